/*
 * best-split.c -- the best division of a cache's slabs among its slab
 * classes for a look-aside request stream of several tenants, computed
 * offline from the same stream bench/loadgen --tenants sends (tenants.h).
 *
 * Model. Each slab class is an LRU list of its own; in look-aside every
 * get moves its key to the top (a hit, or a miss followed by the set of
 * that key). A get hits in a class given s slabs iff its LRU stack
 * distance in that class (distinct keys of the class touched since its
 * previous get) is below s x items per slab. Stack distances come from a
 * Fenwick tree over each class's access times (O(log n) per get). For each
 * measured window, hits(class, s) for s = 0..M is read off the window's
 * distance histogram, and a dynamic programme over classes x slabs picks
 * the split of M slabs with the most hits (each class that the stream
 * touches at all gets at least --min-slabs, as a real server carves a
 * first slab for every class it stores into).
 *
 * --model clock replaces the LRU list by slabcache's own item policy
 * (--eviction=lru, src/storage/item_clock.c: a probation FIFO of a tenth
 * of the class, then a CLOCK hand), which is not a stack policy: each
 * class is replayed once per slab count, from the start of the stream
 * (a few seconds per million gets x M). On a one-class Zipf mix it
 * predicts slabcache --eviction=lru to 1e-5 of its hit ratio, where LRU is
 * 0.036 below (bench/README.md).
 *
 * What the bound assumes: the split is chosen per window with hindsight,
 * and a class resized at the start of the window holds its top s x items
 * keys at once (with clock: holds what that policy would hold had the class
 * always had s slabs; a slab moved by a real server arrives empty), so right
 * after a shift it is optimistic. The lru model also prints a "carried"
 * split per window: the same choice with hindsight, but each class starts
 * the window with at most the keys its stack held within the previous
 * window's carried size (the first window's: its best), so a class that
 * grows fills its new memory one miss at a time, as a real cache's does:
 * a get of a key last requested before the window hits only if its
 * distance is below the class's new size and the key's place in the
 * stack when the window began was below the old size (up to 1024 slabs).
 * A class that grew in the window before and had not filled held fewer,
 * so "carried" is still optimistic, less so; items of one class are assumed to fit
 * chunks_per_page to the slab (all a tenant's items have one size:
 * tenants.h pads key numbers). Tenants whose values fall in the same class
 * share its LRU list and slabs.
 *
 * Usage:
 *   best-split --tenants SPEC --classes ID:PER_SLAB,... --slabs M \
 *       [--warmup SEED:GETS:SHARES]... --window NAME:SEED:GETS:SHARES ... \
 *       [--model lru|clock] [--min-slabs N] [--fixed S1/S2/...] [--json]
 * --classes gives, per tenant in SPEC order, the slab class its items land
 * in and that class's chunks per slab (read them from the server's `stats
 * slabs` after storing one item of each tenant; bench/lookaside does).
 * Phases (warm-ups and windows) are replayed in the order given, each the
 * stream of loadgen --tenants SPEC-with-SHARES --seed SEED for GETS gets
 * (loadgen: --calls x --conns). SHARES: "70/10/10/10", one per tenant.
 * --fixed evaluates one given split too (slabs per class, classes in
 * ascending class id), e.g. for checking the model against a server.
 *
 * Build: gcc -std=c11 -D_GNU_SOURCE -O2 bench/best-split.c -lm -o best-split
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenants.h"

#define MAX_PHASES  64
#define MAX_SLABS   1000000
#define MAX_CARRIED 1024        /* slabs up to which "carried" is computed */

struct phase {
    char name[64];
    bool measured;
    uint64_t seed;
    uint64_t gets;
    struct tenants ts;          /* the spec with this phase's shares */
};

struct klass {
    unsigned id;
    uint64_t per_slab;
    uint64_t cap;               /* histogram bound: slabs x per_slab */
    uint64_t accesses;          /* over the whole replay */
    uint32_t *bit;              /* Fenwick tree over access times, 1-based */
    uint64_t n;                 /* bit size */
    uint64_t now;               /* last access time used */
};

static struct tenants base;
static struct phase phases[MAX_PHASES];
static unsigned nphases;
static struct klass classes[TENANTS_MAX];
static unsigned nclasses;
static unsigned class_of[TENANTS_MAX];     /* tenant -> index in classes */
static unsigned long slabs;
static unsigned long min_slabs = 1;
static char *fixed_spec;
static bool json;
static bool model_clock;        /* --model clock */

