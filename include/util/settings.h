/*
 * settings.h -- every option, command line and extended (-o), declared
 * once in an X-macro table.
 *
 * Each row generates a field of struct settings, its default, its parsing
 * (kind and range), its --help line and names the `stats settings` line
 * that reports it. `--help` and the parser are generated from the table;
 * the README's option table, the man page (slabcache.1) and `stats
 * settings` are checked against `--help` by tests/integration/
 * test_options.py. So adding an option is one row (and the module call
 * that uses it in src/main.c). Flags are memcached's; invalid values are
 * rejected (exit EX_USAGE) rather than silently replaced by a default.
 */
#ifndef SC_SETTINGS_H
#define SC_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Kinds: how the argument is parsed and the field's C type. Command line:
 * INT, OCT (octal), SIZE (k/m/g suffix), REAL, FLAG (no argument), COUNT
 * (-v, -vv), STR. Extended, the name given to -o: XNUM (name=N), XREAL
 * (name=R), XBOOL (name=0|1), XSWITCH (name turns it on, no_name off),
 * XSTR (name=text).
 */
#define SETTINGS_CTYPE_INT     long
#define SETTINGS_CTYPE_OCT     long
#define SETTINGS_CTYPE_SIZE    long
#define SETTINGS_CTYPE_REAL    double
#define SETTINGS_CTYPE_FLAG    bool
#define SETTINGS_CTYPE_COUNT   long
#define SETTINGS_CTYPE_STR     const char *
#define SETTINGS_CTYPE_XNUM    long
#define SETTINGS_CTYPE_XREAL   double
#define SETTINGS_CTYPE_XBOOL   bool
#define SETTINGS_CTYPE_XSWITCH bool
#define SETTINGS_CTYPE_XSTR    const char *

