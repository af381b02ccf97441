/*
 * evict.h -- the eviction policies, one door for the cache layer.
 *
 * When storage cannot allocate for a class without evicting (no free
 * chunk, no new slab under -m), the cache layer (cache.c) calls
 * evict_run(cls). It tries the configured policies in order (e.g.
 * "lra,lru", like twemcache's bitmask) until one frees memory usable by
 * cls: a chunk on its free list, or a whole slab re-carved for it.
 * Policies see storage only through its public headers: the slab table
 * and items (slab.h, item.h), and the flash tier's counts of stubs and
 * live records (flash.h, which decide whether a slab of stubs is kept);
 * storage knows nothing of them (it is a layer below, and its headers
 * cannot include this one).
 */
#ifndef SC_EVICT_H
#define SC_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVICT_LIST_MAX 8        /* policies in one stack */
#define EVICT_NAMES_MAX 128     /* "lra,lru" as text */

typedef enum evict_rstatus {
    EVICT_OK,                   /* memory was freed for cls: retry alloc */
    EVICT_FAIL,                 /* this policy could not free anything */
    EVICT_DECLINE,              /* slab-level would be worse: let the next
                                   (item-level) policy in the stack act */
} evict_rstatus_t;

/*
 * One eviction request: free memory usable by class cls. gated: an
 * item-level policy follows in the stack, so a slab-level policy must let
 * evict_slab() apply the measured gate (evict_slab_wanted) and stop
 * (EVICT_DECLINE) when it says no. batch: an item-level policy may free up
 * to this many items under one lock hold. *freed receives the chunks made
 * available to cls.
 */
struct evict_req {
    uint8_t  cls;
    bool     gated;
    uint32_t batch;
    uint32_t freed;
    bool     others_only;   /* never cls's own slab (evict_slab_for) */
    uint32_t sid;           /* out: the slab moved, after EVICT_OK from evict_slab() */
};

struct evict_policy {
    const char *name;
    bool            slab_level;              /* frees whole slabs */
    int             (*setup)(void);
    void            (*teardown)(void);
    evict_rstatus_t (*evict)(struct evict_req *req);  /* no lock held */
    /* Its item-level part alone (the background evictor's way), or NULL. */
    evict_rstatus_t (*evict_items)(struct evict_req *req);
};

/* Policies, one file each under src/evict/. */
extern const struct evict_policy evict_policy_auto;
extern const struct evict_policy evict_policy_lru;
extern const struct evict_policy evict_policy_random;
extern const struct evict_policy evict_policy_lra;
extern const struct evict_policy evict_policy_lrc;
extern const struct evict_policy evict_policy_none;

#define EVICT_PICKS 8           /* victim slabs tried before giving up */

/*
 * The gate of a slab-level policy followed by an item-level one (e.g.
 * lrc,lru): the victim slab sid moves to cls only if it is another
 * class's and the measured allocator says the move pays (evict_auto_pays).
 * A class that holds no slab is not gated: under a strict -m it gets the
 * slab the measurement values least (evict_auto_first), whatever the
 * policy; where first slabs may be carved past -m, the stack carves one.
 */
bool            evict_slab_wanted(uint8_t cls, uint32_t sid);
/*
 * Under the first-slab rule (slab_first_past_limit()): sid is the only
 * slab of a class other than cls, which no policy takes (that class would
 * carve another past -m at once; a class may always re-carve its own).
 * Always false without the rule.
 */
bool            evict_slab_last_other(uint32_t sid, uint8_t cls);
/*
 * What the slab-level policies never pick for cls: evict_slab_last_other(),
 * and with the flash tier on, a slab of stubs while the stubs take at most
 * half of memory (48 bytes per flash item) and point mostly at live
 * records. Moving a slab of values
 * loses none of them (they go to flash, each leaving a 48-byte stub);
 * moving a slab of stubs loses every flash item it points at (a slab's
 * worth of 48-byte stubs).
 */
bool            evict_slab_kept(uint32_t sid, uint8_t cls);
/* The stubs' class while its slabs are kept (above), else 0. */
uint8_t         evict_stubs_kept(void);

/*
 * Shared by slab-level policies: evict slab sid for cls (applying the
 * rule above when gated), counting busy skips.
 */
evict_rstatus_t evict_slab(uint32_t sid, struct evict_req *req);
/*
 * Shared by the age-ordered policies (lra, lrc): evict, for cls, the
 * assigned slab with the smallest age_key, skipping busy ones.
 */
struct slab_info;
evict_rstatus_t evict_slab_oldest(struct evict_req *req,
                                  uint64_t (*age_key)(const struct slab_info *));
/*
 * Give cls the least recently accessed slab of another class, whatever
 * the stack: for the flash tier's stubs (cache.c), where one slab of
 * stubs keeps thousands of flash-resident values reachable for the RAM of
 * a few of them. Another class's only slab is spared as usual.
 */
evict_rstatus_t evict_slab_for(uint8_t cls);
/*
 * The measured allocator (evict_auto.c): the class whose slab should go to
 * cls now -- of the classes whose last slab cls's next slab out-earns
 * beyond the measurement's noise (or whose last slab earns nothing
 * measurable), the one whose last slab earns least -- or 0. any: the
 * cheapest, whatever cls would earn. (Which of its slabs may go is
 * evict_auto_pays's further test.)
 */
uint8_t         evict_auto_donor(uint8_t cls, bool any);
/* Whether a slab of class donor, last used at accessed_ms
 * (clock_now_ms()), should go to cls now (the rule above; a donor whose
 * last slab earns nothing measurable gives to a taker not surely worth
 * more only a slab last used before the taker's latest slab's worth of
 * its own evictions began, item_class_overflow_ms). */
