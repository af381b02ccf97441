/*
 * loadgen.c -- memcached ASCII-protocol load generator for slabcache.
 *
 * Why our own tool: the experiments this project cares about (twemcache's
 * "random eviction" phases, hit ratio under Zipf with cache-aside fills,
 * throughput/latency against memcached) each need a knob mcperf or
 * memaslap lack, and all need exact per-response-type counts, because
 * SERVER_ERROR "out of memory" replies are the data, not a failure.
 *
 * Shape: one libevent base per thread (default one thread), each owning
 * a share of the connections. Sockets are non-blocking and driven by
 * level-triggered events; every buffer is allocated before the run, so
 * the hot path never calls malloc. Responses are parsed by a streaming
 * state machine: lines need to fit in the read buffer, value bytes do
 * not (a 100 KB value is consumed, and optionally verified, as it
 * arrives).
 *
 * Load is closed loop (each connection keeps --pipeline requests in
 * flight) or open loop (--rate: request k of connection c has an
 * intended send time fixed in advance; its latency is measured from
 * that time, so a stalled server cannot hide queueing delay).
 *
 * Every value is a slice of one shared pseudo-random pattern, starting
 * at an offset derived from a hash of the key, and every key's size is
 * derived from the same hash. Any reply for a key is therefore checkable
 * (--verify) without remembering anything per key.
 *
 * Build standalone (see bench/README.md):
 *   gcc -std=c11 -D_GNU_SOURCE -O2 bench/loadgen.c \
 *       $(pkg-config --cflags --libs libevent) -lm -o loadgen
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "tenants.h"

#define KEY_MAX           250          /* memcached's key length limit */
#define LINE_MAX_LEN      512          /* longest header line we send */
#define RBUF_SIZE         (64 * 1024)
#define WBUF_MIN          (64 * 1024)
#define PATTERN_SLACK     256          /* distinct value start offsets */
#define MAX_SIZES         512
#define MAX_CONNS         65536
#define MAX_PIPELINE      4096
#define MAX_VALUE_SIZE    (64 * 1024 * 1024)
#define MAX_MULTIGET      1000         /* keys in one get */
#define DEFAULT_PORT      "11211"

#define NS_PER_SEC        1000000000ULL
#define NS_PER_US         1000ULL

/* --- options ------------------------------------------------------------- */

enum key_dist { DIST_UNIFORM, DIST_ZIPF };

struct size_class {
    uint32_t size;
    double cum;                 /* cumulative weight, last one is 1.0 */
};

static struct options {
    const char *host;
    const char *port;
    unsigned conns;
    unsigned threads;
    uint64_t calls;             /* 0: until --duration */
    double duration;
    double timeout;             /* per-connection no-progress bound */
    struct size_class sizes[MAX_SIZES];
    unsigned nsizes;
    uint32_t max_size;
    uint64_t keys;
    enum key_dist dist;
    double zipf_s;
    const char *prefix;
    bool sequential;
    double get_ratio;
    unsigned multiget;          /* keys per get */
    bool meta;                  /* gets as mg lines ended by mn */
    bool cache_aside;
    unsigned pipeline;
    double rate;                /* 0: closed loop */
    uint64_t seed;
    long expire;
    bool json;
    bool quiet;
    bool verify;
    struct tenants tenants;     /* --tenants: n > 0 */
} opt = {
    .host = "127.0.0.1",
    .port = DEFAULT_PORT,
    .conns = 100,
    .threads = 1,
    .calls = 0,
    .duration = 60.0,
    .timeout = 10.0,
    .keys = 100000,
    .dist = DIST_UNIFORM,
    .prefix = "",
    .pipeline = 1,
    .multiget = 1,
    .seed = 0x5eedcafe,
};

/* Shared, read-only during the run. */
static char *pattern;
static size_t wbuf_size;
static struct addrinfo *server_ai;
/* --tenants: index of the next request of the stream, shared by all
 * connections (tenants.h), so request i is the same whatever the
 * connection count and the server sees them in about index order. */
static uint64_t stream_next;

/* --- small utilities ----------------------------------------------------- */

static void
die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void
note(const char *fmt, ...)
{
    va_list ap;

    if (opt.quiet) {
        return;
    }
    va_start(ap, fmt);
    fputs("loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static struct timeval
ns_to_tv(uint64_t ns)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ns / NS_PER_SEC);
    tv.tv_usec = (suseconds_t)((ns % NS_PER_SEC) / NS_PER_US);
    return tv;
}

static uint64_t
splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* FNV-1a, then a mixer so both the low and the high bits are usable. */
static uint64_t
key_hash(const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;

    for (i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3ULL;
    }
    return splitmix64(&h);
}

/* --- random numbers: xoshiro256**, one stream per connection ------------- */

struct rng {
    uint64_t s[4];
};

