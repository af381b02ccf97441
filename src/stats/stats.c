/*
 * stats.c -- sums per-thread counters and renders the `stats` sections as
 * (name, value) pairs, in memcached's order and with memcached's names.
 */
#include "stats.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "config.h"
#include "crawler.h"
#include "logger.h"
#include "evict.h"
#include "flash.h"
#include "item.h"
#include "settings.h"
#include "sizing.h"
#include "slab.h"

#define STATS_MAX_THREADS 128

static struct stats_thread *threads[STATS_MAX_THREADS];
static _Atomic size_t       nthreads;
static pthread_mutex_t      register_lock = PTHREAD_MUTEX_INITIALIZER;
static stats_conns_fn       conns_provider;
static const char          *server_version;
static const char          *libevent_version;
static time_t               started;
static size_t               read_buf_size;
static uint32_t             reserved_fds;

#define CONN_FIELD(name) static _Atomic uint64_t name;
STATS_CONN_COUNTERS(CONN_FIELD)
STATS_LISTEN_COUNTERS(CONN_FIELD)
#undef CONN_FIELD
static _Atomic uint64_t   ssl_handshake_errors;
static _Atomic uint64_t   ssl_new_sessions;
static _Atomic rel_time_t ssl_certs_loaded_at;

static const struct {
    const char     *name;
    stats_section_t section;
} section_names[] = {
    { "", STATS_GENERAL },
    { "settings", STATS_SETTINGS },
    { "slabs", STATS_SLABS },
    { "items", STATS_ITEMS },
    { "sizes", STATS_SIZES },
    { "sizing", STATS_SIZING },
    { "slabcache", STATS_SLABCACHE },
    { "conns", STATS_CONNS },
};

int
stats_setup(const char *version, const char *libevent)
{
    server_version = version;
    libevent_version = libevent;
    started = time(NULL);
    atomic_store(&nthreads, 0);
    return 0;
}

void
stats_teardown(void)
{
    atomic_store(&nthreads, 0);
    conns_provider = NULL;
}

void
stats_register_thread(struct stats_thread *st)
{
    pthread_mutex_lock(&register_lock);
    size_t n = atomic_load(&nthreads);
    if (n < STATS_MAX_THREADS) {
        threads[n] = st;
        atomic_store(&nthreads, n + 1);
    }
    pthread_mutex_unlock(&register_lock);
}

void
stats_set_conns_provider(stats_conns_fn fn)
{
    conns_provider = fn;
}

void
stats_set_conn_figures(size_t read_buf, uint32_t reserved)
{
    read_buf_size = read_buf;
    reserved_fds = reserved;
}

/* connection_structures: the most connections ever allocated at once. */
void
stats_conn_open(void)
{
    uint64_t now = atomic_fetch_add(&curr_connections, 1) + 1;
    uint64_t peak = atomic_load(&connection_structures);

    atomic_fetch_add(&total_connections, 1);
    while (now > peak && !atomic_compare_exchange_weak(&connection_structures, &peak, now)) {
    }
}

void stats_conn_close(void)     { atomic_fetch_sub(&curr_connections, 1); }
void stats_conn_rejected(void)  { atomic_fetch_add(&rejected_connections, 1); }

void stats_tls_handshake_error(void) { atomic_fetch_add(&ssl_handshake_errors, 1); }
void stats_tls_new_session(void)     { atomic_fetch_add(&ssl_new_sessions, 1); }
void stats_tls_certs_loaded(void)    { atomic_store(&ssl_certs_loaded_at, clock_now()); }

void
stats_listen_disabled(uint64_t us)
{
    atomic_fetch_add(&listen_disabled_num, 1);
    atomic_fetch_add(&time_in_listen_disabled_us, us);
}
uint64_t stats_curr_connections(void) { return atomic_load(&curr_connections); }

stats_section_t
stats_section(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(section_names) / sizeof(section_names[0]); i++) {
        if (strlen(section_names[i].name) == len &&
            memcmp(section_names[i].name, name, len) == 0) {
            return section_names[i].section;
        }
    }
    return STATS_UNKNOWN;
}

/* --- helpers ----------------------------------------------------------------- */

static void
emit_u64(stats_emit_fn emit, void *ctx, const char *name, uint64_t v)
{
    char buf[24];

    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    emit(ctx, name, buf);
}

static void
emit_str(stats_emit_fn emit, void *ctx, const char *name, const char *v)
{
    emit(ctx, name, v != NULL ? v : "NULL");
}

static void
emit_class_u64(stats_emit_fn emit, void *ctx, const char *prefix, unsigned cls,
               const char *name, uint64_t v)
{
    char key[64];

    snprintf(key, sizeof(key), "%s%u:%s", prefix, cls, name);
    emit_u64(emit, ctx, key, v);
}

