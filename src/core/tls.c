/*
 * tls.c -- TLS connections with OpenSSL (tls.h).
 *
 * One server context, built from memcached's options (-Z, ssl_chain_cert,
 * ssl_key, ssl_ca_cert, ssl_verify_mode, ssl_min_version, ssl_ciphers,
 * ssl_session_cache, ssl_wbuf_size) and replaced whole by refresh_certs,
 * so a connection keeps the context it started with. Writes copy the
 * output queue's pieces into a per-connection buffer of ssl_wbuf_size
 * bytes and encrypt it in one record, as memcached does, instead of one
 * record per piece. Counters go to the stats layer.
 */
#include "tls.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define TLS_LIB_REDIRECT        /* OpenSSL's names call what -Z loaded */
#include "tls_lib.h"

#include "log.h"
#include "settings.h"
#include "stats.h"

struct tls_conn {
    SSL    *ssl;
    bool    handshake_done;
    size_t  pending;            /* bytes of wbuf a retried SSL_write must offer again */
    size_t  wsize;
    char    wbuf[];
};

static SSL_CTX        *server_ctx;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static const int min_versions[] = { TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION,
                                    TLS1_3_VERSION };

static void
tls_log_errors(const char *what)
{
    unsigned long e;
    char buf[256];

    while ((e = ERR_get_error()) != 0) {
        ERR_error_string_n(e, buf, sizeof(buf));
        log_error("%s: %s", what, buf);
    }
}

static int
tls_on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    (void)sess;
    stats_tls_new_session();
    return 0;                   /* OpenSSL keeps the session in its cache */
}

static int
tls_verify_flags(long mode)
{
    switch (mode) {
    case 1:  return SSL_VERIFY_PEER;
    case 2:  return SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    case 3:  return SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT | SSL_VERIFY_CLIENT_ONCE;
    default: return SSL_VERIFY_NONE;
    }
}

/* A context from the settings, or NULL with the reasons logged. */
static SSL_CTX *
tls_ctx_build(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        tls_log_errors("TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, min_versions[settings.ssl_min_version]);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, settings.ssl_chain_cert) != 1) {
        tls_log_errors("ssl_chain_cert");
        log_error("cannot load the certificate chain %s", settings.ssl_chain_cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, settings.ssl_key, (int)settings.ssl_keyformat) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        tls_log_errors("ssl_key");
        log_error("cannot load the private key %s (or it does not match the certificate)",
                  settings.ssl_key);
        goto fail;
    }
    if (settings.ssl_ca_cert != NULL) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(settings.ssl_ca_cert);
        if (names == NULL ||
            SSL_CTX_load_verify_locations(ctx, settings.ssl_ca_cert, NULL) != 1) {
            /* sk_X509_NAME_pop_free, spelled out: OpenSSL 1.1's is an
             * inline function the redirection (tls_lib.h) cannot reach */
            OPENSSL_sk_pop_free((OPENSSL_STACK *)names, (OPENSSL_sk_freefunc)X509_NAME_free);
            tls_log_errors("ssl_ca_cert");
            log_error("cannot load the CA certificates %s", settings.ssl_ca_cert);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    }
    SSL_CTX_set_verify(ctx, tls_verify_flags(settings.ssl_verify_mode), NULL);
    if (settings.ssl_ciphers != NULL && SSL_CTX_set_cipher_list(ctx, settings.ssl_ciphers) != 1) {
        tls_log_errors("ssl_ciphers");
        log_error("no usable cipher in %s", settings.ssl_ciphers);
        goto fail;
    }
    if (settings.ssl_session_cache) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_sess_set_new_cb(ctx, tls_on_new_session);
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"slabcache", 9);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

int
tls_setup(void)
{
    if (!settings.ssl_enabled) {
        return 0;
    }
    if (settings.ssl_chain_cert == NULL || settings.ssl_key == NULL) {
        log_error("-Z needs -o ssl_chain_cert=FILE,ssl_key=FILE");
        return -1;
    }
    char err[256];
    if (tls_lib_load(err, sizeof(err)) != 0) {
        log_error("-Z: %s", err);
        return -1;
    }
    server_ctx = tls_ctx_build();
    if (server_ctx == NULL) {
        return -1;
    }
    stats_tls_certs_loaded();
    return 0;
}

int
tls_refresh(char *err, size_t cap)
{
    SSL_CTX *ctx = tls_ctx_build();

    if (ctx == NULL) {
        snprintf(err, cap, "Error loading the certificate chain or key: %s, %s",
                 settings.ssl_chain_cert, settings.ssl_key);
        return -1;
    }
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX *old = server_ctx;
    server_ctx = ctx;           /* connections hold references to the old one */
    pthread_mutex_unlock(&ctx_lock);
    SSL_CTX_free(old);
    stats_tls_certs_loaded();
    return 0;
}

