/*
 * render.c -- every `stats` section as one JSON document, and as
 * Prometheus text (stats.h: stats_render_json, stats_render_prometheus).
 *
 * Both read the same (name, value) pairs the `stats` command prints, so
 * the admin port can never disagree with the protocol. JSON keeps each
 * section's fields in order, groups per-class and per-connection fields
 * ("N:name") under "classes" or "connections", and writes a value that is
 * a number as a number. Prometheus uses prometheus/memcached_exporter's
 * metric names and labels where it has them, so dashboards built on the
 * exporter keep working, and slabcache_* for slabcache's own figures.
 */
#include "stats.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- collecting a section ---------------------------------------------------- */

struct stats_pair {
    char *name;
    char *value;
};

struct stats_pairs {
    struct stats_pair *v;
    size_t             n, cap;
    bool               failed;      /* out of memory: render what we have */
};

static void
pairs_add(void *ctx, const char *name, const char *value)
{
    struct stats_pairs *p = ctx;

    if (p->failed) {
        return;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct stats_pair *v = realloc(p->v, cap * sizeof(*v));
        if (v == NULL) {
            p->failed = true;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n].name = strdup(name);
    p->v[p->n].value = strdup(value);
    if (p->v[p->n].name == NULL || p->v[p->n].value == NULL) {
        free(p->v[p->n].name);
        free(p->v[p->n].value);
        p->failed = true;
        return;
    }
    p->n++;
}

static void
pairs_collect(struct stats_pairs *p, stats_section_t section)
{
    memset(p, 0, sizeof(*p));
    stats_emit(section, pairs_add, p);
}

static void
pairs_free(struct stats_pairs *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].name);
        free(p->v[i].value);
    }
    free(p->v);
    memset(p, 0, sizeof(*p));
}

static const char *
pairs_get(const struct stats_pairs *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->v[i].name, name) == 0) {
            return p->v[i].value;
        }
    }
    return NULL;
}

/* --- output ---------------------------------------------------------------------- */

static void
put(stats_write_fn w, void *ctx, const char *s)
{
    w(ctx, s, strlen(s));
}

static void
putf(stats_write_fn w, void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
putf(stats_write_fn w, void *ctx, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0) {
        w(ctx, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    }
}

/* --- JSON ----------------------------------------------------------------------- */

/* A JSON number as JSON writes it: no leading zeros, no '+', no hex. */
static bool
json_is_number(const char *s)
{
    const char *p = s;

    if (*p == '-') {
        p++;
    }
    if (!isdigit((unsigned char)*p) || (p[0] == '0' && isdigit((unsigned char)p[1]))) {
        return false;
    }
    while (isdigit((unsigned char)*p)) {
        p++;
    }
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        while (isdigit((unsigned char)*p)) {
            p++;
        }
    }
    return *p == '\0';
}

static void
json_string(stats_write_fn w, void *ctx, const char *s)
{
    put(w, ctx, "\"");
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char esc[2] = { '\\', (char)c };
            w(ctx, esc, 2);
        } else if (c < 0x20) {
            putf(w, ctx, "\\u%04x", c);
        } else {
            w(ctx, p, 1);
        }
    }
    put(w, ctx, "\"");
}

static void
json_value(stats_write_fn w, void *ctx, const char *v)
{
    if (json_is_number(v)) {
        put(w, ctx, v);
    } else {
        json_string(w, ctx, v);
    }
}

/* "N:rest" (after an optional "items:") -> N's length, else 0. */
static size_t
class_prefix(const char *name, const char **rest)
{
    const char *p = strncmp(name, "items:", 6) == 0 ? name + 6 : name;
    size_t n = 0;

    while (isdigit((unsigned char)p[n])) {
        n++;
    }
    if (n == 0 || p[n] != ':') {
        return 0;
    }
    *rest = p + n + 1;
    return (size_t)(p + n - name);
}

/*
 * One section: its plain fields, then its per-class (or per-connection)
 * ones grouped under group: { "N": { ... } } in the order they came.
 */
