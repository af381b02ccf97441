/*
 * bin_sasl.c -- Cyrus SASL for the binary protocol (bin_sasl.h).
 *
 * Cyrus does the mechanisms (PLAIN, CRAM-MD5, ...) and the password
 * checks (sasldb, saslauthd) by its configuration; this file only keeps a
 * sasl_conn_t per connection and maps results, as memcached's
 * proto_bin.c does. SASL_CONF_PATH points Cyrus at the directory holding
 * memcached.conf, as for memcached.
 */
#include "bin_sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sasl/sasl.h>

#include "log.h"

struct bin_sasl {
    sasl_conn_t *conn;
    bool         started;
};

static char hostname[256];

/* sasl_callback_t's proc type; callbacks of other shapes are cast to it
 * (through void (*)(void), which matches every function type). */
typedef int (*sasl_cb_fn)(void);

static int
bin_sasl_log(void *context, int level, const char *message)
{
    (void)context;
    if (level <= SASL_LOG_ERR) {
        log_error("SASL: %s", message);
    }
    return SASL_OK;
}

static int
bin_sasl_getconfpath(void *context, char **path)
{
    (void)context;
    *path = getenv("SASL_CONF_PATH");
    return *path != NULL ? SASL_OK : SASL_FAIL;
}

static sasl_callback_t callbacks[] = {
    { SASL_CB_LOG, (sasl_cb_fn)(void (*)(void))bin_sasl_log, NULL },
    { SASL_CB_GETCONFPATH, (sasl_cb_fn)(void (*)(void))bin_sasl_getconfpath, NULL },
    { SASL_CB_LIST_END, NULL, NULL },
};

int
bin_sasl_setup(void)
{
    if (gethostname(hostname, sizeof(hostname) - 1) != 0) {
        hostname[0] = '\0';
    }
    if (getenv("SASL_CONF_PATH") == NULL) {
        callbacks[1].id = SASL_CB_LIST_END;     /* Cyrus's default places */
    }
    if (sasl_server_init(callbacks, "memcached") != SASL_OK) {
        fprintf(stderr, "Error initializing sasl.\n");
        return -1;
    }
    return 0;
}

void
bin_sasl_teardown(void)
{
    sasl_server_done();
}

static struct bin_sasl *
bin_sasl_state(void **state)
{
    struct bin_sasl *s = *state;

    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            return NULL;
        }
        if (sasl_server_new("memcached", NULL, hostname[0] ? hostname : NULL, NULL, NULL,
                            NULL, 0, &s->conn) != SASL_OK) {
            free(s);
            return NULL;
        }
        *state = s;
    }
    return s;
}

bool
bin_sasl_mechs(void **state, const char **list, size_t *len)
{
    struct bin_sasl *s = bin_sasl_state(state);
    unsigned n = 0;

    if (s == NULL || sasl_listmech(s->conn, NULL, "", " ", "", list, &n, NULL) != SASL_OK) {
        return false;
    }
    *len = n;
    return true;
}

bin_sasl_result_t
bin_sasl_auth(void **state, bool step, const char *mech, const char *data, size_t len,
              const char **out, size_t *outlen)
{
    struct bin_sasl *s = bin_sasl_state(state);
    unsigned n = 0;
    int r = SASL_FAIL;

    *out = NULL;
    *outlen = 0;
    if (s == NULL) {
        return BIN_SASL_FAIL;
    }
    if (!step) {
        r = sasl_server_start(s->conn, mech, len > 0 ? data : NULL, (unsigned)len, out, &n);
        s->started = r == SASL_OK || r == SASL_CONTINUE;
    } else if (s->started) {
        r = sasl_server_step(s->conn, len > 0 ? data : NULL, (unsigned)len, out, &n);
    }
    *outlen = n;
    return r == SASL_OK ? BIN_SASL_OK : r == SASL_CONTINUE ? BIN_SASL_CONTINUE : BIN_SASL_FAIL;
}

void
bin_sasl_free(void **state)
{
    struct bin_sasl *s = *state;

    if (s != NULL) {
        sasl_dispose(&s->conn);
        free(s);
        *state = NULL;
    }
}
