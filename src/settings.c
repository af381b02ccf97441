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

/* Extended (-o) options memcached users pass; accepted for compatibility. */
static const char *const ext_ignored[] = {
    "slab_reassign", "slab_automove", "lru_crawler", "no_lru_crawler",
    "lru_maintainer", "no_lru_maintainer", "maxconns_fast", "no_maxconns_fast",
    "modern", "no_modern", "tail_repair_time", "slab_chunk_max",
    "hash_algorithm", "watcher_logbuf_size",
    "worker_logbuf_size", "track_sizes", "no_inline_ascii_resp", NULL
};

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

/* Extended (-o) options slabcache reads: name=number within [min, max]. */
static void set_hashpower(long v)  { settings.hashpower = (uint32_t)v; }
static void set_bg_evict(long v)   { settings.bg_evict = v != 0; }
static void set_bg_reserve(long v) { settings.bg_reserve = (uint32_t)v; }
static void set_bg_batch(long v)   { settings.bg_batch = (uint32_t)v; }
static void set_idle_timeout(long v) { settings.idle_timeout = (uint32_t)v; }

struct ext_num {
    const char *name;
    long        min, max;
    void      (*apply)(long v);
};

static const struct ext_num ext_nums[] = {
    { "hashpower",        12, 32,      set_hashpower },
    { "bg_evict",         0,  1,       set_bg_evict },
    { "bg_evict_reserve", 1,  1000000, set_bg_reserve },
    { "bg_evict_batch",   1,  10000,   set_bg_batch },
    { "idle_timeout",     0,  INT32_MAX, set_idle_timeout },
};

static const struct ext_num *
ext_num_find(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(ext_nums) / sizeof(ext_nums[0]); i++) {
        if (strlen(ext_nums[i].name) == n && memcmp(ext_nums[i].name, name, n) == 0) {
            return &ext_nums[i];
        }
    }
    return NULL;
}

static bool
ext_is_ignored(const char *name, size_t n)
{
    for (const char *const *p = ext_ignored; *p != NULL; p++) {
        if (strlen(*p) == n && memcmp(*p, name, n) == 0) {
            return true;
        }
    }
    return false;
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
        const struct ext_num *num = ext_num_find(p, nlen);
        if (num != NULL) {
            long v;
            if (!parse_long(value, 10, &v) || v < num->min || v > num->max) {
                char why[64];
                snprintf(why, sizeof(why), "must be between %ld and %ld",
                         num->min, num->max);
                return usage_error(num->name, value, why);
            }
            num->apply(v);
        } else if (!ext_is_ignored(p, nlen)) {
            char opt[64];
            snprintf(opt, sizeof(opt), "%.*s", (int)nlen, p);
            return usage_error("-o", opt, "unknown extended option");
        }
        p += len;
        if (*p == ',') {
            p++;
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
    if (settings.chunk_min >= settings.item_size_max / 2) {
        fprintf(stderr, "slabcache: invalid value for -n: must be smaller than half of -I\n");
        return -1;
    }
    if (settings.extended != NULL && apply_extended(settings.extended) != 0) {
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
