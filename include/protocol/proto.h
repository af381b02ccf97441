/*
 * proto.h -- memcached ASCII protocol: parse requests, compose responses.
 *
 * The protocol module is pure: it turns bytes into a struct proto_req and
 * response fields into bytes. It never performs I/O and never touches
 * storage, so every path (including every error path) can be unit tested
 * on plain buffers. Behaviour follows the newest memcached (1.6.45) byte for
 * byte, except where notes/compatibility.md says why not.
 */
#ifndef SC_PROTO_H
#define SC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_KEY_MAX      250   /* longest key memcached accepts */
#define PROTO_LINE_MAX     2048  /* line without '\n' past this: close, or
                                  * stream it if it is a get (see PROTO_PART) */
#define PROTO_BINARY_MAGIC 0x80  /* first byte of a binary-protocol request */
#define PROTO_VALUE_HDR_MAX (PROTO_KEY_MAX + 96) /* "VALUE k f n c\r\n" */

typedef enum proto_cmd {
    PROTO_CMD_NONE = 0,
    PROTO_CMD_GET,
    PROTO_CMD_GETS,
    PROTO_CMD_GAT,
    PROTO_CMD_GATS,
    PROTO_CMD_SET,
    PROTO_CMD_ADD,
    PROTO_CMD_REPLACE,
    PROTO_CMD_APPEND,
    PROTO_CMD_PREPEND,
    PROTO_CMD_CAS,
    PROTO_CMD_TOUCH,
    PROTO_CMD_DELETE,
    PROTO_CMD_INCR,
    PROTO_CMD_DECR,
    PROTO_CMD_FLUSH_ALL,
    PROTO_CMD_VERSION,
    PROTO_CMD_VERBOSITY,
    PROTO_CMD_QUIT,
    PROTO_CMD_SHUTDOWN,
    PROTO_CMD_REFRESH_CERTS,
    PROTO_CMD_SASL_LIST,        /* binary only: SASL_LIST_MECHS */
    PROTO_CMD_SASL_AUTH,        /* binary only: mechanism in key, data in value */
    PROTO_CMD_SASL_STEP,
    PROTO_CMD_CACHE_MEMLIMIT,
    PROTO_CMD_STATS,
    PROTO_CMD_CONFIG,         /* slabcache's "config <name> <value...>" */
    PROTO_CMD_LRU_CRAWLER,    /* "lru_crawler <sub> ...": sub in req->sub */
    PROTO_CMD_SLABS,          /* "slabs reassign|automove ..." */
    PROTO_CMD_LRU,            /* "lru tune|mode|temp_ttl ..." */
    PROTO_CMD_EXTSTORE,       /* "extstore <knob> <value>": flash tuning */
    PROTO_CMD_WATCH,          /* "watch [fetchers mutations evictions ...]" */
    PROTO_CMD_MG,             /* meta commands: req->meta */
    PROTO_CMD_MS,
    PROTO_CMD_MD,
    PROTO_CMD_MA,
    PROTO_CMD_MN,
    PROTO_CMD_ME,
} proto_cmd_t;

typedef enum proto_status {
    PROTO_OK,     /* a request was parsed; *consumed bytes of line used */
    PROTO_AGAIN,  /* no complete line yet: read more, call again */
    PROTO_ERROR,  /* line consumed; reply req->error (see req->swallow) */
    PROTO_CLOSE,  /* hostile input (overlong line): close the connection */
    PROTO_PART,   /* part of a get/gets/gat/gats line too long to wait for:
                   * req holds its keys complete so far (*consumed covers
                   * them); continue with proto_parse_keys() */
} proto_status_t;

#define PROTO_META_OPAQUE_MAX 32  /* longest O token, its 'O' included */

/*
 * A meta command's flags (mg ms md ma me). Each flag is one letter,
 * maybe followed by a token ("T30", "Oabc"); the answer echoes some of
 * them in the order sent, so the flag text is kept as sent.
 */
