/*
 * settings.c -- parse memcached-compatible command line options.
 *
 * The option table lives in settings.h (SETTINGS_OPTIONS); this file turns
 * it into getopt_long tables, parses each argument strictly by its kind and
 * range, and reports the first invalid value on one line.
 */
#include "settings.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct settings settings;

typedef enum opt_kind {
    KIND_INT, KIND_OCT, KIND_SIZE, KIND_REAL, KIND_FLAG, KIND_COUNT, KIND_STR
} opt_kind_t;

struct opt_desc {
    const char *long_name;
    int         short_name;
    opt_kind_t  kind;
    double      min, max;
    const char *help;
    void       *field;
};

#define OPT_DESC(name, kind, s, l, def, mn, mx, hlp) \
    { l, s, KIND_##kind, mn, mx, hlp, &settings.name },
static const struct opt_desc opt_table[] = { SETTINGS_OPTIONS(OPT_DESC) };
#undef OPT_DESC

#define OPT_COUNT (sizeof(opt_table) / sizeof(opt_table[0]))
#define OPT_LONG_ONLY_BASE 256

void
settings_defaults(void)
{
#define SET_DEFAULT(name, kind, s, l, def, mn, mx, hlp) settings.name = def;
    SETTINGS_OPTIONS(SET_DEFAULT)
#undef SET_DEFAULT
    settings.hashpower = 16;
    settings.bg_evict = false;
    settings.bg_reserve = 64;
    settings.bg_batch = 32;
    settings.idle_timeout = 0;
    settings.slab_reassign = true;
    settings.lru_crawler = true;
    settings.crawler_sleep = 100;
    settings.crawler_tocrawl = 0;
    settings.watcher_logbuf = 256 * 1024;
    settings.automove = -1;
    settings.first_slab = true;
    settings.slab_rescue = true;
    settings.maxbytes = (size_t)settings.memory_mb * 1024 * 1024;
}

static int
usage_error(const char *opt, const char *value, const char *why)
{
    fprintf(stderr, "slabcache: invalid value '%s' for %s: %s\n", value, opt, why);
    return -1;
}

static bool
parse_long(const char *s, int base, long *out)
{
    char *end;

    if (*s == '\0') {
        return false;
    }
    errno = 0;
    long v = strtol(s, &end, base);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

/* Sizes accept a k/m/g suffix (powers of 1024), as memcached's -I does. */
static bool
parse_size(const char *s, long *out)
{
    char buf[64];
    size_t n = strlen(s);
    long mult = 1;

    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, n + 1);
    switch (buf[n - 1]) {
    case 'k': case 'K': mult = 1024L; break;
    case 'm': case 'M': mult = 1024L * 1024; break;
    case 'g': case 'G': mult = 1024L * 1024 * 1024; break;
    default: break;
    }
    if (mult != 1) {
        buf[n - 1] = '\0';
    }
    long v;
    if (!parse_long(buf, 10, &v) || v < 0 || v > LONG_MAX / mult) {
        return false;
    }
    *out = v * mult;
    return true;
}

static int
apply_option(const struct opt_desc *d, const char *arg)
{
    char name[64];
    long lv = 0;
    double dv;
    char *end;

    if (d->short_name) {
        snprintf(name, sizeof(name), "-%c", d->short_name);
    } else {
        snprintf(name, sizeof(name), "--%s", d->long_name);
    }

    switch (d->kind) {
    case KIND_FLAG:
        *(bool *)d->field = true;
        return 0;
    case KIND_COUNT:
        if (*(long *)d->field < (long)d->max) {
            (*(long *)d->field)++;
        }
        return 0;
    case KIND_STR:
        if (*arg == '\0') {
            return usage_error(name, arg, "must not be empty");
        }
        *(const char **)d->field = arg;
        return 0;
    case KIND_INT:
    case KIND_OCT:
        if (!parse_long(arg, d->kind == KIND_OCT ? 8 : 10, &lv)) {
            return usage_error(name, arg, "not a number");
        }
        break;
    case KIND_SIZE:
        if (!parse_size(arg, &lv)) {
            return usage_error(name, arg, "not a size (digits with optional k/m/g)");
        }
        break;
    case KIND_REAL:
        errno = 0;
        dv = strtod(arg, &end);
        if (errno != 0 || end == arg || *end != '\0') {
            return usage_error(name, arg, "not a number");
        }
        if (dv < d->min || dv > d->max) {
            return usage_error(name, arg, "out of range");
        }
        *(double *)d->field = dv;
        return 0;
    }
    if (lv < (long)d->min || lv > (long)d->max) {
        char why[96];
        snprintf(why, sizeof(why), "must be between %ld and %ld",
                 (long)d->min, (long)d->max);
        return usage_error(name, arg, why);
    }
    *(long *)d->field = lv;
    return 0;
}

/*
 * memcached's extended (-o) options. Every one memcached 1.6.18 knows has a
 * row: it works here (a number in range, or a switch), or memcached itself
 * ignores it, or it is refused with the reason (a mechanism slabcache does
 * not have). None is accepted and silently ignored. notes/compatibility.md
 * lists them.
 */
typedef enum ext_kind {
    EXT_NUM,                    /* name=N, N in [min, max] */
    EXT_SWITCH,                 /* bare name */
    EXT_NOOP,                   /* memcached 1.6.18 ignores it too */
    EXT_REFUSED,                /* why: the reason */
} ext_kind_t;

struct ext_opt {
    const char *name;
    ext_kind_t  kind;
    long        min, max;
    void      (*apply)(long v);
    const char *why;
};

static void set_hashpower(long v)    { settings.hashpower = (uint32_t)v; }
static void set_bg_evict(long v)     { settings.bg_evict = v != 0; }
static void set_bg_reserve(long v)   { settings.bg_reserve = (uint32_t)v; }
static void set_bg_batch(long v)     { settings.bg_batch = (uint32_t)v; }
static void set_idle_timeout(long v) { settings.idle_timeout = (uint32_t)v; }
static void set_automove(long v)     { settings.automove = v; }
static void set_crawl_sleep(long v)  { settings.crawler_sleep = (uint32_t)v; }
static void set_tocrawl(long v)      { settings.crawler_tocrawl = (uint32_t)v; }
static void set_watch_buf(long v)    { settings.watcher_logbuf = (uint32_t)v * 1024; }
static void set_reassign(long v)     { settings.slab_reassign = v != 0; }
static void set_first_slab(long v)   { settings.first_slab = v != 0; }
static void set_slab_rescue(long v)  { settings.slab_rescue = v != 0; }
static void set_crawler(long v)      { settings.lru_crawler = v != 0; }
static void set_no_automove(long v)  { (void)v; settings.automove = 0; }
/* memcached 1.4's defaults: no slab moves, no crawler; items are never
 * chunked here anyway. */
static void set_no_modern(long v)
{
    (void)v;
    settings.slab_reassign = false;
    settings.lru_crawler = false;
}
static void set_nothing(long v)      { (void)v; }

#define NUM(n, lo, hi, fn)  { n, EXT_NUM, lo, hi, fn, NULL }
#define SWITCH(n, v, fn)    { n, EXT_SWITCH, v, v, fn, NULL }
#define NOOP(n)             { n, EXT_NOOP, 0, 0, NULL, NULL }
#define REFUSED(n, why)     { n, EXT_REFUSED, 0, 0, NULL, why }

static const char NO_SEGMENTS[] = "slabcache has no segmented LRU (one CLOCK per class)";
static const char NO_MOVER[] = "slabcache moves slabs by eviction policy (--eviction), not a page mover";
static const char GEOMETRY[] = "slab geometry is set with -I, -f and -n";

static const struct ext_opt ext_opts[] = {
    NUM("hashpower", 12, 32, set_hashpower),
    NUM("bg_evict", 0, 1, set_bg_evict),
    NUM("bg_evict_reserve", 1, 1000000, set_bg_reserve),
    NUM("bg_evict_batch", 1, 10000, set_bg_batch),
    NUM("idle_timeout", 0, INT32_MAX, set_idle_timeout),
    NUM("slab_automove", 0, 2, set_automove),
    NUM("lru_crawler_sleep", 0, 1000000, set_crawl_sleep),
    NUM("lru_crawler_tocrawl", 0, UINT32_MAX, set_tocrawl),
    NUM("watcher_logbuf_size", 1, 1048576, set_watch_buf),
    NUM("first_slab_past_limit", 0, 1, set_first_slab),
    NUM("slab_rescue", 0, 1, set_slab_rescue),
    SWITCH("slab_reassign", 1, set_reassign),
    SWITCH("no_slab_reassign", 0, set_reassign),
    SWITCH("no_slab_automove", 0, set_no_automove),
    SWITCH("lru_crawler", 1, set_crawler),
    SWITCH("no_lru_crawler", 0, set_crawler),
    /* What slabcache always does: */
    SWITCH("maxconns_fast", 1, set_nothing),
    SWITCH("no_lru_maintainer", 0, set_nothing),
    NOOP("modern"),
    NOOP("inline_ascii_resp"),
    NOOP("no_inline_ascii_resp"),
    REFUSED("lru_maintainer", NO_SEGMENTS),
    REFUSED("hot_lru_pct", NO_SEGMENTS),
    REFUSED("warm_lru_pct", NO_SEGMENTS),
    REFUSED("hot_max_factor", NO_SEGMENTS),
    REFUSED("warm_max_factor", NO_SEGMENTS),
    REFUSED("temporary_ttl", NO_SEGMENTS),
    REFUSED("tail_repair_time", "no tail repair: a referenced item is never reused"),
    REFUSED("slab_automove_ratio", NO_MOVER),
    REFUSED("slab_automove_window", NO_MOVER),
    REFUSED("slab_sizes", GEOMETRY),
    REFUSED("slab_chunk_max", GEOMETRY),
    REFUSED("no_chunked_items", GEOMETRY),
    SWITCH("no_modern", 0, set_no_modern),
    REFUSED("no_maxconns_fast", "connections past -c are always refused at once"),
    REFUSED("no_hashexpand", "the hash table always grows"),
    REFUSED("worker_logbuf_size", "watch lines go straight to each watcher's buffer"),
    REFUSED("track_sizes", "stats sizes is not kept"),
    REFUSED("drop_privileges", "not supported"),
    REFUSED("no_drop_privileges", "not supported"),
    REFUSED("resp_obj_mem_limit", "no response objects"),
    REFUSED("read_buf_mem_limit", "read buffers are fixed at 16 KB per connection"),
};

/* hash_algorithm takes a name, and only the one slabcache uses. */
static int
apply_hash_algorithm(const char *value)
{
    if (strcmp(value, "murmur3") != 0) {
        return usage_error("hash_algorithm", value, "slabcache hashes keys with murmur3 only");
    }
    return 0;
}

static const struct ext_opt *
ext_find(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(ext_opts) / sizeof(ext_opts[0]); i++) {
        if (strlen(ext_opts[i].name) == n && memcmp(ext_opts[i].name, name, n) == 0) {
            return &ext_opts[i];
        }
    }
    return NULL;
}

