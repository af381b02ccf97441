/*
 * tenants.h -- the look-aside request stream of several tenants, shared by
 * bench/loadgen.c (--tenants) and bench/best-split.c, so that the
 * calculator replays exactly the requests the load generator sends.
 *
 * A tenant has a fixed value size, a key space, a key distribution
 * (uniform or Zipf S, rank 1 = key 0), a share of the requests and its own
 * key prefix. Keys are "<prefix><number>", the number zero-padded to the
 * digits of keys-1, so every item of a tenant has the same size and lands
 * in one slab class.
 *
 * Request i of a stream with seed S is a pure function of (S, i): its
 * uniforms come from a splitmix64 sequence started at a hash of both. The
 * load generator hands out i from one counter shared by all connections,
 * so the server receives the requests in index order up to the few in
 * flight at once, whatever the number of connections or threads.
 *
 * Spec: "size:keys:dist:share[:prefix],..." with dist "uniform" or
 * "zipfS" (e.g. zipf0.9); shares are normalized and may be 0 (an idle
 * tenant whose keys still exist); the default prefix of tenant i is
 * "t<i>:". Example, the reference four tenants with the first one hot:
 *   100:400000:zipf0.6:70,1000:50000:zipf1.0:10,10000:5000:uniform:10,300:100000:zipf0.9:10
 *
 * Header-only (static functions), C11, no dependencies beyond libm.
 */
#ifndef SLABCACHE_BENCH_TENANTS_H
#define SLABCACHE_BENCH_TENANTS_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TENANTS_MAX        16
#define TENANT_PREFIX_MAX  64
#define TENANT_SHIFT       48           /* key_num = tenant << 48 | key */
#define TENANT_KEY_MASK    (((uint64_t)1 << TENANT_SHIFT) - 1)

struct tenant {
    uint32_t size;                      /* value bytes */
    uint64_t keys;
    double zipf_s;                      /* 0: uniform */
    double share;                       /* normalized */
    double cum;                         /* cumulative share, last is 1 */
    char prefix[TENANT_PREFIX_MAX];
    int width;                          /* digits of keys - 1 */
    /* Zipf rejection-inversion sampler (as loadgen's, per tenant) */
    double z_n, z_hx1, z_hn, z_threshold;
};

struct tenants {
    struct tenant t[TENANTS_MAX];
    unsigned n;
};

static inline uint64_t
tn_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline double
tn_uniform(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return (double)(tn_mix(*state) >> 11) * 0x1.0p-53;
}

/* --- Zipf: Hörmann & Derflinger's rejection-inversion, as in loadgen.c --- */

