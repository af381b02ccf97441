/*
 * history.h -- the last ten minutes, one sample a second, for the admin
 * port (GET /stats/history) and its page.
 *
 * `stats` tells the present; an operator who opens a dashboard wants the
 * recent past too, without having scraped it. The main loop's clock tick
 * takes a sample each second (history_sample): the figures of `stats`
 * and `stats slabcache` named in HISTORY_FIELDS, cumulative as `stats`
 * gives them (a reader takes differences for rates), and the process's
 * RSS. A ring keeps the last HISTORY_SAMPLES; the admin thread renders
 * them as JSON under the ring's lock.
 */
#ifndef SC_HISTORY_H
#define SC_HISTORY_H

#include "stats.h"

#define HISTORY_SAMPLES 600     /* ten minutes at one a second */

/* Sampled figures, in order: each a `stats` or `stats slabcache` name,
 * except rss_bytes (/proc/self/statm). */
#define HISTORY_FIELDS(X)         \
    X(cmd_get)                    \
    X(get_hits)                   \
    X(get_misses)                 \
    X(cmd_set)                    \
    X(evictions)                  \
    X(slabs_moved)                \
    X(curr_items)                 \
    X(bytes)                      \
    X(limit_maxbytes)             \
    X(total_malloced)             \
    X(curr_connections)           \
    X(rss_bytes)                  \
    X(get_extstore)               \
    X(extstore_objects_used)      \
    X(extstore_bytes_used)        \
    X(extstore_io_queue)

/* The ring, booked within -m (slab_book); set up only with an admin port. */
int   history_setup(void);
void  history_teardown(void);
/* Take the sample of second `now` (unix time; the main loop's tick); none
 * without a ring. A timer that fires late catches up with a second tick
 * soon after, in the same second: that sample replaces the second's first,
 * so the ring keeps one sample per second and its times never repeat. */
void  history_sample(int64_t now);
/* {"interval_s":1,"fields":["time",...],"samples":[[unix time, ...], ...]},
 * oldest first, at most HISTORY_SAMPLES. */
void  history_render_json(stats_write_fn w, void *ctx);

#endif