static void
emit_timeval(stats_emit_fn emit, void *ctx, const char *name, struct timeval tv)
{
    char buf[48];

    snprintf(buf, sizeof(buf), "%ld.%06ld", (long)tv.tv_sec, (long)tv.tv_usec);
    emit(ctx, name, buf);
}

static void
sum_threads(struct stats_thread *out)
{
    size_t n = atomic_load(&nthreads);

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
#define SUM_FIELD(name) \
        atomic_store(&out->name, atomic_load(&out->name) + atomic_load(&threads[i]->name));
        STATS_THREAD_COUNTERS(SUM_FIELD)
#undef SUM_FIELD
    }
}

static void
sum_class(uint8_t cls, struct stats_class *out)
{
    size_t n = atomic_load(&nthreads);

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
#define SUM_FIELD(name) \
        atomic_store(&out->name, atomic_load(&out->name) + atomic_load(&threads[i]->cls[cls].name));
        STATS_CLASS_COUNTERS(SUM_FIELD)
#undef SUM_FIELD
    }
}

/* --- sections ------------------------------------------------------------------ */

struct slab_evict_figures {
#define FIGURE_FIELD(name) uint64_t name;
    STATS_SLAB_EVICT_CLASS(FIGURE_FIELD)
    uint64_t slab_evict_skipped_busy;
#undef FIGURE_FIELD
};

static void
slab_evict_class(uint8_t cls, struct slab_evict_figures *f)
{
    struct slab_class_stats s;
    struct item_class_stats is;

    slab_class_stats(cls, &s);
    item_class_stats(cls, &is);
    f->slabs_evicted = s.slabs_evicted;
    f->slabs_gained = s.slabs_gained;
    f->items_evicted_by_slab = is.evicted_by_slab;
}

static void
slab_evict_global(struct slab_evict_figures *g)
{
    memset(g, 0, sizeof(*g));
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct slab_evict_figures f;
        slab_evict_class(c, &f);
        g->slabs_evicted += f.slabs_evicted;
        g->slabs_gained += f.slabs_gained;
    }
    g->slab_evict_skipped_busy = evict_skipped_busy();
}

/* Fields of memcached mechanisms slabcache has no counterpart for (see
 * notes/compatibility.md): reported as memcached reports them idle. */
static void
emit_zeros(stats_emit_fn emit, void *ctx, const char *const *names)
{
    for (; *names != NULL; names++) {
        emit(ctx, *names, "0");
    }
}

static const char *const no_resp_objs[] = {
    "response_obj_oom", "response_obj_count", "response_obj_bytes", NULL
};
static const char *const no_page_mover[] = {
    "slab_reassign_inline_reclaim",
    "slab_reassign_busy_items", "slab_reassign_busy_deletes",
    "slab_reassign_busy_nomem", NULL
};
static const char *const no_napi[] = {
    "unexpected_napi_ids", "round_robin_fallback", NULL
};
/* The segmented LRU's, shown as memcached shows them with its maintainer
 * thread (its default; -o no_lru_maintainer hides them as it does). */
static const char *const no_segmented_lru[] = {
    "moves_to_cold", "moves_to_warm", "moves_within_lru",
    "direct_reclaims", "lru_bumps_dropped", NULL
};

/*
 * memcached 1.6.45's `stats`, field for field and in its order: tools and
 * its t/stats.t count them. slabcache's own figures are `stats slabcache`
 * (emit_own), and in the admin port's JSON and Prometheus output.
 */
