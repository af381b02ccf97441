/*
 * main.c -- slabcache: a memcached-compatible cache with slab-level
 * eviction. Glue only: parse settings, set up each module in dependency
 * order, run the main loop (listener, clock, signals), tear down in
 * reverse so sanitizer builds can prove nothing leaks.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "admin.h"
#include "admin_http.h"
#include "auth.h"
#include "bin_sasl.h"
#include "assoc.h"
#include "clock.h"
#include "config.h"
#ifdef HAVE_TLS
#include "tls.h"
#endif
#include "conn.h"
#include "crawler.h"
#include "dispatch.h"
#include "evict.h"
#include "sizing.h"
#include "flash.h"
#include "item.h"
#include "listener.h"
#include "history.h"
#include "log.h"
#include "logger.h"
#include "restart.h"
#include "settings.h"
#include "slab.h"
#include "stats.h"
#include "worker.h"

#ifdef HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>

/*
 * jemalloc's thread caches and per-CPU arenas pay off where a program
 * allocates per request. slabcache does not (items live in slabs, request
 * state in per-worker pools): they would only hold resident memory
 * outside -m, filled per size class a thread ever asks for. One arena,
 * no thread caches. What is freed in large blocks (a probation FIFO's
 * ring after it grows, a connection's large buffers) goes back to the
 * system within jemalloc's decay time: that needs its
 * background thread, since an idle server (or one whose requests do not
 * allocate) never calls into the arena that would purge it. MALLOC_CONF
 * in the environment still overrides.
 */
const char *malloc_conf = "narenas:1,tcache:false,background_thread:true";

/* jemalloc's background thread does not survive fork (-d): start it again
 * in the daemon, unless MALLOC_CONF turned it off. */
static void
allocator_after_fork(void)
{
    bool on = false;
    size_t len = sizeof(on);

    if (mallctl("opt.background_thread", &on, &len, NULL, 0) == 0 && on) {
        (void)mallctl("background_thread", NULL, NULL, &on, sizeof(on));
    }
}
#else
static void
allocator_after_fork(void)
{
}
#endif

static struct event_base *main_base;
static bool               graceful;    /* SIGUSR1 or `shutdown graceful` */

/*
 * `shutdown` arrives on a worker thread; the main loop is told the way a
 * user would tell it, by SIGTERM, so libevent needs no cross-thread locks.
 */
static void
on_shutdown(bool graceful_stop)
{
    kill(getpid(), graceful_stop ? SIGUSR1 : SIGTERM);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    log_info("signal %d: shutting down", (int)sig);
    graceful = graceful || sig == SIGUSR1;
    event_base_loopbreak(main_base);
}

/* SIGHUP: reload the -Y credentials, as memcached does. */
static void
on_hangup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    if (settings.auth_file != NULL && auth_load(settings.auth_file) != AUTH_OK) {
        log_error("SIGHUP: could not reload the auth file %s; keeping the old one",
                  settings.auth_file);
    }
}

/* -Y: read the credentials before anything listens; 0 or an exit code. */
static int
auth_setup(void)
{
    if (settings.auth_file == NULL) {
        return 0;
    }
    switch (auth_load(settings.auth_file)) {
    case AUTH_OK:
        return 0;
    case AUTH_OPEN_FAILED:
        fprintf(stderr, "Could not open authfile [%s] for reading, error %s\n",
                settings.auth_file, strerror(errno));
        break;
    case AUTH_MALFORMED:
        fprintf(stderr, "Authfile [%s] has a malformed entry. Should be 'user:password'\n",
                settings.auth_file);
        break;
    case AUTH_TOO_MANY:
        fprintf(stderr, "Authfile [%s] has more than %d entries\n", settings.auth_file,
                AUTH_ENTRIES_MAX);
        break;
    case AUTH_NO_MEMORY:
        fprintf(stderr, "Out of memory reading password file: %s\n", settings.auth_file);
        break;
    }
    return EXIT_FAILURE;
}

/* Once a second: the clock; slabs past a lowered cache_memlimit go back
 * to the system even while nothing is stored, and memory a class stopped
 * using goes to the global pool (evict_tick). */
static void
on_clock(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    clock_tick();
    evict_tick(clock_now());
    history_sample((int64_t)time(NULL));
}

/*
 * Descriptors beyond -c: stdio, listeners (up to 16), two per worker pipe,
 * three per libevent base (epoll and its notify pipe; the main loop's and
 * each worker's), and one more for the connection refused at -c (it is
 * accepted, told "ERROR Too many open connections", and closed).
 */