void
tls_teardown(void)
{
    if (server_ctx != NULL) {   /* else OpenSSL may not be loaded at all */
        SSL_CTX_free(server_ctx);
        server_ctx = NULL;
    }
}

bool
tls_enabled(void)
{
    return server_ctx != NULL;
}

struct tls_conn *
tls_conn_new(int fd, bool require_cert)
{
    size_t wsize = (size_t)settings.ssl_wbuf_size * 1024;
    struct tls_conn *t = calloc(1, sizeof(*t) + wsize);

    if (t == NULL) {
        return NULL;
    }
    t->wsize = wsize;
    pthread_mutex_lock(&ctx_lock);
    t->ssl = SSL_new(server_ctx);
    pthread_mutex_unlock(&ctx_lock);
    if (t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1) {
        tls_log_errors("TLS connection");
        tls_conn_free(t);
        return NULL;
    }
    if (require_cert) {
        SSL_set_verify(t->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL_set_accept_state(t->ssl);
    return t;
}

void
tls_conn_free(struct tls_conn *t)
{
    if (t == NULL) {
        return;
    }
    if (t->ssl != NULL) {
        if (t->handshake_done) {
            SSL_shutdown(t->ssl);       /* one close_notify, no waiting */
        }
        SSL_free(t->ssl);
    }
    free(t);
}

/* After an SSL call returned r <= 0: EAGAIN (and which way), 0 or EIO. */
static ssize_t
tls_fail(struct tls_conn *t, int r, bool *want_write, bool *want_read)
{
    int e = SSL_get_error(t->ssl, r);

    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (want_write != NULL) {
            *want_write = e == SSL_ERROR_WANT_WRITE;
        }
        if (want_read != NULL) {
            *want_read = e == SSL_ERROR_WANT_READ;
        }
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        errno = EPIPE;
        return 0;                       /* close_notify: a clean close */
    }
    /* A peer that connects and closes before sending anything (a health
     * check) is no failed handshake; memcached does not count it either. */
    bool bare_eof = BIO_number_read(SSL_get_rbio(t->ssl)) == 0;
    if (!t->handshake_done && !bare_eof) {
        /* a plaintext client, a bad or missing certificate, no shared
         * cipher or version: counted, and the connection is dropped */
        stats_tls_handshake_error();
    }
    ERR_clear_error();
    errno = EIO;
    return -1;
}

ssize_t
tls_read(struct tls_conn *t, void *buf, size_t n, bool *want_write)
{
    *want_write = false;
    ERR_clear_error();
    int r = SSL_read(t->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) {
        t->handshake_done = true;
        return r;
    }
    if (SSL_is_init_finished(t->ssl)) {
        t->handshake_done = true;
    }
    return tls_fail(t, r, want_write, NULL);
}

/* Copy up to t->wsize bytes of iov into wbuf (exactly t->pending when a
 * write is being retried: the queue has not moved, so they are the same). */
static size_t
tls_fill(struct tls_conn *t, const struct iovec *iov, int cnt, size_t skip)
{
    size_t want = t->pending > 0 ? t->pending : t->wsize, n = 0;

    for (int i = 0; i < cnt && n < want; i++) {
        size_t len = iov[i].iov_len;
        const char *base = iov[i].iov_base;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        size_t take = len - skip < want - n ? len - skip : want - n;
        memcpy(t->wbuf + n, base + skip, take);
        n += take;
        skip = 0;
    }
    return n;
}

ssize_t
tls_writev(struct tls_conn *t, const struct iovec *iov, int cnt, bool *want_read)
{
    size_t total = 0;

    *want_read = false;
    for (;;) {
        size_t n = tls_fill(t, iov, cnt, total);
        if (n == 0) {
            return (ssize_t)total;
        }
        ERR_clear_error();
        int r = SSL_write(t->ssl, t->wbuf, (int)n);
        if (r <= 0) {
            t->pending = n;
            ssize_t f = tls_fail(t, r, NULL, want_read);
            if (total > 0 && f < 0 && errno == EAGAIN) {
                return (ssize_t)total;
            }
            return f == 0 ? -1 : f;
        }
        t->handshake_done = true;
        t->pending = 0;
        total += (size_t)r;
    }
}

bool
tls_pending(struct tls_conn *t)
{
    return SSL_pending(t->ssl) > 0;
}