static void
die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("best-split: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);

    if (!p) {
        die("out of memory");
    }
    return p;
}

static uint64_t
parse_u64(const char *what, const char *s, char **endp)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') {
        die("%s: expected an integer at '%s'", what, s);
    }
    if (endp) {
        *endp = end;
    } else if (*end) {
        die("%s: trailing '%s'", what, end);
    }
    return v;
}

/* "NAME:SEED:GETS:SHARES" (window) or "SEED:GETS:SHARES" (warm-up) */
static void
add_phase(const char *arg, bool measured)
{
    struct phase *p;
    char buf[1024], *f = buf, *end;
    char err[256];

    if (base.n == 0) {
        die("--tenants must come before --warmup and --window");
    }
    if (nphases == MAX_PHASES) {
        die("at most %d phases", MAX_PHASES);
    }
    if (strlen(arg) >= sizeof(buf)) {
        die("phase spec too long");
    }
    strcpy(buf, arg);
    p = &phases[nphases++];
    p->measured = measured;
    if (measured) {
        char *c = strchr(f, ':');

        if (!c || (size_t)(c - f) >= sizeof(p->name)) {
            die("--window %s: expected NAME:SEED:GETS:SHARES", arg);
        }
        *c = '\0';
        strcpy(p->name, f);
        f = c + 1;
    } else {
        snprintf(p->name, sizeof(p->name), "warmup%u", nphases - 1);
    }
    p->seed = parse_u64("phase seed", f, &end);
    if (*end != ':') {
        die("phase %s: expected SEED:GETS:SHARES", arg);
    }
    p->gets = parse_u64("phase gets", end + 1, &end);
    if (*end != ':') {
        die("phase %s: expected SEED:GETS:SHARES", arg);
    }
    p->ts = base;
    if (!tenants_set_shares(&p->ts, end + 1, err, sizeof(err))) {
        die("phase %s: %s", arg, err);
    }
}

static void
parse_classes(const char *arg)
{
    char buf[1024], *item, *save = NULL;
    unsigned t = 0;

    if (base.n == 0) {
        die("--tenants must come before --classes");
    }
    if (strlen(arg) >= sizeof(buf)) {
        die("--classes too long");
    }
    strcpy(buf, arg);
    for (item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save), t++) {
        char *end;
        unsigned id, c;
        uint64_t per;

        if (t == base.n) {
            die("--classes: more entries than tenants");
        }
        id = (unsigned)parse_u64("--classes id", item, &end);
        if (*end != ':') {
            die("--classes: expected ID:PER_SLAB, got '%s'", item);
        }
        per = parse_u64("--classes per slab", end + 1, NULL);
        if (per == 0) {
            die("--classes: zero items per slab");
        }
        for (c = 0; c < nclasses && classes[c].id != id; c++) {
        }
        if (c == nclasses) {
            /* keep classes sorted by id */
            while (c > 0 && classes[c - 1].id > id) {
                classes[c] = classes[c - 1];
                c--;
            }
            memset(&classes[c], 0, sizeof(classes[c]));
            classes[c].id = id;
            classes[c].per_slab = per;
            nclasses++;
        } else if (classes[c].per_slab != per) {
            die("--classes: class %u given two different per-slab counts", id);
        }
    }
    if (t != base.n) {
        die("--classes: %u entries for %u tenants", t, base.n);
    }
    /* tenant -> class index, after the sort */
    strcpy(buf, arg);
    save = NULL;
    t = 0;
    for (item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save), t++) {
        unsigned id = (unsigned)strtoul(item, NULL, 10), c;

        for (c = 0; classes[c].id != id; c++) {
        }
        class_of[t] = c;
    }
}

/* --- Fenwick tree -------------------------------------------------------- */

static void
bit_add(struct klass *k, uint64_t i, int32_t v)
{
    for (; i <= k->n; i += i & (~i + 1)) {
        k->bit[i] += (uint32_t)v;
    }
}

static uint64_t
bit_sum(const struct klass *k, uint64_t i)
{
    uint64_t s = 0;

    for (; i > 0; i -= i & (~i + 1)) {
        s += k->bit[i];
    }
    return s;
}

/* --- replay -------------------------------------------------------------- */

