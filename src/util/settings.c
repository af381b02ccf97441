/*
 * settings.c -- parse memcached-compatible command line and extended (-o)
 * options.
 *
 * The option table lives in settings.h (SETTINGS_OPTIONS); this file turns
 * it into getopt_long tables, an -o parser and the --help text, parses
 * each argument strictly by its kind and range, and reports the first
 * invalid value on one line. memcached's -o names that are not options
 * here (no-ops in memcached too, or mechanisms slabcache does not have)
 * are in one more table below, each with what it does or why it is
 * refused.
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
    KIND_INT, KIND_OCT, KIND_SIZE, KIND_REAL, KIND_FLAG, KIND_COUNT, KIND_STR,
    KIND_XNUM, KIND_XREAL, KIND_XBOOL, KIND_XSWITCH, KIND_XSTR
} opt_kind_t;

struct opt_desc {
    const char *name;           /* long option, or the -o name */
    int         short_name;
    opt_kind_t  kind;
    double      min, max;
    const char *stat;           /* its `stats settings` line, or NULL */
    const char *help;
    void       *field;
};

#define OPT_DESC(field, kind, s, l, def, mn, mx, st, hlp) \
    { l, s, KIND_##kind, mn, mx, st, hlp, &settings.field },
static const struct opt_desc opt_table[] = { SETTINGS_OPTIONS(OPT_DESC) };
#undef OPT_DESC

#define OPT_COUNT (sizeof(opt_table) / sizeof(opt_table[0]))
#define OPT_LONG_ONLY_BASE 256

static bool
opt_is_ext(const struct opt_desc *d)
{
    return d->kind == KIND_XNUM || d->kind == KIND_XREAL || d->kind == KIND_XBOOL ||
           d->kind == KIND_XSWITCH || d->kind == KIND_XSTR;
}

/*
 * -o string values (XSTR rows) are copied out of the -o argument; the
 * copies are owned here and freed when the settings are reset, or when
 * the same option is given again.
 */
#define XSTR_OWNED_MAX 64
static char  *xstr_owned[XSTR_OWNED_MAX];
static size_t xstr_nowned;

static void
xstr_free_all(void)
{
    for (size_t i = 0; i < xstr_nowned; i++) {
        free(xstr_owned[i]);
    }
    xstr_nowned = 0;
}

/* Keep copy as the value of field; false if out of room. */
static bool
xstr_own(const char **field, char *copy)
{
    for (size_t i = 0; i < xstr_nowned; i++) {
        if (xstr_owned[i] == *field) {          /* given again: replace */
            free(xstr_owned[i]);
            xstr_owned[i] = copy;
            *field = copy;
            return true;
        }
    }
    if (xstr_nowned == XSTR_OWNED_MAX) {
        return false;
    }
    xstr_owned[xstr_nowned++] = copy;
    *field = copy;
    return true;
}

static void
defaults_fill(struct settings *s)
{
#define SET_DEFAULT(field, kind, sh, l, def, mn, mx, st, hlp) s->field = def;
    SETTINGS_OPTIONS(SET_DEFAULT)
#undef SET_DEFAULT
}

void
settings_defaults(void)
{
    xstr_free_all();
    defaults_fill(&settings);
    settings.maxbytes = (size_t)settings.memory_mb * 1024 * 1024;
    settings.binary_auto = true;
    settings.binary_only = false;
    settings.protocol_given = false;
    settings.no_lru_maintainer = false;
    settings.temporary_ttl = 61;    /* memcached's, shown while off */
    settings.temp_lru = false;
}

bool
settings_row_stat(size_t i, const char **stat, char *buf, size_t cap)
{
    if (i >= OPT_COUNT) {
        return false;
    }
    const struct opt_desc *d = &opt_table[i];
    *stat = d->stat;
    /* Atomic loads: a few fields change at run time (the extstore
     * command) while `stats settings` renders them. */
    long lv;
    double dv;
    switch (d->kind) {
    case KIND_INT: case KIND_SIZE: case KIND_XNUM: case KIND_COUNT:
        lv = __atomic_load_n((long *)d->field, __ATOMIC_RELAXED);
        snprintf(buf, cap, "%ld", lv);
        break;
    case KIND_OCT:
        snprintf(buf, cap, "%lo", (unsigned long)*(long *)d->field);
        break;
    case KIND_REAL: case KIND_XREAL:
        __atomic_load((double *)d->field, &dv, __ATOMIC_RELAXED);
        snprintf(buf, cap, "%.2f", dv);
        break;
    case KIND_FLAG: case KIND_XBOOL: case KIND_XSWITCH:
        snprintf(buf, cap, "%s", __atomic_load_n((bool *)d->field, __ATOMIC_RELAXED) ? "yes" : "no");
        break;
    case KIND_STR: case KIND_XSTR:
        snprintf(buf, cap, "%s", *(const char **)d->field != NULL ?
                 *(const char **)d->field : "NULL");
        break;
    }
    return true;
}

/* The default as --help prints it (the table's, formatted by kind). */
static void
opt_default_text(const struct opt_desc *d, char *buf, size_t cap)
{
    struct settings defaults;

    /* d->field points into `settings`: read the same field of a copy
     * holding the defaults */
    defaults_fill(&defaults);
    d = &(struct opt_desc){ .kind = d->kind, .min = d->min, .max = d->max,
                            .field = (char *)&defaults + ((char *)d->field - (char *)&settings) };
    buf[0] = '\0';
    switch (d->kind) {
    case KIND_INT: case KIND_SIZE: case KIND_XNUM:
        if (*(long *)d->field >= (long)d->min) {
            snprintf(buf, cap, "%ld", *(long *)d->field);
        }
        break;
    case KIND_OCT:
        snprintf(buf, cap, "0%lo", (unsigned long)*(long *)d->field);
        break;
    case KIND_REAL: case KIND_XREAL:
        snprintf(buf, cap, "%.2f", *(double *)d->field);
        break;
    case KIND_XBOOL:
        snprintf(buf, cap, "%d", *(bool *)d->field ? 1 : 0);
        break;
    case KIND_XSWITCH:
        snprintf(buf, cap, "%s", *(bool *)d->field ? "on" : "off");
        break;
    case KIND_STR: case KIND_XSTR:
        if (*(const char **)d->field != NULL) {
            snprintf(buf, cap, "%s", *(const char **)d->field);
        }
        break;
    case KIND_FLAG: case KIND_COUNT:
        break;
    }
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

static int apply_extended(const char *list);

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
        snprintf(name, sizeof(name), "--%s", d->name);
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
        if (d->field == &settings.protocol) {
            settings.protocol_given = true;
        }
        /* -o may be given many times, as memcached takes it: each list
         * is applied as it comes (later settings win). */
        return d->field == &settings.extended ? apply_extended(arg) : 0;
    case KIND_XNUM:
    case KIND_XREAL:
    case KIND_XBOOL:
    case KIND_XSWITCH:
    case KIND_XSTR:
        return -1;              /* -o rows: apply_ext_row() */
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
        if (!(dv >= d->min && dv <= d->max)) {     /* NaN too */
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
 * memcached's extended (-o) names that are not options of slabcache's
 * table: spellings that mean something here (no_slab_automove, no_modern),
 * names memcached 1.6.18 itself ignores or that name what slabcache always
 * does, and mechanisms slabcache does not have, refused with the reason.
 * Every name memcached 1.6.18 knows is in one of the two tables; none is
 * accepted and silently ignored. notes/compatibility.md lists them.
 */
typedef enum compat_kind {
    COMPAT_SWITCH,              /* bare name: apply() */
    COMPAT_NOOP,                /* memcached 1.6.18 ignores it too */
    COMPAT_REFUSED,             /* why: the reason */
} compat_kind_t;

struct compat_opt {
    const char   *name;
    compat_kind_t kind;
    void        (*apply)(void);
    const char   *why;
};

static void set_no_automove(void)   { settings.automove = 0; }
/* memcached 1.4's defaults: no slab moves, no crawler, its plain LRU
 * (a read moves an item at most once a minute, no probation) with all of
 * -m for items; items are not chained by default here anyway. */
static void set_no_modern(void)
{
    settings.slab_reassign = false;
    settings.automove = 0;
    settings.lru_crawler = false;
    settings.lru_legacy = true;
    settings.measure_lazily = true;
}
static void set_nothing(void)       { }
/* memcached without its maintainer thread has no segments (lru_segmented
 * off): its plain LRU, as no_modern's. */
static void
set_no_maintainer(void)
{
    settings.no_lru_maintainer = true;
    settings.lru_legacy = true;
}

/* memcached's default (maintainer thread, segmented LRU), and what undoes
 * no_lru_maintainer in either: here the default CLOCK with probation,
 * slabcache's counterpart of the segments (a new item is on probation
 * until read, a read item is kept over unread ones). */
static void
set_maintainer(void)
{
    settings.no_lru_maintainer = false;
    settings.lru_legacy = false;
}

#define SWITCH(n, fn)       { n, COMPAT_SWITCH, fn, NULL }
#define NOOP(n)             { n, COMPAT_NOOP, NULL, NULL }
#define REFUSED(n, why)     { n, COMPAT_REFUSED, NULL, why }

static const char NO_SEGMENTS[] = "slabcache has no segmented LRU (one CLOCK per class)";
static const char NO_MOVER[] = "slabcache moves slabs by eviction policy (--eviction), not a page mover";
static const char GEOMETRY[] = "slab geometry is set with -I, -f and -n";
static const char FLASH_FIFO[] = "no such knob in slabcache's flash log (space is reclaimed first in, first out by page; see ext_compact_under, ext_max_frag)";

static const struct compat_opt compat_opts[] = {
    SWITCH("no_slab_automove", set_no_automove),
    SWITCH("no_modern", set_no_modern),
    SWITCH("no_lru_maintainer", set_no_maintainer),
    SWITCH("lru_maintainer", set_maintainer),
    /* What slabcache always does: */
    SWITCH("maxconns_fast", set_nothing),
    NOOP("modern"),
    NOOP("inline_ascii_resp"),
    NOOP("no_inline_ascii_resp"),
    REFUSED("hot_lru_pct", NO_SEGMENTS),
    REFUSED("warm_lru_pct", NO_SEGMENTS),
    REFUSED("hot_max_factor", NO_SEGMENTS),
    REFUSED("warm_max_factor", NO_SEGMENTS),
    REFUSED("tail_repair_time", "no tail repair: a referenced item is never reused"),
    REFUSED("slab_automove_ratio", NO_MOVER),
    REFUSED("slab_sizes", GEOMETRY),
    REFUSED("no_chunked_items", GEOMETRY),
    REFUSED("no_maxconns_fast", "connections past -c are always refused at once"),
    REFUSED("no_hashexpand", "the hash table always grows"),
    REFUSED("worker_logbuf_size", "watch lines go straight to each watcher's buffer"),
    REFUSED("track_sizes", "stats sizes is not kept"),
    REFUSED("drop_privileges", "not supported"),
    REFUSED("no_drop_privileges", "not supported"),
    REFUSED("resp_obj_mem_limit", "no response objects"),
    REFUSED("read_buf_mem_limit", "read buffers are fixed at 16 KB per connection"),
    REFUSED("ssl_kernel_tls", "kernel TLS offload is not supported"),
    REFUSED("ext_low_ttl", FLASH_FIFO),
    REFUSED("ext_drop_under", FLASH_FIFO),
    REFUSED("ext_max_sleep", FLASH_FIFO),
    REFUSED("slab_automove_freeratio", NO_MOVER),
};

/* -o temporary_ttl=N: items stored with a TTL of at most N seconds are
 * not evicted (memcached's temporary LRU); they go when they expire. */
static int
apply_temporary_ttl(const char *value)
{
    char *end;
    errno = 0;
    long v = value != NULL ? strtol(value, &end, 10) : -1;

    if (value == NULL || errno != 0 || end == value || *end != '\0' || v < 0 ||
        v > 2147483647L) {
        return usage_error("temporary_ttl", value != NULL ? value : "",
                           "seconds from 0 to 2147483647");
    }
    settings.temporary_ttl = v;
    settings.temp_lru = true;
    return 0;
}

/* -o memory_file=PATH, memcached's other spelling of -e PATH. */
static int
apply_memory_file(const char *value)
{
    char *copy = value != NULL && *value != '\0' ? strdup(value) : NULL;

    if (copy == NULL || !xstr_own(&settings.memory_file, copy)) {
        free(copy);
        return usage_error("memory_file", value != NULL ? value : "", "needs a path");
    }
    return 0;
}

/* hash_algorithm takes a name, and only the one slabcache uses. */
static int
apply_hash_algorithm(const char *value)
{
    if (strcmp(value, "murmur3") != 0) {
        return usage_error("hash_algorithm", value, "slabcache hashes keys with murmur3 only");
    }
    return 0;
}

static bool
name_is(const char *want, const char *name, size_t n)
{
    return strlen(want) == n && memcmp(want, name, n) == 0;
}

/* The table's -o row for name (*on false: an XSWITCH's no_ spelling). */
static const struct opt_desc *
ext_find(const char *name, size_t n, bool *on)
{
    for (size_t i = 0; i < OPT_COUNT; i++) {
        const struct opt_desc *d = &opt_table[i];
        if (!opt_is_ext(d)) {
            continue;
        }
        *on = true;
        if (name_is(d->name, name, n)) {
            return d;
        }
        if (d->kind == KIND_XSWITCH && n > 3 && memcmp(name, "no_", 3) == 0 &&
            name_is(d->name, name + 3, n - 3)) {
            *on = false;
            return d;
        }
    }
    return NULL;
}

static const struct compat_opt *
compat_find(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(compat_opts) / sizeof(compat_opts[0]); i++) {
        if (name_is(compat_opts[i].name, name, n)) {
            return &compat_opts[i];
        }
    }
    return NULL;
}

/* One of the table's -o rows. */
static int
apply_ext_row(const struct opt_desc *d, bool on, bool has_value, const char *value)
{
    long v;

    if (d->kind == KIND_XSWITCH) {
        if (has_value) {
            return usage_error(d->name, value, "takes no value");
        }
        *(bool *)d->field = on;
        return 0;
    }
    if (d->kind == KIND_XSTR) {
        if (!has_value || *value == '\0') {
            return usage_error(d->name, "", "needs a value");
        }
        char *copy = strdup(value);
        if (copy == NULL || !xstr_own((const char **)d->field, copy)) {
            free(copy);
            return usage_error(d->name, value, "too many string options");
        }
        return 0;
    }
    if (d->kind == KIND_XREAL) {
        char *end;
        errno = 0;
        double dv = has_value ? strtod(value, &end) : 0;
        if (!has_value || errno != 0 || end == value || *end != '\0' ||
            !(dv >= d->min && dv <= d->max)) {     /* NaN too */
            char why[64];
            snprintf(why, sizeof(why), "must be a number from %g to %g", d->min, d->max);
            return usage_error(d->name, has_value ? value : "", why);
        }
        *(double *)d->field = dv;
        return 0;
    }
    if (!has_value && d->field == &settings.automove) {
        settings.automove = 1;  /* memcached: bare slab_automove means 1 */
        return 0;
    }
    if (!parse_long(value, 10, &v) || v < (long)d->min || v > (long)d->max) {
        char why[64];
        snprintf(why, sizeof(why), "must be between %ld and %ld", (long)d->min, (long)d->max);
        return usage_error(d->name, value, why);
    }
    if (d->kind == KIND_XBOOL) {
        *(bool *)d->field = v != 0;
    } else {
        *(long *)d->field = v;
    }
    return 0;
}

static int
apply_ext(const char *name, size_t nlen, bool has_value, const char *value)
{
    char opt[64];
    bool on;
    snprintf(opt, sizeof(opt), "%.*s", (int)nlen, name);

    if (strcmp(opt, "hash_algorithm") == 0) {
        return apply_hash_algorithm(value);
    }
    if (strcmp(opt, "memory_file") == 0) {
        return apply_memory_file(value);
    }
    if (strcmp(opt, "temporary_ttl") == 0) {
        return apply_temporary_ttl(has_value ? value : NULL);
    }
    if (strncmp(opt, "proxy_", 6) == 0) {
        return usage_error("-o", opt, "the proxy is not supported");
    }
    const struct opt_desc *d = ext_find(name, nlen, &on);
    if (d != NULL) {
        return apply_ext_row(d, on, has_value, value);
    }
    const struct compat_opt *c = compat_find(name, nlen);
    if (c == NULL) {
        return usage_error("-o", opt, "unknown extended option");
    }
    switch (c->kind) {
    case COMPAT_SWITCH:
        if (has_value) {
            return usage_error(c->name, value, "takes no value");
        }
        c->apply();
        return 0;
    case COMPAT_NOOP:
        return 0;
    case COMPAT_REFUSED:
        return usage_error("-o", opt, c->why);
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
        char value[1024] = "";

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
    if (strcmp(settings.eviction, "auto") != 0) {
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
#ifndef HAVE_SASL
    if (settings.sasl) {
        fprintf(stderr, "slabcache: -S: this build has no SASL (configure found no libsasl2)\n");
        return -1;
    }
#endif
    if (settings.sasl) {
        /* memcached's SASL is a binary-protocol exchange */
        if (settings.protocol_given && strcmp(settings.protocol, "binary") != 0) {
            fprintf(stderr, "ERROR: You cannot allow the ASCII protocol while using SASL.\n");
            return -1;
        }
        settings.binary_auto = false;
        settings.binary_only = true;
        if (settings.udp_port != 0) {
            fprintf(stderr, "ERROR: Cannot enable UDP while using binary SASL authentication.\n");
            return -1;
        }
    }
#ifndef HAVE_TLS
    if (settings.ssl_enabled) {
        fprintf(stderr, "slabcache: -Z: this build has no TLS (configure found no OpenSSL)\n");
        return -1;
    }
#endif
    if (settings.auth_file != NULL) {
        /* memcached's -Y is an ASCII exchange: no binary connections. */
        if (settings.binary_only) {
            fprintf(stderr, "slabcache: You cannot allow the BINARY protocol while using "
                    "ascii authentication tokens.\n");
            return -1;
        }
        settings.binary_auto = false;
        if (settings.udp_port != 0) {
            fprintf(stderr, "slabcache: Cannot use UDP with ascii authentication enabled "
                    "(-U 0 to disable)\n");
            return -1;
        }
    }
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
    /* memcached 1.6.45 takes kilobytes, 1 to 1024; a larger number is bytes,
     * as memcached 1.6.18 took it (1.6.45 refuses it). Converted once: the
     * setting holds bytes from here on (`stats settings` shows bytes, as
     * both do). */
    if (settings.slab_chunk_max > 0 && settings.slab_chunk_max <= 1024) {
        settings.slab_chunk_max *= 1024;
    }
    /* Nothing chained by default, where memcached chains past 512 KB:
     * chained values do not go to the flash tier. */
    if (settings.slab_chunk_max == 0) {
        settings.slab_chunk_max = settings.item_size_max;
    }
    /* memcached's rules, its page being our slab (-I). */
    if (settings.slab_chunk_max > settings.item_size_max) {
        fprintf(stderr, "slabcache: slab_chunk_max (bytes: %ld) cannot be larger than -I "
                "(item_size_max %ld)\n", settings.slab_chunk_max, settings.item_size_max);
        return -1;
    }
    if (settings.item_size_max % settings.slab_chunk_max != 0) {
        fprintf(stderr, "slabcache: -I (item_size_max: %ld) must be evenly divisible by "
                "slab_chunk_max (bytes: %ld)\n", settings.item_size_max, settings.slab_chunk_max);
        return -1;
    }
    if (settings.chunk_min >= settings.item_size_max / 2) {
        fprintf(stderr, "slabcache: invalid value for -n: must be smaller than half of -I\n");
        return -1;
    }
    if (check_automove() != 0 || check_protocol() != 0) {
        return -1;
    }
    return 0;
}

/* One --help line: the option, its help, its default and range, and the
 * `stats settings` line that reports it (tests/integration/test_options.py
 * reads these lines to check the README, the man page and the stats). */
static void
usage_line(const struct opt_desc *d)
{
    char flag[64], def[64], extra[160];
    const char *arg = "";
    size_t n = 0;

    switch (d->kind) {
    case KIND_FLAG: case KIND_COUNT: case KIND_XSWITCH: break;
    case KIND_STR: case KIND_XSTR: arg = "=<str>"; break;
    case KIND_XBOOL: arg = "=<0|1>"; break;
    default: arg = "=<num>"; break;
    }
    if (opt_is_ext(d)) {
        snprintf(flag, sizeof(flag), "    -o %s%s%s", d->kind == KIND_XSWITCH ? "[no_]" : "",
                 d->name, arg);
    } else if (d->short_name) {
        snprintf(flag, sizeof(flag), "-%c, --%s%s", d->short_name, d->name, arg);
    } else {
        snprintf(flag, sizeof(flag), "    --%s%s", d->name, arg);
    }
    opt_default_text(d, def, sizeof(def));
    extra[0] = '\0';
    if (def[0] != '\0') {
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, " [default %s]", def);
    }
    if (d->kind == KIND_INT || d->kind == KIND_SIZE || d->kind == KIND_XNUM) {
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, " [range %ld-%ld]",
                              (long)d->min, (long)d->max);
    }
    if (d->stat != NULL) {
        snprintf(extra + n, sizeof(extra) - n, " [stats settings: %s]", d->stat);
    }
    printf("%-34s %s%s\n", flag, d->help, extra);
}

void
settings_usage(void)
{
    printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
    for (size_t i = 0; i < OPT_COUNT; i++) {
        if (!opt_is_ext(&opt_table[i])) {
            usage_line(&opt_table[i]);
        }
    }
    printf("%-34s %s\n", "-V, --version", "print version and exit");
    printf("%-34s %s\n", "-h, --help", "print this help and exit");
    printf("Extended options, -o name[=value][,name[=value]...]:\n");
    for (size_t i = 0; i < OPT_COUNT; i++) {
        if (opt_is_ext(&opt_table[i])) {
            usage_line(&opt_table[i]);
        }
    }
    printf("%-34s %s\n", "    -o hash_algorithm=murmur3", "memcached's; murmur3 is the only one");
    printf("%-34s %s\n", "    -o memory_file=PATH", "memcached's spelling of -e PATH");
    printf("%-34s %s\n", "    -o temporary_ttl=N",
           "items stored with a TTL of at most N seconds are not evicted, only expire "
           "(memcached's temporary LRU; off unless given)");
    printf("memcached's other -o names are no-ops here as in memcached, or refused with\n"
           "the reason (notes/compatibility.md).\n");
}

settings_rstatus_t
settings_parse(int argc, char **argv)
{
    struct option longopts[OPT_COUNT + 3];
    char shortopts[OPT_COUNT * 2 + 8];
    size_t ns = 0;

    size_t nl = 0;

    for (size_t i = 0; i < OPT_COUNT; i++) {
        const struct opt_desc *d = &opt_table[i];
        bool has_arg = d->kind != KIND_FLAG && d->kind != KIND_COUNT;
        if (opt_is_ext(d)) {
            continue;           /* given through -o */
        }
        longopts[nl].name = d->name;
        longopts[nl].has_arg = has_arg ? required_argument : no_argument;
        longopts[nl].flag = NULL;
        longopts[nl].val = d->short_name ? d->short_name : OPT_LONG_ONLY_BASE + (int)i;
        nl++;
        if (d->short_name) {
            shortopts[ns++] = (char)d->short_name;
            if (has_arg) {
                shortopts[ns++] = ':';
            }
        }
    }
    longopts[nl] = (struct option){ "version", no_argument, NULL, 'V' };
    longopts[nl + 1] = (struct option){ "help", no_argument, NULL, 'h' };
    longopts[nl + 2] = (struct option){ NULL, 0, NULL, 0 };
    memcpy(shortopts + ns, "Vh", 3);

    bool tcp_given = false, udp_given = false;
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
        for (size_t i = 0; i < OPT_COUNT && d == NULL; i++) {
            int val = opt_table[i].short_name ? opt_table[i].short_name
                                              : OPT_LONG_ONLY_BASE + (int)i;
            if (val == c && !opt_is_ext(&opt_table[i])) {
                d = &opt_table[i];
            }
        }
        if (d == NULL || apply_option(d, optarg) != 0) {
            return SETTINGS_USAGE;
        }
        tcp_given |= c == 'p';
        udp_given |= c == 'U';
    }
    /* As memcached: -U alone moves the TCP port to it too. */
    if (udp_given && settings.udp_port != 0 && !tcp_given) {
        settings.port = settings.udp_port;
    }
    if (optind < argc) {
        fprintf(stderr, "slabcache: unexpected argument: %s\n", argv[optind]);
        return SETTINGS_USAGE;
    }
    return check_consistency() == 0 ? SETTINGS_OK : SETTINGS_USAGE;
}
