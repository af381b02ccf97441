/*
 * dispatch.h -- the small layer between protocol and storage.
 *
 * Core hands each parsed request here; the dispatcher calls storage and
 * eviction, counts the request, and composes the response (through the
 * protocol module) into the connection's output queue (outq.h). Values
 * of 256 bytes or more are queued by reference, not copied: the item stays
 * referenced until its bytes have been written, then
 * dispatch_ref_release() drops it. Smaller values are copied, which the
 * kernel handles faster than one more iovec (dispatch_reply.c).
 */
#ifndef SC_DISPATCH_H
#define SC_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "item.h"
#include "logger.h"
#include "proto.h"

struct item;
struct logger_watcher;
struct outq;
struct stats_thread;

/* Values shorter than this are copied into the output queue; longer ones
 * are queued by reference (the item stays pinned until sent): below it a
 * copy costs less than the kernel's work per iovec, at one key per get and
 * at 100 (notes/performance.md). */
#ifndef DISPATCH_COPY_MAX
#define DISPATCH_COPY_MAX 256
#endif

/* Keys of a multi-get hashed and prefetched together (dispatch_get_keys);
 * chosen by measurement (notes/performance.md, "Multi-get"). */
#ifndef DISPATCH_MGET_WINDOW
#define DISPATCH_MGET_WINDOW 16
#endif

typedef enum dispatch_result {
    DISPATCH_DONE,          /* response (if any) queued */
    DISPATCH_NEED_DATA,     /* read ctx->ndata bytes into ctx->data, and
                               the next piece's once dispatch_data_next()
                               names one; then call dispatch_data_done() */
    DISPATCH_SWALLOW,       /* drop ctx->swallow bytes of input */
    DISPATCH_CLOSE,         /* quit: close after flushing output */
    DISPATCH_MORE_KEYS,     /* a multi-get is not finished: the keys from
                               ctx->mget.resume on are unanswered (the
                               output reached ctx->out_limit, or the line
                               goes on); continue with dispatch_get_keys() */
    DISPATCH_MORE_DUMP,     /* a key dump (lru_crawler metadump, stats
                               cachedump) goes on: call admin_dump_more()
                               while the output queue has room */
    DISPATCH_WATCH,         /* the connection is now a log stream: drain
                               ctx->watcher (logger.h) until it closes */
} dispatch_result_t;

/*
 * Flash-resident values (dispatch_flash.c): a read goes to the worker's
 * ring (flash_ring, set by core) or else to the I/O threads; when it is
 * done (on the worker, or on an I/O thread) it is handed back to the
 * connection's worker by notify(owner, f), set by core; the worker then
 * calls dispatch_flash_finish(f), which answers and returns the
 * connection to write to (flash_conn), or NULL if it has gone.
 */
struct dispatch_flash;
struct flash_ring;
/* f NULL: a read was prepared in flash_ring (on the worker), to be flushed. */
typedef void (*dispatch_flash_notify_fn)(void *owner, struct dispatch_flash *f);
void *dispatch_flash_finish(struct dispatch_flash *f);
/* A link the notify function may use to queue f until then. */
struct dispatch_flash **dispatch_flash_next(struct dispatch_flash *f);

/* The line format of a key dump. */
typedef enum dispatch_dump {
    DISPATCH_DUMP_CACHE,        /* stats cachedump: "ITEM k [n b; t s]" */
    DISPATCH_DUMP_META,         /* lru_crawler metadump: "key=k exp=..." */
    DISPATCH_DUMP_MG,           /* lru_crawler mgdump (memcached 1.6.45): "mg k" */
} dispatch_dump_t;