static void
emit_general(stats_emit_fn emit, void *ctx)
{
    struct stats_thread t;
    struct item_stats is;
    struct rusage ru;

    sum_threads(&t);
    item_get_stats(&is);
    getrusage(RUSAGE_SELF, &ru);

    emit_u64(emit, ctx, "pid", (uint64_t)getpid());
    emit_u64(emit, ctx, "uptime", (uint64_t)(time(NULL) - started));
    emit_u64(emit, ctx, "time", (uint64_t)time(NULL));
    emit_str(emit, ctx, "version", server_version);
    emit_str(emit, ctx, "libevent", libevent_version);
    emit_u64(emit, ctx, "pointer_size", sizeof(void *) * 8);
    emit_timeval(emit, ctx, "rusage_user", ru.ru_utime);
    emit_timeval(emit, ctx, "rusage_system", ru.ru_stime);
    emit_u64(emit, ctx, "max_connections", (uint64_t)settings.max_conns);
#define EMIT_CONN(name) emit_u64(emit, ctx, #name, atomic_load(&name));
    STATS_CONN_COUNTERS(EMIT_CONN)
#undef EMIT_CONN
    emit_zeros(emit, ctx, no_resp_objs);
    /* Read buffers are lent by each worker to connections with input to
     * parse (conn.h): those allocated, and those free for reuse. */
    int64_t bufs = 0, free_bufs = 0;
    uint64_t oom = 0;
    for (size_t i = 0; i < atomic_load(&nthreads); i++) {
        bufs += atomic_load(&threads[i]->read_bufs);
        free_bufs += atomic_load(&threads[i]->read_bufs_free);
        oom += atomic_load(&threads[i]->read_buf_oom);
    }
    bufs = bufs > 0 ? bufs : 0;
    free_bufs = free_bufs > 0 ? free_bufs : 0;
    emit_u64(emit, ctx, "read_buf_count", (uint64_t)bufs);
    emit_u64(emit, ctx, "read_buf_bytes", (uint64_t)bufs * read_buf_size);
    emit_u64(emit, ctx, "read_buf_bytes_free", (uint64_t)free_bufs * read_buf_size);
    emit_u64(emit, ctx, "read_buf_oom", oom);
    emit_u64(emit, ctx, "reserved_fds", reserved_fds);
#define EMIT_THREAD(name) emit_u64(emit, ctx, #name, atomic_load(&t.name));
    STATS_GENERAL_COMMANDS(EMIT_THREAD)
    if (settings.idle_timeout > 0) {
        EMIT_THREAD(idle_kicks)
    }
    EMIT_THREAD(bytes_read)
    EMIT_THREAD(bytes_written)
    emit_u64(emit, ctx, "limit_maxbytes", slab_limit());
    emit_u64(emit, ctx, "accepting_conns", 1);
#define EMIT_LISTEN(name) emit_u64(emit, ctx, #name, atomic_load(&name));
    STATS_LISTEN_COUNTERS(EMIT_LISTEN)
#undef EMIT_LISTEN
    emit_u64(emit, ctx, "threads", (uint64_t)settings.threads);
    EMIT_THREAD(conn_yields)
#undef EMIT_THREAD
    emit_u64(emit, ctx, "hash_power_level", assoc_power());
    /* handles, live and in arrays a doubling replaced (kept for prefetches) */
    emit_u64(emit, ctx, "hash_bytes",
             (assoc_buckets() + assoc_retired_buckets()) * sizeof(uint32_t));
    emit_u64(emit, ctx, "hash_is_expanding", 0);
    emit_u64(emit, ctx, "slab_reassign_rescues", is.slab_rescues);
    emit_u64(emit, ctx, "slab_reassign_chunk_rescues", is.chunk_rescues);
    emit_zeros(emit, ctx, no_page_mover);
    emit_str(emit, ctx, "slab_reassign_last_busy_status", "none");
    emit_u64(emit, ctx, "slab_reassign_running", 0);
    struct slab_evict_figures g;
    slab_evict_global(&g);
    /* memcached counts every page its mover moves, to the pool too */
    emit_u64(emit, ctx, "slabs_moved", g.slabs_gained + slab_pool_kept_total());
    if (crawler_enabled()) {     /* enable and disable change it, as memcached */
        emit_u64(emit, ctx, "lru_crawler_running", crawler_running() ? 1 : 0);
        emit_u64(emit, ctx, "lru_crawler_starts", crawler_starts());
    }
    if (!settings.no_lru_maintainer) {
        emit_u64(emit, ctx, "lru_maintainer_juggles", 0);
    }
    emit_u64(emit, ctx, "malloc_fails", 0);
    /* Lines go straight to watchers: no per-worker log buffer to drop from. */
    uint64_t log_sent, log_skipped, log_watchers;
    logger_stats(&log_sent, &log_skipped, &log_watchers);
    emit_u64(emit, ctx, "log_worker_dropped", 0);
    emit_u64(emit, ctx, "log_worker_written", log_sent);
    emit_u64(emit, ctx, "log_watcher_skipped", log_skipped);
    emit_u64(emit, ctx, "log_watcher_sent", log_sent);
    emit_u64(emit, ctx, "log_watchers", log_watchers);
    if (flash_enabled()) {
#define EMIT_THREAD(name) emit_u64(emit, ctx, #name, atomic_load(&t.name));
        STATS_FLASH_COMMANDS(EMIT_THREAD)
#undef EMIT_THREAD
    }
    if (settings.ssl_enabled) {
        if (settings.ssl_session_cache) {
            emit_u64(emit, ctx, "ssl_new_sessions", atomic_load(&ssl_new_sessions));
        }
        emit_u64(emit, ctx, "ssl_handshake_errors", atomic_load(&ssl_handshake_errors));
        emit_u64(emit, ctx, "time_since_server_cert_refresh",
                 clock_now() - atomic_load(&ssl_certs_loaded_at));
    }
    emit_zeros(emit, ctx, no_napi);
    emit_u64(emit, ctx, "bytes", is.bytes);
    emit_u64(emit, ctx, "curr_items", is.curr_items);
    emit_u64(emit, ctx, "total_items", is.total_items);
    emit_u64(emit, ctx, "slab_global_page_pool", slab_pool_count());
    emit_u64(emit, ctx, "expired_unfetched", is.expired_unfetched);
    emit_u64(emit, ctx, "evicted_unfetched", is.evicted_unfetched);
    if (!settings.no_lru_maintainer) {
        emit_u64(emit, ctx, "evicted_active", 0);
    }
    emit_u64(emit, ctx, "evictions", is.evictions);
    emit_u64(emit, ctx, "reclaimed", is.reclaimed);
    uint64_t creclaimed = 0, cchecked = 0;
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        creclaimed += item_crawler_reclaimed(c);
        cchecked += item_crawler_checked(c);
    }
    emit_u64(emit, ctx, "crawler_reclaimed", creclaimed);
    emit_u64(emit, ctx, "crawler_items_checked", cchecked);
    emit_u64(emit, ctx, "lrutail_reflocked", 0);
    if (!settings.no_lru_maintainer) {
        emit_zeros(emit, ctx, no_segmented_lru);
    }
    if (flash_enabled()) {
        struct flash_stats fs;
        flash_get_stats(&fs);
#define EMIT_FLASH(name, kind) emit_u64(emit, ctx, #name, fs.name);
        FLASH_STATS(EMIT_FLASH)
#undef EMIT_FLASH
    }
}