static void
json_section(stats_write_fn w, void *ctx, const char *title, stats_section_t section,
             const char *group)
{
    struct stats_pairs p;
    bool first = true;

    pairs_collect(&p, section);
    json_string(w, ctx, title);
    put(w, ctx, ": {");
    for (size_t i = 0; i < p.n; i++) {
        const char *rest;
        if (class_prefix(p.v[i].name, &rest) != 0) {
            continue;
        }
        put(w, ctx, first ? "\n    " : ",\n    ");
        first = false;
        json_string(w, ctx, p.v[i].name);
        put(w, ctx, ": ");
        json_value(w, ctx, p.v[i].value);
    }
    /* grouped fields: a new object whenever the id changes */
    char cur[32] = "";
    bool any = false;
    for (size_t i = 0; i < p.n; i++) {
        const char *rest;
        size_t len = class_prefix(p.v[i].name, &rest);
        if (len == 0) {
            continue;
        }
        const char *id = strncmp(p.v[i].name, "items:", 6) == 0 ? p.v[i].name + 6 : p.v[i].name;
        size_t idlen = (size_t)(rest - 1 - id);
        if (idlen >= sizeof(cur)) {
            continue;
        }
        if (!any) {
            put(w, ctx, first ? "\n    " : ",\n    ");
            first = false;
            json_string(w, ctx, group);
            put(w, ctx, ": {");
        }
        if (!any || strlen(cur) != idlen || memcmp(cur, id, idlen) != 0) {
            put(w, ctx, any ? "},\n      \"" : "\n      \"");
            w(ctx, id, idlen);
            put(w, ctx, "\": {");
            memcpy(cur, id, idlen);
            cur[idlen] = '\0';
        } else {
            put(w, ctx, ", ");
        }
        any = true;
        json_string(w, ctx, rest);
        put(w, ctx, ": ");
        json_value(w, ctx, p.v[i].value);
    }
    if (any) {
        put(w, ctx, "}}");
    }
    put(w, ctx, first ? "}" : "\n  }");
    pairs_free(&p);
}

void
stats_render_json(stats_write_fn w, void *ctx)
{
    put(w, ctx, "{\n  ");
    json_section(w, ctx, "stats", STATS_GENERAL, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "settings", STATS_SETTINGS, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "slabs", STATS_SLABS, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "items", STATS_ITEMS, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "sizing", STATS_SIZING, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "slabcache", STATS_SLABCACHE, "classes");
    put(w, ctx, ",\n  ");
    json_section(w, ctx, "conns", STATS_CONNS, "connections");
    put(w, ctx, "\n}\n");
}

/* --- Prometheus ---------------------------------------------------------------- */

/*
 * Where each metric comes from. Names, types and labels are
 * prometheus/memcached_exporter's (checked against the exporter itself by
 * tests/integration/test_admin_http.py), so its dashboards and alerts
 * work unchanged; slabcache's own figures are slabcache_*.
 */
typedef enum prom_src {
    PROM_GENERAL,               /* `stats` */
    PROM_SETTINGS,              /* `stats settings` */
    PROM_SLABS,                 /* `stats slabs`, N:field */
    PROM_ITEMS,                 /* `stats items`, items:N:field */
    PROM_OWN,                   /* `stats slabcache` */
} prom_src_t;

struct prom_metric {
    const char *name;
    const char *type;
    const char *help;
    prom_src_t  src;
    const char *field;
};