/* Per-connection dispatch state (embedded in the connection). */
struct dispatch_ctx {
    struct outq         *out;
    struct stats_thread *stats;
    /* pending storage command */
    struct item         *it;
    char                *data;      /* where the data block goes: one piece */
    uint32_t             ndata;     /* of this many bytes (vlen + 2 in all) */
    struct item_spans    fill;      /* the pieces after it (dispatch_data_next) */
    proto_cmd_t          cmd;
    uint64_t             cas;
    bool                 noreply;
    uint64_t             swallow;   /* DISPATCH_SWALLOW: bytes to drop */
    /* A multi-get or a dump answers only while less than out_limit bytes,
     * out_copy_limit copied bytes and out_segs_limit pieces wait to be
     * sent, so its answer never holds more than one connection's output
     * bound, whatever the line length. */
    size_t               out_limit;
    size_t               out_copy_limit;
    uint32_t             out_segs_limit;
    struct {
        proto_cmd_t      cmd;
        int64_t          exptime;
        uint64_t         nkeys;     /* keys answered so far */
        uint64_t         mark;      /* output queue before the first answer */
        const char      *resume;    /* DISPATCH_MORE_KEYS: next key */
    } mget;
    struct {                        /* a binary update waiting for its value */
        bool             on;
        uint8_t          opcode;
        uint32_t         opaque;
        bool             sasl;      /* ... or a SASL_AUTH/STEP's data */
    } bin;
    struct {                        /* -S: binary SASL (bin_sasl.h) */
        void            *state;
        bool             ok;        /* authenticated */
        char             mech[64];
        char            *data;      /* the client's data while it arrives */
    } sasl;
    struct {                        /* an ms waiting for its data block */
        char             echo[PROTO_META_OPAQUE_MAX + 12]; /* its O, k, c, s flags */
        const char      *echo_end;
        item_store_op_t  op;
        bool             has_cas;
        uint64_t         cas;
        bool             has_cas_in; /* E */
        uint64_t         cas_in;
        bool             vivify;    /* N with MA/MP: a missing item is created */
        bool             stale_ok;
        bool             key_binary;
    } ms;
    int                  fd;        /* the client's, for watch lines' cfd */
    dispatch_flash_notify_fn flash_notify; /* NULL: flash reads block */
    void                *flash_owner;
    struct flash_ring   *flash_ring; /* the worker's (flash.h); NULL: the I/O threads */
    void                *flash_conn;
    bool                 log_replies; /* -vv: this classic command's answers */
    logger_close_reason_t close_reason; /* for `watch connevents` */
    struct logger_watcher *watcher; /* DISPATCH_WATCH */
    struct {
        dispatch_dump_t  kind;      /* whose lines */
        uint64_t         classes[4]; /* class ids to walk (bit set) */
        uint64_t         left;      /* cachedump limit; 0 = no limit */
        uint32_t         flash_held; /* lines of flash items queued, not
                                       yet sent (dispatch_flash_dump) */
        struct item_cursor cur;
    } dump;
};

typedef void (*dispatch_shutdown_fn)(bool graceful);

void dispatch_set_shutdown(dispatch_shutdown_fn fn);
/* refresh_certs: core's TLS reload (0, or -1 with a reason in err). */
typedef int (*dispatch_refresh_certs_fn)(char *err, size_t cap);
void dispatch_set_refresh_certs(dispatch_refresh_certs_fn fn);
/* Output helpers for command handlers (dispatch.c, admin.c). */
void dispatch_reply(struct dispatch_ctx *d, proto_rsp_t rsp);
void dispatch_reply_line(struct dispatch_ctx *d, const char *text); /* + "\r\n" */
/* The same unless noreply (then only -vv's log line). */
void dispatch_reply_nr(struct dispatch_ctx *d, bool noreply, proto_rsp_t rsp);
void dispatch_reply_line_nr(struct dispatch_ctx *d, bool noreply, const char *text);
/* The answer in progress has reached the connection's output bound. */
bool dispatch_out_full(const struct dispatch_ctx *d);

/* The output queue's release function for queued values. */
void dispatch_ref_release(void *ref);

/*
 * Answer a fetch of it, a stub (item_is_flash), from flash: the bytes
 * queued from mark hit to mark miss are its hit's header, those from miss
 * on what a miss answers; send is how many of the value's bytes (with its
 * "\r\n": nbytes) the hit carries; key is the one it was fetched by (a
 * stub keeps none; the flash record is checked against it). Consumes the
 * reference to it.
 */
void dispatch_flash_reply(struct dispatch_ctx *d, struct item *it, const char *key,
                          size_t nkey, uint64_t hit,
                          uint64_t miss, uint32_t send);
/*
 * A dump's line of a flash item (it->stub), composed once the read of its
 * record brings its key back, and queued in order meanwhile (a waiting
 * answer); nothing if the record is gone or is another key's. Each holds
 * about 2 KB of heap until sent, and its read may queue ahead of other
 * workers' gets in the I/O threads' queue: a connection holds at most
 * DISPATCH_DUMP_FLASH_MAX of them (dispatch_out_full), as many reads in
 * flight as a dump's blocking reads once were per turn.
 */
#define DISPATCH_DUMP_LINE_MAX (PROTO_KEY_MAX * 3 + 160)
#define DISPATCH_DUMP_FLASH_MAX 16
void dispatch_flash_dump(struct dispatch_ctx *d, const struct item_dump *it);
bool dispatch_ref_is_flash(void *ref);
void dispatch_flash_release(void *ref);

