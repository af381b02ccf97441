/*
 * listener.c -- accept clients on the main loop and pass them on.
 *
 * The -c limit is enforced here, at accept time, so a client beyond it
 * gets memcached's "ERROR Too many open connections" and is closed without
 * ever costing a worker anything.
 */
#include "listener.h"

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

#include "log.h"
#include "proto.h"
#include "settings.h"
#include "stats.h"
#include "worker.h"

#define LISTENERS_MAX 16

static struct evconnlistener *listeners[LISTENERS_MAX];
static int                    nlisteners;

static void
listener_on_accept(struct evconnlistener *l, evutil_socket_t fd,
                   struct sockaddr *addr, int len, void *arg)
{
    (void)l;
    (void)len;
    (void)arg;
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
    if (worker_handoff(fd) != 0) {
        close(fd);
        stats_conn_close();
    }
}

static int
listener_add(struct event_base *base, const struct sockaddr *sa, socklen_t len)
{
    if (nlisteners == LISTENERS_MAX) {
        return -1;
    }
    struct evconnlistener *l = evconnlistener_new_bind(base, listener_on_accept,
        NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        (int)settings.backlog, sa, (int)len);
    if (l == NULL) {
        return -1;
    }
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
    int rc = listener_add(base, (struct sockaddr *)&sun, sizeof(sun));
    umask(old);
    if (rc != 0) {
        log_error("failed to listen on unix socket %s", settings.socket_path);
    }
    return rc;
}

/* -l takes a comma-separated list of addresses, as memcached's does. */
static int
listen_tcp(struct event_base *base)
{
    char addrs[256], port[16];
    char *save = NULL;

    snprintf(addrs, sizeof(addrs), "%s", settings.listen_addr);
    snprintf(port, sizeof(port), "%ld", settings.port);
    for (char *host = strtok_r(addrs, ",", &save); host != NULL;
         host = strtok_r(NULL, ",", &save)) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0) {
            log_error("cannot resolve listen address %s: %s", host, gai_strerror(rc));
            return -1;
        }
        int ok = -1;
        for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
            if (listener_add(base, ai->ai_addr, ai->ai_addrlen) == 0) {
                ok = 0;
            }
        }
        freeaddrinfo(res);
        if (ok != 0) {
            log_error("failed to listen on %s:%s", host, port);
            return -1;
        }
    }
    return 0;
}

int
listener_setup(struct event_base *base)
{
    if (settings.socket_path != NULL) {
        return listen_unix(base);
    }
    return listen_tcp(base);
}

void
listener_teardown(void)
{
    for (int i = 0; i < nlisteners; i++) {
        evconnlistener_free(listeners[i]);
    }
    nlisteners = 0;
    if (settings.socket_path != NULL) {
        unlink(settings.socket_path);
    }
}