/* slabcache's own figures: `stats slabcache`. */
static void
emit_own(stats_emit_fn emit, void *ctx)
{
    struct slab_evict_figures g;
    char buf[64];

    slab_evict_global(&g);
    emit_u64(emit, ctx, "hash_expansions", assoc_expansions());
    /* the classes' probation FIFOs (item_clock.c), booked inside -m */
    emit_u64(emit, ctx, "probation_bytes", item_probation_bytes());
    emit_u64(emit, ctx, "total_malloced", slab_charged());
#define EMIT_GLOBAL(name) emit_u64(emit, ctx, #name, g.name);
    STATS_SLAB_EVICT_GLOBAL(EMIT_GLOBAL)
#undef EMIT_GLOBAL
    uint64_t bg_runs, bg_evictions;
    evict_bg_stats(&bg_runs, &bg_evictions);
    emit_u64(emit, ctx, "bg_evictions", bg_evictions);
    emit_u64(emit, ctx, "bg_evictor_runs", bg_runs);
    evict_names(buf, sizeof(buf));
    emit_str(emit, ctx, "evictions_policy", buf);
    emit_str(emit, ctx, "watch_enabled", settings.watch_disabled ? "no" : "yes");
    emit_str(emit, ctx, "slabcache_version", PACKAGE_VERSION);
}

struct fixed_setting {
    const char *name;
    const char *value;
};

/*
 * Settings of memcached mechanisms slabcache does not have (segmented LRU
 * and its maintainer, extstore, TLS, NAPI), with the values memcached
 * shows when they are off or at their defaults: tools that read `stats
 * settings` find every field (notes/compatibility.md).
 */
static const struct fixed_setting lru_fixed[] = {
    { "lru_maintainer_thread", "no" }, { "lru_segmented", "no" },
    { "hot_lru_pct", "20" }, { "warm_lru_pct", "40" },
    { "hot_max_factor", "0.20" }, { "warm_max_factor", "2.00" }, { NULL, NULL },
};
static const struct fixed_setting ext_fixed[] = {
    { "worker_logbuf_size", "65536" },
    { "read_buf_mem_limit", "0" }, { "track_sizes", "no" },
    { "inline_ascii_response", "no" }, { NULL, NULL },
};
/* memcached's extstore settings slabcache refuses (settings.c) keep its
 * defaults' lines between the ones it has (emit_ext_settings). */
static const struct fixed_setting ext_age_fixed[] = {
    { "ext_low_ttl", "0" }, { NULL, NULL },
};
static const struct fixed_setting ext_compact_fixed[] = {
    { "ext_drop_under", "0" }, { "ext_max_sleep", "1000000" }, { NULL, NULL },
};
static const struct fixed_setting automove_fixed[] = {
    { "slab_automove_freeratio", "0.010" }, { NULL, NULL },
};
static const struct fixed_setting napi_fixed[] = {
    { "num_napi_ids", "(null)" }, { NULL, NULL },
};
static const struct fixed_setting tail_fixed[] = {
    /* client flags are 32 bits (memcached 1.6.45's default build) */
    { "client_flags_size", "4" }, { NULL, NULL },
};

