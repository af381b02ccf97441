/*
 * admin_http.c -- the admin port (admin_http.h).
 *
 * libevent's evhttp does the HTTP: parsing, limits on header and body
 * size (an oversized request is refused by evhttp itself), a timeout per
 * connection, keep-alive. This file only routes: three GET paths, 404 for
 * any other path, 405 for any other method. It runs on its own event base
 * and thread, so the request path never waits for it; what it serves is
 * rendered by the stats layer (stats_render_json, stats_render_prometheus)
 * from the same figures the `stats` command prints.
 */
#include "admin_http.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "log.h"
#include "stats.h"

#define ADMIN_HEADERS_MAX   8192    /* bytes of request line and headers */
#define ADMIN_BODY_MAX      1024    /* a GET has none; others get their 405 */
#define ADMIN_TIMEOUT_S     5       /* a stalled client is dropped */

static struct event_base *admin_base;
static struct evhttp     *admin_http;
static pthread_t          admin_thread;
static struct event      *admin_stop_ev;
static int                admin_stop_pipe[2] = { -1, -1 };

static void
append(void *ctx, const char *s, size_t n)
{
    evbuffer_add(ctx, s, n);
}

static void
reply(struct evhttp_request *req, int code, const char *reason,
      const char *type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    /* HEAD: the headers alone (evhttp would send a body after them) */
    evhttp_send_reply(req, code, reason,
                      evhttp_request_get_command(req) == EVHTTP_REQ_HEAD ? NULL : body);
}

static void
reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evbuffer_add_printf(b, "%s\n", text);
    reply(req, code, reason, "text/plain; charset=utf-8", b);
    evbuffer_free(b);
}

static void
serve_rendered(struct evhttp_request *req, const char *type,
               void (*render)(stats_write_fn, void *))
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    render(append, b);
    reply(req, HTTP_OK, "OK", type, b);
    evbuffer_free(b);
}

static void
route(struct evhttp_request *req, void *arg)
{
    (void)arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;

    if (path == NULL) {
        evhttp_send_error(req, HTTP_BADREQUEST, NULL);
        return;
    }
    bool known = strcmp(path, "/stats") == 0 || strcmp(path, "/metrics") == 0 ||
                 strcmp(path, "/health") == 0;
    if (!known) {
        reply_text(req, HTTP_NOTFOUND, "Not Found", "not found: /stats, /metrics, /health");
        return;
    }
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        reply_text(req, 405, "Method Not Allowed", "method not allowed: GET only");
        return;
    }
    if (strcmp(path, "/stats") == 0) {
        serve_rendered(req, "application/json", stats_render_json);
    } else if (strcmp(path, "/metrics") == 0) {
        serve_rendered(req, "text/plain; version=0.0.4; charset=utf-8",
                       stats_render_prometheus);
    } else {
        reply_text(req, HTTP_OK, "OK", "ok");
    }
}

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

int
admin_http_setup(const char *addr, int port)
{
    if (admin_base != NULL) {
        return -1;              /* set up twice */
    }
    admin_base = event_base_new();
    admin_http = admin_base != NULL ? evhttp_new(admin_base) : NULL;
    if (admin_http == NULL) {
        log_error("admin port: cannot create the HTTP server");
        admin_http_teardown();
        return -1;
    }
    evhttp_set_max_headers_size(admin_http, ADMIN_HEADERS_MAX);
    evhttp_set_max_body_size(admin_http, ADMIN_BODY_MAX);
    evhttp_set_timeout(admin_http, ADMIN_TIMEOUT_S);
    /* Every method reaches route(), which answers 405 itself (evhttp's
     * own answer to a method outside its list would be 501). */
    evhttp_set_allowed_methods(admin_http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                               EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                               EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
    evhttp_set_gencb(admin_http, route, NULL);
    if (evhttp_bind_socket(admin_http, addr, (ev_uint16_t)port) != 0) {
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
    if (admin_http != NULL) {
        evhttp_free(admin_http);
        admin_http = NULL;
    }
    if (admin_base != NULL) {
        event_base_free(admin_base);
        admin_base = NULL;
    }
}