struct window_result {
    uint64_t gets;
    uint64_t tenant_gets[TENANTS_MAX];
    uint64_t *hist[TENANTS_MAX];        /* per tenant: distance -> gets */
    /* per tenant, gets of keys last requested before the window that hit
     * at some size: [distance in slabs][stack place at the window's start
     * in slabs, slabs for beyond], (slabs + 1) x (slabs + 1) */
    uint64_t *old[TENANTS_MAX];
};

static bool
carried_on(void)
{
    return !model_clock && slabs <= MAX_CARRIED;
}

static struct window_result results[MAX_PHASES];

/* A window begins: each key's place in its class's stack, and the times. */
static void
carried_start(struct window_result *r, uint32_t **last, uint32_t **place0, uint64_t *start)
{
    for (unsigned c = 0; c < nclasses; c++) {
        start[c] = classes[c].now;
    }
    for (unsigned t = 0; t < base.n; t++) {
        struct klass *k = &classes[class_of[t]];
        uint64_t top = bit_sum(k, k->now);

        r->old[t] = xcalloc((slabs + 1) * (slabs + 1), sizeof(uint64_t));
        for (uint64_t key = 0; key < base.t[t].keys; key++) {
            uint64_t d0 = last[t][key] != 0 ? top - bit_sum(k, last[t][key]) : UINT32_MAX;

            place0[t][key] = (uint32_t)(d0 < UINT32_MAX ? d0 : UINT32_MAX);
        }
    }
}

static void
replay(void)
{
    uint32_t *last[TENANTS_MAX];        /* per key: class-local time, 0 never */
    uint32_t *place0[TENANTS_MAX];      /* per key: its stack place as the window began */
    uint64_t start[TENANTS_MAX];        /* per class: its time as the window began */
    unsigned p, t, c;

    /* pass 1: accesses per class, for the trees' sizes */
    for (p = 0; p < nphases; p++) {
        for (uint64_t i = 0; i < phases[p].gets; i++) {
            uint64_t kn = tenants_request(&phases[p].ts, phases[p].seed, i);

            classes[class_of[tenant_of(kn)]].accesses++;
        }
    }
    for (c = 0; c < nclasses; c++) {
        if (classes[c].accesses >= UINT32_MAX) {
            die("too many requests for one class (32-bit times)");
        }
        classes[c].n = classes[c].accesses;
        classes[c].bit = xcalloc(classes[c].n + 1, sizeof(uint32_t));
        classes[c].cap = (uint64_t)slabs * classes[c].per_slab;
    }
    for (t = 0; t < base.n; t++) {
        last[t] = xcalloc(base.t[t].keys, sizeof(uint32_t));
        place0[t] = carried_on() ? xcalloc(base.t[t].keys, sizeof(uint32_t)) : NULL;
    }
    /* pass 2: stack distances */
    for (p = 0; p < nphases; p++) {
        struct window_result *r = &results[p];

        if (phases[p].measured) {
            for (t = 0; t < base.n; t++) {
                r->hist[t] = xcalloc(classes[class_of[t]].cap, sizeof(uint64_t));
            }
            if (carried_on()) {
                carried_start(r, last, place0, start);
            }
        }
        for (uint64_t i = 0; i < phases[p].gets; i++) {
            uint64_t kn = tenants_request(&phases[p].ts, phases[p].seed, i);
            unsigned tn = tenant_of(kn);
            uint64_t key = kn & TENANT_KEY_MASK;
            struct klass *k = &classes[class_of[tn]];
            uint64_t now = ++k->now, prev = last[tn][key];

            if (phases[p].measured) {
                r->gets++;
                r->tenant_gets[tn]++;
                if (prev != 0) {
                    uint64_t d = bit_sum(k, now - 1) - bit_sum(k, prev);

                    if (d < k->cap) {
                        r->hist[tn][d]++;
                        if (r->old[tn] != NULL && prev <= start[class_of[tn]]) {
                            uint64_t d0 = place0[tn][key] / k->per_slab;

                            d0 = d0 < slabs ? d0 : slabs;
                            r->old[tn][(d / k->per_slab) * (slabs + 1) + d0]++;
                        }
                    }
                }
            }
            if (prev != 0) {
                bit_add(k, prev, -1);
            }
            bit_add(k, now, 1);
            last[tn][key] = (uint32_t)now;
        }
    }
    for (t = 0; t < base.n; t++) {
        free(last[t]);
        free(place0[t]);
    }
    for (c = 0; c < nclasses; c++) {
        free(classes[c].bit);
    }
}

