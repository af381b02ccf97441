/*
 * admin.h -- memcached's operator commands, beside the data commands of
 * dispatch.c: `slabs reassign|automove`, `lru_crawler`, `lru`, `stats
 * cachedump`, `stats detail`, `watch`, and the key dumps they start.
 * Arguments are judged as memcached 1.6.18 judges them, and answered with
 * its bytes (notes/compatibility.md lists each answer).
 */
#ifndef SC_ADMIN_H
#define SC_ADMIN_H

#include "dispatch.h"

dispatch_result_t admin_slabs(struct dispatch_ctx *d, const struct proto_req *req);
dispatch_result_t admin_lru_crawler(struct dispatch_ctx *d, const struct proto_req *req);
dispatch_result_t admin_lru(struct dispatch_ctx *d, const struct proto_req *req);
dispatch_result_t admin_extstore(struct dispatch_ctx *d, const struct proto_req *req);
dispatch_result_t admin_watch(struct dispatch_ctx *d, const struct proto_req *req);
/* `stats cachedump ...` and `stats detail ...`: args after the word. */
dispatch_result_t admin_cachedump(struct dispatch_ctx *d, const char *args,
                                  const char *end);
dispatch_result_t admin_stats_detail(struct dispatch_ctx *d, const char *args,
                                     const char *end);
/* A dump's line for it (metadump's if meta, else cachedump's). */
size_t            admin_dump_line(const struct item_dump *it, dispatch_dump_t kind, char *line,
                                  size_t cap);
/*
 * Write the next piece of a key dump: until the output bound or a batch
 * of items (so other connections get their turn). DISPATCH_DONE once
 * "END" is queued, else DISPATCH_MORE_DUMP.
 */
dispatch_result_t admin_dump_more(struct dispatch_ctx *d);
/* The storage eviction hook that feeds `watch evictions`. */
void              admin_evict_hook(struct item *it, rel_time_t now);

#endif