bool            evict_auto_pays(uint8_t cls, uint8_t donor, uint64_t accessed_ms);
/* Give cls, holding no slab under a strict -m (first_slab_past_limit=0;
 * else false: the stack carves it a first slab), the slab the measurement
 * values least (the cheapest class's least recently accessed that may
 * move); *freed: its chunks. */
bool            evict_auto_first(uint8_t cls, uint32_t *freed);
/*
 * Past the room (slab_room()) only first slabs stay: while slabs exceed
 * it (first slabs carved past it, or -m lowered at run time), the slab the
 * measurement values least among those a class can spare (a second slab,
 * or the only one of a class whose items a larger class of its group
 * holds) goes back to the system, not to another class. The slabs settle
 * at the room, plus any class's only slab that no other class can hold. A
 * few slabs per call: the caller is an allocation.
 */
void            evict_auto_trim(void);
/*
 * While the slabs exceed the room: slabs kept in the pool go back to the
 * system first, then evict_auto_trim() if the stack moves slabs (a
 * slab-level policy in it). After every eviction run, and once a second
 * from the server's clock, so memory past a lowered cache_memlimit goes
 * back with no allocation asking (memcached frees pages to the system
 * there too).
 */
void            evict_give_back(void);
/*
 * The server's clock, once a second (now: clock_now()): evict_give_back(),
 * then, if the stack moves slabs, evict_pool_idle(now).
 */
void            evict_tick(uint32_t now);
/*
 * Memory a class stopped using goes to the global pool (evict_pool.c): a
 * class with no eviction, out-of-memory answer or slab gained for
 * slab_automove_window seconds, more than 2.5 slabs of free chunks, and
 * all of the room carved, gives its emptiest slabs (a few a tick, their
 * items moved into its free chunks; in a class of chained values' heads
 * or bodies only empty ones) to the pool, within -m (slab_pool_keep); a
 * window after a flush_all the crawler walks every class once.
 * evict_pool_reset() forgets what it watched.
 */
void            evict_pool_idle(uint32_t now);
void            evict_pool_reset(void);
/* Slabs the measured allocator moved. */
uint64_t        evict_auto_moves(void);
/* A slab moved some other way: the allocator's view of the classes is stale. */
void            evict_auto_note_move(void);
/*
 * Start the measurement the allocator moves slabs by (sizing.h), booked
 * inside -m, and feed it every get; nothing if it runs already. Called
 * once storage is set up, and by evict_configure() for a stack that moves
 * slabs (-o no_modern measures nothing until one does). 0, or -1 out of
 * memory.
 */
int             evict_measure_start(void);
/* Victim slabs skipped because an item in them was referenced. */
uint64_t        evict_skipped_busy(void);
/* Random number for policies: xorshift64*, per thread, seeded at first use. */
uint64_t        evict_rand64(void);

/* `slabs reassign <src> <dst>`, memcached's answers (evict_reassign.c). */
typedef enum evict_reassign {
    EVICT_REASSIGN_OK,          /* moved */
    EVICT_REASSIGN_BUSY,        /* another move runs, or every slab tried
                                   holds an item in use */
    EVICT_REASSIGN_BADCLASS,
    EVICT_REASSIGN_NOSPARE,     /* src has fewer than two slabs */
    EVICT_REASSIGN_SAME,
} evict_reassign_t;
evict_reassign_t evict_reassign(int src, int dst);

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
/* Whether the current stack moves whole slabs. */
bool            evict_has_slab_level(void);
/* The stack as memcached's slab_automove level: 0 no slab-level policy,
 * 1 slab-level gated by an item-level one, 2 slab-level alone. */
unsigned        evict_automove_level(void);
/* The stack for a slab_automove level (`slabs automove N`, -o
 * slab_automove=N): 0 "lru", 1 "auto" (the default), 2 "lrc"; NULL
 * past 2. */
const char     *evict_automove_stack(unsigned level);
/*
 * Try the stack in order until one policy frees memory for cls; up to
 * batch items for an item-level policy. *freed (may be NULL) receives the
 * chunks made available.
 */
evict_rstatus_t evict_run(uint8_t cls, uint32_t batch, uint32_t *freed);
/*
 * The same, but no slab of class spare moves for it (0: any may): a
 * chained item needs chunks of two classes at once (its head's and the
 * bodies'), and a slab moved or emptied for one must not be taken from
 * the other while it holds its part (item_alloc_spare), or the two trade
 * it until the allocation gives up.
 */
evict_rstatus_t evict_run_sparing(uint8_t cls, uint32_t batch, uint8_t spare, uint32_t *freed);
/* The same, item-level policies only (the background evictor's way). */
evict_rstatus_t evict_run_items(uint8_t cls, uint32_t batch, uint32_t *freed);

/*
 * Background evictor: a thread that keeps a few free chunks in every class
 * that allocates while memory is full, so sets rarely evict inline. It
 * sleeps on a condition variable until the cache layer reports a class below
 * evict_bg_target(cls), then evicts in batches through the item-level
 * policies of the stack only: moving slabs stays the inline path's
 * decision, and a stack without an item-level policy gets no background
 * eviction.
 */
int             evict_bg_start(uint32_t reserve, uint32_t batch);
void            evict_bg_stop(void);
/* The cache layer: class cls has fewer than the reserve free (cheap if repeated). */
void            evict_bg_notify(uint8_t cls);
uint32_t        evict_bg_reserve(void);           /* 0 when not running */
/*
 * Free chunks to keep in cls: the reserve, but never more than 1/16 of
 * the class's chunks, so a class of a few large chunks per slab is not
 * emptied to keep a reserve it cannot hold. 0: nothing to keep.
 */
uint64_t        evict_bg_target(uint8_t cls);
void            evict_bg_stats(uint64_t *runs, uint64_t *evictions);

#endif