struct proto_meta {
    uint64_t    seen;           /* proto_meta_has() */
    const char *flags;          /* the flag tokens as sent */
    const char *flags_end;
    int32_t     ttl;            /* T */
    int32_t     vivify_ttl;     /* N */
    int32_t     recache_ttl;    /* R */
    uint32_t    client_flags;   /* F */
    uint64_t    cas;            /* C */
    uint64_t    cas_in;         /* E: the CAS a change gives the item */
    uint64_t    delta;          /* D (ma; 1 when absent) */
    uint64_t    initial;        /* J (ma) */
    char        mode;           /* M, or 0 */
    bool        key_binary;     /* b: req->key is the decoded key below */
    char        key[PROTO_KEY_MAX];
};

static inline uint64_t
proto_meta_bit(char f)
{
    return f >= 'A' && f <= 'Z' ? 1ull << (f - 'A') :
           f >= 'a' && f <= 'z' ? 1ull << (26 + f - 'a') : 0;
}

static inline bool
proto_meta_has(const struct proto_meta *m, char f)
{
    return (m->seen & proto_meta_bit(f)) != 0;
}

/* The binary protocol: a 24-byte header, extras, key, value. */
#define PROTO_BIN_HDR_LEN 24
#define PROTO_BIN_RES_MAGIC 0x81

typedef enum proto_bin_status {
    PROTO_BIN_OK = 0x00,
    PROTO_BIN_KEY_ENOENT = 0x01,
    PROTO_BIN_KEY_EEXISTS = 0x02,
    PROTO_BIN_E2BIG = 0x03,
    PROTO_BIN_EINVAL = 0x04,
    PROTO_BIN_NOT_STORED = 0x05,
    PROTO_BIN_DELTA_BADVAL = 0x06,
    PROTO_BIN_AUTH_ERROR = 0x20,
    PROTO_BIN_AUTH_CONTINUE = 0x21,
    PROTO_BIN_UNKNOWN_COMMAND = 0x81,
    PROTO_BIN_ENOMEM = 0x82,
} proto_bin_status_t;

/* A binary request beyond what struct proto_req's common fields hold. */
struct proto_bin {
    bool        on;             /* the request came in binary */
    uint8_t     opcode;         /* as sent (quiet forms included) */
    bool        quiet;          /* a ...Q opcode */
    bool        with_key;       /* GETK, GETKQ, GATK, GATKQ: answer the key */
    bool        touch_only;     /* TOUCH: no value in the answer */
    uint32_t    opaque;         /* echoed, network order kept */
    uint64_t    cas;            /* the header's */
    uint64_t    initial;        /* incr/decr: created with this ... */
    bool        create;         /* ... unless the expiration is 0xffffffff */
    proto_bin_status_t status;  /* PROTO_ERROR: the answer */
    bool        close;          /* PROTO_ERROR: close after answering */
    uint32_t    swallow;        /* PROTO_ERROR: body bytes still to drop */
};

/*
 * One parsed request. Pointers point into the caller's buffer and are
 * valid only as long as that buffer is unchanged (a base64 meta key: as
 * long as the request).
 */
struct proto_req {
    proto_cmd_t cmd;
    const char *key;       /* first (or only) key */
    size_t      nkey;
    const char *keys;      /* get/gets/gat/gats: all keys, for proto_key_next */
    const char *keys_end;
    uint32_t    flags;     /* storage commands */
    int64_t     exptime;   /* storage, touch, gat: as sent (relative/absolute) */
    uint32_t    vlen;      /* storage: data block length without "\r\n" */
    uint64_t    cas;       /* cas: the unique value */
    uint64_t    delta;     /* incr/decr */
    int64_t     arg;       /* flush_all delay, verbosity level, memlimit MB */
    bool        has_arg;   /* whether arg was given */
    bool        noreply;
    const char *sub;       /* stats/config: rest of line after command */
    size_t      nsub;
    const char *error;     /* PROTO_ERROR: full line without "\r\n" */
    bool        swallow;   /* PROTO_ERROR: a vlen+2 byte data block follows
                            * and must be read and dropped */
    bool        swallow_line; /* proto_parse_keys: the line ended early
                            * (a NUL, or an error before its newline): drop
                            * input through the next '\n' */
    struct proto_bin bin;   /* binary protocol requests */
    struct proto_meta meta; /* PROTO_CMD_M*: last, not cleared per request */
};

