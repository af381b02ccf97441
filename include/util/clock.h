/*
 * clock.h -- coarse server clock, memcached style.
 *
 * Items store times as seconds relative to process start (rel_time_t) so
 * a 32-bit field lasts 136 years and hot paths read one atomic instead of
 * calling time(). A timer in the main loop calls clock_tick() once a second.
 */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef uint32_t rel_time_t;

#define CLOCK_MAXDELTA (60 * 60 * 24 * 30) /* larger exptimes are unix times */

void       clock_setup(void);
void       clock_tick(void);           /* refresh from the wall clock */
rel_time_t clock_now(void);            /* seconds since (start - 2) */
time_t     clock_started(void);        /* unix time that rel 0 stands for */
/* A warm restart: rel 0 stands for started again, so the times saved with
 * the items run on, the downtime included. */
void       clock_restore(time_t started);
time_t     clock_unix(rel_time_t t);   /* rel -> unix */
rel_time_t clock_exptime(int64_t exptime); /* protocol exptime -> rel; 0 = never */
/* Milliseconds since start from the kernel's coarse clock (vDSO, no syscall). */
uint64_t   clock_now_ms(void);
/* Monotonic nanoseconds, fine-grained (vDSO): for timing short spans. */
uint64_t   clock_mono_ns(void);
/* The wall-clock time ms from now, as pthread_cond_timedwait() takes it. */
void       clock_deadline(struct timespec *out, uint32_t ms);

#endif
