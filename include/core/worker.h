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
/* Ask every worker loop to stop, join them, free their connections. */
void worker_teardown(void);
/* Give an accepted, non-blocking socket to the next worker. */
int  worker_handoff(int fd, bool tls);

#endif