static const struct prom_metric prom_scalars[] = {
    { "memcached_up", "gauge", "1: the server answered.", PROM_GENERAL, NULL },
    { "memcached_uptime_seconds", "counter", "Seconds since the server started.", PROM_GENERAL, "uptime" },
    { "memcached_time_seconds", "gauge", "The server's clock, Unix seconds.", PROM_GENERAL, "time" },
    { "memcached_process_user_cpu_seconds_total", "counter", "User CPU time of the server.", PROM_GENERAL, "rusage_user" },
    { "memcached_process_system_cpu_seconds_total", "counter", "System CPU time of the server.", PROM_GENERAL, "rusage_system" },
    { "memcached_read_bytes_total", "counter", "Bytes read from clients.", PROM_GENERAL, "bytes_read" },
    { "memcached_written_bytes_total", "counter", "Bytes written to clients.", PROM_GENERAL, "bytes_written" },
    { "memcached_current_connections", "gauge", "Open client connections.", PROM_GENERAL, "curr_connections" },
    { "memcached_connections_total", "counter", "Connections accepted since start.", PROM_GENERAL, "total_connections" },
    { "memcached_connections_rejected_total", "counter", "Connections refused at the -c limit.", PROM_GENERAL, "rejected_connections" },
    { "memcached_connections_listener_disabled_total", "counter", "Times accepting paused for lack of descriptors.", PROM_GENERAL, "listen_disabled_num" },
    { "memcached_connections_yielded_total", "counter", "Times a connection yielded after -R requests.", PROM_GENERAL, "conn_yields" },
    { "memcached_max_connections", "gauge", "The -c limit.", PROM_GENERAL, "max_connections" },
    { "memcached_accepting_connections", "gauge", "1 while the listeners accept.", PROM_GENERAL, "accepting_conns" },
    { "memcached_current_bytes", "gauge", "Bytes of the items stored.", PROM_GENERAL, "bytes" },
    { "memcached_current_items", "gauge", "Items stored now.", PROM_GENERAL, "curr_items" },
    { "memcached_items_total", "counter", "Items stored since start.", PROM_GENERAL, "total_items" },
    { "memcached_items_evicted_total", "counter", "Live items evicted, by the CLOCK or with their slab.", PROM_GENERAL, "evictions" },
    { "memcached_items_reclaimed_total", "counter", "Stores that reused an expired or flushed item's memory.", PROM_GENERAL, "reclaimed" },
    { "memcached_limit_bytes", "gauge", "The -m limit in bytes.", PROM_GENERAL, "limit_maxbytes" },
    { "memcached_malloced_bytes", "gauge", "Memory counted against -m: slabs, pooled ones too, and bookkeeping.", PROM_SLABS, "total_malloced" },
    { "memcached_lru_crawler_enabled", "gauge", "1 when the crawler thread runs.", PROM_SETTINGS, "lru_crawler" },
    { "memcached_lru_crawler_sleep", "gauge", "Crawler pause between batches, microseconds.", PROM_SETTINGS, "lru_crawler_sleep" },
    { "memcached_lru_crawler_to_crawl", "gauge", "Items the crawler looks at per class and run.", PROM_SETTINGS, "lru_crawler_tocrawl" },
    { "memcached_lru_crawler_maintainer_thread", "gauge", "1 with memcached's LRU maintainer (never here).", PROM_SETTINGS, "lru_maintainer_thread" },
    { "memcached_lru_crawler_hot_percent", "gauge", "memcached's hot LRU share (no segments here).", PROM_SETTINGS, "hot_lru_pct" },
    { "memcached_lru_crawler_warm_percent", "gauge", "memcached's warm LRU share (no segments here).", PROM_SETTINGS, "warm_lru_pct" },
    { "memcached_lru_crawler_hot_max_factor", "gauge", "memcached's hot age factor (no segments here).", PROM_SETTINGS, "hot_max_factor" },
    { "memcached_lru_crawler_warm_max_factor", "gauge", "memcached's warm age factor (no segments here).", PROM_SETTINGS, "warm_max_factor" },
    { "memcached_lru_crawler_starts_total", "counter", "Crawls started.", PROM_GENERAL, "lru_crawler_starts" },
    { "memcached_lru_crawler_items_checked_total", "counter", "Items the crawler looked at.", PROM_GENERAL, "crawler_items_checked" },
    { "memcached_lru_crawler_reclaimed_total", "counter", "Expired items the crawler removed.", PROM_GENERAL, "crawler_reclaimed" },
    { "memcached_lru_crawler_moves_to_cold_total", "counter", "memcached's segment moves (no segments here).", PROM_GENERAL, "moves_to_cold" },
    { "memcached_lru_crawler_moves_to_warm_total", "counter", "memcached's segment moves (no segments here).", PROM_GENERAL, "moves_to_warm" },
    { "memcached_lru_crawler_moves_within_lru_total", "counter", "memcached's segment moves (no segments here).", PROM_GENERAL, "moves_within_lru" },
    { "slabcache_slabs_moved_total", "counter", "Slabs moved to another class or to the global pool.", PROM_GENERAL, "slabs_moved" },
    { "slabcache_slab_evict_skipped_busy_total", "counter", "Victim slabs passed over because an item in them was in use.", PROM_OWN, "slab_evict_skipped_busy" },
    { "slabcache_slab_reassign_rescues_total", "counter", "Live items moved out of a slab being emptied.", PROM_GENERAL, "slab_reassign_rescues" },
    { "slabcache_slab_reassign_chunk_rescues_total", "counter", "Chained values' chunks moved out of a slab being emptied.", PROM_GENERAL, "slab_reassign_chunk_rescues" },
    { "slabcache_background_evictions_total", "counter", "Items the background evictor freed.", PROM_OWN, "bg_evictions" },
    { "slabcache_background_evictor_runs_total", "counter", "Background evictor wake-ups.", PROM_OWN, "bg_evictor_runs" },
};

