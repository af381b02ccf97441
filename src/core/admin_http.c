/*
 * admin_http.c -- the admin port (admin_http.h).
 *
 * A small HTTP/1.1 server on libevent bufferevents, on an event base and
 * thread of its own, so the request path never waits for it. Request
 * heads are parsed by protocol/http.c; this file routes five GET paths
 * (404 for any other path, 405 for any other method, 401 without the
 * token when one is set, except for the page, which holds no figures)
 * and answers with the page (admin_page.h) or what the stats layer
 * renders (stats_render_json, history_render_json,
 * stats_render_prometheus) from the figures `stats` prints.
 *
 * A connection reads heads and answers them in order (pipelining), each
 * body (a Content-Length of at most ADMIN_BODY_MAX) read and dropped.
 * Input is held, not read, while ADMIN_OUT_MAX bytes of answers wait to be
 * sent or ADMIN_HEAD_MAX bytes of a head wait to end, so a connection
 * holds at most about their sum. An idle or stalled connection is closed
 * after ADMIN_TIMEOUT_S without a byte, and a head still unfinished
 * ADMIN_HEAD_MS after its first byte is answered 408 (a client that
 * trickles a byte at a time cannot hold a connection for ever); past
 * ADMIN_CONNS_MAX connections a new one is answered 503.
 *
 * An answer that ends the connection (an unframed or refused request,
 * Connection: close, HTTP/1.0) is followed by a lingering close: once it
 * is sent the write side is shut (FIN) and whatever the client still
 * sends is read and dropped until it closes, for at most ADMIN_LINGER_MS
 * and ADMIN_LINGER_BYTES. Closing a socket that has unread input makes
 * the kernel reset the connection, and a client still sending its
 * request (a 1 MB header) gets the reset instead of the answer. That is
 * why this is not libevent's evhttp, which closes at once.
 */
#include "admin_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admin_page.h"
#include "clock.h"
#include "history.h"
#include "http.h"
#include "log.h"
#include "stats.h"

#define ADMIN_HEAD_MAX      HTTP_HEAD_MAX   /* bytes of request line and headers */
#define ADMIN_BODY_MAX      1024            /* a GET has none: larger ones get 413 */
#define ADMIN_OUT_MAX       (64u << 10)     /* answers queued before input waits */
#define ADMIN_TIMEOUT_S     5               /* a stalled client is dropped */
#define ADMIN_HEAD_MS       5000            /* a head must arrive within this */
#define ADMIN_LINGER_MS     2000            /* input drained after a closing answer */
#define ADMIN_LINGER_BYTES  (16u << 20)
#define ADMIN_CONNS_MAX     512             /* more are answered 503 and closed */

struct admin_conn {
    struct bufferevent *bev;
    struct admin_conn  *prev, *next;    /* every connection: teardown frees them */
    uint64_t            body_left;      /* bytes of a request body to drop */
    bool                closing;        /* the last answer is queued */
    bool                lingering;      /* it is sent and FIN too: drain */
    bool                peer_done;      /* the client closed its side */
    uint64_t            head_since_ms;  /* a head's first byte came (0: none) */
    uint64_t            linger_bytes;
    uint64_t            linger_until_ms;
};

static struct event_base     *admin_base;
static struct evconnlistener *admin_listener;
static pthread_t              admin_thread;
static struct event          *admin_stop_ev;
static int                    admin_stop_pipe[2] = { -1, -1 };
static struct admin_conn     *admin_conns;
static unsigned               admin_nconns;
static char                  *admin_token;   /* NULL: none asked */

static void conn_read(struct bufferevent *bev, void *arg);

/* --- connections ---------------------------------------------------------- */

static void
conn_free(struct admin_conn *c)
{
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        admin_conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    admin_nconns--;
    bufferevent_free(c->bev);
    free(c);
}

/* The answer is sent: shut the write side and drain what still comes. */
static void
conn_linger(struct admin_conn *c)
{
    struct timeval tv = { ADMIN_LINGER_MS / 1000, (ADMIN_LINGER_MS % 1000) * 1000 };

    if (c->peer_done) {
        conn_free(c);
        return;
    }
    c->lingering = true;
    c->linger_until_ms = clock_now_ms() + ADMIN_LINGER_MS;
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    bufferevent_set_timeouts(c->bev, &tv, NULL);
    bufferevent_enable(c->bev, EV_READ);
    conn_read(c->bev, c);
}

