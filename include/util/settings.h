/*
 * settings.h -- command line options, declared once in an X-macro table.
 *
 * Each row generates a field of struct settings, its default, its short
 * and long option and its help line, so adding an option is one line.
 * Flags are memcached's; invalid values are rejected (exit EX_USAGE)
 * rather than silently replaced by a default.
 */
#ifndef SC_SETTINGS_H
#define SC_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Option value kinds: how the argument is parsed and the field's C type. */
#define SETTINGS_CTYPE_INT   long
#define SETTINGS_CTYPE_OCT   long
#define SETTINGS_CTYPE_SIZE  long
#define SETTINGS_CTYPE_REAL  double
#define SETTINGS_CTYPE_FLAG  bool
#define SETTINGS_CTYPE_COUNT long
#define SETTINGS_CTYPE_STR   const char *

/*  field            kind   short long                   default      min  max         help */
#define SETTINGS_OPTIONS(X)                                                                 \
    X(port,            INT,   'p', "port",                11211,       0,   65535,       "TCP port to listen on") \
    X(listen_addr,     STR,   'l', "listen",              "127.0.0.1", 0,   0,           "interface to listen on") \
    X(udp_port,        INT,   'U', "udp-port",            0,           0,   65535,       "UDP port (0 = off; UDP is not served yet)") \
    X(socket_path,     STR,   's', "unix-socket",         NULL,        0,   0,           "UNIX socket path (disables TCP)") \
    X(socket_mask,     OCT,   'a', "unix-mask",           0700,        0,   0777,        "access mask for the UNIX socket, octal") \
    X(memory_mb,       INT,   'm', "memory-limit",        64,          1,   1048576,     "item memory in megabytes") \
    X(no_evict,        FLAG,  'M', "disable-evictions",   false,       0,   0,           "return errors instead of evicting") \
    X(max_conns,       INT,   'c', "conn-limit",          1024,        1,   1048576,     "max simultaneous connections") \
    X(threads,         INT,   't', "threads",             4,           1,   64,          "number of worker threads") \
    X(item_size_max,   SIZE,  'I', "max-item-size",       1048576,     1024, 1073741824, "max item size = slab size (k/m suffix)") \
    X(factor,          REAL,  'f', "slab-growth-factor",  1.08,        1,   100,         "chunk size growth factor (> 1.0)") \
    X(chunk_min,       INT,   'n', "slab-min-size",       48,          1,   1048576,     "minimum space for key+value+flags") \
    X(cas_disabled,    FLAG,  'C', "disable-cas",         false,       0,   0,           "disable CAS") \
    X(reqs_per_event,  INT,   'R', "max-reqs-per-event",  20,          1,   1000000,     "max requests handled per read event") \
    X(backlog,         INT,   'b', "listen-backlog",      1024,        1,   1048576,     "listen backlog") \
    X(shutdown_ok,     FLAG,  'A', "enable-shutdown",     false,       0,   0,           "enable the shutdown command") \
    X(flush_disabled,  FLAG,  'F', "disable-flush-all",   false,       0,   0,           "refuse the flush_all command") \
    X(dump_disabled,   FLAG,  'X', "disable-dumping",     false,       0,   0,           "refuse stats cachedump and lru_crawler metadump") \
    X(watch_disabled,  FLAG,  'W', "disable-watch",       false,       0,   0,           "refuse the watch command") \
    X(daemonize,       FLAG,  'd', "daemon",              false,       0,   0,           "run as a daemon") \
    X(pid_file,        STR,   'P', "pidfile",             NULL,        0,   0,           "write the process id to this file") \
    X(user,            STR,   'u', "user",                NULL,        0,   0,           "drop privileges to this user") \
    X(verbose,         COUNT, 'v', "verbose",             0,           0,   2,           "log startup and shutdown lines (-v; -vv adds nothing more yet)") \
    X(extended,        STR,   'o', "extended",            NULL,        0,   0,           "comma separated extended options") \
    X(protocol,        STR,   'B', "protocol",            "auto",      0,   0,           "protocol: auto (ASCII, or binary when a connection's first byte is 0x80), ascii or binary") \
    X(eviction,        STR,   0,   "eviction",            "lrc,lru",   0,   0,           "eviction policies in order: lru, random, lra, lrc, none")

struct settings {
#define SETTINGS_FIELD(name, kind, s, l, def, min, max, help) SETTINGS_CTYPE_##kind name;
    SETTINGS_OPTIONS(SETTINGS_FIELD)
#undef SETTINGS_FIELD
    /* derived at parse time */
    size_t   maxbytes;          /* memory_mb in bytes */
    uint32_t hashpower;         /* -o hashpower=N (initial table size) */
    bool     bg_evict;          /* -o bg_evict=0|1: background evictor */
    uint32_t bg_reserve;        /* -o bg_evict_reserve=N free chunks/class */
    uint32_t bg_batch;          /* -o bg_evict_batch=N items per lock hold */
    uint32_t idle_timeout;      /* -o idle_timeout=N: close idle conns (0 = never) */
    bool     slab_reassign;     /* -o [no_]slab_reassign: slabs may move */
    bool     binary_auto;       /* -B auto: a first byte 0x80 means binary */
    bool     binary_only;       /* -B binary */
    bool     lru_crawler;       /* -o [no_]lru_crawler: crawler thread runs */
    uint32_t crawler_sleep;     /* -o lru_crawler_sleep=us */
    uint32_t crawler_tocrawl;   /* -o lru_crawler_tocrawl=N */
    uint32_t watcher_logbuf;    /* -o watcher_logbuf_size=KB (bytes here) */
    long     automove;          /* -o slab_automove=N, -1: not given */
    bool     first_slab;        /* -o first_slab_past_limit=0|1 (slab.h) */
    bool     slab_rescue;       /* -o slab_rescue=0|1 (item.h) */
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

#endif
