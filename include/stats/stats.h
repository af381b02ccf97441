/*
 * stats.h -- counters and the `stats` command's sections.
 *
 * Request counters are per worker thread (struct stats_thread, written
 * only by its owner, summed on demand) so the request path never shares
 * a cache line between threads. Names are memcached's and are declared
 * once, in the X-macro tables below.
 *
 * Sections are produced as (name, value) pairs through a callback: the
 * caller turns them into protocol bytes, so this module knows nothing of
 * sockets or wire formats.
 */
#ifndef SC_STATS_H
#define SC_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-thread request counters: the commands, in memcached's `stats` order. */
#define STATS_GENERAL_COMMANDS(X) \
    X(cmd_get)          \
    X(cmd_set)          \
    X(cmd_flush)        \
    X(cmd_touch)        \
    X(cmd_meta)         \
    X(get_hits)         \
    X(get_misses)       \
    X(get_expired)      \
    X(get_flushed)      \
    X(delete_misses)    \
    X(delete_hits)      \
    X(incr_misses)      \
    X(incr_hits)        \
    X(decr_misses)      \
    X(decr_hits)        \
    X(cas_misses)       \
    X(cas_hits)         \
    X(cas_badval)       \
    X(touch_hits)       \
    X(touch_misses)     \
    X(store_too_large)  \
    X(store_no_memory)  \
    X(auth_cmds)        \
    X(auth_errors)
/* Fetches of flash-resident items (dispatch_flash.c), memcached's names;
 * shown while the flash tier is on (-o ext_path). */
#define STATS_FLASH_COMMANDS(X) \
    X(get_extstore)             \
    X(get_aborted_extstore)     \
    X(get_oom_extstore)         \
    X(recache_from_extstore)    \
    X(miss_from_extstore)       \
    X(badcrc_from_extstore)
#define STATS_THREAD_COUNTERS(X) \
    STATS_GENERAL_COMMANDS(X) \
    STATS_FLASH_COMMANDS(X) \
    X(idle_kicks)       \
    X(bytes_read)       \
    X(bytes_written)    \
    X(conn_yields)

/*
 * Per-thread, per-class request counters: `stats slabs` shows them as
 * N:name, as memcached does (monitoring tools such as memcached_exporter
 * read them). Each is also counted in its global counter above.
 */
#define STATS_CLASS_COUNTERS(X) \
    X(get_hits)         \
    X(cmd_set)          \
    X(delete_hits)      \
    X(incr_hits)        \
    X(decr_hits)        \
    X(cas_hits)         \
    X(cas_badval)       \
    X(touch_hits)
#define STATS_CLASSES 256       /* class ids are uint8_t */

struct stats_class {
#define STATS_FIELD(name) _Atomic uint64_t name;
    STATS_CLASS_COUNTERS(STATS_FIELD)
#undef STATS_FIELD
};

struct stats_thread {
#define STATS_FIELD(name) _Atomic uint64_t name;
    STATS_THREAD_COUNTERS(STATS_FIELD)
#undef STATS_FIELD
    struct stats_class cls[STATS_CLASSES];
    /* Levels its owner keeps (`stats reset` leaves them): read buffers
     * allocated and, of those, kept free for reuse (memcached's
     * read_buf_count, read_buf_bytes_free); and the count of buffers it
     * could not get (read_buf_oom, cleared by `stats reset`). */
    _Atomic int64_t    read_bufs;
    _Atomic int64_t    read_bufs_free;
    _Atomic uint64_t   read_buf_oom;
};

/* Owner-only increment: a relaxed load+store, no locked instruction. */
#define STATS_ADD(st, field, n)                                              \
    atomic_store_explicit(&(st)->field,                                      \
        atomic_load_explicit(&(st)->field, memory_order_relaxed) + (n),      \
        memory_order_relaxed)
#define STATS_INCR(st, field) STATS_ADD(st, field, 1)
#define STATS_CLASS_INCR(st, c, field) STATS_INCR(&(st)->cls[(uint8_t)(c)], field)

/* Connection counters, updated by core. */
#define STATS_CONN_COUNTERS(X) \
    X(curr_connections)       \
    X(total_connections)      \
    X(rejected_connections)   \
    X(connection_structures)
/* Accepting paused for lack of descriptors: times, and microseconds. */
#define STATS_LISTEN_COUNTERS(X) \
    X(listen_disabled_num)    \
    X(time_in_listen_disabled_us)

/* Slab-level eviction figures: per class in `stats slabs`, and global. */
#define STATS_SLAB_EVICT_CLASS(X) \
    X(slabs_evicted)              \
    X(slabs_gained)               \
    X(items_evicted_by_slab)
#define STATS_SLAB_EVICT_GLOBAL(X) \
    X(slabs_evicted)               \
    X(slab_evict_skipped_busy)

typedef void (*stats_emit_fn)(void *ctx, const char *name, const char *value);
/* Core supplies the per-connection lines of `stats conns`. */
typedef void (*stats_conns_fn)(stats_emit_fn emit, void *ctx);

typedef enum stats_section {
    STATS_GENERAL,
    STATS_SETTINGS,
    STATS_SLABS,
    STATS_ITEMS,
    STATS_SIZES,
    STATS_SIZING,
    STATS_SLABCACHE,            /* slabcache's own figures (`stats slabcache`) */
    STATS_CONNS,
    STATS_UNKNOWN,
} stats_section_t;

int   stats_setup(const char *version, const char *libevent);
void  stats_teardown(void);

/* Register a worker's counters; at most `threads` of them. */
void  stats_register_thread(struct stats_thread *st);
void  stats_set_conns_provider(stats_conns_fn fn);
/* What core reserves: each connection's read buffer, descriptors kept
 * beyond -c for the server itself (`stats` read_buf_*, reserved_fds). */
void  stats_set_conn_figures(size_t read_buf_size, uint32_t reserved_fds);

void  stats_conn_open(void);
void  stats_conn_close(void);
void  stats_conn_rejected(void);
void  stats_listen_disabled(uint64_t us);   /* one pause of us microseconds */
/* TLS (core): a failed handshake, a session cached, certificates (re)loaded. */
void  stats_tls_handshake_error(void);
void  stats_tls_new_session(void);
void  stats_tls_certs_loaded(void);
uint64_t stats_curr_connections(void);

/* `stats detail` (detail.c): per key-prefix request counts. */
typedef enum stats_detail_op {
    STATS_DETAIL_GET, STATS_DETAIL_SET, STATS_DETAIL_DELETE,
} stats_detail_op_t;
void     stats_detail_set_enabled(bool on);
bool     stats_detail_enabled(void);
void     stats_detail_record(const char *key, size_t nkey, stats_detail_op_t op,
                             bool hit);
/* "PREFIX p get N hit N set N del N" (without "\r\n"), one per prefix. */
void     stats_detail_dump(void (*line)(void *ctx, const char *text), void *ctx);
void     stats_detail_clear(void);
uint64_t stats_detail_untracked(void);   /* requests past the prefix cap */

/*
 * The admin port's documents (render.c), written through w: every section
 * as one JSON object (numbers as numbers, per-class fields grouped), and
 * Prometheus text with prometheus/memcached_exporter's metric names.
 */
typedef void (*stats_write_fn)(void *ctx, const char *s, size_t n);
void  stats_render_json(stats_write_fn w, void *ctx);
void  stats_render_prometheus(stats_write_fn w, void *ctx);

stats_section_t stats_section(const char *name, size_t len);
void  stats_emit(stats_section_t section, stats_emit_fn emit, void *ctx);
void  stats_reset(void);

#endif