static int
apply_ext(const char *name, size_t nlen, bool has_value, const char *value)
{
    char opt[64];
    snprintf(opt, sizeof(opt), "%.*s", (int)nlen, name);

    if (strcmp(opt, "hash_algorithm") == 0) {
        return apply_hash_algorithm(value);
    }
    if (strncmp(opt, "ssl_", 4) == 0 || strncmp(opt, "ext_", 4) == 0 ||
        strncmp(opt, "proxy_", 6) == 0) {
        return usage_error("-o", opt, "TLS, extstore and the proxy are not supported yet");
    }
    const struct ext_opt *e = ext_find(name, nlen);
    if (e == NULL) {
        return usage_error("-o", opt, "unknown extended option");
    }
    switch (e->kind) {
    case EXT_NUM: {
        long v;
        if (!has_value && strcmp(e->name, "slab_automove") == 0) {
            e->apply(1);        /* memcached: bare slab_automove means 1 */
            return 0;
        }
        if (!parse_long(value, 10, &v) || v < e->min || v > e->max) {
            char why[64];
            snprintf(why, sizeof(why), "must be between %ld and %ld", e->min, e->max);
            return usage_error(e->name, value, why);
        }
        e->apply(v);
        return 0;
    }
    case EXT_SWITCH:
        if (has_value) {
            return usage_error(e->name, value, "takes no value");
        }
        e->apply(e->min);
        return 0;
    case EXT_NOOP:
        return 0;
    case EXT_REFUSED:
        return usage_error("-o", opt, e->why);
    }
    return -1;
}

