/*
 * admin_http.h -- the admin port (--admin-port, off by default): GET
 * /stats (every `stats` section as JSON), GET /stats/history (the last ten
 * minutes, history.h), GET /metrics (Prometheus text) and GET /health,
 * served over HTTP/1.1 (heads parsed by protocol/http.c) on a thread and
 * event base of its own so a slow or stalled scraper never holds a
 * worker. Read-only: no endpoint changes anything.
 *
 * With a token (--admin-token), every endpoint requires it as a bearer
 * token (Authorization: Bearer, as Prometheus scrapers send it) and
 * answers 401 without it. The port listens on 127.0.0.1 by default; the
 * server refuses a listen address that is not loopback unless a token is
 * set or --admin-insecure says so (main.c, admin_http_loopback).
 */
#ifndef SC_ADMIN_HTTP_H
#define SC_ADMIN_HTTP_H

#include <stdbool.h>

/* Listen on addr:port and start serving; 0, or -1 with a message logged.
 * token: the bearer token every request must carry, or NULL (copied). */
int  admin_http_setup(const char *addr, int port, const char *token);
/* Whether every address addr resolves to is a loopback one. */
bool admin_http_loopback(const char *addr);
void admin_http_teardown(void);

#endif