static uint32_t
reserved_fds(void)
{
    uint32_t t = (uint32_t)settings.threads;

    return 3 + 16 + 2 * t + 3 * (t + 1) + 1;
}

/*
 * Each connection needs a descriptor: make room for -c of them. When the
 * hard limit is lower, -c is lowered to fit, with a warning (memcached
 * refuses to start instead; a drop-in serving slightly fewer connections
 * beats one that does not start under a stock `ulimit -n`). Nothing left
 * for clients at all: refuse, exit 71.
 */
static int
fit_fd_limit(void)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)settings.max_conns + reserved_fds();

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "slabcache: cannot read the open files limit: %s\n", strerror(errno));
        return EX_OSERR;
    }
    if (rl.rlim_cur >= want) {
        return 0;
    }
    rl.rlim_cur = want;
    if (rl.rlim_max < want) {
        rl.rlim_max = want;     /* root may raise the hard limit too */
    }
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
        return 0;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur <= reserved_fds()) {
        fprintf(stderr, "slabcache: the open files limit (%llu) leaves no descriptor for "
                "clients: raise ulimit -n\n", (unsigned long long)rl.rlim_cur);
        return EX_OSERR;
    }
    long fit = (long)(rl.rlim_cur - reserved_fds());
    fprintf(stderr, "slabcache: warning: open files limit %llu: -c lowered from %ld to %ld\n",
            (unsigned long long)rl.rlim_cur, settings.max_conns, fit);
    settings.max_conns = fit;
    return 0;
}

/*
 * Run as root only with -u, as memcached: exit 64 without it. With it, the
 * UNIX socket (created while still root; memcached, which drops privileges
 * first, creates it as the user) is given to the user, then supplementary
 * groups, gid and uid are dropped in that order, and the drop is checked:
 * if root could be regained, slabcache refuses to go on.
 */
static int
drop_privileges(void)
{
    if (getuid() != 0 && geteuid() != 0) {
        return 0;
    }
    if (settings.user == NULL) {
        fprintf(stderr, "can't run as root without the -u switch\n");
        return EX_USAGE;
    }
    struct passwd *pw = getpwnam(settings.user);
    if (pw == NULL) {
        fprintf(stderr, "can't find the user %s to switch to\n", settings.user);
        return EX_NOUSER;
    }
    if (settings.socket_path != NULL &&
        chown(settings.socket_path, pw->pw_uid, pw->pw_gid) != 0) {
        fprintf(stderr, "slabcache: cannot give %s to user '%s': %s\n",
                settings.socket_path, settings.user, strerror(errno));
        return EX_OSERR;
    }
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 ||
        setuid(pw->pw_uid) != 0) {
        fprintf(stderr, "failed to assume identity of user %s: %s\n",
                settings.user, strerror(errno));
        return EX_OSERR;
    }
    if (pw->pw_uid != 0 && (setuid(0) == 0 || seteuid(0) == 0 ||
                            getgroups(0, NULL) > 0)) {
        fprintf(stderr, "slabcache: could regain root after becoming %s: refusing to run\n",
                settings.user);
        return EX_OSERR;
    }
    return 0;
}

