/*
 * auth.h -- memcached's ASCII authentication (-Y FILE): the credentials
 * file ("user:password" per line) and the check. SIGHUP reloads the file,
 * as memcached does; a connection that has authenticated stays so.
 */
#ifndef SC_AUTH_H
#define SC_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define AUTH_ENTRIES_MAX 1024   /* memcached reads 8 and ignores the rest */
#define AUTH_LINE_MAX    256    /* bytes per line, as memcached */

typedef enum auth_rstatus {
    AUTH_OK,
    AUTH_OPEN_FAILED,           /* errno says why */
    AUTH_MALFORMED,             /* a line without "user:password" */
    AUTH_TOO_MANY,              /* more than AUTH_ENTRIES_MAX lines */
    AUTH_NO_MEMORY,
} auth_rstatus_t;

/* Load (or, on SIGHUP, reload) the file; the old entries stay on failure. */
auth_rstatus_t auth_load(const char *path);
bool           auth_enabled(void);
/* In time independent of where user or password differ. */
bool           auth_check(const char *user, size_t nuser, const char *pass, size_t npass);
void           auth_teardown(void);

#endif