/* --- --model clock: slabcache's item policy, simulated per capacity --------
 *
 * As src/storage/item_clock.c (lru): a class of C chunks; a new item goes
 * on probation, a FIFO whose oldest entries are judged while it holds a
 * tenth of C: never read since stored, the item goes; read, it leaves
 * probation and stays. Otherwise a CLOCK hand over the chunks passes items
 * read since it last passed (up to 32 per eviction) and evicts the next.
 * Not a stack policy, so each class is replayed once per slab count. */

struct cseq {                   /* one class's accesses, in order */
    uint64_t n;
    uint32_t *key;              /* key id within the class */
    uint8_t *tenant;
    uint8_t *phase;
    uint64_t nkeys;             /* key ids in the class */
};

static struct cseq cseqs[TENANTS_MAX];

#define CK_FETCHED 1
#define CK_ACTIVE  2

struct ring_entry {
    uint32_t chunk;
    uint32_t serial;
};

/* hits[phase * TENANTS_MAX + tenant] += hits of one replay at capacity cap */
static void
clock_sim(const struct cseq *q, uint64_t cap, uint64_t *hits)
{
    int32_t *where = xcalloc(q->nkeys, sizeof(int32_t));
    int32_t *ckey = xcalloc(cap, sizeof(int32_t));
    uint32_t *serial = xcalloc(cap, sizeof(uint32_t));
    uint8_t *flags = xcalloc(cap, sizeof(uint8_t));
    uint64_t rcap = 16, quota = cap * 10 / 100;
    uint64_t used = 0, hand = 0, owed = 0, rhead = 0, rcount = 0;
    bool hand_turn = false;
    struct ring_entry *ring;

    while (rcap < cap) {
        rcap <<= 1;
    }
    ring = xcalloc(rcap, sizeof(*ring));
    if (quota == 0) {
        quota = 1;
    }
    memset(where, 0xff, q->nkeys * sizeof(int32_t));
    for (uint64_t i = 0; i < q->n; i++) {
        uint32_t x = q->key[i];
        int64_t ch = where[x];

        if (ch >= 0) {
            if (phases[q->phase[i]].measured) {
                hits[(size_t)q->phase[i] * TENANTS_MAX + q->tenant[i]]++;
            }
            flags[ch] |= CK_FETCHED | CK_ACTIVE;
            continue;
        }
        /* a miss, then the set: a free chunk, or evict one */
        if (used < cap) {
            ch = (int64_t)used++;
        } else {
            ch = -1;
            hand_turn = owed > 0 && !hand_turn;
            if (!hand_turn) {
                for (int looks = 0; looks < 1024 && rcount > 0 && rcount >= quota;
                     looks++) {
                    struct ring_entry e = ring[rhead];

                    rhead = (rhead + 1) & (rcap - 1);
                    rcount--;
                    if (serial[e.chunk] != e.serial || (flags[e.chunk] & CK_FETCHED)) {
                        continue;
                    }
                    ch = e.chunk;
                    break;
                }
            }
            if (ch < 0) {
                int rescues = 32;

                for (;;) {
                    uint64_t c = hand;

                    hand = hand + 1 == cap ? 0 : hand + 1;
                    if ((flags[c] & CK_ACTIVE) && rescues > 0) {
                        flags[c] &= (uint8_t)~CK_ACTIVE;
                        rescues--;
                        continue;
                    }
                    ch = (int64_t)c;
                    if (owed > 0) {
                        owed--;
                    }
                    break;
                }
            }
            where[ckey[ch]] = -1;
        }
        ckey[ch] = (int32_t)x;
        serial[ch]++;
        flags[ch] = 0;
        where[x] = (int32_t)ch;
        if (rcount == rcap) {   /* full: the oldest leaves unjudged */
            struct ring_entry e = ring[rhead];

            if (serial[e.chunk] == e.serial && !(flags[e.chunk] & CK_FETCHED) &&
                owed < cap) {
                owed++;
            }
            rhead = (rhead + 1) & (rcap - 1);
            rcount--;
        }
        ring[(rhead + rcount) & (rcap - 1)] =
            (struct ring_entry){ (uint32_t)ch, serial[ch] };
        rcount++;
    }
    free(where);
    free(ckey);
    free(serial);
    free(flags);
    free(ring);
}

/* Records each class's accesses, then replays every class at every slab
 * count: chits[c][s][phase * TENANTS_MAX + tenant]. */