static void
write_pidfile(void)
{
    FILE *f;

    if (settings.pid_file == NULL) {
        return;
    }
    f = fopen(settings.pid_file, "w");
    if (f == NULL) {
        log_error("cannot write pid file %s: %s", settings.pid_file, strerror(errno));
        return;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
}

static int flash_start(bool keep);
static int flash_age_start(void);

/* -e: the memory file, and what a graceful stop saved beside it. */
static int                 memory_fd = -1;
static struct restart_meta saved;

/* Classes as memcached's for the same -n, -f and slab_chunk_max
 * (SLAB_MC_HEADER): an item of slabcache's smaller header fits the
 * class memcached would put it in, or a smaller one. */
static int
slabs_setup(void)
{
    if (settings.ext_path != NULL) {
        slab_add_small_class(item_stub_size());     /* flash stubs fit it exactly */
    }
    slab_set_file(memory_fd);
    if (slab_setup_chunked(settings.maxbytes, (size_t)settings.item_size_max,
                           settings.factor, (size_t)settings.chunk_min, SLAB_MC_HEADER,
                           (size_t)settings.slab_chunk_max) != SLAB_OK) {
        fprintf(stderr, "slabcache: invalid slab geometry (-I/-f/-n/-o slab_chunk_max)\n");
        return -1;
    }
    if (item_setup(!settings.cas_disabled) != 0) {
        fprintf(stderr, "slabcache: out of memory at start-up\n");
        return -1;
    }
    return 0;
}

/*
 * -e PATH: read what the last graceful stop saved (restart.h): *warm if
 * saved holds it. 0, or an exit code. (memcached 1.6.45 refuses a memory
 * file with extstore; slabcache keeps its flash tier too.)
 */
static int
memory_file_open(bool *warm)
{
    char err[256];

    *warm = false;
    if (settings.memory_file == NULL) {
        return 0;
    }
    /* Locked first: a second server on the same file would empty it
     * under the first (and take its metadata). */
    memory_fd = restart_open_file(settings.memory_file);
    if (memory_fd < 0) {
        fprintf(stderr, "slabcache: cannot open the memory file %s: %s\n",
                settings.memory_file,
                errno == EWOULDBLOCK ? "another process uses it" : strerror(errno));
        return EX_OSERR;
    }
    restart_status_t st = restart_read(settings.memory_file, &saved, err, sizeof(err));
    if (st == RESTART_BAD) {
        fprintf(stderr, "slabcache: cannot restart from %s.meta: %s\n",
                settings.memory_file, err);
        return EXIT_FAILURE;
    }
    if (st == RESTART_NONE) {
        log_warn("memory file %s: no metadata from a graceful stop, starting cold",
                 settings.memory_file);
        return restart_empty_file(memory_fd) == 0 ? 0 : EX_OSERR;
    }
    if (err[0] != '\0') {
        log_warn("memory file %s: %s, starting cold", settings.memory_file, err);
        restart_meta_free(&saved);
        return restart_empty_file(memory_fd) == 0 ? 0 : EX_OSERR;
    }
    *warm = true;
    return 0;
}

/* The geometry moved since the stop: start cold, the memory file emptied. */
static int
memory_file_cold(const char *why)
{
    log_warn("memory file %s: %s, starting cold", settings.memory_file, why);
    restart_meta_free(&saved);
    item_teardown();
    slab_teardown();
    if (restart_empty_file(memory_fd) != 0) {
        return EX_OSERR;
    }
    return slabs_setup() == 0 ? 0 : EXIT_FAILURE;
}

/* Warm: the flash tier's slots, then every item the file holds. */
static int
memory_file_restore(void)
{
    struct item_restored r;
    const char *flash = "";

    uint64_t t0 = clock_mono_ns();
    clock_restore((time_t)saved.started);
    item_state_restore(&saved.items);
    if (flash_enabled()) {
        flash = saved.has_flash && flash_state_restore(&saved.flash) ? "" :
                "; the flash file did not match what was saved: it starts empty";
    }
    if (assoc_setup(saved.hashpower) != 0 || !slab_restore_table(saved.nslabs, saved.cls)) {
        fprintf(stderr, "slabcache: cannot restore %u slabs from %s\n", saved.nslabs,
                settings.memory_file);
        restart_meta_free(&saved);
        return EXIT_FAILURE;
    }
    slab_room_classes_set(saved.room_classes);
    item_restore(saved.nslabs, &r);
    log_warn("memory file %s: restored %llu items (%llu on flash, %llu bytes) in %u slabs "
             "in %.1f ms, stopped %llds ago; %llu expired, %llu not whole (dropped)%s",
             settings.memory_file, (unsigned long long)r.items, (unsigned long long)r.stubs,
             (unsigned long long)r.bytes, saved.nslabs, (double)(clock_mono_ns() - t0) / 1e6,
             (long long)(time(NULL) - saved.stopped), (unsigned long long)r.expired,
             (unsigned long long)r.broken, flash);
    restart_meta_free(&saved);
    return 0;
}

static int
storage_setup(void)
{
    char why[256] = "";
    bool warm;
    int rc = memory_file_open(&warm);

    if (rc != 0) {
        return rc;
    }
    if (slabs_setup() != 0) {
        return -1;
    }
    if (warm && !restart_compatible(&saved, settings.maxbytes, why, sizeof(why))) {
        rc = memory_file_cold(why);
        if (rc != 0) {
            return rc;
        }
        warm = false;
    }
    if (!warm && assoc_setup(settings.hashpower) != 0) {
        fprintf(stderr, "slabcache: out of memory at start-up\n");
        return -1;
    }
    slab_set_first_past_limit(settings.first_slab);
    item_set_slab_rescue(settings.slab_rescue);
    item_set_legacy_lru(settings.lru_legacy);
    item_set_temporary_ttl(settings.temp_lru ? (uint32_t)settings.temporary_ttl : 0);
    for (uint8_t c = 1; log_enabled(LOG_LEVEL_DEBUG) && c <= slab_class_count(); c++) {
        log_debug("slab class %3u: chunk size %9u perslab %7u", (unsigned)c,
                  (unsigned)slab_class_chunk_size(c), (unsigned)slab_class_perslab(c));
    }
    /* The flash tier before the items: their stubs point into it. */
    rc = flash_start(warm && saved.has_flash);
    if (rc == 0 && warm) {
        rc = memory_file_restore();
    }
    return rc != 0 ? rc : flash_age_start();
}

/* -o ext_path: the flash tier. One line and an exit status on any error:
 * it never starts half-working. keep: a warm restart's, whose stubs point
 * into the file. */
static int
flash_start(bool keep)
{
    char path[4096], err[512];
    struct flash_options o = {
        .slab_size = (uint32_t)settings.ext_wbuf_size << 20,
        .page_size = (uint64_t)settings.ext_page_size << 20,
        .wbufs = 4,
        .free_pages = (uint32_t)settings.ext_compact_under - 1,
        .rewrite_share = settings.ext_max_frag,
        .io_threads = (uint32_t)settings.ext_threads,
        /* with rings, ext_io_depth is theirs; the threads are the fallback */
        .io_depth = settings.ext_io_uring ? 1 : (uint32_t)settings.ext_io_depth,
        .min_value = (uint32_t)settings.ext_item_size,
        .drop_unread = settings.ext_drop_unread,
        .keep = keep,
        .path = path,
    };

    if (settings.ext_path == NULL) {
        return 0;
    }
    if (flash_parse_path(settings.ext_path, path, sizeof(path), &o.size, err,
                         sizeof(err)) != FLASH_OK) {
        fprintf(stderr, "slabcache: %s\n", err);
        return EX_USAGE;
    }
    flash_rstatus_t st = flash_setup(&o, err, sizeof(err));
    if (st != FLASH_OK) {
        fprintf(stderr, "slabcache: %s\n", err);
        return st == FLASH_EINVAL ? EX_USAGE : EX_OSERR;
    }
    item_flash_attach();
    return 0;
}

/* ext_item_age: once the items are in place. */
static int
flash_age_start(void)
{
    if (settings.ext_path != NULL && settings.ext_item_age < UINT32_MAX &&
        item_flash_age_start((uint32_t)settings.ext_item_age) != 0) {
        fprintf(stderr, "slabcache: cannot start the ext_item_age thread\n");
        return EX_OSERR;
    }
    return 0;
}

static void
storage_teardown(void)
{
    item_flash_age_stop();
    flash_teardown();
    item_teardown();
    assoc_teardown();
    slab_teardown();
    if (memory_fd >= 0) {
        close(memory_fd);
        memory_fd = -1;
    }
}

/*
 * A graceful stop with -e: everything that touches the cache has stopped;
 * save what indexes the slabs (restart.h). The next start finds it.
 */
static int
memory_file_save(void)
{
    if (!graceful || memory_fd < 0) {
        return 0;
    }
    uint64_t t0 = clock_mono_ns();
    /* The flash tier's last buffer written, its writer and ager stopped:
     * nothing changes the stubs or the slots from here. */
    item_flash_age_stop();
    flash_quiesce();
    if (restart_save(settings.memory_file, settings.maxbytes) != 0) {
        log_error("memory file %s: cannot save its metadata: %s; the next start is cold",
                  settings.memory_file, strerror(errno));
        return EXIT_FAILURE;
    }
    log_warn("memory file %s: %u slabs saved in %.1f ms", settings.memory_file,
             slab_table_count(), (double)(clock_mono_ns() - t0) / 1e6);
    return 0;
}

/*
 * --admin-token FILE: the token, one line (trailing whitespace dropped),
 * read before privileges are dropped. A non-loopback --admin-listen needs
 * it, or --admin-insecure. 0, or an exit code.
 */
#define ADMIN_TOKEN_MAX 1024

static int
admin_token_read(char *out, size_t cap)
{
    out[0] = '\0';
    if (settings.admin_port == 0) {
        return 0;
    }
    if (settings.admin_token == NULL) {
        if (!settings.admin_insecure && !admin_http_loopback(settings.admin_listen)) {
            fprintf(stderr, "slabcache: --admin-listen %s is not a loopback address: give "
                    "--admin-token FILE (or --admin-insecure)\n", settings.admin_listen);
            return EX_USAGE;
        }
        return 0;
    }
    FILE *f = fopen(settings.admin_token, "r");
    size_t n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
    bool whole = f != NULL && feof(f);
    if (f != NULL) {
        fclose(f);
    }
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' ||
                     out[n - 1] == '\t')) {
        out[--n] = '\0';
    }
    bool printable = n > 0 && whole;
    for (size_t i = 0; i < n; i++) {
        printable &= out[i] > ' ' && out[i] < 0x7f;
    }
    if (!printable) {
        fprintf(stderr, "slabcache: --admin-token %s: %s\n", settings.admin_token,
                f == NULL ? strerror(errno) :
                !whole ? "longer than 1024 bytes" : "not one line of printable characters");
        return EX_USAGE;
    }
    return 0;
}

