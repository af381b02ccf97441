/*
 * evict_reassign.c -- memcached's `slabs reassign <src> <dst>` on the slab
 * table: move one slab of class src to class dst now, its live items
 * moved into free chunks of their class where there are some (slab
 * rescue), the rest dropped.
 *
 * memcached queues the move for its page mover; here the slab-level
 * eviction machinery does it in the caller, so OK means done. The victim
 * is src's least recently accessed slab that holds no referenced item.
 * Class 0 is the global page pool, as memcached's: `reassign N 0` puts a
 * slab of N there, within -m (slab_pool_keep), for the next class that
 * needs memory; `reassign 0 M` gives M a slab from the pool, or else an
 * empty slab of another class.
 */
#include "evict.h"

#include <pthread.h>

#include "item.h"
#include "slab.h"

static pthread_mutex_t reassign_lock = PTHREAD_MUTEX_INITIALIZER;

/* src -1: the class with the most slabs (at least 2), other than dst. */
static int
pick_any(int dst)
{
    int best = -1;
    uint32_t most = 1;

    for (int c = 1; c <= slab_class_count(); c++) {
        uint32_t n = slab_class_slabs((uint8_t)c);
        if (c != dst && n > most) {
            most = n;
            best = c;
        }
    }
    return best;
}

/* The least recently accessed slab of cls not in tried[0..ntried). */
static uint32_t
coldest_slab(uint8_t cls, const uint32_t *tried, int ntried)
{
    uint32_t best = SLAB_ID_NONE;
    uint64_t best_ms = 0;

    for (uint32_t sid = 0; sid < slab_table_count(); sid++) {
        struct slab_info info;
        bool skip = false;
        for (int i = 0; i < ntried; i++) {
            skip = skip || tried[i] == sid;
        }
        if (skip || !slab_table_info(sid, &info) || info.cls != cls) {
            continue;
        }
        if (best == SLAB_ID_NONE || info.accessed_ms < best_ms) {
            best = sid;
            best_ms = info.accessed_ms;
        }
    }
    return best;
}

/* Empty a slab of src and carve it for dst (0: into the pool). */
static evict_reassign_t
move_from(uint8_t src, uint8_t dst)
{
    uint32_t tried[EVICT_PICKS];

    for (int i = 0; i < EVICT_PICKS; i++) {
        uint32_t sid = coldest_slab(src, tried, i);
        if (sid == SLAB_ID_NONE) {
            break;
        }
        tried[i] = sid;
        item_slab_status_t st = dst == 0 ? item_slab_pool(sid) : item_slab_evict(sid, dst);
        if (st == ITEM_SLAB_OK) {
            evict_auto_note_move();
            return EVICT_REASSIGN_OK;
        }
    }
    return EVICT_REASSIGN_BUSY;
}

static evict_reassign_t
reassign_locked(int src, int dst)
{
    int top = slab_class_count();

    if (src == dst) {
        return EVICT_REASSIGN_SAME;
    }
    if (src == -1) {
        src = pick_any(dst);
    }
    if (src < 0 || src > top || dst < 0 || dst > top) {
        return EVICT_REASSIGN_BADCLASS;
    }
    if (src == 0 && slab_pool_take((uint8_t)dst)) {
        evict_auto_note_move();
        return EVICT_REASSIGN_OK;
    }
    if (src == 0) {
        uint32_t sid = slab_find_empty((uint8_t)dst, 0);
        if (sid == SLAB_ID_NONE) {
            return EVICT_REASSIGN_NOSPARE;
        }
        return slab_move_empty(sid, (uint8_t)dst) ? EVICT_REASSIGN_OK
                                                  : EVICT_REASSIGN_BUSY;
    }
    if (slab_class_slabs((uint8_t)src) < 2) {
        return EVICT_REASSIGN_NOSPARE;
    }
    return move_from((uint8_t)src, (uint8_t)dst);
}

evict_reassign_t
evict_reassign(int src, int dst)
{
    if (pthread_mutex_trylock(&reassign_lock) != 0) {
        return EVICT_REASSIGN_BUSY;
    }
    evict_reassign_t r = reassign_locked(src, dst);
    pthread_mutex_unlock(&reassign_lock);
    return r;
}
