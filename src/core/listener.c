/*
 * listener.c -- accept clients on the main loop and pass them on.
 *
 * The -c limit is enforced here, at accept time, so a client beyond it
 * gets memcached's "ERROR Too many open connections" and is closed without
 * ever costing a worker anything.
 *
 * When accept() itself fails for lack of descriptors (EMFILE, ENFILE: the
 * limit was lowered under us, or the system ran out), every listener is
 * paused for LISTEN_BACKOFF_MS instead of being retried at once (a
 * level-triggered listener would spin and log without end), the pause is
 * logged once and counted as memcached counts it (listen_disabled_num).
 *
 * With -U, UDP sockets are bound on the same addresses (not with -s, as
 * memcached); the workers read them (udp.c). A port of 0 binds nothing,
 * -1 any free port. As memcached, the ports bound are written to the file
 * $MEMCACHED_PORT_FILENAME names ("TCP INET: 11211" lines), for tests and
 * tools that start it on -1.
 */
#include "listener.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "proto.h"
#include "settings.h"
#include "stats.h"
#include "worker.h"

#define LISTENERS_MAX 16
#define LISTEN_BACKOFF_MS 100

static struct evconnlistener *listeners[LISTENERS_MAX];
static conn_tls_t             listener_tls[LISTENERS_MAX];
static char                   listen_names[LISTENERS_MAX][INET6_ADDRSTRLEN + 16];
static int                    nlisteners;
static rel_time_t             listen_since;
static struct event          *resume_ev;
static uint64_t               paused_at_ns;
static int                    udp_fds[LISTENERS_MAX];
static char                   udp_names[LISTENERS_MAX][INET6_ADDRSTRLEN + 16];
static int                    nudp;
static FILE                  *port_file;    /* MEMCACHED_PORT_FILENAME's, while binding */

/* `stats conns`'s name of the socket fd bound to sa: the port bound
 * (-1 asked for any). */
static void
bound_name(int fd, const struct sockaddr *sa, bool udp, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    conn_format_addr(getsockname(fd, (struct sockaddr *)&ss, &len) == 0 ?
                     (const struct sockaddr *)&ss : sa, out, cap);
    if (udp) {
        memcpy(out, "udp", 3);                  /* "tcp:..." / "tcp6:..." */
    }
}

/* A line of the port file for the socket fd just bound. */
static void
port_file_note(int fd, bool udp)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (port_file == NULL || getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return;
    }
    bool v6 = ss.ss_family == AF_INET6;
    unsigned port = v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    fprintf(port_file, "%s INET%s: %u\n", udp ? "UDP" : "TCP", v6 ? "6" : "", port);
}

static void
listeners_enable(bool on)
{
    for (int i = 0; i < nlisteners; i++) {
        if (on) {
            evconnlistener_enable(listeners[i]);
        } else {
            evconnlistener_disable(listeners[i]);
        }
    }
}

static void
listener_on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    stats_listen_disabled((clock_mono_ns() - paused_at_ns) / 1000);
    listeners_enable(true);
}

static void
listener_on_error(struct evconnlistener *l, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval backoff = { 0, LISTEN_BACKOFF_MS * 1000 };

    (void)arg;
    if (err != EMFILE && err != ENFILE) {
        log_error("accept: %s", evutil_socket_error_to_string(err));
        return;
    }
    if (resume_ev == NULL) {
        resume_ev = evtimer_new(evconnlistener_get_base(l), listener_on_resume, NULL);
    }
    if (resume_ev == NULL || evtimer_pending(resume_ev, NULL)) {
        return;
    }
    log_error("accept: %s: not accepting for %d ms",
              evutil_socket_error_to_string(err), LISTEN_BACKOFF_MS);
    paused_at_ns = clock_mono_ns();
    listeners_enable(false);
    evtimer_add(resume_ev, &backoff);
}

static void
listener_on_accept(struct evconnlistener *l, evutil_socket_t fd,
                   struct sockaddr *addr, int len, void *arg)
{
    const conn_tls_t *tls = arg;

