/*
 * log.h -- leveled logging to stderr (-v, -vv). At -vv the connection
 * layer and the classic ASCII dispatcher write memcached's per-connection
 * lines: "<fd new auto-negotiating client connection", "<fd <command
 * line>", ">fd <answer>", ">fd sending key K", "<fd connection closed.".
 */
#ifndef SC_LOG_H
#define SC_LOG_H

#include <stdbool.h>

typedef enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN  = 0,
    LOG_LEVEL_INFO  = 1,        /* -v */
    LOG_LEVEL_DEBUG = 2,        /* -vv */
} log_level_t;

void log_set_level(int level);
/* Whether lines of this level are written (a relaxed load): callers test
 * it before composing a per-request line. */
bool log_enabled(log_level_t level);
void log_write(log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