static uint64_t ***chits;

static void
clock_replay(void)
{
    uint64_t key_base[TENANTS_MAX];
    unsigned p, t, c;

    for (c = 0; c < nclasses; c++) {
        cseqs[c].n = 0;
        cseqs[c].nkeys = 0;
    }
    for (t = 0; t < base.n; t++) {
        key_base[t] = cseqs[class_of[t]].nkeys;
        cseqs[class_of[t]].nkeys += base.t[t].keys;
    }
    for (p = 0; p < nphases; p++) {
        for (uint64_t i = 0; i < phases[p].gets; i++) {
            cseqs[class_of[tenant_of(tenants_request(&phases[p].ts, phases[p].seed, i))]].n++;
        }
    }
    for (c = 0; c < nclasses; c++) {
        if (cseqs[c].nkeys >= INT32_MAX) {
            die("--model clock: too many keys in one class");
        }
        cseqs[c].key = xcalloc(cseqs[c].n, sizeof(uint32_t));
        cseqs[c].tenant = xcalloc(cseqs[c].n, 1);
        cseqs[c].phase = xcalloc(cseqs[c].n, 1);
        cseqs[c].n = 0;
    }
    for (p = 0; p < nphases; p++) {
        for (uint64_t i = 0; i < phases[p].gets; i++) {
            uint64_t kn = tenants_request(&phases[p].ts, phases[p].seed, i);
            unsigned tn = tenant_of(kn);
            struct cseq *q = &cseqs[class_of[tn]];

            q->key[q->n] = (uint32_t)(key_base[tn] + (kn & TENANT_KEY_MASK));
            q->tenant[q->n] = (uint8_t)tn;
            q->phase[q->n] = (uint8_t)p;
            q->n++;
            if (phases[p].measured) {
                results[p].gets++;
                results[p].tenant_gets[tn]++;
            }
        }
    }
    chits = xcalloc(nclasses, sizeof(*chits));
    for (c = 0; c < nclasses; c++) {
        uint64_t top = slabs - (uint64_t)(nclasses - 1) * min_slabs;

        chits[c] = xcalloc(slabs + 1, sizeof(**chits));
        for (unsigned long sl = 0; sl <= slabs; sl++) {
            chits[c][sl] = xcalloc((size_t)nphases * TENANTS_MAX, sizeof(uint64_t));
            if (sl == 0 || (sl > top && !fixed_spec)) {
                continue;       /* no slab: no hit; more than the DP may give */
            }
            if (sl > 1 && (sl - 1) * classes[c].per_slab >= cseqs[c].nkeys) {
                /* every key fits already: nothing changes */
                memcpy(chits[c][sl], chits[c][sl - 1],
                       (size_t)nphases * TENANTS_MAX * sizeof(uint64_t));
                continue;
            }
            clock_sim(&cseqs[c], (uint64_t)sl * classes[c].per_slab, chits[c][sl]);
        }
        free(cseqs[c].key);
        free(cseqs[c].tenant);
        free(cseqs[c].phase);
    }
}

/* hits[t][s]: gets of tenant t in the window that hit with s slabs in its
 * class, s = 0..slabs */
static uint64_t **
tenant_hits(const struct window_result *r)
{
    uint64_t **h = xcalloc(base.n, sizeof(*h));
    unsigned p = (unsigned)(r - results);

    if (model_clock) {
        for (unsigned t = 0; t < base.n; t++) {
            h[t] = xcalloc(slabs + 1, sizeof(uint64_t));
            for (unsigned long s = 0; s <= slabs; s++) {
                h[t][s] = chits[class_of[t]][s][(size_t)p * TENANTS_MAX + t];
            }
        }
        return h;
    }
    for (unsigned t = 0; t < base.n; t++) {
        const struct klass *k = &classes[class_of[t]];
        uint64_t cum = 0, d = 0;

        h[t] = xcalloc(slabs + 1, sizeof(uint64_t));
        for (unsigned long s = 1; s <= slabs; s++) {
            uint64_t lim = (uint64_t)s * k->per_slab;

            for (; d < lim && d < k->cap; d++) {
                cum += r->hist[t][d];
            }
            h[t][s] = cum;
        }
    }
    return h;
}

/* th less, for each tenant, the gets of keys its class did not hold when
 * the window began with carry[class] slabs. */