static void
rng_seed(struct rng *r, uint64_t seed)
{
    int i;

    for (i = 0; i < 4; i++) {
        r->s[i] = splitmix64(&seed);
    }
}

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t
rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1). */
static double
rng_double(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* --- Zipf: rejection-inversion sampler --------------------------------------
 *
 * Hörmann & Derflinger, "Rejection-inversion to generate variates from
 * monotone discrete distributions" (1996), as in Apache Commons Math.
 * O(1) memory and about one uniform per sample, so 10M-key spaces cost
 * nothing to set up, unlike a CDF table (80 MB of doubles). */

static struct zipf {
    double s;
    double n;
    double h_x1;                /* H(1.5) - 1 */
    double h_n;                 /* H(n + 0.5) */
    double threshold;
} zipf;

/* log1p(x)/x, continuous at 0 */
static double
zipf_helper1(double x)
{
    if (fabs(x) > 1e-8) {
        return log1p(x) / x;
    }
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

/* expm1(x)/x, continuous at 0 */
static double
zipf_helper2(double x)
{
    if (fabs(x) > 1e-8) {
        return expm1(x) / x;
    }
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

static double
zipf_h(double x)
{
    return exp(-zipf.s * log(x));
}

static double
zipf_hint(double x)
{
    double log_x = log(x);

    return zipf_helper2((1.0 - zipf.s) * log_x) * log_x;
}

static double
zipf_hint_inv(double x)
{
    double t = x * (1.0 - zipf.s);

    if (t < -1.0) {
        t = -1.0;               /* rounding guard, as the reference code */
    }
    return exp(zipf_helper1(t) * x);
}

static void
zipf_setup(uint64_t n, double s)
{
    zipf.s = s;
    zipf.n = (double)n;
    zipf.h_x1 = zipf_hint(1.5) - 1.0;
    zipf.h_n = zipf_hint(zipf.n + 0.5);
    zipf.threshold = 2.0 - zipf_hint_inv(zipf_hint(2.5) - zipf_h(2.0));
}

/* Rank in [1, n]; rank 1 is the most popular. */
static uint64_t
zipf_sample(struct rng *r)
{
    for (;;) {
        double u = zipf.h_n + rng_double(r) * (zipf.h_x1 - zipf.h_n);
        double x = zipf_hint_inv(u);
        double k = floor(x + 0.5);

        if (k < 1.0) {
            k = 1.0;
        } else if (k > zipf.n) {
            k = zipf.n;
        }
        if (k - x <= zipf.threshold || u >= zipf_hint(k + 0.5) - zipf_h(k)) {
            return (uint64_t)k;
        }
    }
}

/* --- latency histogram (HDR-style log-linear) -------------------------------
 *
 * Values are nanoseconds. Below 2^SUB_BITS each value has its own bucket;
 * above, each power of two is split into 2^SUB_BITS linear buckets, so the
 * relative error is under 1% at any magnitude in a fixed 58 KB array. */

#define SUB_BITS  7
#define SUB_COUNT (1u << SUB_BITS)
#define HIST_BUCKETS (SUB_COUNT + (64 - SUB_BITS) * SUB_COUNT)

struct hist {
    uint64_t count;
    uint64_t sum;
    uint64_t min;
    uint64_t max;
    uint64_t b[HIST_BUCKETS];
};

static unsigned
hist_index(uint64_t v)
{
    unsigned e;

    if (v < SUB_COUNT) {
        return (unsigned)v;
    }
    e = 63u - (unsigned)__builtin_clzll(v);
    return SUB_COUNT + (e - SUB_BITS) * SUB_COUNT +
           (unsigned)((v >> (e - SUB_BITS)) & (SUB_COUNT - 1));
}

/* Highest value that maps to bucket i (HDR's "highest equivalent"). */
static uint64_t
hist_bucket_high(unsigned i)
{
    unsigned e, sub;
    uint64_t base;

    if (i < SUB_COUNT) {
        return i;
    }
    e = (i - SUB_COUNT) / SUB_COUNT + SUB_BITS;
    sub = (i - SUB_COUNT) % SUB_COUNT;
    base = ((uint64_t)(SUB_COUNT + sub)) << (e - SUB_BITS);
    return base + ((1ULL << (e - SUB_BITS)) - 1);
}

static void
hist_record(struct hist *h, uint64_t v)
{
    if (h->count == 0 || v < h->min) {
        h->min = v;
    }
    if (v > h->max) {
        h->max = v;
    }
    h->count++;
    h->sum += v;
    h->b[hist_index(v)]++;
}

static void
hist_merge(struct hist *dst, const struct hist *src)
{
    unsigned i;

    if (src->count == 0) {
        return;
    }
    if (dst->count == 0 || src->min < dst->min) {
        dst->min = src->min;
    }
    if (src->max > dst->max) {
        dst->max = src->max;
    }
    dst->count += src->count;
    dst->sum += src->sum;
    for (i = 0; i < HIST_BUCKETS; i++) {
        dst->b[i] += src->b[i];
    }
}

static uint64_t
hist_percentile(const struct hist *h, double q)
{
    uint64_t rank, seen = 0;
    unsigned i;

    if (h->count == 0) {
        return 0;
    }
    rank = (uint64_t)ceil(q * (double)h->count);
    if (rank < 1) {
        rank = 1;
    }
    for (i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = hist_bucket_high(i);

            /* Bucket edges can overshoot what was actually seen. */
            return v > h->max ? h->max : (v < h->min ? h->min : v);
        }
    }
    return h->max;
}

/* --- statistics ---------------------------------------------------------- */

enum rsp_type {
    RSP_STORED,
    RSP_NOT_STORED,
    RSP_EXISTS,
    RSP_NOT_FOUND,
    RSP_DELETED,
    RSP_MISS,                   /* END alone */
    RSP_HIT,                    /* VALUE ... END */
    RSP_ERROR,
    RSP_CLIENT_ERROR,
    RSP_SERVER_ERROR,
    RSP_COUNT
};

static const char *const rsp_names[RSP_COUNT] = {
    "stored", "not_stored", "exists", "not_found", "deleted",
    "end(miss)", "value(hit)", "error", "client_error", "server_error",
};

static const char *const rsp_json_names[RSP_COUNT] = {
    "stored", "not_stored", "exists", "not_found", "deleted",
    "miss", "hit", "error", "client_error", "server_error",
};

struct stats {
    uint64_t requests;          /* queued for sending */
    uint64_t gets;
    uint64_t get_keys;          /* keys of the gets answered */
    uint64_t values;            /* VALUEs received */
    uint64_t sets;
    uint64_t fills;             /* cache-aside sets (part of sets) */
    uint64_t responses;
    uint64_t rsp[RSP_COUNT];
    uint64_t bytes_out;
    uint64_t bytes_in;
    uint64_t conns_ok;
    uint64_t conns_done;        /* finished their --calls */
    uint64_t err_refused;
    uint64_t err_connect;       /* any other connect failure */
    uint64_t err_reset;
    uint64_t err_eof;           /* server closed the connection */
    uint64_t err_io;
    uint64_t timeouts;
    uint64_t protocol_errors;
    uint64_t verify_mismatch;
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t tenant_gets[TENANTS_MAX];  /* --tenants */
    uint64_t tenant_hits[TENANTS_MAX];
    struct hist lat;
};

/* --- connections --------------------------------------------------------- */

enum req_type { REQ_GET, REQ_SET };

/* A request on the wire, awaiting its response; responses come in order. */
struct pending {
    uint8_t type;
    uint64_t key_num;
    uint64_t start_ns;          /* intended (open loop) or queue time */
};

enum conn_state { CONN_CONNECTING, CONN_READY, CONN_CLOSED };

enum parse_state { P_LINE, P_DATA };

struct worker;

struct conn {
    struct worker *w;
    unsigned id;                /* global index: seed, keys, open-loop slot */
    int fd;
    enum conn_state state;
    struct event *rev;
    struct event *wev;
    struct event *tev;          /* open loop: next intended send time */
    bool wev_on;
    uint64_t last_progress;
    struct rng rng;

    char *wbuf;
    size_t whead, wtail;
    char *rbuf;
    size_t rhead, rtail;

    struct pending *ring;       /* capacity opt.pipeline */
    unsigned ring_head, ring_count;
    uint64_t *fills;            /* cache-aside fills to send, cap 2*pipeline */
    unsigned fill_head, fill_count;
    uint64_t calls_sent;        /* workload requests, excluding fills */

    enum parse_state pstate;
    bool got_value;
    unsigned nvalues;           /* VALUEs in the response being read */
    uint64_t *batch_keys;       /* multi-get: keys asked, multiget per ring slot */
    unsigned match_pos;         /* --verify: next asked key an answer may be */
    uint64_t data_len;          /* value length from the VALUE line */
    uint64_t data_pos;          /* bytes of value + CRLF consumed */
    uint64_t want_off;          /* pattern offset the value should have */
    bool verify_value;
};

struct worker {
    unsigned idx;
    struct event_base *base;
    struct event *stop_ev;
    struct event *tick_ev;
    struct conn *conns;
    unsigned nconns;
    unsigned active;
    struct stats st;
    pthread_t tid;
};

static void conn_pump(struct conn *c, uint64_t now);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);

static void
conn_close(struct conn *c)
{
    if (c->state == CONN_CLOSED) {
        return;
    }
    if (c->rev) {
        event_del(c->rev);
    }
    if (c->wev) {
        event_del(c->wev);
    }
    if (c->tev) {
        event_del(c->tev);
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->state = CONN_CLOSED;
    if (--c->w->active == 0) {
        event_base_loopbreak(c->w->base);
    }
}

static void
conn_fail_io(struct conn *c, int err, const char *what)
{
    if (err == ECONNRESET || err == EPIPE) {
        c->w->st.err_reset++;
    } else {
        c->w->st.err_io++;
    }
    note("conn %u: %s: %s", c->id, what, strerror(err));
    conn_close(c);
}

static void
conn_protocol_error(struct conn *c, const char *why, const char *line,
                    size_t len)
{
    c->w->st.protocol_errors++;
    note("conn %u: protocol error: %s: '%.*s'", c->id, why,
         (int)(len > 80 ? 80 : len), line);
    conn_close(c);
}

/* --- keys and values ----------------------------------------------------- */

static size_t
key_format(const struct conn *c, uint64_t key_num, char *buf)
{
    int n;

    if (opt.tenants.n > 0) {
        return tenant_key_format(&opt.tenants, key_num, buf, KEY_MAX + 1);
    }
    if (opt.sequential) {
        n = snprintf(buf, KEY_MAX + 1, "%sc%u:%" PRIu64, opt.prefix, c->id,
                     key_num);
    } else {
        n = snprintf(buf, KEY_MAX + 1, "%s%" PRIu64, opt.prefix, key_num);
    }
    return (size_t)n;           /* opt checks keep it <= KEY_MAX */
}

/* Size and pattern offset are functions of the key, so every set of a key
 * writes the same bytes and a get can check them. */
static uint32_t
key_size(uint64_t h)
{
    double u = (double)(h >> 11) * 0x1.0p-53;
    unsigned i;

    for (i = 0; i + 1 < opt.nsizes; i++) {
        if (u < opt.sizes[i].cum) {
            break;
        }
    }
    return opt.sizes[i].size;
}

/* The size a set of key_num writes (h: the hash of its key). */
static uint32_t
value_size(uint64_t key_num, uint64_t h)
{
    if (opt.tenants.n > 0) {
        return opt.tenants.t[tenant_of(key_num)].size;
    }
    return key_size(h);
}

static uint64_t
key_offset(uint64_t h)
{
    return h % PATTERN_SLACK;
}

static uint64_t
next_key_num(struct conn *c)
{
    if (opt.sequential) {
        return c->calls_sent;
    }
    if (opt.dist == DIST_ZIPF) {
        return zipf_sample(&c->rng) - 1;
    }
    return (uint64_t)(rng_double(&c->rng) * (double)opt.keys) % opt.keys;
}

/* --- request generation -------------------------------------------------- */

/* The longest request queue_* may write: a set, or a get of every key. */
static size_t
req_max(void)
{
    size_t set = LINE_MAX_LEN + opt.max_size + 2;
    size_t get = 4 + (size_t)opt.multiget * (KEY_MAX + 12) + 2;

    return set > get ? set : get;
}

static bool
wbuf_has_room(struct conn *c, size_t need)
{
    if (c->whead == c->wtail) {
        c->whead = c->wtail = 0;
    }
    if (wbuf_size - c->wtail >= need) {
        return true;
    }
    if (c->whead > 0) {
        memmove(c->wbuf, c->wbuf + c->whead, c->wtail - c->whead);
        c->wtail -= c->whead;
        c->whead = 0;
    }
    return wbuf_size - c->wtail >= need;
}

static void
ring_push(struct conn *c, enum req_type type, uint64_t key_num,
          uint64_t start)
{
    struct pending *p =
        &c->ring[(c->ring_head + c->ring_count) % opt.pipeline];

    p->type = (uint8_t)type;
    p->key_num = key_num;
    p->start_ns = start;
    c->ring_count++;
}

/* One get of --multiget keys: key_num, then further draws; with --meta
 * one "mg <key> v k q" line per key and an "mn" to end the batch. */
static void
queue_get(struct conn *c, uint64_t key_num, uint64_t start)
{
    char *p = c->wbuf + c->wtail;
    size_t off = 0;
    uint64_t *asked = c->batch_keys == NULL ? NULL :
        c->batch_keys + (size_t)((c->ring_head + c->ring_count) % opt.pipeline) * opt.multiget;

    if (!opt.meta) {
        memcpy(p, "get", 3);
        off = 3;
    }
    for (unsigned i = 0; i < opt.multiget; i++) {
        if (opt.meta) {
            memcpy(p + off, "mg ", 3);
            off += 3;
        } else {
            p[off++] = ' ';
        }
        uint64_t k = i == 0 ? key_num : next_key_num(c);
        if (asked != NULL) {
            asked[i] = k;
        }
        off += key_format(c, k, p + off);
        if (opt.meta) {
            memcpy(p + off, " v k q\r\n", 8);
            off += 8;
        }
    }
    if (opt.meta) {
        memcpy(p + off, "mn", 2);
        off += 2;
    }
    memcpy(p + off, "\r\n", 2);
    c->wtail += off + 2;
    c->w->st.gets++;
    ring_push(c, REQ_GET, key_num, start);
}

static void
queue_set(struct conn *c, uint64_t key_num, uint64_t start)
{
    char key[KEY_MAX + 1];
    size_t klen = key_format(c, key_num, key);
    uint64_t h = key_hash(key, klen);
    uint32_t size = value_size(key_num, h);
    char *p = c->wbuf + c->wtail;
    int n;

    n = snprintf(p, LINE_MAX_LEN, "set %s 0 %ld %" PRIu32 "\r\n", key,
                 opt.expire, size);
    p += n;
    memcpy(p, pattern + key_offset(h), size);
    memcpy(p + size, "\r\n", 2);
    c->wtail += (size_t)n + size + 2;
    c->w->st.sets++;
    ring_push(c, REQ_SET, key_num, start);
}

/* Whether this connection may queue another workload request. */
static bool
calls_left(const struct conn *c)
{
    if (opt.calls == 0) {
        return true;
    }
    if (opt.tenants.n > 0) {
        return __atomic_load_n(&stream_next, __ATOMIC_RELAXED) <
               opt.calls * opt.conns;
    }
    return c->calls_sent < opt.calls;
}

/* --tenants: the next request index of the stream, false once --calls x
 * --conns have been handed out. */
static bool
stream_take(uint64_t *idx)
{
    uint64_t cur = __atomic_load_n(&stream_next, __ATOMIC_RELAXED);

    do {
        if (opt.calls > 0 && cur >= opt.calls * opt.conns) {
            return false;
        }
    } while (!__atomic_compare_exchange_n(&stream_next, &cur, cur + 1, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    *idx = cur;
    return true;
}

static void
queue_workload_request(struct conn *c, uint64_t start)
{
    uint64_t idx, key_num;
    bool is_get;

    if (opt.tenants.n > 0) {
        if (!stream_take(&idx)) {
            return;
        }
        queue_get(c, tenants_request(&opt.tenants, opt.seed, idx), start);
        c->calls_sent++;
        c->w->st.requests++;
        return;
    }
    key_num = next_key_num(c);
    is_get = opt.get_ratio > 0.0 && rng_double(&c->rng) < opt.get_ratio;

    if (is_get) {
        queue_get(c, key_num, start);
    } else {
        queue_set(c, key_num, start);
    }
    c->calls_sent++;
    c->w->st.requests++;
}

static void
queue_fill(struct conn *c, uint64_t start)
{
    uint64_t key_num = c->fills[c->fill_head];

    c->fill_head = (c->fill_head + 1) % (2 * opt.pipeline);
    c->fill_count--;
    queue_set(c, key_num, start);
    c->w->st.fills++;
    c->w->st.requests++;
}

/* Open loop: connection c's k-th request is due at t0 + (c + k*conns)/rate,
 * which spreads all connections' requests evenly over time. */
static uint64_t
intended_ns(const struct conn *c, uint64_t k)
{
    double slot = (double)c->id + (double)k * (double)opt.conns;

    return c->w->st.start_ns + (uint64_t)(slot * 1e9 / opt.rate);
}

static bool
conn_finished(const struct conn *c)
{
    return opt.calls > 0 && !calls_left(c) &&
           c->ring_count == 0 && c->fill_count == 0 && c->whead == c->wtail;
}

/* --- writing ------------------------------------------------------------- */

static void
conn_want_write(struct conn *c, bool on)
{
    if (on == c->wev_on) {
        return;
    }
    if (on) {
        event_add(c->wev, NULL);
    } else {
        event_del(c->wev);
    }
    c->wev_on = on;
}

static void
conn_flush(struct conn *c, uint64_t now)
{
    while (c->whead < c->wtail) {
        ssize_t n = send(c->fd, c->wbuf + c->whead, c->wtail - c->whead,
                         MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                conn_want_write(c, true);
                return;
            }
            if (errno == EINTR) {
                continue;
            }
            conn_fail_io(c, errno, "send");
            return;
        }
        c->whead += (size_t)n;
        c->w->st.bytes_out += (uint64_t)n;
        c->last_progress = now;
    }
    c->whead = c->wtail = 0;
    conn_want_write(c, false);
}

/* Queue whatever may be sent now (fills first: they answer misses already
 * counted), then write it out. */
static void
conn_pump(struct conn *c, uint64_t now)
{
    size_t max_req = req_max();

    while (c->state == CONN_READY && c->ring_count < opt.pipeline &&
           wbuf_has_room(c, max_req)) {
        if (c->fill_count > 0) {
            queue_fill(c, now);
            continue;
        }
        if (!calls_left(c)) {
            break;
        }
        if (opt.rate > 0.0) {
            uint64_t due = intended_ns(c, c->calls_sent);

            if (due > now) {
                struct timeval tv = ns_to_tv(due - now);

                evtimer_add(c->tev, &tv);
                break;
            }
            queue_workload_request(c, due);
        } else {
            queue_workload_request(c, now);
        }
    }
    if (c->state != CONN_READY) {
        return;
    }
    conn_flush(c, now);
    if (c->state == CONN_READY && conn_finished(c)) {
        c->w->st.conns_done++;
        conn_close(c);
    }
}

/* --- response parsing ---------------------------------------------------- */

static bool
line_is(const char *line, size_t len, const char *word)
{
    size_t wl = strlen(word);

    return len >= wl && memcmp(line, word, wl) == 0 &&
           (len == wl || line[wl] == ' ');
}

static void
complete_request(struct conn *c, enum rsp_type type, uint64_t now)
{
    struct pending *p = &c->ring[c->ring_head];
    struct stats *st = &c->w->st;

    st->responses++;
    st->rsp[type]++;
    if (p->type == REQ_GET) {
        st->get_keys += opt.multiget;
        st->values += c->nvalues;
        if (opt.tenants.n > 0) {
            st->tenant_gets[tenant_of(p->key_num)]++;
            st->tenant_hits[tenant_of(p->key_num)] += type == RSP_HIT;
        }
    }
    hist_record(&st->lat, now > p->start_ns ? now - p->start_ns : 0);
    if (type == RSP_MISS && opt.cache_aside) {
        unsigned cap = 2 * opt.pipeline;

        c->fills[(c->fill_head + c->fill_count) % cap] = p->key_num;
        c->fill_count++;
    }
    c->ring_head = (c->ring_head + 1) % opt.pipeline;
    c->ring_count--;
    c->got_value = false;
    c->nvalues = 0;
    c->match_pos = 0;
}

/* --verify of a multi-get: the answers must be the keys asked, in order,
 * misses left out (an in-order subsequence); false if key_num is not the
 * next one (a key skipped past, repeated, reordered or never asked). */
static bool
batch_match(struct conn *c, uint64_t key_num)
{
    const uint64_t *asked = c->batch_keys + (size_t)c->ring_head * opt.multiget;

    while (c->match_pos < opt.multiget && asked[c->match_pos] != key_num) {
        c->match_pos++;
    }
    if (c->match_pos == opt.multiget) {
        return false;
    }
    c->match_pos++;
    return true;
}

/* Parse "VALUE <key> <flags> <bytes>[ <cas>]" and switch to data mode. */
static bool
start_value(struct conn *c, const char *line, size_t len)
{
    char buf[LINE_MAX_LEN];
    char *key, *flags, *bytes, *cas, *end, *save = NULL;
    struct pending *p = &c->ring[c->ring_head];
    unsigned long long nbytes;

    if (len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    strtok_r(buf, " ", &save);
    if (strcmp(buf, "VA") == 0) {
        /* "VA <bytes> k<key>" (the meta flags this tool sends) */
        char *t;
        bytes = strtok_r(NULL, " ", &save);
        key = NULL;
        while ((t = strtok_r(NULL, " ", &save)) != NULL) {
            if (t[0] == 'k') {
                key = t + 1;
            }
        }
        if (!bytes || !key) {
            return false;
        }
    } else {
        key = strtok_r(NULL, " ", &save);
        flags = strtok_r(NULL, " ", &save);
        bytes = strtok_r(NULL, " ", &save);
        cas = strtok_r(NULL, " ", &save);
        if (!key || !flags || !bytes || strtok_r(NULL, " ", &save)) {
            return false;
        }
        (void)cas;
    }
    errno = 0;
    nbytes = strtoull(bytes, &end, 10);
    if (errno || *end || end == bytes) {
        return false;
    }
    c->pstate = P_DATA;
    c->data_len = nbytes;
    c->data_pos = 0;
    c->got_value = true;
    c->nvalues++;
    c->verify_value = false;
    if (opt.verify) {
        char want[KEY_MAX + 1];
        uint64_t key_num = p->key_num;
        if (opt.multiget > 1 || opt.meta) {
            /* answers name their keys: "<prefix><number>" */
            size_t pl = strlen(opt.prefix);
            key_num = strncmp(key, opt.prefix, pl) == 0 ?
                      strtoull(key + pl, NULL, 10) : UINT64_MAX;
            if (!batch_match(c, key_num)) {
                key_num = UINT64_MAX;   /* counted as a mismatch below */
            }
        }
        size_t klen = key_format(c, key_num, want);
        uint64_t h = key_hash(want, klen);

        if (strlen(key) != klen || memcmp(key, want, klen) != 0 ||
            nbytes != value_size(key_num, h)) {
            c->w->st.verify_mismatch++;
        } else {
            c->verify_value = true;
            c->want_off = key_offset(h);
        }
    }
    return true;
}

static void
handle_line(struct conn *c, const char *line, size_t len, uint64_t now)
{
    bool is_get;
    enum rsp_type t;

    if (c->ring_count == 0) {
        conn_protocol_error(c, "response with no request outstanding", line,
                            len);
        return;
    }
    is_get = c->ring[c->ring_head].type == REQ_GET;
    if (line_is(line, len, "VALUE") || (opt.meta && line_is(line, len, "VA"))) {
        if (!is_get || c->nvalues >= opt.multiget ||
            !start_value(c, line, len)) {
            conn_protocol_error(c, "unexpected or malformed VALUE", line, len);
        }
        return;
    }
    if ((len == 3 && memcmp(line, "END", 3) == 0) ||
        (opt.meta && len == 2 && memcmp(line, "MN", 2) == 0)) {
        if (!is_get) {
            conn_protocol_error(c, "END for a set", line, len);
            return;
        }
        complete_request(c, c->got_value ? RSP_HIT : RSP_MISS, now);
        return;
    }
    if (line_is(line, len, "STORED")) {
        t = RSP_STORED;
    } else if (line_is(line, len, "NOT_STORED")) {
        t = RSP_NOT_STORED;
    } else if (line_is(line, len, "EXISTS")) {
        t = RSP_EXISTS;
    } else if (line_is(line, len, "NOT_FOUND")) {
        t = RSP_NOT_FOUND;
    } else if (line_is(line, len, "DELETED")) {
        t = RSP_DELETED;
    } else if (line_is(line, len, "ERROR")) {
        t = RSP_ERROR;
    } else if (line_is(line, len, "CLIENT_ERROR")) {
        t = RSP_CLIENT_ERROR;
    } else if (line_is(line, len, "SERVER_ERROR")) {
        t = RSP_SERVER_ERROR;
    } else {
        conn_protocol_error(c, "unknown response", line, len);
        return;
    }
    if (c->got_value) {
        conn_protocol_error(c, "status line inside a get response", line, len);
        return;
    }
    complete_request(c, t, now);
}

/* Consume value bytes (and their CRLF) as they arrive; checks the bytes
 * against the pattern slice this key's set wrote, if --verify. */
static void
consume_data(struct conn *c)
{
    uint64_t total = c->data_len + 2;
    size_t avail = c->rtail - c->rhead;
    uint64_t take = total - c->data_pos;
    const char *p = c->rbuf + c->rhead;
    uint64_t pos;

    if (take > avail) {
        take = avail;
    }
    /* Only the last two bytes of the block need looking at here. */
    pos = c->data_pos > c->data_len ? c->data_pos : c->data_len;
    for (; pos < c->data_pos + take; pos++) {
        const char *q = p + (pos - c->data_pos);

        if (*q != "\r\n"[pos - c->data_len]) {
            conn_protocol_error(c, "value not followed by CRLF", q,
                                (size_t)(c->rbuf + c->rtail - q));
            return;
        }
    }
    if (c->verify_value) {
        uint64_t vend = c->data_pos + take;
        uint64_t n = (vend > c->data_len ? c->data_len : vend);

        if (n > c->data_pos &&
            memcmp(p, pattern + c->want_off + c->data_pos,
                   n - c->data_pos) != 0) {
            c->w->st.verify_mismatch++;
            c->verify_value = false;    /* count each value once */
        }
    }
    c->rhead += take;
    c->data_pos += take;
    if (c->data_pos == total) {
        c->pstate = P_LINE;
    }
}

static void
conn_parse(struct conn *c, uint64_t now)
{
    while (c->state == CONN_READY && c->rhead < c->rtail) {
        char *line, *nl;
        size_t len;

        if (c->pstate == P_DATA) {
            consume_data(c);
            continue;
        }
        line = c->rbuf + c->rhead;
        nl = memchr(line, '\n', c->rtail - c->rhead);
        if (!nl) {
            if (c->rhead == 0 && c->rtail == RBUF_SIZE) {
                conn_protocol_error(c, "response line too long", line, 80);
            }
            break;
        }
        len = (size_t)(nl - line);
        if (len == 0 || line[len - 1] != '\r') {
            conn_protocol_error(c, "line not ended by CRLF", line, len);
            break;
        }
        c->rhead += len + 1;
        handle_line(c, line, len - 1, now);
    }
    if (c->rhead == c->rtail) {
        c->rhead = c->rtail = 0;
    } else if (c->rhead > 0 && c->pstate == P_LINE) {
        memmove(c->rbuf, c->rbuf + c->rhead, c->rtail - c->rhead);
        c->rtail -= c->rhead;
        c->rhead = 0;
    }
}

/* --- event callbacks ----------------------------------------------------- */

static void
conn_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    uint64_t now;
    ssize_t n;

    (void)what;
    n = recv(fd, c->rbuf + c->rtail, RBUF_SIZE - c->rtail, 0);
    if (n == 0) {
        c->w->st.err_eof++;
        note("conn %u: server closed the connection", c->id);
        conn_close(c);
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_fail_io(c, errno, "recv");
        }
        return;
    }
    now = now_ns();
    c->rtail += (size_t)n;
    c->w->st.bytes_in += (uint64_t)n;
    c->last_progress = now;
    conn_parse(c, now);
    if (c->state == CONN_READY) {
        conn_pump(c, now);
    }
}

static void
conn_on_connected(struct conn *c)
{
    int err = 0;
    socklen_t elen = sizeof(err);

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
        err = errno;
    }
    if (err != 0) {
        if (err == ECONNREFUSED) {
            c->w->st.err_refused++;
        } else {
            c->w->st.err_connect++;
        }
        note("conn %u: connect: %s", c->id, strerror(err));
        conn_close(c);
        return;
    }
    c->state = CONN_READY;
    c->w->st.conns_ok++;
    c->wev_on = false;
    event_del(c->wev);
    event_add(c->rev, NULL);
    conn_pump(c, now_ns());
}

static void
conn_on_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (c->state == CONN_CONNECTING) {
        conn_on_connected(c);
        return;
    }
    conn_pump(c, now_ns());
}