static int
apply_extended(const char *list)
{
    const char *p = list;

    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        char value[64] = "";

        if (eq != NULL) {
            size_t vlen = len - nlen - 1;
            if (vlen >= sizeof(value)) {
                return usage_error("-o", p, "value too long");
            }
            memcpy(value, eq + 1, vlen);
            value[vlen] = '\0';
        }
        if (apply_ext(p, nlen, eq != NULL, value) != 0) {
            return -1;
        }
        p += len;
        if (*p == ',') {
            p++;
        }
    }
    return 0;
}

/*
 * slab_automove and no_slab_reassign choose the eviction stack (0 and no
 * reassignment: item-level only); with --eviction as well, the two would
 * disagree, so that is refused.
 */
static int
check_automove(void)
{
    long level = settings.slab_reassign ? settings.automove : 0;

    if (level < 0) {
        return 0;
    }
    if (strcmp(settings.eviction, "lrc,lru") != 0) {
        fprintf(stderr, "slabcache: -o slab_automove/no_slab_reassign and --eviction "
                "both choose the eviction stack: give one\n");
        return -1;
    }
    return 0;               /* main.c sets the stack (evict_automove_stack) */
}

/* -B: auto (memcached's default: a connection whose first byte is the
 * binary magic speaks binary, any other ASCII), ascii, or binary. */