/*
 * Parse one request line from buf[0..len). On PROTO_OK and PROTO_ERROR,
 * *consumed is the number of bytes of the command line including its
 * "\n" (a storage command's data block is NOT consumed: the caller reads
 * req->vlen + 2 more bytes). Lines end in "\n" or "\r\n". When a storage
 * command is rejected but its length field parses (key too long, bad
 * flags, exptime or cas), its data block is swallowed (req->swallow), as
 * memcached 1.6.45 does (1.6.18 parsed it as commands).
 */
proto_status_t proto_parse(const char *buf, size_t len, struct proto_req *req,
                           size_t *consumed);

/*
 * Continue a streamed multi-get (after PROTO_PART) on the bytes that follow
 * what was consumed. A key counts once a space, the newline or a NUL ends
 * it, so a key split across reads is simply waited for. Returns
 *   PROTO_PART   more keys (req->keys..keys_end, maybe none); the line goes on;
 *   PROTO_OK     the last keys: the line ended (*consumed includes its "\n";
 *                with req->swallow_line, a NUL ended it and the rest of the
 *                line is still to be dropped);
 *   PROTO_AGAIN  no complete key yet;
 *   PROTO_ERROR  a key over PROTO_KEY_MAX (req->error), possibly before the
 *                newline arrived (req->swallow_line).
 * Memory stays bounded whatever the line's length: the caller keeps only
 * the unfinished key (at most PROTO_KEY_MAX bytes).
 */
proto_status_t proto_parse_keys(const char *buf, size_t len,
                                struct proto_req *req, size_t *consumed);

/*
 * Iterate keys of a multi-key request: *cursor starts at req->keys.
 * Returns false when no keys remain.
 */
bool proto_key_next(const char **cursor, const char *end, const char **key,
                    size_t *nkey);

/*
 * Read-ahead for prefetching: the keys that the complete requests at the
 * head of buf will look up one at a time (ASCII: get/gets lines of one key
 * and mg lines, base64 keys excepted; binary: proto_bin_peek_keys), at
 * most max of them, stopping at the first incomplete request or one of
 * another kind (a multi-key get line batches its own keys). *scanned is
 * the bytes of the requests covered. Consumes and validates nothing: a
 * key reported here that the real parse rejects costs a useless prefetch.
 */
struct proto_key {
    const char *p;
    size_t      n;
};
size_t proto_peek_keys(const char *buf, size_t len, struct proto_key *keys,
                       size_t max, size_t *scanned);

/* Verify a storage command's data block: data[vlen..vlen+2) == "\r\n". */
bool proto_data_ok(const char *data_tail2);

/* Fixed response lines, each including "\r\n". */
typedef enum proto_rsp {
    PROTO_RSP_STORED,
    PROTO_RSP_NOT_STORED,
    PROTO_RSP_EXISTS,
    PROTO_RSP_NOT_FOUND,
    PROTO_RSP_DELETED,
    PROTO_RSP_TOUCHED,
    PROTO_RSP_END,
    PROTO_RSP_OK,
    PROTO_RSP_ERROR,
    PROTO_RSP_RESET,
    PROTO_RSP_BAD_CHUNK,
    PROTO_RSP_BAD_FORMAT,
    PROTO_RSP_TOO_LARGE,
    PROTO_RSP_OOM,
    PROTO_RSP_NON_NUMERIC,
    PROTO_RSP_INCR_OOM,
    PROTO_RSP_TOO_MANY_CONNS,
    PROTO_RSP_SHUTDOWN_DISABLED,
    PROTO_RSP_MAX
} proto_rsp_t;