static void
conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (c->state == CONN_READY) {
        conn_pump(c, now_ns());
    }
}

/* A connection with work in flight and no byte moved for --timeout is
 * declared dead, so a wedged server cannot hang the run. */
static void
worker_on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    uint64_t now = now_ns();
    uint64_t limit = (uint64_t)(opt.timeout * 1e9);
    unsigned i;

    (void)fd;
    (void)what;
    for (i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        bool waiting = c->state == CONN_CONNECTING ||
                       (c->state == CONN_READY &&
                        (c->ring_count > 0 || c->whead < c->wtail));

        if (waiting && now - c->last_progress > limit) {
            w->st.timeouts++;
            note("conn %u: no progress for %.1f s", c->id, opt.timeout);
            conn_close(c);
        }
    }
}

static void
worker_on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;

    (void)fd;
    (void)what;
    event_base_loopbreak(w->base);
}

/* --- setup and teardown -------------------------------------------------- */

static void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (!p) {
        die("out of memory");
    }
    return p;
}

static void
conn_init(struct worker *w, struct conn *c, unsigned id)
{
    c->w = w;
    c->id = id;
    c->fd = -1;
    c->state = CONN_CLOSED;
    rng_seed(&c->rng, opt.seed ^ ((uint64_t)id * 0x9e3779b97f4a7c15ULL));
    c->wbuf = xcalloc(1, wbuf_size);
    c->rbuf = xcalloc(1, RBUF_SIZE);
    c->ring = xcalloc(opt.pipeline, sizeof(*c->ring));
    c->fills = xcalloc(2 * opt.pipeline, sizeof(*c->fills));
    if (opt.multiget > 1 || opt.meta) {
        c->batch_keys = xcalloc((size_t)opt.pipeline * opt.multiget, sizeof(*c->batch_keys));
    }
}

