/*
 * listener.h -- accept TCP or UNIX-socket clients on the main event loop,
 * enforce -c, and hand sockets to workers.
 */
#ifndef SC_LISTENER_H
#define SC_LISTENER_H

struct event_base;

int  listener_setup(struct event_base *base);
void listener_teardown(void);
/* `stats conns` rows for the listening sockets (memcached lists them
 * first, in state conn_listening). */
void listener_stats(void (*emit)(void *, const char *, const char *), void *ctx);
/* -U: the UDP sockets bound (the workers read them, udp.h); closed once
 * the workers are gone. */
int  listener_udp_count(void);
int  listener_udp_fd(int i);
void listener_udp_close(void);

#endif
