/*
 * evict_pool.c -- memory a class has stopped using goes to the global
 * page pool, where whichever class needs a slab next takes it.
 *
 * Free chunks earn nothing where they are. A class that has neither
 * evicted, run out of memory nor gained a slab for the automover's window
 * (`slab_automove_window` seconds), while all of the room is carved, and
 * that holds more than 2.5 slabs of free chunks (after deletes, expiries
 * or a flush_all), gives its emptiest slab to the pool: the slab's live
 * items move into the class's other free chunks (slab rescue), and the
 * slab stays carved within -m (slab_pool_keep), so a class that then
 * needs memory takes it before any policy evicts. This is memcached's
 * automover's "too much free" rule (2.5 pages, a window without
 * evictions), whose page pool behaves the same way.
 *
 * The window is the hysteresis: a class that is still filling or
 * evicting keeps its free chunks (it is about to use them), and 2.5 slabs
 * leave it room for what it stores next. Runs on the server's clock, once
 * a second, with the stack's slab moves (evict_tick).
 *
 * Flushed items free nothing until something meets them: a window after a
 * flush_all takes effect, the LRU crawler (when it is on) walks every
 * class once, as memcached's crawler does on its own schedule, so their
 * memory comes free and can go to the pool. Not at once: a get soon after
 * the flush still finds its item flushed (get_flushed), as in memcached.
 */
#include "evict.h"
#include "evict_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "crawler.h"
#include "item.h"
#include "sizing.h"
#include "slab.h"

#define POOL_PER_TICK    8      /* slabs a class gives at most per tick */

/* What a class's need for memory is read from, at the last tick. */
struct pool_watch {
    uint64_t need;              /* evictions and out-of-memory answers */
    uint64_t pages;             /* slabs held */
    uint32_t needed_at;         /* the last tick either grew */
};

static struct pool_watch watch[SLAB_CLASS_MAX + 1];
static rel_time_t flush_seen;   /* the flush point last looked at */
static uint32_t   flush_noted;  /* the tick it changed; 0: no crawl owed */

void
evict_pool_reset(void)
{
    memset(watch, 0, sizeof(watch));
    flush_seen = 0;
    flush_noted = 0;
}

/* A window after a flush_all took effect, crawl every class once. */
static void
crawl_after_flush(uint32_t now)
{
    struct item_state st;

    item_state_save(&st);
    if (st.oldest_live != flush_seen) {
        flush_seen = st.oldest_live;
        flush_noted = now > 0 ? now : 1;
    }
    /* A delayed flush takes effect at its point: the window counts from
     * there. */
    uint32_t from = flush_noted > st.oldest_live ? flush_noted : st.oldest_live;
    if (flush_noted == 0 || now < from || now - from < sizing_window()) {
        return;
    }
    uint64_t all[4];

    memset(all, 0xff, sizeof(all));
    if (!crawler_enabled() || crawler_start(all) == CRAWLER_OK) {
        flush_noted = 0;        /* else a crawl is running: next tick */
    }
}

/* Note whether cls needed memory since the last tick; true if it has not
 * for the whole window. */
static bool
class_idle(uint8_t cls, uint32_t now, const struct slab_class_stats *ss)
{
    struct pool_watch *w = &watch[cls];
    struct item_class_stats is;

    item_class_stats(cls, &is);
    uint64_t need = is.evicted + is.outofmemory;
    /* A change either way (stats reset clears the counters) is news. */
    if (need != w->need || ss->total_pages > w->pages) {
        w->needed_at = now;
    }
    w->need = need;
    w->pages = ss->total_pages;
    return now - w->needed_at >= sizing_window();
}

/* cls's slab with the fewest chunks handed out, or SLAB_ID_NONE; in a
 * class that holds chained values' heads or bodies only an empty one (a
 * slab of heads moving drops their items, and nothing needs its room). */
static uint32_t
emptiest_slab(uint8_t cls)
{
    uint32_t best = SLAB_ID_NONE, best_used = UINT32_MAX;
    uint32_t n = slab_table_count();
    bool bodies = cls == item_chain_class() || item_chain_head_class_used(cls);

    for (uint32_t sid = 0; sid < n; sid++) {
        struct slab_info info;
        if (!slab_table_info(sid, &info) || info.cls != cls || info.used >= best_used ||
            slab_draining(sid) || (bodies && info.used != 0)) {
            continue;
        }
        best = sid;
        best_used = info.used;
    }
    return best;
}

/* More than 2.5 slabs of free chunks. */
static bool
too_much_free(uint8_t cls)
{
    return 2 * slab_class_free(cls) > 5 * (uint64_t)slab_class_perslab(cls);
}

void
evict_pool_idle(uint32_t now)
{
    bool carved = slab_all_carved();
    uint8_t stubs = item_stub_class();

    crawl_after_flush(now);
    for (unsigned c = 1; c <= slab_class_count(); c++) {
        uint8_t cls = (uint8_t)c;
        struct slab_class_stats ss;

        slab_class_stats(cls, &ss);
        if (!class_idle(cls, now, &ss) || !carved || cls == stubs) {
            continue;
        }
        for (int k = 0; k < POOL_PER_TICK && too_much_free(cls); k++) {
            uint32_t sid = emptiest_slab(cls);
            if (sid == SLAB_ID_NONE || item_slab_pool(sid) != ITEM_SLAB_OK) {
                break;
            }
            evict_auto_note_move();
        }
        slab_class_stats(cls, &ss);
        watch[cls].pages = ss.total_pages;      /* giving is not growing */
    }
}