static void
conn_start(struct conn *c)
{
    struct worker *w = c->w;
    int one = 1;
    int fd;

    fd = socket(server_ai->ai_family,
                SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->state = CONN_CONNECTING;
    c->last_progress = now_ns();
    c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, conn_on_read, c);
    c->wev = event_new(w->base, fd, EV_WRITE | EV_PERSIST, conn_on_write, c);
    if (opt.rate > 0.0) {
        c->tev = evtimer_new(w->base, conn_on_timer, c);
    }
    if (!c->rev || !c->wev || (opt.rate > 0.0 && !c->tev)) {
        die("event_new failed");
    }
    w->active++;
    /* Completion (or failure) of the connect is reported as writability. */
    if (connect(fd, server_ai->ai_addr, server_ai->ai_addrlen) < 0 &&
        errno != EINPROGRESS) {
        if (errno == ECONNREFUSED) {
            w->st.err_refused++;
        } else {
            w->st.err_connect++;
        }
        note("conn %u: connect: %s", c->id, strerror(errno));
        conn_close(c);
        return;
    }
    c->wev_on = true;
    event_add(c->wev, NULL);
}

static void
conn_free(struct conn *c)
{
    conn_close(c);
    if (c->rev) {
        event_free(c->rev);
    }
    if (c->wev) {
        event_free(c->wev);
    }
    if (c->tev) {
        event_free(c->tev);
    }
    free(c->wbuf);
    free(c->rbuf);
    free(c->ring);
    free(c->batch_keys);
    free(c->fills);
}