static uint64_t **
carried_hits(const struct window_result *r, uint64_t **th, const unsigned long *carry)
{
    uint64_t **h = xcalloc(base.n, sizeof(*h));

    for (unsigned t = 0; t < base.n; t++) {
        unsigned long had = carry[class_of[t]];
        uint64_t lost = 0;

        h[t] = xcalloc(slabs + 1, sizeof(uint64_t));
        for (unsigned long s = 1; s <= slabs; s++) {
            for (unsigned long d0 = had; d0 <= slabs; d0++) {
                lost += r->old[t][(s - 1) * (slabs + 1) + d0];
            }
            h[t][s] = th[t][s] - lost;
        }
    }
    return h;
}

/* Best split for one window: dynamic programme over classes x slabs. */
static uint64_t
best(uint64_t **th, unsigned long *split)
{
    uint64_t **f = xcalloc(nclasses + 1, sizeof(*f));
    unsigned long **arg = xcalloc(nclasses + 1, sizeof(*arg));
    uint64_t *ch = xcalloc(slabs + 1, sizeof(uint64_t));
    const uint64_t NEG = UINT64_MAX;
    unsigned c;
    unsigned long m, s, rest;
    uint64_t total;

    for (c = 0; c <= nclasses; c++) {
        f[c] = xcalloc(slabs + 1, sizeof(uint64_t));
        arg[c] = xcalloc(slabs + 1, sizeof(unsigned long));
    }
    /* f[c][m]: most hits of classes < c with exactly m slabs */
    for (m = 1; m <= slabs; m++) {
        f[0][m] = NEG;
    }
    for (c = 0; c < nclasses; c++) {
        for (s = 0; s <= slabs; s++) {
            ch[s] = 0;
            for (unsigned t = 0; t < base.n; t++) {
                if (class_of[t] == c) {
                    ch[s] += th[t][s];
                }
            }
        }
        for (m = 0; m <= slabs; m++) {
            f[c + 1][m] = NEG;
            for (s = min_slabs; s <= m; s++) {
                if (f[c][m - s] == NEG) {
                    continue;
                }
                if (f[c + 1][m] == NEG || f[c][m - s] + ch[s] > f[c + 1][m]) {
                    f[c + 1][m] = f[c][m - s] + ch[s];
                    arg[c + 1][m] = s;
                }
            }
        }
    }
    if (f[nclasses][slabs] == NEG) {
        die("%lu slabs cannot give %lu to each of %u classes", slabs, min_slabs,
            nclasses);
    }
    total = f[nclasses][slabs];
    rest = slabs;
    for (c = nclasses; c > 0; c--) {
        split[c - 1] = arg[c][rest];
        rest -= arg[c][rest];
    }
    for (c = 0; c <= nclasses; c++) {
        free(f[c]);
        free(arg[c]);
    }
    free(f);
    free(arg);
    free(ch);
    return total;
}

static void
print_window(const struct phase *p, const struct window_result *r,
             uint64_t **th, const char *label, const unsigned long *split,
             bool first)
{
    uint64_t hits = 0;
    unsigned t, c;

    for (t = 0; t < base.n; t++) {
        hits += th[t][split[class_of[t]]];
    }
    if (json) {
        printf("%s{\"window\":\"%s\",\"split\":\"%s\",\"gets\":%" PRIu64
               ",\"hits\":%" PRIu64 ",\"hit_ratio\":%.6f,\"slabs\":{",
               first ? "" : ",", p->name, label, r->gets, hits,
               r->gets ? (double)hits / (double)r->gets : 0.0);
        for (c = 0; c < nclasses; c++) {
            printf("%s\"%u\":%lu", c ? "," : "", classes[c].id, split[c]);
        }
        printf("},\"tenants\":[");
        for (t = 0; t < base.n; t++) {
            uint64_t h = th[t][split[class_of[t]]];

            printf("%s{\"prefix\":\"%s\",\"class\":%u,\"gets\":%" PRIu64
                   ",\"hits\":%" PRIu64 "}", t ? "," : "", base.t[t].prefix,
                   classes[class_of[t]].id, r->tenant_gets[t], h);
        }
        printf("]}");
        return;
    }
    printf("%-12s %-7s hit ratio %.4f (%" PRIu64 "/%" PRIu64 ")  slabs",
           p->name, label, r->gets ? (double)hits / (double)r->gets : 0.0,
           hits, r->gets);
    for (c = 0; c < nclasses; c++) {
        printf(" %u:%lu", classes[c].id, split[c]);
    }
    printf("  tenants");
    for (t = 0; t < base.n; t++) {
        uint64_t g = r->tenant_gets[t], h = th[t][split[class_of[t]]];

        printf(" %s%.3f", base.t[t].prefix, g ? (double)h / (double)g : 0.0);
    }
    printf("\n");
}