/* memcached_commands_total{command,status} and the per-slab ones. */
struct prom_command {
    const char *command;
    const char *status;
    const char *field;          /* `stats` field; per slab "N:field" */
    bool        per_slab;
};

static const struct prom_command prom_commands[] = {
    { "get", "hit", "get_hits", true },
    { "get", "miss", "get_misses", false },
    { "set", "hit", "cmd_set", true },
    { "delete", "hit", "delete_hits", true },
    { "delete", "miss", "delete_misses", false },
    { "incr", "hit", "incr_hits", true },
    { "incr", "miss", "incr_misses", false },
    { "decr", "hit", "decr_hits", true },
    { "decr", "miss", "decr_misses", false },
    { "cas", "hit", "cas_hits", true },
    { "cas", "miss", "cas_misses", false },
    { "cas", "badval", "cas_badval", true },
    { "touch", "hit", "touch_hits", true },
    { "touch", "miss", "touch_misses", false },
    { "flush", "hit", "cmd_flush", false },
};

static const struct prom_metric prom_per_slab[] = {
    { "memcached_slab_chunk_size_bytes", "gauge", "Chunk size of the class.", PROM_SLABS, "chunk_size" },
    { "memcached_slab_chunks_per_page", "gauge", "Chunks in one slab of the class.", PROM_SLABS, "chunks_per_page" },
    { "memcached_slab_current_pages", "gauge", "Slabs the class holds.", PROM_SLABS, "total_pages" },
    { "memcached_slab_current_chunks", "gauge", "Chunks the class holds.", PROM_SLABS, "total_chunks" },
    { "memcached_slab_chunks_used", "gauge", "Chunks in use.", PROM_SLABS, "used_chunks" },
    { "memcached_slab_chunks_free", "gauge", "Free chunks.", PROM_SLABS, "free_chunks" },
    { "memcached_slab_chunks_free_end", "gauge", "Chunks never carved (0: slabs are carved whole).", PROM_SLABS, "free_chunks_end" },
    { "memcached_slab_mem_requested_bytes", "counter", "Bytes of the class's items.", PROM_ITEMS, "mem_requested" },
    { "memcached_slab_current_items", "gauge", "Items of the class.", PROM_ITEMS, "number" },
    { "memcached_slab_hot_items", "gauge", "memcached's hot segment (no segments here).", PROM_ITEMS, "number_hot" },
    { "memcached_slab_warm_items", "gauge", "memcached's warm segment (no segments here).", PROM_ITEMS, "number_warm" },
    { "memcached_slab_cold_items", "gauge", "Items of the class (one CLOCK: all cold).", PROM_ITEMS, "number_cold" },
    { "memcached_slab_hot_age_seconds", "gauge", "memcached's hot segment age (no segments here).", PROM_ITEMS, "age_hot" },
    { "memcached_slab_warm_age_seconds", "gauge", "memcached's warm segment age (no segments here).", PROM_ITEMS, "age_warm" },
    { "memcached_slab_items_age_seconds", "gauge", "Age of the item at the CLOCK hand.", PROM_ITEMS, "age" },
    { "memcached_slab_items_evicted_total", "counter", "Live items evicted by the CLOCK.", PROM_ITEMS, "evicted" },
    { "memcached_slab_items_evicted_nonzero_total", "counter", "Evicted items that had an expiry time.", PROM_ITEMS, "evicted_nonzero" },
    { "memcached_slab_items_evicted_time_seconds", "counter", "Seconds since the last evicted item's last access.", PROM_ITEMS, "evicted_time" },
    { "memcached_slab_items_evicted_unfetched_total", "counter", "Evicted items never read.", PROM_ITEMS, "evicted_unfetched" },
    { "memcached_slab_items_expired_unfetched_total", "counter", "Expired items never read.", PROM_ITEMS, "expired_unfetched" },
    { "memcached_slab_items_outofmemory_total", "counter", "Stores refused for lack of memory.", PROM_ITEMS, "outofmemory" },
    { "memcached_slab_items_reclaimed_total", "counter", "Stores that reused an expired item.", PROM_ITEMS, "reclaimed" },
    { "memcached_slab_items_tailrepairs_total", "counter", "memcached's tail repairs (none here).", PROM_ITEMS, "tailrepairs" },
    { "memcached_slab_items_crawler_reclaimed_total", "counter", "Expired items the crawler removed.", PROM_ITEMS, "crawler_reclaimed" },
    { "memcached_slab_items_moves_to_cold", "counter", "memcached's segment moves (no segments here).", PROM_ITEMS, "moves_to_cold" },
    { "memcached_slab_items_moves_to_warm", "counter", "memcached's segment moves (no segments here).", PROM_ITEMS, "moves_to_warm" },
    { "memcached_slab_items_moves_within_lru", "counter", "memcached's segment moves (no segments here).", PROM_ITEMS, "moves_within_lru" },
    { "slabcache_slab_slabs_evicted_total", "counter", "Slabs taken from the class for another.", PROM_SLABS, "slabs_evicted" },
    { "slabcache_slab_slabs_gained_total", "counter", "Slabs re-carved into the class.", PROM_SLABS, "slabs_gained" },
    { "slabcache_slab_items_evicted_by_slab_total", "counter", "Live items dropped with their slab.", PROM_SLABS, "items_evicted_by_slab" },
};