/* Input after a closing answer: dropped, within the linger's bounds. */
static void
conn_drop_input(struct admin_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    c->linger_bytes += evbuffer_get_length(in);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (c->lingering && (c->linger_bytes > ADMIN_LINGER_BYTES ||
                         clock_now_ms() > c->linger_until_ms)) {
        conn_free(c);
    }
}

/* Queue an answer; `body` may be NULL (empty). HEAD gets the head alone. */
static void
conn_answer(struct admin_conn *c, int status, const char *type, struct evbuffer *body,
            const char *extra, bool head_only, bool close)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    size_t blen = body != NULL ? evbuffer_get_length(body) : 0;
    char head[512];
    size_t n = http_compose_head(head, sizeof(head), status, type, blen, close, extra,
                                 time(NULL));

    evbuffer_add(out, head, n);
    if (body != NULL && !head_only) {
        evbuffer_add_buffer(out, body);
    }
    if (close) {
        c->closing = true;
    }
}

static void
conn_answer_text(struct admin_conn *c, int status, const char *text, const char *extra,
                 bool head_only, bool close)
{
    struct evbuffer *b = evbuffer_new();

    if (b != NULL) {
        evbuffer_add_printf(b, "%s\n", text);
    }
    conn_answer(c, b != NULL ? status : 500, "text/plain; charset=utf-8", b, extra,
                head_only, close || b == NULL);
    if (b != NULL) {
        evbuffer_free(b);
    }
}

static void
append(void *ctx, const char *s, size_t n)
{
    evbuffer_add(ctx, s, n);
}

static void
conn_rendered(struct admin_conn *c, const char *type, void (*render)(stats_write_fn, void *),
              bool head_only, bool close)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        conn_answer_text(c, 500, "out of memory", NULL, head_only, true);
        return;
    }
    render(append, b);
    conn_answer(c, 200, type, b, NULL, head_only, close);
    evbuffer_free(b);
}

static bool
path_is(const struct http_req *r, const char *p)
{
    return r->npath == strlen(p) && memcmp(r->path, p, r->npath) == 0;
}

/* The request carries the token, or none is asked; compared in time that
 * does not depend on where they differ. */
static bool
token_ok(const struct http_req *r)
{
    if (admin_token == NULL) {
        return true;
    }
    size_t n = strlen(admin_token);
    if (!r->has_token || r->ntoken != n) {
        return false;
    }
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned char)(r->token[i] ^ admin_token[i]);
    }
    return diff == 0;
}

/* The page: everything it uses is in it, and the browser is told to load
 * nothing from elsewhere. */
static void
conn_page(struct admin_conn *c, bool head_only, bool close)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        conn_answer_text(c, 500, "out of memory", NULL, head_only, true);
        return;
    }
    evbuffer_add_reference(b, admin_page_html, admin_page_len, NULL, NULL);
    conn_answer(c, 200, "text/html; charset=utf-8", b,
                "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'\r\n",
                head_only, close);
    evbuffer_free(b);
}