/*  field             kind     short name (long / -o)      default      min   max         stats settings       help */
#define SETTINGS_OPTIONS(X)                                                                                        \
    X(port,            INT,     'p', "port",                11211,       -1,   65535,       "tcpport",           "TCP port to listen on (0 = none, -1 = any free port)") \
    X(listen_addr,     STR,     'l', "listen",              "127.0.0.1", 0,    0,           "inter",             "interface(s) to listen on, comma-separated") \
    X(udp_port,        INT,     'U', "udp-port",            0,           -1,   65535,       "udpport",           "UDP port (0 = off, -1 = any free port)") \
    X(socket_path,     STR,     's', "unix-socket",         NULL,        0,    0,           "domain_socket",     "UNIX socket path (disables TCP)") \
    X(socket_mask,     OCT,     'a', "unix-mask",           0700,        0,    0777,        "umask",             "access mask for the UNIX socket, octal") \
    X(memory_mb,       INT,     'm', "memory-limit",        64,          1,    1048576,     "maxbytes",          "item memory in megabytes") \
    X(no_evict,        FLAG,    'M', "disable-evictions",   false,       0,    0,           "evictions",         "return errors instead of evicting") \
    X(max_conns,       INT,     'c', "conn-limit",          1024,        1,    1048576,     "maxconns",          "max simultaneous connections") \
    X(threads,         INT,     't', "threads",             4,           1,    64,          "num_threads",       "number of worker threads") \
    X(item_size_max,   SIZE,    'I', "max-item-size",       1048576,     1024, 1073741824,  "item_size_max",     "max item size = slab size (k/m suffix)") \
    X(factor,          REAL,    'f', "slab-growth-factor",  1.25,        1,    100,         "growth_factor",     "chunk size growth factor (> 1.0)") \
    X(chunk_min,       INT,     'n', "slab-min-size",       48,          1,    1048576,     "chunk_size",        "minimum space for key+value+flags: the first chunk is N + 48 bytes, as memcached's") \
    X(cas_disabled,    FLAG,    'C', "disable-cas",         false,       0,    0,           "cas_enabled",       "disable CAS") \
    X(reqs_per_event,  INT,     'R', "max-reqs-per-event",  20,          1,    1000000,     "reqs_per_event",    "max requests handled per read event") \
    X(backlog,         INT,     'b', "listen-backlog",      1024,        1,    1048576,     "tcp_backlog",       "listen backlog") \
    X(shutdown_ok,     FLAG,    'A', "enable-shutdown",     false,       0,    0,           "shutdown_command",  "enable the shutdown command") \
    X(flush_disabled,  FLAG,    'F', "disable-flush-all",   false,       0,    0,           "flush_enabled",     "refuse the flush_all command") \
    X(dump_disabled,   FLAG,    'X', "disable-dumping",     false,       0,    0,           "dump_enabled",      "refuse stats cachedump and lru_crawler metadump") \
    X(watch_disabled,  FLAG,    'W', "disable-watch",       false,       0,    0,           "watch_enabled",     "refuse the watch command") \
    X(daemonize,       FLAG,    'd', "daemon",              false,       0,    0,           NULL,                "run as a daemon") \
    X(pid_file,        STR,     'P', "pidfile",             NULL,        0,    0,           NULL,                "write the process id to this file") \
    X(user,            STR,     'u', "user",                NULL,        0,    0,           NULL,                "drop privileges to this user") \
    X(verbose,         COUNT,   'v', "verbose",             0,           0,    2,           "verbosity",         "log startup and shutdown lines (-v); -vv: every command and answer, as memcached") \
    X(extended,        STR,     'o', "extended",            NULL,        0,    0,           NULL,                "comma separated extended options (the -o rows below)") \
    X(ssl_enabled,     FLAG,    'Z', "enable-ssl",          false,       0,    0,           "ssl_enabled",       "TLS on the client listeners (-o ssl_*; an -l entry notls:ADDR:PORT stays plain)") \
    X(sasl,            FLAG,    'S', "enable-sasl",         false,       0,    0,           "auth_enabled_sasl", "SASL authentication over the binary protocol (Cyrus SASL, service memcached; SASL_CONF_PATH)") \
    X(auth_file,       STR,     'Y', "auth-file",           NULL,        0,    0,           "auth_enabled_ascii", "memcached's ASCII authentication: user:password lines; clients send \"set <any> 0 0 <n>\" with \"user pass\" as data") \
    X(protocol,        STR,     'B', "protocol",            "auto",      0,    0,           "binding_protocol",  "auto (ASCII, or binary when a connection's first byte is 0x80), ascii or binary") \
    X(memory_file,     STR,     'e', "memory-file",         NULL,        0,    0,           "memory_file",       "warm restart: slabs live in this file (on tmpfs), saved by a graceful stop (SIGUSR1, shutdown graceful) and found again by the next start with the same options; also -o memory_file=PATH") \
    X(admin_port,      INT,     0,   "admin-port",          0,           0,    65535,       "admin_port",        "admin HTTP port: GET /stats (JSON), /metrics (Prometheus), /health; 0 = off") \
    X(admin_listen,    STR,     0,   "admin-listen",        "127.0.0.1", 0,    0,           "admin_listen",      "address the admin port listens on (not loopback: --admin-token or --admin-insecure required)") \
    X(admin_token,     STR,     0,   "admin-token",         NULL,        0,    0,           "admin_token",       "a file holding the token every admin endpoint then requires (Authorization: Bearer, or as a Basic password)") \
    X(admin_insecure,  FLAG,    0,   "admin-insecure",      false,       0,    0,           "admin_insecure",    "let the admin port listen on a non-loopback address without a token") \
    X(eviction,        STR,     0,   "eviction",            "auto",      0,    0,           "evictions_policy",  "eviction policies in order: auto, lru, random, lra, lrc, none") \
    X(hashpower,       XNUM,    0,   "hashpower",           16,          12,   32,          "hashpower_init",    "initial hash table size: 2^N buckets") \
    X(slab_reassign,   XSWITCH, 0,   "slab_reassign",       true,        0,    1,           "slab_reassign",     "slabs may move between classes (no_slab_reassign: item-level eviction only)") \
    X(automove,        XNUM,    0,   "slab_automove",       -1,          0,    2,           "slab_automove",     "memcached's mover levels as eviction stacks: 0 lru, 1 auto, 2 lrc (default: --eviction)") \
    X(automove_window, XNUM,    0,   "slab_automove_window", 10,         3,    1800,        "slab_automove_window", "how much history auto weighs, as memcached's automover window: its window of recent gets is N/10 of the default (10, memcached 1.6.45's), so a larger N moves slabs later and surer; also slabs automove window N") \
    X(first_slab,      XBOOL,   0,   "first_slab_past_limit", true,      0,    1,           "first_slab_past_limit", "past -m, a group of classes within 1.4x with no slab gets one, as memcached's first page") \
    X(slab_chunk_max,  XNUM,    0,   "slab_chunk_max",      0,           0,    1073741824,  "slab_chunk_max",    "largest slab chunk: kilobytes from 1 to 1024 (memcached 1.6.45), bytes above (1.6.18), dividing -I; larger items are chained from chunks of it (0: -I, nothing chained; memcached's is 512 KB)") \
    X(slab_rescue,     XBOOL,   0,   "slab_rescue",         true,        0,    1,           "slab_rescue",       "a slab emptied for another class moves its recently read items to its class's coldest chunks") \
    X(lru_crawler,     XSWITCH, 0,   "lru_crawler",         true,        0,    1,           "lru_crawler",       "run the crawler thread that lru_crawler crawl uses") \
    X(crawler_sleep,   XNUM,    0,   "lru_crawler_sleep",   100,         0,    1000000,     "lru_crawler_sleep", "crawler pause between batches, microseconds") \
    X(crawler_tocrawl, XNUM,    0,   "lru_crawler_tocrawl", 0,           0,    4294967295,  "lru_crawler_tocrawl", "items the crawler looks at per class and run (0 = all)") \
    X(watcher_logbuf_kb, XNUM,  0,   "watcher_logbuf_size", 256,         1,    1048576,     "watcher_logbuf_size", "each watch connection's log buffer, KB") \
    X(idle_timeout,    XNUM,    0,   "idle_timeout",        0,           0,    2147483647,  "idle_timeout",      "close connections idle for N seconds (0 = never)") \
    X(bg_evict,        XBOOL,   0,   "bg_evict",            false,       0,    1,           "bg_evict",          "background evictor: keep free chunks in classes that allocate while memory is full") \
    X(bg_reserve,      XNUM,    0,   "bg_evict_reserve",    64,          1,    1000000,     "bg_evict_reserve",  "free chunks the background evictor keeps per class") \
    X(bg_batch,        XNUM,    0,   "bg_evict_batch",      32,          1,    10000,       "bg_evict_batch",    "items the background evictor frees per class-lock hold") \
    X(ssl_chain_cert,  XSTR,    0,   "ssl_chain_cert",      NULL,        0,    0,           "ssl_chain_cert",    "TLS: the server's certificate chain, PEM") \
    X(ssl_key,         XSTR,    0,   "ssl_key",             NULL,        0,    0,           "ssl_key",           "TLS: the server's private key") \
    X(ssl_ca_cert,     XSTR,    0,   "ssl_ca_cert",         NULL,        0,    0,           "ssl_ca_cert",       "TLS: CA certificates that sign client certificates, PEM") \
    X(ssl_verify_mode, XNUM,    0,   "ssl_verify_mode",     0,           0,    3,           "ssl_verify_mode",   "TLS client certificates: 0 not asked, 1 checked if sent, 2 required, 3 required once") \
    X(ssl_keyformat,   XNUM,    0,   "ssl_keyformat",       1,           1,    2,           "ssl_keyformat",     "TLS key file format: 1 PEM, 2 ASN.1") \
    X(ssl_ciphers,     XSTR,    0,   "ssl_ciphers",         NULL,        0,    0,           "ssl_ciphers",       "TLS: OpenSSL cipher list (TLS 1.2 and below)") \
    X(ssl_min_version, XNUM,    0,   "ssl_min_version",     2,           0,    3,           "ssl_min_version",   "TLS: lowest version, 0 1.0, 1 1.1, 2 1.2, 3 1.3") \
    X(ssl_wbuf_size,   XNUM,    0,   "ssl_wbuf_size",       16,          1,    1024,        "ssl_wbuf_size",     "TLS: per-connection write buffer, KB (one record per fill)") \
    X(ssl_session_cache, XSWITCH, 0, "ssl_session_cache",   false,       0,    1,           "ssl_session_cache", "TLS: server-side session cache, for resumption") \
    X(ext_path,        XSTR,    0,   "ext_path",            NULL,        0,    0,           "ext_path",          "flash tier: FILE:SIZE (k/m/g/t suffix), a file or device that keeps items evicted from RAM; emptied at start, kept by a warm restart (-e)") \
    X(ext_item_size,   XNUM,    0,   "ext_item_size",       512,         0,    1073741824,  "ext_item_size",     "flash tier: smallest value, in bytes, kept on flash when evicted") \
    X(ext_threads,     XNUM,    0,   "ext_threads",         1,           1,    64,          "ext_threads",       "flash tier: I/O threads reading flash where a worker has no io_uring (ext_io_uring=0, or none in the kernel)") \
    X(ext_io_depth,    XNUM,    0,   "ext_io_depth",        0,           0,    4096,        "ext_io_depth",      "flash tier: reads in flight per worker's io_uring (0: 64); with ext_io_uring=0, blocking readers per I/O thread (0: 1; ext_threads x ext_io_depth, at most 64)") \
    X(ext_io_uring,    XBOOL,   0,   "ext_io_uring",        true,        0,    1,           "ext_io_uring",      "flash tier: each worker reads flash through its own io_uring, without a thread hop (0: through the ext_threads I/O threads)") \
    X(ext_page_size,   XNUM,    0,   "ext_page_size",       0,           0,    65536,       NULL,                "flash tier: flash space is reclaimed this many megabytes at a time, a multiple of ext_wbuf_size (0: one write buffer)") \
    X(ext_wbuf_size,   XNUM,    0,   "ext_wbuf_size",       1,           1,    64,          NULL,                "flash tier: write buffer = flash slab, in megabytes (stats settings shows bytes)") \
    X(ext_item_age,    XNUM,    0,   "ext_item_age",        4294967295,  0,    4294967295,  "ext_item_age",      "flash tier: items idle more than this many seconds are written to flash before memory runs out (default: only when evicted)") \
    X(ext_recache_rate, XNUM,   0,   "ext_recache_rate",    2000,        0,    4294967295,  "ext_recache_rate",  "flash tier: every Nth value read from flash is copied back to RAM (0 = never, ext_recache_hot included)") \
    X(ext_recache_hot, XBOOL,   0,   "ext_recache_hot",     true,        0,    1,           "ext_recache_hot",   "flash tier: a value read from flash again within about the last 65,536 flash reads is copied back to RAM too (ext_recache_rate=0 turns both off)") \
    X(ext_compact_under, XNUM,  0,   "ext_compact_under",   1,           1,    65536,       "ext_compact_under", "flash tier: the oldest page is reclaimed (its read records rewritten) once fewer than this many pages are free, so N-1 stay free ahead of the writer") \
    X(ext_max_frag,    XREAL,   0,   "ext_max_frag",        0.25,        0,    1,           "ext_max_frag",      "flash tier: share of a page its read records may fill when rewritten as it is reclaimed (0: none)") \
    X(ext_drop_unread, XSWITCH, 0,   "ext_drop_unread",     false,       0,    1,           "ext_drop_unread",   "flash tier: items never read are dropped, not written to flash")