/* memcached's TLS settings lines, as it prints them (the verify mode as
 * OpenSSL's flags, the write buffer in bytes, an unset path "(null)"). */
static void
emit_ssl_settings(stats_emit_fn emit, void *ctx)
{
    static const char *const versions[] = { "tlsv1.0", "tlsv1.1", "tlsv1.2", "tlsv1.3" };
    static const unsigned verify_flags[] = { 0, 1, 3, 7 };

    emit_str(emit, ctx, "ssl_enabled", settings.ssl_enabled ? "yes" : "no");
    emit_str(emit, ctx, "ssl_chain_cert", settings.ssl_chain_cert ? settings.ssl_chain_cert : "(null)");
    emit_str(emit, ctx, "ssl_key", settings.ssl_key ? settings.ssl_key : "(null)");
    emit_u64(emit, ctx, "ssl_verify_mode", verify_flags[settings.ssl_verify_mode & 3]);
    emit_u64(emit, ctx, "ssl_keyformat", (uint64_t)settings.ssl_keyformat);
    emit_str(emit, ctx, "ssl_ciphers", settings.ssl_ciphers ? settings.ssl_ciphers : "NULL");
    emit_str(emit, ctx, "ssl_ca_cert", settings.ssl_ca_cert ? settings.ssl_ca_cert : "NULL");
    emit_u64(emit, ctx, "ssl_wbuf_size", (uint64_t)settings.ssl_wbuf_size * 1024);
    emit_str(emit, ctx, "ssl_session_cache", settings.ssl_session_cache ? "yes" : "no");
    emit_str(emit, ctx, "ssl_kernel_tls", "no");
    emit_str(emit, ctx, "ssl_min_version", versions[settings.ssl_min_version & 3]);
}

static void
emit_fixed(stats_emit_fn emit, void *ctx, const struct fixed_setting *f)
{
    for (; f->name != NULL; f++) {
        emit(ctx, f->name, f->value);
    }
}