static int
run(void)
{
    struct event *sigterm, *sigint, *sigusr1, *sighup, *tick;
    struct timeval one_sec = { 1, 0 };

    main_base = event_base_new();
    if (main_base == NULL || listener_setup(main_base) != 0) {
        fprintf(stderr, "slabcache: failed to listen (port %ld in use?)\n", settings.port);
        return EXIT_FAILURE;
    }
    /* Bound before privileges are dropped, as the client port is. */
    char token[ADMIN_TOKEN_MAX + 1];
    int trc = admin_token_read(token, sizeof(token));
    if (trc != 0) {
        listener_teardown();
        listener_udp_close();
        event_base_free(main_base);
        return trc;
    }
    if (settings.admin_port != 0 &&
        admin_http_setup(settings.admin_listen, (int)settings.admin_port,
                         settings.admin_token != NULL ? token : NULL) != 0) {
        fprintf(stderr, "slabcache: failed to listen on the admin port %ld\n",
                settings.admin_port);
        listener_teardown();
        listener_udp_close();
        event_base_free(main_base);
        return EXIT_FAILURE;
    }
    int priv = drop_privileges();
    if (priv != 0) {
        admin_http_teardown();
        listener_teardown();    /* also removes the UNIX socket file */
        listener_udp_close();
        event_base_free(main_base);
        return priv;
    }
    if (worker_setup((int)settings.threads) != 0) {
        admin_http_teardown();
        return EXIT_FAILURE;
    }
    dispatch_set_shutdown(on_shutdown);
    sigterm = evsignal_new(main_base, SIGTERM, on_signal, NULL);
    sigint = evsignal_new(main_base, SIGINT, on_signal, NULL);
    /* memcached's graceful stop: with -e the cache is saved for the next
     * start; without, the same as SIGTERM. */
    sigusr1 = evsignal_new(main_base, SIGUSR1, on_signal, NULL);
    event_add(sigusr1, NULL);
    sighup = evsignal_new(main_base, SIGHUP, on_hangup, NULL);
    event_add(sighup, NULL);
    tick = event_new(main_base, -1, EV_PERSIST, on_clock, NULL);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    event_add(tick, &one_sec);
    write_pidfile();
    log_info("slabcache %s listening on %s port %ld", PACKAGE_VERSION,
             settings.socket_path ? settings.socket_path : settings.listen_addr,
             settings.port);

    event_base_dispatch(main_base);

    admin_http_teardown();
    listener_teardown();
    /* Workers stop first, the flash tier's I/O threads then finish their
     * reads (handing them back to the stopped workers), then the
     * connections go. The rest of the flash tier stays until the threads
     * that may still evict into it (background evictor, crawler) are
     * stopped: storage_teardown(). */
    worker_stop();
    flash_stop_reads();
    worker_teardown();
    listener_udp_close();       /* the workers read them until now */
    event_free(sigterm);
    event_free(sigint);
    event_free(sigusr1);
    event_free(sighup);
    event_free(tick);
    event_base_free(main_base);
    if (settings.pid_file != NULL) {
        unlink(settings.pid_file);
    }
    return EXIT_SUCCESS;
}