struct settings {
#define SETTINGS_FIELD(name, kind, s, l, def, min, max, stat, help) SETTINGS_CTYPE_##kind name;
    SETTINGS_OPTIONS(SETTINGS_FIELD)
#undef SETTINGS_FIELD
    /* derived at parse time */
    size_t   maxbytes;          /* memory_mb in bytes */
    bool     binary_auto;       /* -B auto: a first byte 0x80 means binary */
    bool     binary_only;       /* -B binary */
    bool     protocol_given;    /* -B was given (memcached refuses -S -B auto) */
    long     temporary_ttl;     /* -o temporary_ttl=N: memcached's temporary LRU */
    bool     temp_lru;          /* ... given: items with a TTL up to N are not evicted */
    bool     lru_legacy;        /* -o no_modern or no_lru_maintainer: memcached's
                                 * unsegmented LRU (item.h: item_set_legacy_lru) */
    bool     measure_lazily;    /* -o no_modern: nothing measured until a stack
                                 * that moves slabs is asked for */
    bool     no_lru_maintainer; /* -o no_lru_maintainer: `stats` leaves out the
                                 * fields of memcached's maintainer thread, as
                                 * memcached does (slabcache runs none) */
};

extern struct settings settings;

typedef enum settings_rstatus {
    SETTINGS_OK,
    SETTINGS_EXIT_OK,           /* -h or -V printed: exit 0 */
    SETTINGS_USAGE,             /* invalid: message printed, exit 64 */
} settings_rstatus_t;

/* Reset to defaults; then parse argv. Messages go to stdout/stderr. */
void               settings_defaults(void);
settings_rstatus_t settings_parse(int argc, char **argv);
void               settings_usage(void);
/*
 * Row i of the table for `stats settings`: its name there (*stat, NULL if
 * none) and its value as text (numbers in decimal, -a's in octal, flags
 * and switches yes/no). false past the last row. stats.c prints every row
 * memcached does not, so a new option's line needs no code.
 */
bool               settings_row_stat(size_t i, const char **stat, char *buf, size_t cap);

#endif
