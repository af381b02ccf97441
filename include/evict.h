/*
 * evict.h -- the one door from storage to eviction policies.
 *
 * When a class has no free chunk and no new slab can be allocated, the
 * storage layer calls evict_run(cls). It tries the configured policies in
 * order (e.g. "lra,lru", like twemcache's bitmask) until one frees memory
 * usable by cls: a chunk on its free list, or a whole slab re-carved for
 * it. Policies see storage only through its public slab-table and item
 * APIs (slab.h, item.h); storage sees policies only through this table.
 */
#ifndef SC_EVICT_H
#define SC_EVICT_H

#include <stddef.h>
#include <stdint.h>

#define EVICT_LIST_MAX 8        /* policies in one stack */
#define EVICT_NAMES_MAX 128     /* "lra,lru" as text */

typedef enum evict_rstatus {
    EVICT_OK,                   /* memory was freed for cls: retry alloc */
    EVICT_FAIL,                 /* this policy could not free anything */
} evict_rstatus_t;

struct evict_policy {
    const char *name;
    int             (*setup)(void);
    void            (*teardown)(void);
    evict_rstatus_t (*evict)(uint8_t cls);   /* no storage lock held */
};

/* Policies, one file each under src/evict/. */
extern const struct evict_policy evict_policy_lru;
extern const struct evict_policy evict_policy_none;

int             evict_setup(const char *list);
void            evict_teardown(void);

/*
 * Replace the policy stack with a comma-separated list of names. Returns
 * 0, or -1 (stack unchanged) for an unknown name, an empty or too long
 * list, or a repeated name.
 */
int             evict_configure(const char *list, size_t len);
/* The current stack as "a,b", NUL-terminated, into buf. */
void            evict_names(char *buf, size_t cap);
evict_rstatus_t evict_run(uint8_t cls);

#endif
