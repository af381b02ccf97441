/*
 * bin_sasl.h -- SASL authentication over the binary protocol (-S), as
 * memcached does it, with Cyrus SASL: the service is "memcached", so
 * memcached's SASL configuration (SASL_CONF_PATH/memcached.conf, its
 * sasldb) works unchanged. Until a connection authenticates, every binary
 * command but the SASL ones and VERSION is answered "Auth failure." and
 * the connection closed.
 */
#ifndef SC_BIN_SASL_H
#define SC_BIN_SASL_H

#include <stdbool.h>
#include <stddef.h>

typedef enum bin_sasl_result {
    BIN_SASL_OK,                /* authenticated */
    BIN_SASL_CONTINUE,          /* another step; *out is the challenge */
    BIN_SASL_FAIL,
} bin_sasl_result_t;

/* Once, at start (-S): 0, or -1 with a message. */
int  bin_sasl_setup(void);
void bin_sasl_teardown(void);

/* Per connection (the dispatcher's ctx holds *state, NULL at first). */
bool bin_sasl_mechs(void **state, const char **list, size_t *len);
bin_sasl_result_t bin_sasl_auth(void **state, bool step, const char *mech,
                                const char *data, size_t len,
                                const char **out, size_t *outlen);
void bin_sasl_free(void **state);

#endif