/* The bytes of a fixed response; *len receives its length. */
const char *proto_rsp_str(proto_rsp_t rsp, size_t *len);

/*
 * Compose into buf (capacity cap). Each returns the bytes written, or 0 if
 * cap is too small (never writes past cap).
 */
size_t proto_compose_value(char *buf, size_t cap, const char *key, size_t nkey,
                           uint32_t flags, uint32_t vlen, bool with_cas,
                           uint64_t cas);                 /* "VALUE ...\r\n" */
size_t proto_compose_uint(char *buf, size_t cap, uint64_t v); /* "v\r\n" */
size_t proto_compose_stat(char *buf, size_t cap, const char *name,
                          const char *value);            /* "STAT n v\r\n" */
size_t proto_compose_line(char *buf, size_t cap, const char *text); /* "t\r\n" */
/* One `lru_crawler metadump` line (ends in "\n" only, as memcached's):
 * "key=K exp=E la=L cas=C fetch=yes|no cls=N size=S flags=F \n" (memcached
 * 1.6.45's, the space before the newline too); the key is URI-encoded, exp
 * is -1 for never. */
/* An mgdump line (memcached 1.6.45): "mg <key>\r\n", a binary key as
 * "mg <base64> b\r\n". */
size_t proto_compose_mgdump(char *buf, size_t cap, const char *key, size_t nkey,
                            bool binary);
size_t proto_compose_metadump(char *buf, size_t cap, const char *key,
                              size_t nkey, int64_t exp, uint64_t la,
                              uint64_t cas, bool fetched, unsigned cls,
                              uint64_t size, uint32_t flags);
/* memcached's URI encoding of a key (all but [A-Za-z0-9._~-] as %XX),
 * NUL-terminated; 0 if cap is too small. At most 3 * n + 1 bytes. */
size_t proto_uri_encode(char *buf, size_t cap, const char *key, size_t nkey);
/* One `stats cachedump` line: "ITEM K [V b; E s]\r\n". */
size_t proto_compose_cachedump(char *buf, size_t cap, const char *key,
                               size_t nkey, uint32_t vlen, uint64_t exp);

/* What a meta answer reports about an item (or, on a miss, the key). */
struct proto_meta_item {
    const char *key;
    size_t      nkey;
    bool        key_binary;     /* k: answer the key base64-encoded, " b" */
    uint32_t    vlen;           /* VA size, s */
    uint32_t    client_flags;   /* f */
    uint64_t    cas;            /* c */
    int64_t     ttl_before;     /* t: seconds left as before this request, -1 for never */
    int64_t     ttl;            /* t sent after the T: the TTL it set */
    int64_t     ttl_vivify;     /* t sent after the N that created it: N's TTL */
    bool        vivified;       /* N created it (a created item has no TTL before) */
    uint32_t    la;             /* l: seconds since last access */
    bool        fetched;        /* h: read before this request */
    bool        token_sent;     /* Z: a win was handed out before */
    bool        stale;          /* X */
    bool        won;            /* W: this client is to recache */
};

/*
 * A meta answer line: code ("VA", "HD", "EN", "NF", "NS", "EX", "MN"), then
 * for each flag of the request that is in echo (e.g. "Ok" on a miss,
 * "stcflhOk" for an mg hit) its value, in the order sent (t shows the TTL
 * as the flags before it left it: it->ttl_before, then it->ttl after a T,
 * it->ttl_vivify after the N of a vivified item, as memcached applies
 * flags in order), then Z X W as
 * set in it (may be NULL when echo needs no item figure), then "\r\n".
 * "VA" is followed by it->vlen. Returns bytes written, 0 if cap is short.
 */
size_t proto_compose_meta(char *buf, size_t cap, const char *code, const char *echo,
                          const struct proto_meta *m, const struct proto_meta_item *it);