/* libevent's default clock is CLOCK_MONOTONIC_COARSE (4 ms ticks on many
 * kernels) with millisecond epoll timeouts; open-loop send times need
 * better, or timer lateness shows up as server latency. */
static struct event_base *
base_new(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base;

    if (!cfg) {
        die("event_config_new failed");
    }
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (!base) {
        die("event_base_new failed");
    }
    return base;
}

static void
worker_init(struct worker *w, unsigned idx)
{
    unsigned i, n = 0;

    w->idx = idx;
    w->base = base_new();
    /* Connection i belongs to worker i % threads. */
    for (i = idx; i < opt.conns; i += opt.threads) {
        n++;
    }
    w->nconns = n;
    w->conns = xcalloc(n, sizeof(*w->conns));
    for (i = 0; i < n; i++) {
        conn_init(w, &w->conns[i], idx + i * opt.threads);
    }
}

static void *
worker_run(void *arg)
{
    struct worker *w = arg;
    struct timeval stop = ns_to_tv((uint64_t)(opt.duration * 1e9));
    struct timeval tick = { 0, 250000 };
    unsigned i;

    w->stop_ev = evtimer_new(w->base, worker_on_stop, w);
    w->tick_ev = event_new(w->base, -1, EV_PERSIST, worker_on_tick, w);
    if (!w->stop_ev || !w->tick_ev) {
        die("event_new failed");
    }
    evtimer_add(w->stop_ev, &stop);
    event_add(w->tick_ev, &tick);
    w->st.start_ns = now_ns();
    for (i = 0; i < w->nconns; i++) {
        conn_start(&w->conns[i]);
    }
    if (w->active > 0) {
        event_base_dispatch(w->base);
    }
    w->st.end_ns = now_ns();
    return NULL;
}