static int
check_protocol(void)
{
    if (strcmp(settings.protocol, "ascii") != 0 && strcmp(settings.protocol, "auto") != 0 &&
        strcmp(settings.protocol, "binary") != 0) {
        return usage_error("-B", settings.protocol, "must be auto, ascii or binary");
    }
    settings.binary_auto = strcmp(settings.protocol, "auto") == 0;
    settings.binary_only = strcmp(settings.protocol, "binary") == 0;
    return 0;
}

static int
check_consistency(void)
{
    if (settings.factor <= 1.0) {
        fprintf(stderr, "slabcache: invalid value for -f: factor must be greater than 1\n");
        return -1;
    }
    settings.maxbytes = (size_t)settings.memory_mb * 1024 * 1024;
    if ((size_t)settings.item_size_max > settings.maxbytes / 2) {
        fprintf(stderr, "slabcache: invalid value for -I: cannot exceed half of -m (%zu bytes)\n",
                settings.maxbytes / 2);
        return -1;
    }
    if (settings.chunk_min >= settings.item_size_max / 2) {
        fprintf(stderr, "slabcache: invalid value for -n: must be smaller than half of -I\n");
        return -1;
    }
    if (settings.extended != NULL && apply_extended(settings.extended) != 0) {
        return -1;
    }
    if (check_automove() != 0 || check_protocol() != 0) {
        return -1;
    }
    return 0;
}

void
settings_usage(void)
{
    printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
    for (size_t i = 0; i < OPT_COUNT; i++) {
        const struct opt_desc *d = &opt_table[i];
        const char *arg = (d->kind == KIND_FLAG || d->kind == KIND_COUNT) ? "" : "=<arg>";
        if (d->short_name) {
            printf("-%c, --%s%-*s %s\n", d->short_name, d->long_name,
                   (int)(24 - strlen(d->long_name)), arg, d->help);
        } else {
            printf("    --%s%-*s %s\n", d->long_name,
                   (int)(24 - strlen(d->long_name)), arg, d->help);
        }
    }
    printf("-V, --version%-19s print version and exit\n", "");
    printf("-h, --help%-22s print this help and exit\n", "");
}

settings_rstatus_t
settings_parse(int argc, char **argv)
{
    struct option longopts[OPT_COUNT + 3];
    char shortopts[OPT_COUNT * 2 + 8];
    size_t ns = 0;

    for (size_t i = 0; i < OPT_COUNT; i++) {
        const struct opt_desc *d = &opt_table[i];
        bool has_arg = d->kind != KIND_FLAG && d->kind != KIND_COUNT;
        longopts[i].name = d->long_name;
        longopts[i].has_arg = has_arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = d->short_name ? d->short_name : OPT_LONG_ONLY_BASE + (int)i;
        if (d->short_name) {
            shortopts[ns++] = (char)d->short_name;
            if (has_arg) {
                shortopts[ns++] = ':';
            }
        }
    }
    longopts[OPT_COUNT] = (struct option){ "version", no_argument, NULL, 'V' };
    longopts[OPT_COUNT + 1] = (struct option){ "help", no_argument, NULL, 'h' };
    longopts[OPT_COUNT + 2] = (struct option){ NULL, 0, NULL, 0 };
    memcpy(shortopts + ns, "Vh", 3);

    optind = 0;                 /* glibc: 0 also forgets a half-read -hv group */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'V') {
            printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
            return SETTINGS_EXIT_OK;
        }
        if (c == 'h') {
            settings_usage();
            return SETTINGS_EXIT_OK;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, "slabcache: unknown option or missing argument: %s\n",
                    argv[optind - 1]);
            return SETTINGS_USAGE;
        }
        const struct opt_desc *d = NULL;
        for (size_t i = 0; i < OPT_COUNT; i++) {
            if (longopts[i].val == c) {
                d = &opt_table[i];
                break;
            }
        }
        if (d == NULL || apply_option(d, optarg) != 0) {
            return SETTINGS_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slabcache: unexpected argument: %s\n", argv[optind]);
        return SETTINGS_USAGE;
    }
    return check_consistency() == 0 ? SETTINGS_OK : SETTINGS_USAGE;
}