/* memcached's `stats settings`, field for field and in its order. */
static void
emit_settings_memcached(stats_emit_fn emit, void *ctx)
{
    char buf[EVICT_NAMES_MAX];

    emit_u64(emit, ctx, "maxbytes", slab_limit());
    emit_u64(emit, ctx, "maxconns", (uint64_t)settings.max_conns);
    char port[24];
    snprintf(port, sizeof(port), "%ld", (long)settings.port);
    emit_str(emit, ctx, "tcpport", port);
    snprintf(port, sizeof(port), "%ld", (long)settings.udp_port);
    emit_str(emit, ctx, "udpport", port);
    emit_str(emit, ctx, "inter", settings.listen_addr);
    emit_u64(emit, ctx, "verbosity", (uint64_t)settings.verbose);
    emit_u64(emit, ctx, "oldest", 0);
    emit_str(emit, ctx, "evictions", settings.no_evict ? "off" : "on");
    emit_str(emit, ctx, "domain_socket", settings.socket_path);
    snprintf(buf, sizeof(buf), "%o", (unsigned)settings.socket_mask);
    emit_str(emit, ctx, "umask", buf);
    emit_str(emit, ctx, "shutdown_command", settings.shutdown_ok ? "yes" : "no");
    snprintf(buf, sizeof(buf), "%.2f", settings.factor);
    emit_str(emit, ctx, "growth_factor", buf);
    emit_u64(emit, ctx, "chunk_size", (uint64_t)settings.chunk_min);
    emit_u64(emit, ctx, "num_threads", (uint64_t)settings.threads);
    emit_u64(emit, ctx, "num_threads_per_udp", (uint64_t)settings.threads);
    emit_str(emit, ctx, "stat_key_prefix", ":");
    emit_str(emit, ctx, "detail_enabled", stats_detail_enabled() ? "yes" : "no");
    emit_u64(emit, ctx, "reqs_per_event", (uint64_t)settings.reqs_per_event);
    emit_str(emit, ctx, "cas_enabled", settings.cas_disabled ? "no" : "yes");
    emit_u64(emit, ctx, "tcp_backlog", (uint64_t)settings.backlog);
    emit_str(emit, ctx, "binding_protocol",
             settings.auth_file != NULL ? "ascii" :      /* -Y forces it, as memcached */
             settings.sasl ? "binary" :                 /* -S too */
             strcmp(settings.protocol, "auto") == 0 ? "auto-negotiate" : settings.protocol);
    emit_str(emit, ctx, "auth_enabled_sasl", settings.sasl ? "yes" : "no");
    emit_str(emit, ctx, "auth_enabled_ascii",
             settings.auth_file != NULL ? settings.auth_file : "no");
    emit_u64(emit, ctx, "item_size_max", (uint64_t)settings.item_size_max);
    emit_str(emit, ctx, "maxconns_fast", "yes");
    emit_u64(emit, ctx, "hashpower_init", settings.hashpower);
    emit_str(emit, ctx, "slab_reassign", settings.slab_reassign ? "yes" : "no");
    emit_u64(emit, ctx, "slab_automove", evict_automove_level());
    emit_str(emit, ctx, "slab_automove_ratio", "0.80");
    emit_u64(emit, ctx, "slab_automove_window", sizing_window());
    emit_u64(emit, ctx, "slab_chunk_max", (uint64_t)settings.slab_chunk_max);
    emit_str(emit, ctx, "lru_crawler", crawler_enabled() ? "yes" : "no");
    emit_u64(emit, ctx, "lru_crawler_sleep", crawler_sleep());
    emit_u64(emit, ctx, "lru_crawler_tocrawl", crawler_tocrawl());
    emit_str(emit, ctx, "tail_repair_time", "0");
    emit_str(emit, ctx, "flush_enabled", settings.flush_disabled ? "no" : "yes");
    emit_str(emit, ctx, "dump_enabled", settings.dump_disabled ? "no" : "yes");
    emit_str(emit, ctx, "hash_algorithm", "murmur3");
    emit_fixed(emit, ctx, lru_fixed);
    emit_str(emit, ctx, "temp_lru", settings.temp_lru ? "yes" : "no");
    emit_u64(emit, ctx, "temporary_ttl", (uint64_t)settings.temporary_ttl);
    emit_u64(emit, ctx, "idle_timeout", settings.idle_timeout);
    emit_u64(emit, ctx, "watcher_logbuf_size", (uint64_t)settings.watcher_logbuf_kb * 1024);
    emit_fixed(emit, ctx, ext_fixed);
    /* the ext_ knobs change at run time (the extstore command) */
    emit_u64(emit, ctx, "ext_item_size",
             (uint64_t)__atomic_load_n(&settings.ext_item_size, __ATOMIC_RELAXED));
    emit_u64(emit, ctx, "ext_item_age",
             (uint64_t)__atomic_load_n(&settings.ext_item_age, __ATOMIC_RELAXED));
    emit_fixed(emit, ctx, ext_age_fixed);
    emit_u64(emit, ctx, "ext_recache_rate",
             (uint64_t)__atomic_load_n(&settings.ext_recache_rate, __ATOMIC_RELAXED));
    emit_u64(emit, ctx, "ext_wbuf_size", (uint64_t)settings.ext_wbuf_size << 20);
    emit_u64(emit, ctx, "ext_compact_under", (uint64_t)settings.ext_compact_under);
    emit_fixed(emit, ctx, ext_compact_fixed);
    double frag;
    __atomic_load(&settings.ext_max_frag, &frag, __ATOMIC_RELAXED);
    snprintf(buf, sizeof(buf), "%.2f", frag);
    emit_str(emit, ctx, "ext_max_frag", buf);
    emit_fixed(emit, ctx, automove_fixed);
    emit_str(emit, ctx, "ext_drop_unread",
             __atomic_load_n(&settings.ext_drop_unread, __ATOMIC_RELAXED) ? "yes" : "no");
    emit_ssl_settings(emit, ctx);
    emit_fixed(emit, ctx, napi_fixed);
    emit_str(emit, ctx, "memory_file", settings.memory_file != NULL ? settings.memory_file : "(null)");
    emit_fixed(emit, ctx, tail_fixed);
    /* slabcache's own that are not rows of the option table as such. */
    emit_u64(emit, ctx, "slab_page_size", slab_size());
    evict_names(buf, sizeof(buf));
    emit_str(emit, ctx, "evictions_policy", buf);
    emit_str(emit, ctx, "watch_enabled", settings.watch_disabled ? "no" : "yes");
}

/* The names emit_settings_memcached() wrote, so the option table's other
 * rows can follow without repeating one. */
struct settings_seen {
    stats_emit_fn emit;
    void         *ctx;
    const char   *names[128];
    size_t        n;
};

static void
settings_seen_emit(void *ctx, const char *name, const char *value)
{
    struct settings_seen *seen = ctx;

    if (seen->n < sizeof(seen->names) / sizeof(seen->names[0])) {
        seen->names[seen->n++] = name;
    }
    seen->emit(seen->ctx, name, value);
}

