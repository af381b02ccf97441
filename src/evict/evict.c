/*
 * evict.c -- the policy stack behind evict_run(): parsing and publishing
 * stacks (`--eviction`, `config evict`), and walking one when a class
 * needs memory. The slab choices every stack shares -- empty slabs first,
 * the first-slab rule, the measured gate, the slabs kept -- are
 * evict_slab.c's.
 *
 * The stack is an immutable array published by pointer swap, so the set
 * path reads it without a lock while `config evict` may replace it. Every
 * distinct stack ever built is kept until teardown (a reader may still be
 * walking a retired one) and reused when asked for again, so repeated
 * `config evict` commands cannot grow memory: there are at most a few
 * hundred distinct orderings of the five policies.
 */
#include "evict.h"
#include "evict_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "slab.h"

struct evict_stack {
    const struct evict_policy *policy[EVICT_LIST_MAX];
    size_t                     n;
    struct evict_stack        *next;    /* all stacks built, freed at teardown */
};

static const struct evict_policy *const known[] = {
    &evict_policy_auto,
    &evict_policy_lru,
    &evict_policy_random,
    &evict_policy_lra,
    &evict_policy_lrc,
    &evict_policy_none,
};


static _Atomic(struct evict_stack *) current;
static struct evict_stack *all_stacks;  /* guarded by configure_lock */
static pthread_mutex_t configure_lock = PTHREAD_MUTEX_INITIALIZER;

static bool stack_has_slab_level(const struct evict_stack *s);

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

static struct evict_stack *
stack_intern(const struct evict_stack *want)
{
    for (struct evict_stack *s = all_stacks; s != NULL; s = s->next) {
        if (s->n == want->n &&
            memcmp(s->policy, want->policy, want->n * sizeof(want->policy[0])) == 0) {
            return s;
        }
    }
    struct evict_stack *s = malloc(sizeof(*s));
    if (s != NULL) {
        *s = *want;
        s->next = all_stacks;
        all_stacks = s;
    }
    return s;
}

int
evict_configure(const char *list, size_t len)
{
    struct evict_stack want = { .n = 0 };
    int rc = -1;

    if (!stack_parse(list, len, &want)) {
        return -1;
    }
    pthread_mutex_lock(&configure_lock);
    for (size_t i = 0; i < want.n; i++) {
        if (want.policy[i]->setup != NULL && want.policy[i]->setup() != 0) {
            goto out;
        }
    }
    /* A stack that moves slabs moves them by the measurement; before
     * storage is set up (start-up) main.c starts it. */
    if (stack_has_slab_level(&want) && slab_class_count() > 0 && evict_measure_start() != 0) {
        goto out;
    }
    struct evict_stack *s = stack_intern(&want);
    if (s != NULL) {
        atomic_store(&current, s);
        rc = 0;
    }
out:
    pthread_mutex_unlock(&configure_lock);
    return rc;
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
    pthread_mutex_lock(&configure_lock);
    while (all_stacks != NULL) {
        struct evict_stack *next = all_stacks->next;
        free(all_stacks);
        all_stacks = next;
    }
    pthread_mutex_unlock(&configure_lock);
    evict_pool_reset();
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

/* Is there an item-level policy after position i to fall back on? */
static bool
stack_has_item_level_after(const struct evict_stack *s, size_t i)
{
    for (size_t j = i + 1; j < s->n; j++) {
        if (s->policy[j]->evict_items != NULL) {
            return true;
        }
    }
    return false;
}

static bool
stack_has_slab_level(const struct evict_stack *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->policy[i]->slab_level) {
            return true;
        }
    }
    return false;
}

bool
evict_has_slab_level(void)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    return s != NULL && stack_has_slab_level(s);
}

const char *
evict_automove_stack(unsigned level)
{
    static const char *const stacks[] = { "lru", "auto", "lrc" };

    return level < 3 ? stacks[level] : NULL;
}

unsigned
evict_automove_level(void)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    if (s == NULL || !stack_has_slab_level(s)) {
        return 0;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->policy[i]->evict_items != NULL) {
            return 1;
        }
    }
    return 2;
}

/* Walk the stack until a policy frees memory; items_only: item-level parts only. */
static evict_rstatus_t
stack_walk(struct evict_stack *s, uint8_t cls, uint32_t batch, uint32_t *freed,
           bool items_only)
{
    struct evict_req req = { .cls = cls, .batch = batch > 0 ? batch : 1 };
    uint32_t got = 0;

    if (s != NULL && !items_only && stack_has_slab_level(s) &&
        evict_take_empty_slab(cls, &got)) {
        if (freed != NULL) {
            *freed = got;
        }
        return EVICT_OK;
    }

    for (size_t i = 0; s != NULL && i < s->n; i++) {
        const struct evict_policy *p = s->policy[i];
        if (items_only && p->evict_items == NULL) {
            continue;
        }
        req.gated = p->slab_level && stack_has_item_level_after(s, i);
        req.freed = 0;
        /* (Not "no items": the chained values' body class holds none
         * of its own, only their bodies, and frees them item by item.) */
        if (req.gated && !items_only && slab_class_slabs(cls) == 0 &&
            evict_auto_first(cls, &req.freed)) {
            if (freed != NULL) {
                *freed = req.freed;
            }
            return EVICT_OK;
        }
        if ((items_only ? p->evict_items(&req) : p->evict(&req)) == EVICT_OK) {
            if (freed != NULL) {
                *freed = req.freed;
            }
            return EVICT_OK;
        }
    }
    /* The first-slab rule: a class with no slab that no policy could give
     * one (no class can spare a slab, or none may move) carves its own,
     * past the limit. */
    if (!items_only && slab_first_past_limit() && slab_class_slabs(cls) == 0 &&
        slab_grow_first(cls)) {
        if (freed != NULL) {
            *freed = slab_class_perslab(cls);
        }
        return EVICT_OK;
    }
    return EVICT_FAIL;
}

void
evict_give_back(void)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    while (slab_malloced() > slab_room() && slab_pool_unkeep()) {
        /* a pooled slab is the cheapest to give */
    }
    if (s != NULL && stack_has_slab_level(s) && slab_malloced() > slab_room()) {
        evict_auto_trim();
    }
}

void
evict_tick(uint32_t now)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    evict_give_back();
    if (s != NULL && stack_has_slab_level(s)) {
        evict_pool_idle(now);
    }
}

static evict_rstatus_t
stack_run(uint8_t cls, uint32_t batch, uint32_t *freed, bool items_only)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);
    evict_rstatus_t st = stack_walk(s, cls, batch, freed, items_only);

    if (!items_only) {
        evict_give_back();
    }
    return st;
}

evict_rstatus_t
evict_run(uint8_t cls, uint32_t batch, uint32_t *freed)
{
    return stack_run(cls, batch, freed, false);
}

evict_rstatus_t
evict_run_sparing(uint8_t cls, uint32_t batch, uint8_t spare, uint32_t *freed)
{
    evict_spare_set(spare != cls ? spare : 0);
    evict_rstatus_t st = stack_run(cls, batch, freed, false);
    evict_spare_set(0);
    return st;
}

evict_rstatus_t
evict_run_items(uint8_t cls, uint32_t batch, uint32_t *freed)
{
    return stack_run(cls, batch, freed, true);
}