    (void)l;
    (void)len;
    if (stats_curr_connections() >= (uint64_t)settings.max_conns) {
        size_t n;
        const char *msg = proto_rsp_str(PROTO_RSP_TOO_MANY_CONNS, &n);
        if (write(fd, msg, n) < 0) {
            /* the client is dropped either way */
        }
        close(fd);
        stats_conn_rejected();
        return;
    }
    if (addr->sa_family == AF_INET || addr->sa_family == AF_INET6) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    stats_conn_open();
    if (worker_handoff(fd, *tls) != 0) {
        close(fd);
        stats_conn_close();
    }
}

void
listener_stats(void (*emit)(void *, const char *, const char *), void *ctx)
{
    char name[48], value[32];

    for (int i = 0; i < nlisteners; i++) {
        int fd = evconnlistener_get_fd(listeners[i]);
        snprintf(name, sizeof(name), "%d:addr", fd);
        emit(ctx, name, listen_names[i]);
        snprintf(name, sizeof(name), "%d:state", fd);
        emit(ctx, name, "conn_listening");
        snprintf(name, sizeof(name), "%d:secs_since_last_cmd", fd);
        snprintf(value, sizeof(value), "%u", clock_now() - listen_since);
        emit(ctx, name, value);
    }
    /* memcached shows a UDP socket as a connection waiting to read. */
    for (int i = 0; i < nudp; i++) {
        snprintf(name, sizeof(name), "%d:addr", udp_fds[i]);
        emit(ctx, name, udp_names[i]);
        snprintf(name, sizeof(name), "%d:state", udp_fds[i]);
        emit(ctx, name, "conn_read");
        snprintf(name, sizeof(name), "%d:secs_since_last_cmd", udp_fds[i]);
        snprintf(value, sizeof(value), "%u", clock_now() - listen_since);
        emit(ctx, name, value);
    }
}

void
listener_udp_close(void)
{
    for (int i = 0; i < nudp; i++) {
        close(udp_fds[i]);
    }
    nudp = 0;
}

int
listener_udp_count(void)
{
    return nudp;
}

int
listener_udp_fd(int i)
{
    return udp_fds[i];
}

static int
udp_add(const struct sockaddr *sa, socklen_t len)
{
    int one = 1;

    if (nudp == LISTENERS_MAX) {
        return -1;
    }
    int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (bind(fd, sa, len) != 0) {
        close(fd);
        return -1;
    }
    port_file_note(fd, true);
    bound_name(fd, sa, true, udp_names[nudp], sizeof(udp_names[0]));
    log_debug("<%d server listening (udp)", fd);
    udp_fds[nudp++] = fd;
    return 0;
}

static int
listener_add(struct event_base *base, const struct sockaddr *sa, socklen_t len, conn_tls_t tls)
{
    if (nlisteners == LISTENERS_MAX) {
        return -1;
    }
    listener_tls[nlisteners] = tls;
    struct evconnlistener *l = evconnlistener_new_bind(base, listener_on_accept,
        &listener_tls[nlisteners], LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        (int)settings.backlog, sa, (int)len);
    if (l == NULL) {
        return -1;
    }
    evconnlistener_set_error_cb(l, listener_on_error);
    port_file_note(evconnlistener_get_fd(l), false);
    log_debug("<%d server listening (%s%s)", (int)evconnlistener_get_fd(l),
              settings.binary_auto ? "auto-negotiate" : settings.binary_only ? "binary" : "ascii",
              tls == CONN_TLS_MUTUAL ? ", TLS, client certificate required" : tls ? ", TLS" : "");
    bound_name(evconnlistener_get_fd(l), sa, false, listen_names[nlisteners],
               sizeof(listen_names[0]));
    listeners[nlisteners++] = l;
    return 0;
}