/* memcached_slab_lru_hits_total{lru}: memcached's segments; hits_to_*. */
static const char *const prom_lrus[] = { "cold", "hot", "temporary", "warm" };
static const char *const prom_lru_fields[] = { "hits_to_cold", "hits_to_hot", "hits_to_temp",
                                               "hits_to_warm" };

struct prom_sections {
    struct stats_pairs general, settings, slabs, items, own;
};

static const struct stats_pairs *
prom_pairs(const struct prom_sections *s, prom_src_t src)
{
    switch (src) {
    case PROM_GENERAL:  return &s->general;
    case PROM_SETTINGS: return &s->settings;
    case PROM_SLABS:    return &s->slabs;
    case PROM_ITEMS:    return &s->items;
    case PROM_OWN:      return &s->own;
    }
    return &s->general;
}

/* A stats value as a sample: yes/on 1, no/off 0; NULL if not a number. */
static const char *
prom_value(const char *v)
{
    if (v == NULL) {
        return NULL;
    }
    if (strcmp(v, "yes") == 0 || strcmp(v, "on") == 0) {
        return "1";
    }
    if (strcmp(v, "no") == 0 || strcmp(v, "off") == 0) {
        return "0";
    }
    return json_is_number(v) ? v : NULL;
}

static void
prom_head(stats_write_fn w, void *ctx, const char *name, const char *type, const char *help)
{
    putf(w, ctx, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Class ids present in `stats slabs` or `stats items`, ascending. */
static size_t
prom_classes(const struct prom_sections *s, unsigned *ids, size_t cap)
{
    bool seen[STATS_CLASSES] = { false };
    size_t n = 0;
    const struct stats_pairs *srcs[2] = { &s->slabs, &s->items };

    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < srcs[k]->n; i++) {
            const char *rest;
            const char *name = srcs[k]->v[i].name;
            if (class_prefix(name, &rest) != 0) {
                unsigned id = (unsigned)strtoul(strncmp(name, "items:", 6) == 0 ? name + 6 : name,
                                                NULL, 10);
                if (id < STATS_CLASSES) {
                    seen[id] = true;
                }
            }
        }
    }
    for (unsigned id = 0; id < STATS_CLASSES && n < cap; id++) {
        if (seen[id]) {
            ids[n++] = id;
        }
    }
    return n;
}

