/*
 * crawler.h -- the LRU crawler: a background thread that walks chosen
 * classes and unlinks the expired and flushed items it finds, so their
 * memory is free before any allocation has to reclaim it (memcached's
 * `lru_crawler crawl`). One crawl runs at a time; it takes each item's
 * partition lock on its own, so requests never wait behind a crawl.
 */
#ifndef SC_CRAWLER_H
#define SC_CRAWLER_H

#include <stdbool.h>
#include <stdint.h>

typedef enum crawler_status {
    CRAWLER_OK,
    CRAWLER_RUNNING,            /* a crawl is in progress */
    CRAWLER_DISABLED,           /* lru_crawler disable, -o no_lru_crawler */
} crawler_status_t;

#define CRAWLER_SLEEP_MAX 1000000   /* us between batches, at most 1 s */

int              crawler_setup(bool enabled);
void             crawler_teardown(void);
/* Crawl the classes in the 256-bit set. */
crawler_status_t crawler_start(const uint64_t classes[4]);
/* Start the thread: 0, or -1 if it is already running (or cannot start). */
int              crawler_enable(void);
void             crawler_disable(void);
bool             crawler_enabled(void);
/* Microseconds to sleep after each batch of items; items per class per
 * crawl (0: all). */
void             crawler_set_sleep(uint32_t us);
uint32_t         crawler_sleep(void);
void             crawler_set_tocrawl(uint32_t n);
uint32_t         crawler_tocrawl(void);
bool             crawler_running(void);
uint64_t         crawler_starts(void);

#endif