static void
usage(FILE *f)
{
    fprintf(f,
        "usage: best-split --tenants SPEC --classes ID:PER_SLAB,... --slabs M\n"
        "         [--warmup SEED:GETS:SHARES]... --window NAME:SEED:GETS:SHARES...\n"
        "         [--model lru|clock] [--min-slabs N] [--fixed S1/S2/...] [--json]\n"
        "  phases are replayed in the order given; SHARES like 70/10/10/10;\n"
        "  --classes one entry per tenant; --fixed slabs per class, classes in\n"
        "  ascending id; see the comment at the top of bench/best-split.c\n");
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "tenants", required_argument, NULL, 't' },
        { "classes", required_argument, NULL, 'c' },
        { "slabs", required_argument, NULL, 's' },
        { "min-slabs", required_argument, NULL, 'n' },
        { "warmup", required_argument, NULL, 'w' },
        { "window", required_argument, NULL, 'W' },
        { "fixed", required_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'j' },
        { "model", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long fixed[TENANTS_MAX], carry[TENANTS_MAX];
    bool first = true;
    char err[256];
    unsigned p, c;
    int ch;

    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 't':
            if (!tenants_parse(&base, optarg, err, sizeof(err))) {
                die("--tenants: %s", err);
            }
            break;
        case 'c': parse_classes(optarg); break;
        case 's': slabs = (unsigned long)parse_u64("--slabs", optarg, NULL); break;
        case 'n': min_slabs = (unsigned long)parse_u64("--min-slabs", optarg, NULL); break;
        case 'w': add_phase(optarg, false); break;
        case 'W': add_phase(optarg, true); break;
        case 'f': fixed_spec = optarg; break;
        case 'j': json = true; break;
        case 'M':
            if (strcmp(optarg, "clock") == 0) {
                model_clock = true;
            } else if (strcmp(optarg, "lru") != 0) {
                die("--model: lru or clock");
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || base.n == 0 || nclasses == 0 || slabs == 0 ||
        slabs > MAX_SLABS) {
        usage(stderr);
        return 2;
    }
    if (fixed_spec) {
        char *q = fixed_spec, *end;

        for (c = 0; c < nclasses; c++) {
            fixed[c] = (unsigned long)parse_u64("--fixed", q, &end);
            if (fixed[c] > slabs || (c + 1 < nclasses ? *end != '/' : *end != '\0')) {
                die("--fixed: expected %u slab counts separated by /, each <= --slabs",
                    nclasses);
            }
            q = end + 1;
        }
    }
    if (model_clock) {
        clock_replay();
    } else {
        replay();
    }
    if (json) {
        printf("{\"model\":\"%s\",\"slabs\":%lu,\"min_slabs\":%lu,\"classes\":[",
               model_clock ? "clock" : "lru", slabs, min_slabs);
        for (c = 0; c < nclasses; c++) {
            printf("%s{\"id\":%u,\"per_slab\":%" PRIu64 "}", c ? "," : "",
                   classes[c].id, classes[c].per_slab);
        }
        printf("],\"results\":[");
    }
    for (p = 0; p < nphases; p++) {
        unsigned long split[TENANTS_MAX];
        uint64_t **th;

        if (!phases[p].measured) {
            continue;
        }
        th = tenant_hits(&results[p]);
        best(th, split);
        print_window(&phases[p], &results[p], th, "best", split, first);
        if (carried_on()) {
            uint64_t **cth = carried_hits(&results[p], th, first ? split : carry);

            best(cth, carry);
            print_window(&phases[p], &results[p], cth, "carried", carry, false);
            for (unsigned t = 0; t < base.n; t++) {
                free(cth[t]);
            }
            free(cth);
        }
        first = false;
        if (fixed_spec) {
            print_window(&phases[p], &results[p], th, "fixed", fixed, false);
        }
        for (unsigned t = 0; t < base.n; t++) {
            free(th[t]);
            free(results[p].hist[t]);   /* NULL with --model clock */
            free(results[p].old[t]);
        }
        free(th);
    }
    if (json) {
        printf("]}\n");
    }
    return 0;
}
