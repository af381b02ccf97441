/*
 * admin_http.h -- the admin port (--admin-port, off by default): GET
 * /stats (every `stats` section as JSON), GET /metrics (Prometheus text)
 * and GET /health, served over HTTP/1.1 (heads parsed by protocol/http.c)
 * on a thread and event base of its own so a slow or stalled scraper
 * never holds a worker.
 */
#ifndef SC_ADMIN_HTTP_H
#define SC_ADMIN_HTTP_H

/* Listen on addr:port and start serving; 0, or -1 with a message logged. */
int  admin_http_setup(const char *addr, int port);
void admin_http_teardown(void);

#endif