static void
worker_free(struct worker *w)
{
    unsigned i;

    for (i = 0; i < w->nconns; i++) {
        conn_free(&w->conns[i]);
    }
    free(w->conns);
    if (w->stop_ev) {
        event_free(w->stop_ev);
    }
    if (w->tick_ev) {
        event_free(w->tick_ev);
    }
    event_base_free(w->base);
}

/* Deterministic, non-periodic bytes, so a value read back at the wrong
 * offset or of the wrong key does not compare equal by accident. */
static void
pattern_setup(void)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = (size_t)opt.max_size + PATTERN_SLACK;
    uint64_t state = 0x70a77e54ULL;
    size_t i;

    pattern = xcalloc(1, n);
    for (i = 0; i < n; i++) {
        pattern[i] = alphabet[splitmix64(&state) % (sizeof(alphabet) - 1)];
    }
}

static void
resolve_server(const char *spec)
{
    static char host[256];
    const char *colon = strrchr(spec, ':');
    struct addrinfo hints;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (colon) {
        size_t hl = (size_t)(colon - spec);

        if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') {
            spec++;             /* [v6addr]:port */
            hl -= 2;
        }
        if (hl >= sizeof(host)) {
            die("server host too long");
        }
        memcpy(host, spec, hl);
        host[hl] = '\0';
        opt.host = host;
        opt.port = colon + 1;
    } else {
        opt.host = spec;
    }
    rc = getaddrinfo(opt.host, opt.port, &hints, &server_ai);
    if (rc != 0) {
        die("cannot resolve %s:%s: %s", opt.host, opt.port, gai_strerror(rc));
    }
}

/* --- option parsing ------------------------------------------------------ */

static uint64_t
parse_u64(const char *name, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        die("--%s: expected an integer in [%" PRIu64 ", %" PRIu64
            "], got '%s'", name, min, max, s);
    }
    return v;
}

static double
parse_double(const char *name, const char *s, double min, double max)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max)) {
        die("--%s: expected a number in [%g, %g], got '%s'", name, min, max,
            s);
    }
    return v;
}

/* "100:0.5,1000:0.3,10000:0.2"; a bare size has weight 1. */
static void
parse_sizes(const char *spec)
{
    char buf[8192];
    char *item, *save = NULL;
    double total = 0.0, cum = 0.0;
    unsigned i;

    if (strlen(spec) >= sizeof(buf)) {
        die("--sizes: list too long");
    }
    strcpy(buf, spec);
    opt.nsizes = 0;
    for (item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        double weight = 1.0;

        if (opt.nsizes == MAX_SIZES) {
            die("--sizes: at most %d entries", MAX_SIZES);
        }
        if (colon) {
            *colon = '\0';
            weight = parse_double("sizes", colon + 1, 0.0, 1e12);
        }
        opt.sizes[opt.nsizes].size =
            (uint32_t)parse_u64("sizes", item, 0, MAX_VALUE_SIZE);
        opt.sizes[opt.nsizes].cum = weight;
        total += weight;
        opt.nsizes++;
    }
    if (opt.nsizes == 0 || total <= 0.0) {
        die("--sizes: need at least one entry with positive weight");
    }
    for (i = 0; i < opt.nsizes; i++) {
        cum += opt.sizes[i].cum / total;
        opt.sizes[i].cum = cum;
    }
    opt.sizes[opt.nsizes - 1].cum = 1.0;
}

static void
parse_key_dist(const char *s)
{
    if (strcmp(s, "uniform") == 0) {
        opt.dist = DIST_UNIFORM;
    } else if (strncmp(s, "zipf:", 5) == 0) {
        opt.dist = DIST_ZIPF;
        opt.zipf_s = parse_double("key-dist", s + 5, 1e-6, 100.0);
    } else if (strcmp(s, "zipf") == 0) {
        opt.dist = DIST_ZIPF;
        opt.zipf_s = 1.0;
    } else {
        die("--key-dist: expected uniform or zipf:S, got '%s'", s);
    }
}

static void
usage(FILE *f)
{
    fprintf(f,
        "usage: loadgen [options]\n"
        "  --server HOST:PORT   target (default 127.0.0.1:11211)\n"
        "  --conns N            connections (default 100)\n"
        "  --threads N          event loops sharing connections (default 1)\n"
        "  --calls N            workload requests per connection; 0 = until\n"
        "                       --duration (default 0)\n"
        "  --duration SECONDS   hard bound on run time (default 60)\n"
        "  --timeout SECONDS    per-connection stall limit (default 10)\n"
        "  --size N             fixed value size (default 100)\n"
        "  --sizes LIST         weighted sizes, e.g. 100:6,1000:3,5000:1;\n"
        "                       weights are normalized, and a hash of the\n"
        "                       key picks its size\n"
        "  --keys N             key space size (default 100000)\n"
        "  --key-dist D         uniform | zipf:S (default uniform)\n"
        "  --key-prefix STR     prefix for every key\n"
        "  --sequential         connection c, call i -> key <prefix>c<c>:<i>\n"
        "  --get-ratio F        fraction of gets, 0..1 (default 0: all sets)\n"
        "  --multiget N         keys per get (default 1); the hit ratio is\n"
        "                       then values received / keys asked for\n"
        "  --meta               gets as meta commands: \"mg <key> v k q\" per\n"
        "                       key, then \"mn\"\n"
        "  --cache-aside        a get miss is followed by a set of that key\n"
        "  --pipeline N         requests in flight per connection (def. 1)\n"
        "  --rate R             open loop, R requests/s in total (default 0:\n"
        "                       closed loop)\n"
        "  --seed N             RNG seed (default fixed)\n"
        "  --expire N           exptime for sets (default 0)\n"
        "  --verify             check VALUE bytes against what a set writes\n"
        "  --tenants SPEC       look-aside tenants size:keys:dist:share[:prefix],...\n"
        "                       (dist uniform|zipfS); every request is a get,\n"
        "                       a miss is filled; request i of the stream is\n"
        "                       a function of --seed and i, --calls x --conns\n"
        "                       requests in all (bench/tenants.h)\n"
        "  --json               print results as one JSON object\n"
        "  --quiet              no diagnostics on stderr\n");
}