static inline double
tn_helper1(double x)
{
    if (fabs(x) > 1e-8) {
        return log1p(x) / x;
    }
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

static inline double
tn_helper2(double x)
{
    if (fabs(x) > 1e-8) {
        return expm1(x) / x;
    }
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

static inline double
tn_h(const struct tenant *t, double x)
{
    return exp(-t->zipf_s * log(x));
}

static inline double
tn_hint(const struct tenant *t, double x)
{
    double log_x = log(x);

    return tn_helper2((1.0 - t->zipf_s) * log_x) * log_x;
}

static inline double
tn_hint_inv(const struct tenant *t, double x)
{
    double u = x * (1.0 - t->zipf_s);

    if (u < -1.0) {
        u = -1.0;
    }
    return exp(tn_helper1(u) * x);
}

static inline void
tn_zipf_setup(struct tenant *t)
{
    t->z_n = (double)t->keys;
    t->z_hx1 = tn_hint(t, 1.5) - 1.0;
    t->z_hn = tn_hint(t, t->z_n + 0.5);
    t->z_threshold = 2.0 - tn_hint_inv(t, tn_hint(t, 2.5) - tn_h(t, 2.0));
}

static inline uint64_t
tn_zipf_sample(const struct tenant *t, uint64_t *state)
{
    for (;;) {
        double u = t->z_hn + tn_uniform(state) * (t->z_hx1 - t->z_hn);
        double x = tn_hint_inv(t, u);
        double k = floor(x + 0.5);

        if (k < 1.0) {
            k = 1.0;
        } else if (k > t->z_n) {
            k = t->z_n;
        }
        if (k - x <= t->z_threshold || u >= tn_hint(t, k + 0.5) - tn_h(t, k)) {
            return (uint64_t)k;
        }
    }
}

/* --- the stream ---------------------------------------------------------- */

/* Request i of the stream with this seed: tenant index and key number,
 * packed as tenant << TENANT_SHIFT | key. */
static inline uint64_t
tenants_request(const struct tenants *ts, uint64_t seed, uint64_t i)
{
    uint64_t state = tn_mix(seed ^ 0x7e4a47c1d2b3a5f9ULL) + tn_mix(i + 1);
    double u = tn_uniform(&state);
    const struct tenant *t;
    unsigned idx = 0;
    uint64_t k;

    while (idx + 1 < ts->n && !(u < ts->t[idx].cum)) {
        idx++;
    }
    t = &ts->t[idx];
    if (t->zipf_s > 0.0) {
        k = tn_zipf_sample(t, &state) - 1;
    } else {
        k = (uint64_t)(tn_uniform(&state) * (double)t->keys) % t->keys;
    }
    return (uint64_t)idx << TENANT_SHIFT | k;
}

static inline unsigned
tenant_of(uint64_t key_num)
{
    return (unsigned)(key_num >> TENANT_SHIFT);
}

static inline size_t
tenant_key_format(const struct tenants *ts, uint64_t key_num, char *buf,
                  size_t cap)
{
    const struct tenant *t = &ts->t[tenant_of(key_num)];

    return (size_t)snprintf(buf, cap, "%s%0*" PRIu64, t->prefix, t->width,
                            (uint64_t)(key_num & TENANT_KEY_MASK));
}

static inline void
tenants_normalize(struct tenants *ts)
{
    double total = 0.0, cum = 0.0;
    unsigned i;

    for (i = 0; i < ts->n; i++) {
        total += ts->t[i].share;
    }
    for (i = 0; i < ts->n; i++) {
        ts->t[i].share /= total;
        cum += ts->t[i].share;
        ts->t[i].cum = cum;
    }
    /* From the last tenant with a share on, cum is 1: rounding never
     * picks an idle tenant. */
    for (i = ts->n; i-- > 0;) {
        ts->t[i].cum = 1.0;
        if (ts->t[i].share > 0.0) {
            break;
        }
    }
}

/* Parses spec into ts; on error writes a message to err and returns false. */
static inline bool
tenants_parse(struct tenants *ts, const char *spec, char *err, size_t errcap)
{
    char buf[4096];
    char *item, *save = NULL;
    double total = 0.0;

    memset(ts, 0, sizeof(*ts));
    if (strlen(spec) >= sizeof(buf)) {
        snprintf(err, errcap, "spec too long");
        return false;
    }
    strcpy(buf, spec);
    for (item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        struct tenant *t;
        char *f[5] = { 0 }, *p = item, *end;
        unsigned nf = 0;
        uint64_t v;

        if (ts->n == TENANTS_MAX) {
            snprintf(err, errcap, "at most %d tenants", TENANTS_MAX);
            return false;
        }
        while (nf < 5 && p) {
            f[nf++] = p;
            p = nf < 5 ? strchr(p, ':') : NULL;
            if (p) {
                *p++ = '\0';
            }
        }
        if (nf < 4) {
            snprintf(err, errcap, "tenant %u: expected size:keys:dist:share[:prefix]",
                     ts->n);
            return false;
        }
        t = &ts->t[ts->n];
        v = strtoull(f[0], &end, 10);
        if (*end || end == f[0] || v > 64 * 1024 * 1024) {
            snprintf(err, errcap, "tenant %u: bad size '%s'", ts->n, f[0]);
            return false;
        }
        t->size = (uint32_t)v;
        t->keys = strtoull(f[1], &end, 10);
        if (*end || end == f[1] || t->keys == 0 || t->keys > TENANT_KEY_MASK) {
            snprintf(err, errcap, "tenant %u: bad key count '%s'", ts->n, f[1]);
            return false;
        }
        if (strcmp(f[2], "uniform") == 0) {
            t->zipf_s = 0.0;
        } else if (strncmp(f[2], "zipf", 4) == 0) {
            t->zipf_s = strtod(f[2] + 4, &end);
            if (*end || end == f[2] + 4 || !(t->zipf_s > 0.0 && t->zipf_s < 100.0)) {
                snprintf(err, errcap, "tenant %u: bad distribution '%s'", ts->n, f[2]);
                return false;
            }
        } else {
            snprintf(err, errcap, "tenant %u: distribution '%s' is not uniform or zipfS",
                     ts->n, f[2]);
            return false;
        }
        t->share = strtod(f[3], &end);
        if (*end || end == f[3] || !(t->share >= 0.0 && t->share < 1e12)) {
            snprintf(err, errcap, "tenant %u: bad share '%s'", ts->n, f[3]);
            return false;
        }
        if (f[4]) {
            if (strlen(f[4]) >= TENANT_PREFIX_MAX || strpbrk(f[4], " \t\r\n")) {
                snprintf(err, errcap, "tenant %u: bad prefix", ts->n);
                return false;
            }
            strcpy(t->prefix, f[4]);
        } else {
            snprintf(t->prefix, sizeof(t->prefix), "t%u:", ts->n);
        }
        t->width = snprintf(NULL, 0, "%" PRIu64, t->keys - 1);
        if (t->zipf_s > 0.0) {
            tn_zipf_setup(t);
        }
        total += t->share;
        ts->n++;
    }
    if (ts->n == 0 || !(total > 0.0)) {
        snprintf(err, errcap, "need at least one tenant with a positive share");
        return false;
    }
    tenants_normalize(ts);
    return true;
}

/* Replaces the shares, as "70/10/10/10" (one per tenant, in order). */
static inline bool
tenants_set_shares(struct tenants *ts, const char *shares, char *err,
                   size_t errcap)
{
    const char *p = shares;
    double total = 0.0;
    unsigned i;

    for (i = 0; i < ts->n; i++) {
        char *end;
        double v = strtod(p, &end);

        if (end == p || !(v >= 0.0 && v < 1e12) ||
            (i + 1 < ts->n ? *end != '/' : *end != '\0')) {
            snprintf(err, errcap, "shares '%s': expected %u numbers separated by /",
                     shares, ts->n);
            return false;
        }
        ts->t[i].share = v;
        total += v;
        p = end + 1;
    }
    if (!(total > 0.0)) {
        snprintf(err, errcap, "shares '%s': none positive", shares);
        return false;
    }
    tenants_normalize(ts);
    return true;
}

#endif