dispatch_result_t dispatch_request(struct dispatch_ctx *d,
                                   const struct proto_req *req);
/* Parse error: queue req->error (unless noreply) and set up swallowing. */
dispatch_result_t dispatch_error(struct dispatch_ctx *d,
                                 const struct proto_req *req);
/*
 * A get line too long to buffer (PROTO_PART, proto_parse_keys) or an
 * answer paused at the output bound: answer the keys of req (a chunk of
 * the same line) up to the output bound. Returns DISPATCH_MORE_KEYS with
 * ctx->mget.resume at the first key left over, or DISPATCH_DONE when
 * every key of req is answered.
 */
dispatch_result_t dispatch_get_keys(struct dispatch_ctx *d,
                                    const struct proto_req *req);
/*
 * Read-ahead: prefetch the lookups of the one-key reads (get, mg, binary
 * GET/GETQ/GETK/GETKQ) at the head of buf together, when there are two or
 * more, as a multi-get's window is (item_probe_prefetch). Returns the bytes
 * of buf whose requests were looked at, so the caller does not look again.
 * Changes nothing; the requests are then parsed and answered as usual.
 */
size_t dispatch_prefetch(const char *buf, size_t len, bool binary);
/* Start a streamed multi-get with its first chunk (a PROTO_PART request). */
dispatch_result_t dispatch_get_begin(struct dispatch_ctx *d,
                                     const struct proto_req *req);
/*
 * The line ended: answer END (ERROR if it held no key at all), or, with
 * error set, take back whatever of the answer is still unsent and reply
 * the error line instead (as memcached, which answers a multi-get with a
 * bad key by the error alone; an answer that already outgrew the output
 * bound was partly sent, and the error line follows it).
 */
void dispatch_get_finish(struct dispatch_ctx *d, const char *error);
/* The data block is in ctx->data; store it and answer. */
void dispatch_data_done(struct dispatch_ctx *d);
/* The current piece is full: true if data/ndata now name the next one. */
bool dispatch_data_next(struct dispatch_ctx *d);

/* Shared by dispatch.c, dispatch_meta.c and dispatch_bin.c. */
/* A key lookup's stats detail record and `watch fetchers` line. */
void dispatch_note_fetch(struct dispatch_ctx *d, const char *key, size_t nkey,
                         struct item *it, item_miss_t miss);
/* Its counters: cmd_get if count_get, cmd_touch and the touch hit/miss
 * counters if touch (else get's), get_expired/get_flushed on a miss. */
void dispatch_count_fetch(struct dispatch_ctx *d, struct item *it, item_miss_t miss,
                          bool count_get, bool touch);
/* cas_hits/cas_badval (global and per class) or cas_misses, by st. */
void dispatch_count_cas(struct dispatch_ctx *d, item_status_t st, uint8_t cls);
/* incr_hits/decr_hits (global and per class) or the misses, by st. */
void dispatch_count_arith(struct dispatch_ctx *d, bool incr, item_status_t st,
                          uint8_t cls);
void dispatch_log_lookup(struct dispatch_ctx *d, const char *key, size_t nkey);
/* The value bytes (with "\r\n") of an item we hold a reference to; the
 * reference passes to the output queue. */
void dispatch_reply_data(struct dispatch_ctx *d, struct item *it);
/* Queue the value's first len bytes (copied if small, else by reference,
 * a piece per chunk) and give the caller's reference back. */
void dispatch_reply_bytes(struct dispatch_ctx *d, struct item *it, uint32_t len);
/* A data block goes into it's value bytes [0, len): data/ndata name the
 * first piece. */
void dispatch_fill_start(struct dispatch_ctx *d, struct item *it, uint32_t len);
/* Binary protocol requests (dispatch_bin.c). */
dispatch_result_t dispatch_bin(struct dispatch_ctx *d, const struct proto_req *req);
dispatch_result_t dispatch_bin_error(struct dispatch_ctx *d, const struct proto_req *req);
void dispatch_bin_data_done(struct dispatch_ctx *d);
/* Meta commands (dispatch_meta.c). */
dispatch_result_t dispatch_meta(struct dispatch_ctx *d, const struct proto_req *req);
void dispatch_meta_data_done(struct dispatch_ctx *d);
/* The connection is going away mid-command: drop pending state. */
void dispatch_abort(struct dispatch_ctx *d);

#endif