/* Answer one parsed request. */
static void
conn_serve(struct admin_conn *c, const struct http_req *r)
{
    bool head_only = r->method == HTTP_HEAD;
    /* a chunked body's end is not looked for: the connection ends */
    bool close = !r->keep_alive || r->chunked;

    if (!r->chunked && r->content_length > ADMIN_BODY_MAX) {
        conn_answer_text(c, 413, "request body too large", NULL, head_only, true);
        return;
    }
    c->body_left = r->chunked ? 0 : r->content_length;
    bool stats = path_is(r, "/stats"), metrics = path_is(r, "/metrics");
    bool history = path_is(r, "/stats/history");
    if (!token_ok(r)) {
        /* Basic first: a browser prompts for it, then sends what it was
         * given (the token as the password) with the page's requests too. */
        conn_answer_text(c, 401, "the admin token is required (--admin-token)",
                         "WWW-Authenticate: Basic realm=\"slabcache\", charset=\"UTF-8\"\r\n"
                         "WWW-Authenticate: Bearer realm=\"slabcache\"\r\n", head_only, close);
    } else if (path_is(r, "/") && r->method != HTTP_OTHER) {
        conn_page(c, head_only, close);
    } else if (!stats && !metrics && !history && !path_is(r, "/health") && !path_is(r, "/")) {
        conn_answer_text(c, 404, "not found: /stats, /stats/history, /metrics, /health", NULL,
                         head_only, close);
    } else if (r->method == HTTP_OTHER) {
        conn_answer_text(c, 405, "method not allowed: GET only", "Allow: GET, HEAD\r\n",
                         false, close);
    } else if (stats) {
        conn_rendered(c, "application/json", stats_render_json, head_only, close);
    } else if (history) {
        conn_rendered(c, "application/json", history_render_json, head_only, close);
    } else if (metrics) {
        conn_rendered(c, "text/plain; version=0.0.4; charset=utf-8", stats_render_prometheus,
                      head_only, close);
    } else {
        conn_answer_text(c, 200, "ok", NULL, head_only, close);
    }
}

/* Drop what is left of a request body; false while more is to come. */
static bool
conn_skip_body(struct admin_conn *c, struct evbuffer *in)
{
    size_t n = evbuffer_get_length(in);
    size_t k = c->body_left < n ? (size_t)c->body_left : n;

    evbuffer_drain(in, k);
    c->body_left -= k;
    return c->body_left == 0;
}

static void
conn_read(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (c->closing) {
        conn_drop_input(c);
        return;
    }
    while (!c->closing && evbuffer_get_length(bufferevent_get_output(bev)) < ADMIN_OUT_MAX) {
        if (!conn_skip_body(c, in)) {
            return;
        }
        size_t n = evbuffer_get_length(in);
        if (n == 0) {
            return;
        }
        size_t look = n < ADMIN_HEAD_MAX ? n : ADMIN_HEAD_MAX;
        const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)look);
        struct http_req req;
        size_t used = 0;
        http_parse_t st = p != NULL ? http_parse_head(p, look, &req, &used) : HTTP_PARSE_BAD;
        if (st == HTTP_PARSE_MORE) {
            uint64_t now = clock_now_ms();
            if (c->head_since_ms == 0) {
                c->head_since_ms = now;
            } else if (now - c->head_since_ms > ADMIN_HEAD_MS) {
                conn_answer_text(c, 408, http_reason(408), NULL, false, true);
                break;
            }
            return;
        }
        c->head_since_ms = 0;
        if (st != HTTP_PARSE_OK) {
            conn_answer_text(c, http_parse_status(st), http_reason(http_parse_status(st)),
                             NULL, false, true);
            break;
        }
        /* req points into the head: answered before it is drained */
        conn_serve(c, &req);
        evbuffer_drain(in, used);
    }
    if (c->closing) {
        conn_drop_input(c);     /* the rest of a refused request */
    }
}

/* Output sent (to the low watermark, 0): linger, or read what waited. */
static void
conn_written(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;

    if (c->closing) {
        if (!c->lingering) {
            conn_linger(c);
        }
        return;
    }
    conn_read(bev, c);          /* what waited for room, if any */
    if (!c->closing && c->peer_done &&
        evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        conn_free(c);           /* the client shut its side: all answered */
    }
}

static void
conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct admin_conn *c = arg;

    (void)bev;
    if ((what & BEV_EVENT_EOF) && !c->lingering &&
        evbuffer_get_length(bufferevent_get_output(c->bev)) > 0) {
        /* a client that shut its side after the request still gets the answer */
        c->peer_done = true;
        bufferevent_disable(c->bev, EV_READ);
        return;
    }
    conn_free(c);               /* EOF, error, a timeout, or the linger ended */
}

