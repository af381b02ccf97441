/*
 * auth.c -- the -Y credentials (auth.h).
 *
 * Entries live in one block swapped under a read-write lock, so a reload
 * (SIGHUP, on the main thread) never shows a worker half a table. The
 * check compares every entry in full with a constant-time compare, so the
 * time an answer takes says nothing about which part was wrong or how
 * much of it matched.
 */
#include "auth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct auth_entry {
    char  *user;
    size_t nuser;
    char  *pass;
    size_t npass;
};

struct auth_table {
    struct auth_entry e[AUTH_ENTRIES_MAX];
    size_t            n;
    char              lines[];  /* the entries point in here */
};

static struct auth_table *table;
static pthread_rwlock_t   table_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Split "user:password" (no newline) into e; false without a ':'. */
static bool
auth_parse_line(char *line, struct auth_entry *e)
{
    char *colon = strchr(line, ':');

    if (colon == NULL) {
        return false;
    }
    *colon = '\0';
    e->user = line;
    e->nuser = (size_t)(colon - line);
    e->pass = colon + 1;
    e->npass = strlen(colon + 1);
    return true;
}

auth_rstatus_t
auth_load(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[AUTH_LINE_MAX + 2];

    if (f == NULL) {
        return AUTH_OPEN_FAILED;
    }
    struct auth_table *t = calloc(1, sizeof(*t) + (size_t)AUTH_ENTRIES_MAX * (AUTH_LINE_MAX + 1));
    if (t == NULL) {
        fclose(f);
        return AUTH_NO_MEMORY;
    }
    auth_rstatus_t rc = AUTH_OK;
    char *next = t->lines;
    while (rc == AUTH_OK && fgets(line, sizeof(line), f) != NULL) {
        size_t n = strcspn(line, "\r\n");
        if (n > AUTH_LINE_MAX) {
            rc = AUTH_MALFORMED;        /* longer than memcached reads: refused, not split */
            break;
        }
        line[n] = '\0';
        if (n == 0) {
            continue;               /* a blank line (a final newline) */
        }
        if (t->n == AUTH_ENTRIES_MAX) {
            rc = AUTH_TOO_MANY;
            break;
        }
        memcpy(next, line, n + 1);
        if (!auth_parse_line(next, &t->e[t->n])) {
            rc = AUTH_MALFORMED;
            break;
        }
        t->n++;
        next += n + 1;
    }
    fclose(f);
    if (rc != AUTH_OK) {
        free(t);
        return rc;
    }
    pthread_rwlock_wrlock(&table_lock);
    struct auth_table *old = table;
    table = t;
    pthread_rwlock_unlock(&table_lock);
    free(old);
    return AUTH_OK;
}

bool
auth_enabled(void)
{
    pthread_rwlock_rdlock(&table_lock);
    bool on = table != NULL;
    pthread_rwlock_unlock(&table_lock);
    return on;
}

/* a[0..n) == b[0..n) in time that depends on n only. */
static unsigned
auth_diff(const char *a, const char *b, size_t n)
{
    unsigned d = 0;

    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)a[i] ^ (unsigned char)b[i];
    }
    return d;
}

bool
auth_check(const char *user, size_t nuser, const char *pass, size_t npass)
{
    bool ok = false;

    pthread_rwlock_rdlock(&table_lock);
    for (size_t i = 0; table != NULL && i < table->n; i++) {
        const struct auth_entry *e = &table->e[i];
        /* Compare over the stored lengths whatever was sent, so a near
         * miss costs the same as a far one. */
        char u[AUTH_LINE_MAX + 1] = { 0 }, p[AUTH_LINE_MAX + 1] = { 0 };
        memcpy(u, user, nuser < e->nuser ? nuser : e->nuser);
        memcpy(p, pass, npass < e->npass ? npass : e->npass);
        unsigned d = auth_diff(u, e->user, e->nuser) | auth_diff(p, e->pass, e->npass) |
                     (unsigned)(nuser != e->nuser) | (unsigned)(npass != e->npass);
        ok |= d == 0;
    }
    pthread_rwlock_unlock(&table_lock);
    return ok;
}

void
auth_teardown(void)
{
    pthread_rwlock_wrlock(&table_lock);
    free(table);
    table = NULL;
    pthread_rwlock_unlock(&table_lock);
}