int
main(int argc, char **argv)
{
    settings_defaults();
    switch (settings_parse(argc, argv)) {
    case SETTINGS_OK:
        break;
    case SETTINGS_EXIT_OK:
        return EXIT_SUCCESS;
    case SETTINGS_USAGE:
        return EX_USAGE;
    }
    /* -o slab_automove / no_slab_reassign name a stack (settings.c
     * refused them together with --eviction); -M means none. */
    long automove = settings.slab_reassign ? settings.automove : 0;
    if (automove >= 0) {
        settings.eviction = evict_automove_stack((unsigned)automove);
    }
    if (settings.no_evict) {
        settings.eviction = "none";
    }
    if ((getuid() == 0 || geteuid() == 0) && settings.user == NULL) {
        fprintf(stderr, "can't run as root without the -u switch\n");
        return EX_USAGE;
    }
    log_set_level((int)settings.verbose);
    clock_setup();
    if (evict_setup(settings.eviction) != 0) {
        fprintf(stderr, "slabcache: invalid value '%s' for --eviction: "
                "expected a comma-separated list of auto, lru, random, lra, lrc, none\n", settings.eviction);
        return EX_USAGE;
    }
    int auth_rc = auth_setup();
    if (auth_rc != 0) {
        return auth_rc;
    }
#ifdef HAVE_SASL
    if (settings.sasl && bin_sasl_setup() != 0) {
        return EXIT_FAILURE;
    }
#endif
#ifdef HAVE_TLS
    if (tls_setup() != 0) {
        return EXIT_FAILURE;
    }
    if (tls_enabled()) {
        dispatch_set_refresh_certs(tls_refresh);
    }
#endif
    int fd_rc = fit_fd_limit();
    if (fd_rc != 0) {
        return fd_rc;
    }
    if (settings.daemonize && daemon(1, 0) != 0) {
        fprintf(stderr, "slabcache: failed to daemonize: %s\n", strerror(errno));
        return EXIT_FAILURE;
    }
    if (settings.daemonize) {
        allocator_after_fork();
    }
    signal(SIGPIPE, SIG_IGN);
    /* a flash file past the file size limit (ulimit -f): EFBIG, a logged
     * and counted device fault, not a killed server */
    signal(SIGXFSZ, SIG_IGN);
    int storage_rc = storage_setup();
    if (storage_rc != 0) {
        return storage_rc < 0 ? EXIT_FAILURE : storage_rc;
    }
    sizing_window_set((uint32_t)settings.automove_window);
    /* -o no_modern gives all of -m to items, as memcached 1.4 did:
     * nothing is measured (`stats sizing` has no curve) until a stack
     * moves slabs (evict_configure starts it then). */
    if ((!settings.measure_lazily || evict_has_slab_level()) && evict_measure_start() != 0) {
        fprintf(stderr, "slabcache: out of memory at start-up\n");
        return EXIT_FAILURE;
    }
    stats_setup(SC_PROTOCOL_VERSION, event_get_version());
    /* the last ten minutes are kept for the admin port only */
    if (settings.admin_port != 0 && history_setup() != 0) {
        fprintf(stderr, "slabcache: out of memory at start-up\n");
        return EXIT_FAILURE;
    }
    stats_set_conn_figures(CONN_RBUF_SIZE, reserved_fds());
    logger_setup((uint32_t)settings.watcher_logbuf_kb * 1024);
    item_set_evict_hook(admin_evict_hook);
    if (crawler_setup(settings.lru_crawler) != 0) {
        fprintf(stderr, "slabcache: cannot start the LRU crawler\n");
        return EXIT_FAILURE;
    }
    crawler_set_sleep(settings.crawler_sleep);
    crawler_set_tocrawl(settings.crawler_tocrawl);
    if (settings.bg_evict && evict_bg_start(settings.bg_reserve, settings.bg_batch) != 0) {
        fprintf(stderr, "slabcache: cannot start the background evictor\n");
        return EXIT_FAILURE;
    }

    int rc = run();

    evict_bg_stop();
    crawler_teardown();
    if (rc == 0) {
        rc = memory_file_save();
    }
    item_set_evict_hook(NULL);
    item_set_ref_hook(NULL);
    sizing_teardown();
    logger_teardown();
    history_teardown();
    stats_teardown();
    evict_teardown();
    storage_teardown();
    auth_teardown();
#ifdef HAVE_SASL
    if (settings.sasl) {
        bin_sasl_teardown();
    }
#endif
#ifdef HAVE_TLS
    tls_teardown();
#endif
    libevent_global_shutdown();
    return rc;
}