static void
admin_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
             void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    (void)arg;
    struct admin_conn *c = calloc(1, sizeof(*c));
    struct timeval tv = { ADMIN_TIMEOUT_S, 0 };

    if (c == NULL ||
        (c->bev = bufferevent_socket_new(admin_base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
        free(c);
        close(fd);
        return;
    }
    bool full = admin_nconns >= ADMIN_CONNS_MAX;
    c->next = admin_conns;
    if (admin_conns != NULL) {
        admin_conns->prev = c;
    }
    admin_conns = c;
    admin_nconns++;
    bufferevent_setcb(c->bev, conn_read, conn_written, conn_event, c);
    /* input stops at a head's limit while answers or a head are pending */
    bufferevent_setwatermark(c->bev, EV_READ, 0, ADMIN_HEAD_MAX + ADMIN_BODY_MAX);
    bufferevent_set_timeouts(c->bev, &tv, &tv);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (full) {
        conn_answer_text(c, 503, "too many admin connections", NULL, false, true);
    }
}

/* --- the thread ------------------------------------------------------------- */

static void
admin_stop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

static void *
admin_main(void *arg)
{
    (void)arg;
    event_base_dispatch(admin_base);
    return NULL;
}

static struct evconnlistener *
admin_listen(const char *addr, int port)
{
    struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *res, *ai;
    struct evconnlistener *l = NULL;
    char service[16];

    snprintf(service, sizeof(service), "%d", port);
    if (getaddrinfo(addr, service, &hints, &res) != 0) {
        return NULL;
    }
    for (ai = res; ai != NULL && l == NULL; ai = ai->ai_next) {
        l = evconnlistener_new_bind(admin_base, admin_accept, NULL,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                    LEV_OPT_CLOSE_ON_EXEC, -1, ai->ai_addr,
                                    (int)ai->ai_addrlen);
    }
    freeaddrinfo(res);
    return l;
}

bool
admin_http_loopback(const char *addr)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
    bool loopback = true;

    if (getaddrinfo(addr, NULL, &hints, &res) != 0) {
        return false;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)ai->ai_addr;
            loopback &= (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ai->ai_addr;
            loopback &= IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
        } else {
            loopback = false;
        }
    }
    freeaddrinfo(res);
    return loopback;
}

int
admin_http_setup(const char *addr, int port, const char *token)
{
    if (admin_base != NULL) {
        return -1;              /* set up twice */
    }
    if (token != NULL && (admin_token = strdup(token)) == NULL) {
        return -1;
    }
    admin_base = event_base_new();
    if (admin_base == NULL) {
        log_error("admin port: cannot create its event base");
        return -1;
    }
    if ((admin_listener = admin_listen(addr, port)) == NULL) {
        log_error("admin port: cannot listen on %s:%d", addr, port);
        admin_http_teardown();
        return -1;
    }
    /* The base is not shared between threads: teardown wakes it through
     * a pipe rather than touching it from the main thread. */
    if (pipe(admin_stop_pipe) != 0 ||
        (admin_stop_ev = event_new(admin_base, admin_stop_pipe[0], EV_READ, admin_stop_cb,
                                   admin_base)) == NULL ||
        event_add(admin_stop_ev, NULL) != 0 ||
        pthread_create(&admin_thread, NULL, admin_main, NULL) != 0) {
        log_error("admin port: cannot start its thread");
        if (admin_stop_ev != NULL) {
            event_free(admin_stop_ev);
            admin_stop_ev = NULL;
        }
        admin_http_teardown();
        return -1;
    }
    return 0;
}

void
admin_http_teardown(void)
{
    if (admin_stop_ev != NULL) {
        ssize_t n = write(admin_stop_pipe[1], "x", 1);
        (void)n;
        pthread_join(admin_thread, NULL);
        event_free(admin_stop_ev);
        admin_stop_ev = NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (admin_stop_pipe[i] >= 0) {
            close(admin_stop_pipe[i]);
            admin_stop_pipe[i] = -1;
        }
    }
    while (admin_conns != NULL) {
        conn_free(admin_conns);
    }
    if (admin_listener != NULL) {
        evconnlistener_free(admin_listener);
        admin_listener = NULL;
    }
    if (admin_base != NULL) {
        event_base_free(admin_base);
        admin_base = NULL;
    }
    free(admin_token);
    admin_token = NULL;
}