static void
parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "server", required_argument, NULL, 'S' },
        { "conns", required_argument, NULL, 'c' },
        { "threads", required_argument, NULL, 'T' },
        { "calls", required_argument, NULL, 'n' },
        { "duration", required_argument, NULL, 'd' },
        { "timeout", required_argument, NULL, 'o' },
        { "size", required_argument, NULL, 's' },
        { "sizes", required_argument, NULL, 'z' },
        { "keys", required_argument, NULL, 'k' },
        { "key-dist", required_argument, NULL, 'D' },
        { "key-prefix", required_argument, NULL, 'p' },
        { "sequential", no_argument, NULL, 'q' },
        { "get-ratio", required_argument, NULL, 'g' },
        { "cache-aside", no_argument, NULL, 'a' },
        { "multiget", required_argument, NULL, 'M' },
        { "meta", no_argument, NULL, 'm' },
        { "pipeline", required_argument, NULL, 'P' },
        { "rate", required_argument, NULL, 'r' },
        { "seed", required_argument, NULL, 'e' },
        { "expire", required_argument, NULL, 'x' },
        { "verify", no_argument, NULL, 'V' },
        { "json", no_argument, NULL, 'j' },
        { "quiet", no_argument, NULL, 'Q' },
        { "tenants", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *server = NULL;
    bool size_set = false;
    unsigned i;
    int ch;

    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'S': server = optarg; break;
        case 'c':
            opt.conns = (unsigned)parse_u64("conns", optarg, 1, MAX_CONNS);
            break;
        case 'T':
            opt.threads = (unsigned)parse_u64("threads", optarg, 1, 256);
            break;
        case 'n': opt.calls = parse_u64("calls", optarg, 0, UINT64_MAX); break;
        case 'd':
            opt.duration = parse_double("duration", optarg, 0.001, 1e7);
            break;
        case 'o':
            opt.timeout = parse_double("timeout", optarg, 0.001, 1e7);
            break;
        case 's':
            opt.sizes[0].size =
                (uint32_t)parse_u64("size", optarg, 0, MAX_VALUE_SIZE);
            opt.sizes[0].cum = 1.0;
            opt.nsizes = 1;
            size_set = true;
            break;
        case 'z': parse_sizes(optarg); size_set = true; break;
        case 'k':
            opt.keys = parse_u64("keys", optarg, 1, UINT64_MAX >> 11);
            break;
        case 'D': parse_key_dist(optarg); break;
        case 'p': opt.prefix = optarg; break;
        case 'q': opt.sequential = true; break;
        case 'g':
            opt.get_ratio = parse_double("get-ratio", optarg, 0.0, 1.0);
            break;
        case 'a': opt.cache_aside = true; break;
        case 'm': opt.meta = true; break;
        case 'M':
            opt.multiget = (unsigned)parse_u64("multiget", optarg, 1, MAX_MULTIGET);
            break;
        case 'P':
            opt.pipeline =
                (unsigned)parse_u64("pipeline", optarg, 1, MAX_PIPELINE);
            break;
        case 'r': opt.rate = parse_double("rate", optarg, 0.0, 1e9); break;
        case 'e': opt.seed = parse_u64("seed", optarg, 0, UINT64_MAX); break;
        case 'x':
            opt.expire = (long)parse_u64("expire", optarg, 0, LONG_MAX);
            break;
        case 'V': opt.verify = true; break;
        case 'j': opt.json = true; break;
        case 'Q': opt.quiet = true; break;
        case 't': {
            char err[256];

            if (!tenants_parse(&opt.tenants, optarg, err, sizeof(err))) {
                die("--tenants: %s", err);
            }
            break;
        }
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) {
        die("unexpected argument '%s'", argv[optind]);
    }
    if (opt.tenants.n > 0) {
        if (opt.sequential || opt.multiget > 1 || opt.meta) {
            die("--tenants is not combined with --sequential, --multiget or --meta");
        }
        opt.get_ratio = 1.0;    /* look-aside: gets, misses filled */
        opt.cache_aside = true;
        for (i = 0; i < opt.tenants.n; i++) {
            if (opt.tenants.t[i].size > opt.max_size) {
                opt.max_size = opt.tenants.t[i].size;
            }
        }
    }
    if (!size_set) {
        opt.sizes[0].size = 100;
        opt.sizes[0].cum = 1.0;
        opt.nsizes = 1;
    }
    for (i = 0; i < opt.nsizes; i++) {
        if (opt.sizes[i].size > opt.max_size) {
            opt.max_size = opt.sizes[i].size;
        }
    }
    /* "c<conn>:<2^64>" or "<2^64>" adds at most 27 bytes to the prefix. */
    if (strlen(opt.prefix) + 27 > KEY_MAX) {
        die("--key-prefix too long (keys must stay within %d bytes)", KEY_MAX);
    }
    if (strpbrk(opt.prefix, " \r\n\t")) {
        die("--key-prefix must not contain whitespace");
    }
    if ((opt.multiget > 1 || opt.meta) && (opt.cache_aside || opt.sequential)) {
        die("--multiget and --meta are not combined with --cache-aside or --sequential");
    }
    if (opt.threads > opt.conns) {
        opt.threads = opt.conns;
    }
    if (opt.dist == DIST_ZIPF) {
        zipf_setup(opt.keys, opt.zipf_s);
    }
    resolve_server(server ? server : "127.0.0.1:" DEFAULT_PORT);
    wbuf_size = req_max();
    if (wbuf_size < WBUF_MIN) {
        wbuf_size = WBUF_MIN;   /* room for many small pipelined requests */
    }
}

/* --- reporting ----------------------------------------------------------- */

static void
stats_merge(struct stats *dst, const struct stats *src)
{
    unsigned i;

    dst->requests += src->requests;
    dst->gets += src->gets;
    dst->get_keys += src->get_keys;
    dst->values += src->values;
    dst->sets += src->sets;
    dst->fills += src->fills;
    dst->responses += src->responses;
    for (i = 0; i < RSP_COUNT; i++) {
        dst->rsp[i] += src->rsp[i];
    }
    dst->bytes_out += src->bytes_out;
    dst->bytes_in += src->bytes_in;
    dst->conns_ok += src->conns_ok;
    dst->conns_done += src->conns_done;
    dst->err_refused += src->err_refused;
    dst->err_connect += src->err_connect;
    dst->err_reset += src->err_reset;
    dst->err_eof += src->err_eof;
    dst->err_io += src->err_io;
    dst->timeouts += src->timeouts;
    dst->protocol_errors += src->protocol_errors;
    dst->verify_mismatch += src->verify_mismatch;
    for (i = 0; i < TENANTS_MAX; i++) {
        dst->tenant_gets[i] += src->tenant_gets[i];
        dst->tenant_hits[i] += src->tenant_hits[i];
    }
    if (dst->start_ns == 0 || src->start_ns < dst->start_ns) {
        dst->start_ns = src->start_ns;
    }
    if (src->end_ns > dst->end_ns) {
        dst->end_ns = src->end_ns;
    }
    hist_merge(&dst->lat, &src->lat);
}