static const char *
prom_class_value(const struct prom_sections *s, prom_src_t src, unsigned id, const char *field)
{
    char key[96];

    snprintf(key, sizeof(key), "%s%u:%s", src == PROM_ITEMS ? "items:" : "", id, field);
    return prom_value(pairs_get(prom_pairs(s, src), key));
}

static void
prom_general(stats_write_fn w, void *ctx, const struct prom_sections *s)
{
    for (size_t i = 0; i < sizeof(prom_scalars) / sizeof(prom_scalars[0]); i++) {
        const struct prom_metric *m = &prom_scalars[i];
        const char *v = m->field == NULL ? "1" : prom_value(pairs_get(prom_pairs(s, m->src), m->field));
        if (v != NULL) {
            prom_head(w, ctx, m->name, m->type, m->help);
            putf(w, ctx, "%s %s\n", m->name, v);
        }
    }
    const char *version = pairs_get(&s->general, "version");
    prom_head(w, ctx, "memcached_version", "gauge", "The memcached version served.");
    putf(w, ctx, "memcached_version{version=\"%s\"} 1\n", version != NULL ? version : "");
    const char *policy = pairs_get(&s->settings, "evictions_policy");
    prom_head(w, ctx, "slabcache_eviction_policy", "gauge", "The eviction policies in force, in order.");
    putf(w, ctx, "slabcache_eviction_policy{policy=\"%s\"} 1\n", policy != NULL ? policy : "");
    prom_head(w, ctx, "memcached_commands_total", "counter", "Requests by command and outcome.");
    for (size_t i = 0; i < sizeof(prom_commands) / sizeof(prom_commands[0]); i++) {
        const struct prom_command *c = &prom_commands[i];
        const char *v = prom_value(pairs_get(&s->general, c->field));
        if (v != NULL) {
            putf(w, ctx, "memcached_commands_total{command=\"%s\",status=\"%s\"} %s\n",
                 c->command, c->status, v);
        }
    }
}

