/*
 * evict.c -- the policy stack behind evict_run().
 *
 * The stack is an immutable array published by pointer swap, so the set
 * path reads it without a lock while `config evict` may replace it. Old
 * stacks are kept until teardown (they are a few bytes, and a reader may
 * still be walking one).
 */
#include "evict.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct evict_stack {
    const struct evict_policy *policy[EVICT_LIST_MAX];
    size_t                     n;
    struct evict_stack        *older;   /* retired stacks, freed at teardown */
};

static const struct evict_policy *const known[] = {
    &evict_policy_lru,
    &evict_policy_none,
};

static _Atomic(struct evict_stack *) current;
static pthread_mutex_t configure_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct evict_policy *
policy_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strlen(known[i]->name) == len && memcmp(known[i]->name, name, len) == 0) {
            return known[i];
        }
    }
    return NULL;
}

/* Parse "a,b,c" into s; false on an unknown, empty or repeated name. */
static bool
stack_parse(const char *list, size_t len, struct evict_stack *s)
{
    const char *p = list, *end = list + len;

    s->n = 0;
    if (len == 0 || len >= EVICT_NAMES_MAX) {
        return false;
    }
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *tok_end = comma ? comma : end;
        const struct evict_policy *pol = policy_find(p, (size_t)(tok_end - p));
        if (pol == NULL || s->n == EVICT_LIST_MAX) {
            return false;
        }
        for (size_t i = 0; i < s->n; i++) {
            if (s->policy[i] == pol) {
                return false;
            }
        }
        s->policy[s->n++] = pol;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    return true;
}

int
evict_configure(const char *list, size_t len)
{
    struct evict_stack *s = calloc(1, sizeof(*s));

    if (s == NULL || !stack_parse(list, len, s)) {
        free(s);
        return -1;
    }
    pthread_mutex_lock(&configure_lock);
    for (size_t i = 0; i < s->n; i++) {
        if (s->policy[i]->setup != NULL && s->policy[i]->setup() != 0) {
            pthread_mutex_unlock(&configure_lock);
            free(s);
            return -1;
        }
    }
    s->older = atomic_load(&current);
    atomic_store(&current, s);
    pthread_mutex_unlock(&configure_lock);
    return 0;
}

int
evict_setup(const char *list)
{
    return evict_configure(list, strlen(list));
}

void
evict_teardown(void)
{
    struct evict_stack *s = atomic_exchange(&current, NULL);

    for (size_t i = 0; s != NULL && i < sizeof(known) / sizeof(known[0]); i++) {
        if (known[i]->teardown != NULL) {
            known[i]->teardown();
        }
    }
    while (s != NULL) {
        struct evict_stack *older = s->older;
        free(s);
        s = older;
    }
}

void
evict_names(char *buf, size_t cap)
{
    struct evict_stack *s = atomic_load(&current);
    size_t off = 0;

    if (cap == 0) {
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; s != NULL && i < s->n; i++) {
        size_t n = strlen(s->policy[i]->name);
        if (off + n + 2 > cap) {
            break;
        }
        if (i > 0) {
            buf[off++] = ',';
        }
        memcpy(buf + off, s->policy[i]->name, n);
        off += n;
        buf[off] = '\0';
    }
}

evict_rstatus_t
evict_run(uint8_t cls)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    for (size_t i = 0; s != NULL && i < s->n; i++) {
        if (s->policy[i]->evict(cls) == EVICT_OK) {
            return EVICT_OK;
        }
    }
    return EVICT_FAIL;
}
