/*
 * worker.h -- worker threads, each running its own libevent loop.
 *
 * The listener hands accepted sockets to workers round-robin through a
 * per-worker notification pipe; from then on a connection lives on one
 * thread only, so connection state needs no locks.
 */
#ifndef SC_WORKER_H
#define SC_WORKER_H

#include <stdbool.h>

struct event_base;
struct stats_thread;

int  worker_setup(int nthreads);
/* Ask every worker loop to stop and join them (connections stay, so
 * flash reads still in flight can come back to them: main.c). */
void worker_stop(void);
/* worker_stop(), then free every connection and loop. */
void worker_teardown(void);
/* Give an accepted, non-blocking socket to the next worker. */
int  worker_handoff(int fd, int tls);       /* tls: a conn_tls_t (conn.h) */

#endif