static void
prom_slabs(stats_write_fn w, void *ctx, const struct prom_sections *s)
{
    unsigned ids[STATS_CLASSES];
    size_t n = prom_classes(s, ids, STATS_CLASSES);

    for (size_t i = 0; i < sizeof(prom_per_slab) / sizeof(prom_per_slab[0]); i++) {
        const struct prom_metric *m = &prom_per_slab[i];
        bool head = false;
        for (size_t k = 0; k < n; k++) {
            const char *v = prom_class_value(s, m->src, ids[k], m->field);
            if (v == NULL) {
                continue;
            }
            if (!head) {
                prom_head(w, ctx, m->name, m->type, m->help);
                head = true;
            }
            putf(w, ctx, "%s{slab=\"%u\"} %s\n", m->name, ids[k], v);
        }
    }
    prom_head(w, ctx, "memcached_slab_commands_total", "counter", "Requests by class, command and outcome.");
    for (size_t i = 0; i < sizeof(prom_commands) / sizeof(prom_commands[0]); i++) {
        const struct prom_command *c = &prom_commands[i];
        for (size_t k = 0; k < n && c->per_slab; k++) {
            const char *v = prom_class_value(s, PROM_SLABS, ids[k], c->field);
            if (v != NULL) {
                putf(w, ctx, "memcached_slab_commands_total{command=\"%s\",slab=\"%u\",status=\"%s\"} %s\n",
                     c->command, ids[k], c->status, v);
            }
        }
    }
    prom_head(w, ctx, "memcached_slab_lru_hits_total", "counter", "Hits by class and memcached LRU segment (all cold here).");
    for (size_t l = 0; l < sizeof(prom_lrus) / sizeof(prom_lrus[0]); l++) {
        for (size_t k = 0; k < n; k++) {
            const char *v = prom_class_value(s, PROM_ITEMS, ids[k], prom_lru_fields[l]);
            if (v != NULL) {
                putf(w, ctx, "memcached_slab_lru_hits_total{lru=\"%s\",slab=\"%u\"} %s\n",
                     prom_lrus[l], ids[k], v);
            }
        }
    }
}

/*
 * `stats sizing` as gauges: the hit ratio the workload would have at each
 * multiple of -m, and per class the slabs it would have at 1x -m, the
 * hits its last slab earns and one slab more would earn.
 */
static void
prom_sizing(stats_write_fn w, void *ctx, const struct stats_pairs *p)
{
    static const char *const fields[][3] = {
        { "wanted_slabs", "slabcache_sizing_wanted_slabs",
          "Slabs the class would hold at -m, divided by measured hits." },
        { "last_slab_hits", "slabcache_sizing_last_slab_hits",
          "Gets in the window that the class's last slab earns (estimated)." },
        { "next_slab_hits", "slabcache_sizing_next_slab_hits",
          "Gets in the window that one slab more would earn the class (estimated)." },
    };

    prom_head(w, ctx, "slabcache_sizing_hit_ratio", "gauge",
              "Hit ratio the measured gets would have at a multiple of -m.");
    for (size_t i = 0; i < p->n; i++) {
        if (strncmp(p->v[i].name, "hit_ratio_at_", 13) == 0) {
            putf(w, ctx, "slabcache_sizing_hit_ratio{memory=\"%s\"} %s\n",
                 p->v[i].name + 13, p->v[i].value);
        }
    }
    prom_head(w, ctx, "slabcache_sizing_memory_bytes", "gauge",
              "Memory the measurement holds (at most 1% of -m).");
    putf(w, ctx, "slabcache_sizing_memory_bytes %s\n",
         pairs_get(p, "sizing_memory") != NULL ? pairs_get(p, "sizing_memory") : "0");
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        prom_head(w, ctx, fields[f][1], "gauge", fields[f][2]);
        for (size_t i = 0; i < p->n; i++) {
            const char *rest;
            if (class_prefix(p->v[i].name, &rest) != 0 && strcmp(rest, fields[f][0]) == 0) {
                putf(w, ctx, "%s{slab=\"%u\"} %s\n", fields[f][1],
                     (unsigned)strtoul(p->v[i].name, NULL, 10), p->v[i].value);
            }
        }
    }
}

void
stats_render_prometheus(stats_write_fn w, void *ctx)
{
    struct stats_pairs sizing;
    struct prom_sections s;

    pairs_collect(&s.general, STATS_GENERAL);
    pairs_collect(&s.settings, STATS_SETTINGS);
    pairs_collect(&s.slabs, STATS_SLABS);
    pairs_collect(&s.items, STATS_ITEMS);
    pairs_collect(&s.own, STATS_SLABCACHE);
    prom_general(w, ctx, &s);
    prom_slabs(w, ctx, &s);
    pairs_collect(&sizing, STATS_SIZING);
    prom_sizing(w, ctx, &sizing);
    pairs_free(&sizing);
    pairs_free(&s.general);
    pairs_free(&s.settings);
    pairs_free(&s.slabs);
    pairs_free(&s.items);
    pairs_free(&s.own);
}