static bool
settings_seen_has(const struct settings_seen *seen, const char *name)
{
    for (size_t i = 0; i < seen->n; i++) {
        if (strcmp(seen->names[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* memcached's fields in its order, then every other row of the option
 * table (settings.h) with a `stats settings` name, as the table renders it. */
static void
emit_settings(stats_emit_fn emit, void *ctx)
{
    struct settings_seen seen = { .emit = emit, .ctx = ctx, .n = 0 };
    const char *stat;
    char buf[128];

    emit_settings_memcached(settings_seen_emit, &seen);
    for (size_t i = 0; settings_row_stat(i, &stat, buf, sizeof(buf)); i++) {
        if (stat != NULL && !settings_seen_has(&seen, stat)) {
            emit(ctx, stat, buf);
        }
    }
}

static void
emit_slabs(stats_emit_fn emit, void *ctx)
{
    uint64_t active = 0;

    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct slab_class_stats s;
        slab_class_stats(c, &s);
        if (s.total_pages == 0 && s.slabs_evicted == 0) {
            continue;           /* never held a slab */
        }
        active++;
        /* SLAB_CLASS_STATS (slab.h) in order; MOVE rows come below. */
#define SLAB_STAT_SHOW_VIEW(name)   emit_class_u64(emit, ctx, "", c, #name, s.name);
#define SLAB_STAT_SHOW_ZERO(name)   emit_class_u64(emit, ctx, "", c, #name, 0);
#define SLAB_STAT_SHOW_MOVE(name)
#define SLAB_STAT_SHOW(name, kind)  SLAB_STAT_SHOW_##kind(name)
        SLAB_CLASS_STATS(SLAB_STAT_SHOW)
#undef SLAB_STAT_SHOW
#undef SLAB_STAT_SHOW_MOVE
#undef SLAB_STAT_SHOW_ZERO
#undef SLAB_STAT_SHOW_VIEW
        struct stats_class sc;
        sum_class(c, &sc);
#define EMIT_CMD(name) emit_class_u64(emit, ctx, "", c, #name, atomic_load(&sc.name));
        STATS_CLASS_COUNTERS(EMIT_CMD)
#undef EMIT_CMD
        struct slab_evict_figures f;
        slab_evict_class(c, &f);
#define EMIT_CLASS(name) emit_class_u64(emit, ctx, "", c, #name, f.name);
        STATS_SLAB_EVICT_CLASS(EMIT_CLASS)
#undef EMIT_CLASS
    }
    emit_u64(emit, ctx, "active_slabs", active);
    emit_u64(emit, ctx, "total_malloced", slab_charged());
    if (flash_enabled()) {
        /* The flash tier's slabs (slabcache's own lines). */
        struct flash_stats fs;
        flash_get_stats(&fs);
        emit_u64(emit, ctx, "flash_slab_size", flash_slab_size());
        emit_u64(emit, ctx, "flash_slabs", fs.extstore_pages_used + fs.extstore_pages_free);
        emit_u64(emit, ctx, "flash_slabs_used", fs.extstore_pages_used);
        emit_u64(emit, ctx, "flash_slabs_written", fs.extstore_page_allocs);
        emit_u64(emit, ctx, "flash_slabs_reclaimed", fs.extstore_page_evictions);
    }
}

static void
emit_items(stats_emit_fn emit, void *ctx)
{
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        struct item_class_stats s;
        item_class_stats(c, &s);
        if (s.number == 0 && s.evicted == 0 && s.outofmemory == 0) {
            continue;
        }
        /* ITEM_CLASS_STATS (item.h): its rows in order, HIDDEN ones left
         * out, ZERO ones (mechanisms slabcache lacks) as 0. */
#define ITEM_STAT_SHOW_COUNT(name)   emit_class_u64(emit, ctx, "items:", c, #name, s.name);
#define ITEM_STAT_SHOW_SUM(name)     ITEM_STAT_SHOW_COUNT(name)
#define ITEM_STAT_SHOW_VIEW(name)    ITEM_STAT_SHOW_COUNT(name)
#define ITEM_STAT_SHOW_ZERO(name)    emit_class_u64(emit, ctx, "items:", c, #name, 0);
#define ITEM_STAT_SHOW_HIDDEN(name)
#define ITEM_STAT_SHOW(name, kind)   ITEM_STAT_SHOW_##kind(name)
        ITEM_CLASS_STATS(ITEM_STAT_SHOW)
#undef ITEM_STAT_SHOW
#undef ITEM_STAT_SHOW_HIDDEN
#undef ITEM_STAT_SHOW_ZERO
#undef ITEM_STAT_SHOW_VIEW
#undef ITEM_STAT_SHOW_SUM
#undef ITEM_STAT_SHOW_COUNT
        struct stats_class sc;
        sum_class(c, &sc);
        emit_class_u64(emit, ctx, "items:", c, "hits_to_cold",
                       atomic_load(&sc.get_hits) + atomic_load(&sc.touch_hits));
        emit_class_u64(emit, ctx, "items:", c, "hits_to_temp", 0);
    }
}

/*
 * `stats sizing`: what memory earns, measured (evict/sizing.h). The hit
 * ratio the current gets would have at each multiple of -m (memory divided
 * among the classes at best), and per class the gets, the hits of its last
 * slab and of one slab more, and the slabs it would have at 1x -m. Gets are
 * the measurement window's (halved as it slides), estimated from a sample.
 */
static const struct {
    const char *name;
    unsigned    quarters;       /* of -m */
} sizing_points[] = {
    { "0.25x", 1 }, { "0.5x", 2 }, { "0.75x", 3 }, { "1x", 4 },
    { "1.5x", 6 }, { "2x", 8 }, { "4x", 16 },
};

static void
emit_double(stats_emit_fn emit, void *ctx, const char *name, double v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%.4f", v);
    emit(ctx, name, buf);
}

static void
emit_sizing(stats_emit_fn emit, void *ctx)
{
    uint32_t slabs = (uint32_t)(slab_room() / slab_size());
    uint32_t want[SLAB_CLASS_MAX + 1];
    char key[64];

    struct sizing_state st;
    sizing_state(&st);
    emit_u64(emit, ctx, "sizing_memory", st.bytes);
    emit_u64(emit, ctx, "sizing_memory_limit", st.budget);
    emit_u64(emit, ctx, "sizing_keys_sampled", st.samples);
    emit_u64(emit, ctx, "sizing_sample_shift", st.shift);
    emit_u64(emit, ctx, "sizing_slabs_moved", evict_auto_moves());
    emit_u64(emit, ctx, "sizing_limit_slabs", slabs);
    if (!sizing_enabled()) {
        return;                 /* -o no_modern: nothing measured */
    }
    for (size_t i = 0; i < sizeof(sizing_points) / sizeof(sizing_points[0]); i++) {
        snprintf(key, sizeof(key), "hit_ratio_at_%s", sizing_points[i].name);
        emit_double(emit, ctx, key,
                    sizing_curve((uint32_t)((uint64_t)slabs * sizing_points[i].quarters / 4),
                                 NULL));
    }
    (void)sizing_curve(slabs, want);
    for (uint8_t c = 1; c <= slab_class_count(); c++) {
        uint32_t have = slab_class_slabs(c);
        double gets = sizing_gets(c);
        if (gets <= 0 && have == 0) {
            continue;
        }
        emit_class_u64(emit, ctx, "", c, "slabs", have);
        emit_class_u64(emit, ctx, "", c, "wanted_slabs", want[c]);
        emit_class_u64(emit, ctx, "", c, "gets", (uint64_t)(gets + 0.5));
        emit_class_u64(emit, ctx, "", c, "last_slab_hits",
                       (uint64_t)(have > 0 ? sizing_hits(c, have - 1, have, NULL) + 0.5 : 0));
        emit_class_u64(emit, ctx, "", c, "next_slab_hits",
                       (uint64_t)(sizing_hits(c, have, have + 1, NULL) + 0.5));
    }
}

void
stats_emit(stats_section_t section, stats_emit_fn emit, void *ctx)
{
    switch (section) {
    case STATS_GENERAL:  emit_general(emit, ctx); break;
    case STATS_SETTINGS: emit_settings(emit, ctx); break;
    case STATS_SLABS:    emit_slabs(emit, ctx); break;
    case STATS_ITEMS:    emit_items(emit, ctx); break;
    case STATS_SIZES:    emit_str(emit, ctx, "sizes_status", "disabled"); break;
    case STATS_SIZING:   emit_sizing(emit, ctx); break;
    case STATS_SLABCACHE: emit_own(emit, ctx); break;
    case STATS_CONNS:
        if (conns_provider != NULL) {
            conns_provider(emit, ctx);
        }
        break;
    case STATS_UNKNOWN:
        break;
    }
}

void
stats_reset(void)
{
    size_t n = atomic_load(&nthreads);

    for (size_t i = 0; i < n; i++) {
#define ZERO_FIELD(name) atomic_store(&threads[i]->name, 0);
        STATS_THREAD_COUNTERS(ZERO_FIELD)
#undef ZERO_FIELD
        atomic_store(&threads[i]->read_buf_oom, 0);     /* a count; the levels stay */
        for (size_t c = 0; c < STATS_CLASSES; c++) {
#define ZERO_CLASS(name) atomic_store(&threads[i]->cls[c].name, 0);
            STATS_CLASS_COUNTERS(ZERO_CLASS)
#undef ZERO_CLASS
        }
    }
    atomic_store(&total_connections, 0);
    atomic_store(&rejected_connections, 0);
    item_reset_stats();
    stats_detail_clear();
}