static int
listen_unix(struct event_base *base)
{
    struct sockaddr_un sun;

    if (strlen(settings.socket_path) >= sizeof(sun.sun_path)) {
        log_error("unix socket path too long: %s", settings.socket_path);
        return -1;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    strcpy(sun.sun_path, settings.socket_path);
    unlink(settings.socket_path);
    mode_t old = umask((mode_t)(~settings.socket_mask & 0777));
    int rc = listener_add(base, (struct sockaddr *)&sun, sizeof(sun), false);
    umask(old);
    if (rc != 0) {
        log_error("failed to listen on unix socket %s", settings.socket_path);
    }
    return rc;
}

/*
 * One -l entry, as memcached reads it: ADDR, ADDR:PORT or [IPV6]:PORT
 * (the port defaults to -p), with "notls:" in front for a plaintext
 * listener when -Z is on. Splits entry in place; false if malformed.
 */
static bool
listen_entry(char *entry, char **host, char **port, conn_tls_t *tls)
{
    *tls = settings.ssl_enabled ? CONN_TLS_ON : CONN_TLS_NONE;
    if (strncmp(entry, "notls:", 6) == 0 || strncmp(entry, "mtls:", 5) == 0) {
        bool mutual = entry[0] == 'm';
        if (!settings.ssl_enabled) {
            log_error("'%s' option is valid only when SSL is enabled",
                      mutual ? "mtls" : "notls");
            return false;
        }
        *tls = mutual ? CONN_TLS_MUTUAL : CONN_TLS_NONE;
        entry += mutual ? 5 : 6;
    }
    *host = entry;
    *port = NULL;
    if (entry[0] == '[') {                      /* [v6]:port */
        char *close = strchr(entry, ']');
        if (close == NULL) {
            return false;
        }
        *close = '\0';
        *host = entry + 1;
        if (close[1] == ':') {
            *port = close + 2;
        }
    } else {
        char *colon = strchr(entry, ':');
        if (colon != NULL && strchr(colon + 1, ':') == NULL) {     /* not bare v6 */
            *colon = '\0';
            *port = colon + 1;
        }
    }
    return **host != '\0';
}

/* -l takes a comma-separated list of addresses, as memcached's does. */
/* Bind each -l address: TCP listeners on the main loop (udp false), or
 * UDP sockets for the workers on -U's port. */
static int
listen_inet(struct event_base *base, bool udp)
{
    char addrs[1024], defport[24];
    char *save = NULL;

    snprintf(addrs, sizeof(addrs), "%s", settings.listen_addr);
    long want = udp ? (long)settings.udp_port : settings.port;
    snprintf(defport, sizeof(defport), "%ld", want < 0 ? 0 : want);
    for (char *entry = strtok_r(addrs, ",;", &save); entry != NULL;
         entry = strtok_r(NULL, ",;", &save)) {
        char *host, *port;
        conn_tls_t tls;
        if (!listen_entry(entry, &host, &port, &tls)) {
            log_error("bad listen address %s", entry);
            return -1;
        }
        if (port == NULL || *port == '\0' || udp) {
            port = defport;
        }
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = udp ? SOCK_DGRAM : SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0) {
            log_error("cannot resolve listen address %s: %s", host, gai_strerror(rc));
            return -1;
        }
        int ok = -1;
        for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
            if ((udp ? udp_add(ai->ai_addr, ai->ai_addrlen)
                     : listener_add(base, ai->ai_addr, ai->ai_addrlen, tls)) == 0) {
                ok = 0;
            }
        }
        freeaddrinfo(res);
        if (ok != 0) {
            log_error("failed to listen on %s%s:%s", udp ? "UDP " : "", host, port);
            return -1;
        }
    }
    return 0;
}

int
listener_setup(struct event_base *base)
{
    listen_since = clock_now();
    if (settings.socket_path != NULL) {
        return listen_unix(base);
    }
    const char *name = getenv("MEMCACHED_PORT_FILENAME");
    char tmp[4096];
    if (name != NULL && snprintf(tmp, sizeof(tmp), "%s.lck", name) < (int)sizeof(tmp)) {
        port_file = fopen(tmp, "a");
    }
    int rc = 0;
    if (settings.port != 0) {
        rc = listen_inet(base, false);
    }
    if (rc == 0 && settings.udp_port != 0) {
        rc = listen_inet(base, true);
    }
    if (port_file != NULL) {
        fclose(port_file);
        port_file = NULL;
        if (rc == 0) {
            rename(tmp, name);
        }
    }
    return rc;
}

void
listener_teardown(void)
{
    for (int i = 0; i < nlisteners; i++) {
        evconnlistener_free(listeners[i]);
    }
    nlisteners = 0;
    if (resume_ev != NULL) {
        event_free(resume_ev);
        resume_ev = NULL;
    }
    if (settings.socket_path != NULL) {
        unlink(settings.socket_path);
    }
}