/* me's answer: "ME <key> exp=E la=L cas=C fetch=yes|no cls=N size=S\r\n". */
size_t proto_compose_me(char *buf, size_t cap, const struct proto_meta_item *it,
                        int64_t exp, unsigned cls, uint64_t size);
#define PROTO_META_LINE_MAX 1024    /* room for any meta answer line */

/*
 * Parse one binary request from buf[0..len): header, extras and key (the
 * value of a storage command is not consumed: req->vlen bytes follow).
 * PROTO_AGAIN until the header, extras and key are there; PROTO_CLOSE on a
 * wrong magic byte; PROTO_ERROR with req->bin.status (and .close, or
 * .swallow bytes of body to drop) for a request memcached refuses. Every
 * opcode maps onto the ASCII command of the same meaning (req->cmd).
 */
/*
 * memcached's ASCII authentication (-Y). Until a connection has
 * authenticated, every line goes to proto_parse_auth(): PROTO_OK for
 * "set <key> <flags> <exptime> <bytes>" (only "set" and the byte count
 * matter; the count digits only) with *bytes; PROTO_ERROR for anything
 * else (memcached answers "CLIENT_ERROR unauthenticated"); PROTO_AGAIN
 * for a partial line; PROTO_CLOSE past PROTO_AUTH_JUNK_MAX bytes without
 * one, or for a line shorter than PROTO_AUTH_LINE_MIN bytes before its
 * '\n', as memcached 1.6.45 does. *consumed is the line with its '\n'.
 * The data block (bytes + "\r\n") then goes to proto_auth_token() for
 * "user pass".
 */
#define PROTO_AUTH_JUNK_MAX 2048
#define PROTO_AUTH_LINE_MIN 6
proto_status_t proto_parse_auth(const char *buf, size_t len, uint32_t *bytes,
                                size_t *consumed);

typedef enum proto_auth {
    PROTO_AUTH_OK,
    PROTO_AUTH_BAD_TERMINATION, /* "CLIENT_ERROR bad command line termination" */
    PROTO_AUTH_BAD_FORMAT,      /* "CLIENT_ERROR bad authentication token format" */
} proto_auth_t;

struct proto_auth_cred {
    const char *user;
    size_t      nuser;
    const char *pass;
    size_t      npass;
};
proto_auth_t   proto_auth_token(const char *data, size_t n, struct proto_auth_cred *cred);

proto_status_t proto_bin_parse(const char *buf, size_t len, struct proto_req *req,
                               size_t *consumed);
/* proto_peek_keys() for the binary protocol: GET, GETQ, GETK, GETKQ. */
size_t proto_bin_peek_keys(const char *buf, size_t len, struct proto_key *keys,
                           size_t max, size_t *scanned);
/*
 * A binary response header plus extras and key into buf (cap bytes); the
 * caller queues body_extra bytes of value after it (bodylen = extlen +
 * keylen + body_extra). Returns bytes written, 0 if cap is short.
 */
size_t proto_bin_compose(char *buf, size_t cap, uint8_t opcode, uint16_t status,
                         uint32_t opaque, uint64_t cas, const void *extras,
                         uint8_t extlen, const char *key, uint16_t keylen,
                         uint32_t body_extra);
/* Big-endian stores for binary answers' extras and values. */
void proto_bin_put32(unsigned char *p, uint32_t v);
void proto_bin_put64(unsigned char *p, uint64_t v);
/* An error answer: header and text (NULL: memcached's for the status). */
size_t proto_bin_compose_error(char *buf, size_t cap, uint8_t opcode,
                               uint16_t status, uint32_t opaque, const char *text);

/* Bounded decimal parsers (no locale, no strtol): whole string must match. */
bool proto_parse_u64(const char *s, size_t n, uint64_t *out);
bool proto_parse_i64(const char *s, size_t n, int64_t *out);

#endif