static double
ratio(uint64_t num, uint64_t den)
{
    return den ? (double)num / (double)den : 0.0;
}

struct summary {
    double secs;
    double hit_ratio;
    double us[6];               /* avg p50 p90 p99 p999 max */
    unsigned conns_failed;
};

static const char *const lat_names[6] = {
    "avg", "p50", "p90", "p99", "p999", "max",
};

static void
summarize(const struct stats *st, struct summary *s)
{
    const struct hist *h = &st->lat;

    s->secs = (double)(st->end_ns - st->start_ns) / 1e9;
    if (s->secs <= 0.0) {
        s->secs = 1e-9;         /* keeps the rates finite */
    }
    s->hit_ratio = opt.multiget > 1 ? ratio(st->values, st->get_keys) :
                   ratio(st->rsp[RSP_HIT], st->rsp[RSP_HIT] + st->rsp[RSP_MISS]);
    s->us[0] = h->count ? (double)h->sum / (double)h->count / 1e3 : 0.0;
    s->us[1] = (double)hist_percentile(h, 0.50) / 1e3;
    s->us[2] = (double)hist_percentile(h, 0.90) / 1e3;
    s->us[3] = (double)hist_percentile(h, 0.99) / 1e3;
    s->us[4] = (double)hist_percentile(h, 0.999) / 1e3;
    s->us[5] = (double)h->max / 1e3;
}

static void
print_text(const struct stats *st, const struct summary *s)
{
    unsigned i;

    printf("Total: connections %u (ok %" PRIu64 ", done %" PRIu64 ") "
           "requests %" PRIu64 " responses %" PRIu64 " test-duration %.3f s\n",
           opt.conns, st->conns_ok, st->conns_done, st->requests,
           st->responses, s->secs);
    printf("Request rate: %.1f req/s   Response rate: %.1f rsp/s\n",
           (double)st->requests / s->secs, (double)st->responses / s->secs);
    printf("Request type: get %" PRIu64 " set %" PRIu64 " (cache-aside fills %"
           PRIu64 ")\n", st->gets, st->sets, st->fills);
    printf("Keys: in the gets answered %" PRIu64 " values received %" PRIu64 " (%.1f keys/s)\n",
           st->get_keys, st->values, (double)st->values / s->secs);
    printf("Response type:");
    for (i = 0; i < RSP_COUNT; i++) {
        printf(" %s %" PRIu64, rsp_names[i], st->rsp[i]);
    }
    printf("\nHit ratio: %.4f (hits %" PRIu64 " misses %" PRIu64 ")\n",
           s->hit_ratio, st->rsp[RSP_HIT], st->rsp[RSP_MISS]);
    printf("Response time [us]:");
    for (i = 0; i < 6; i++) {
        printf(" %s %.1f", lat_names[i], s->us[i]);
    }
    printf("\nNet I/O: bytes out %" PRIu64 " in %" PRIu64 " (%.1f MB/s)\n",
           st->bytes_out, st->bytes_in,
           (double)(st->bytes_out + st->bytes_in) / 1e6 / s->secs);
    printf("Errors: refused %" PRIu64 " connect %" PRIu64 " reset %" PRIu64
           " eof %" PRIu64 " io %" PRIu64 " timeouts %" PRIu64
           " protocol %" PRIu64 " verify_mismatch %" PRIu64 "\n",
           st->err_refused, st->err_connect, st->err_reset, st->err_eof,
           st->err_io, st->timeouts, st->protocol_errors, st->verify_mismatch);
}

static void
print_json(const struct stats *st, const struct summary *s)
{
    unsigned i;

    printf("{\"server\":\"%s:%s\",\"conns\":%u,\"conns_ok\":%" PRIu64
           ",\"conns_done\":%" PRIu64 ",\"requests\":%" PRIu64
           ",\"responses\":%" PRIu64 ",\"duration_s\":%.6f"
           ",\"request_rate\":%.1f,\"response_rate\":%.1f"
           ",\"gets\":%" PRIu64 ",\"sets\":%" PRIu64 ",\"fills\":%" PRIu64
           ",\"get_keys\":%" PRIu64 ",\"values\":%" PRIu64,
           opt.host, opt.port, opt.conns, st->conns_ok, st->conns_done,
           st->requests, st->responses, s->secs,
           (double)st->requests / s->secs, (double)st->responses / s->secs,
           st->gets, st->sets, st->fills, st->get_keys, st->values);
    for (i = 0; i < RSP_COUNT; i++) {
        printf(",\"%s\":%" PRIu64, rsp_json_names[i], st->rsp[i]);
    }
    printf(",\"hit_ratio\":%.6f,\"latency_us\":{", s->hit_ratio);
    for (i = 0; i < 6; i++) {
        printf("%s\"%s\":%.1f", i ? "," : "", lat_names[i], s->us[i]);
    }
    printf("}");
    if (opt.tenants.n > 0) {
        printf(",\"stream_requests\":%" PRIu64 ",\"tenants\":[", stream_next);
        for (i = 0; i < opt.tenants.n; i++) {
            printf("%s{\"prefix\":\"%s\",\"gets\":%" PRIu64 ",\"hits\":%" PRIu64 "}",
                   i ? "," : "", opt.tenants.t[i].prefix, st->tenant_gets[i],
                   st->tenant_hits[i]);
        }
        printf("]");
    }
    printf(",\"bytes_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64
           ",\"errors\":{\"refused\":%" PRIu64 ",\"connect\":%" PRIu64
           ",\"reset\":%" PRIu64 ",\"eof\":%" PRIu64 ",\"io\":%" PRIu64
           ",\"timeouts\":%" PRIu64 ",\"protocol\":%" PRIu64
           ",\"verify_mismatch\":%" PRIu64 "}}\n",
           st->bytes_out, st->bytes_in, st->err_refused, st->err_connect,
           st->err_reset, st->err_eof, st->err_io, st->timeouts,
           st->protocol_errors, st->verify_mismatch);
}

/* --- main ---------------------------------------------------------------- */

int
main(int argc, char **argv)
{
    struct worker *workers;
    struct stats *total;
    struct summary sum;
    unsigned i;
    int rc = 0;

    parse_options(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    pattern_setup();
    workers = xcalloc(opt.threads, sizeof(*workers));
    for (i = 0; i < opt.threads; i++) {
        worker_init(&workers[i], i);
    }
    for (i = 1; i < opt.threads; i++) {
        if (pthread_create(&workers[i].tid, NULL, worker_run, &workers[i])) {
            die("pthread_create failed");
        }
    }
    worker_run(&workers[0]);
    for (i = 1; i < opt.threads; i++) {
        pthread_join(workers[i].tid, NULL);
    }

    total = xcalloc(1, sizeof(*total));
    for (i = 0; i < opt.threads; i++) {
        stats_merge(total, &workers[i].st);
        worker_free(&workers[i]);
    }
    summarize(total, &sum);
    if (opt.json) {
        print_json(total, &sum);
    } else {
        print_text(total, &sum);
    }

    /* Connect failures and protocol errors mean the figures are not
     * trustworthy; SERVER_ERRORs and timeouts are results. */
    if (total->err_refused + total->err_connect > 0) {
        rc = 2;
    } else if (total->protocol_errors > 0) {
        rc = 3;
    }
    free(total);
    free(workers);
    free(pattern);
    freeaddrinfo(server_ai);
    return rc;
}
