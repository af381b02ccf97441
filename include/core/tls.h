/*
 * tls.h -- TLS for client connections (-Z, memcached's ssl_* options),
 * with OpenSSL. A listener is TLS unless -Z is off or its -l entry has the
 * notls: prefix. Reads and writes of a TLS connection go through here;
 * the handshake happens inside the first reads, on the non-blocking
 * socket, so a client that stalls in it holds no worker.
 */
#ifndef SC_TLS_H
#define SC_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct tls_conn;

/* Build the server context from settings; 0, or -1 with a message. */
int      tls_setup(void);
void     tls_teardown(void);
bool     tls_enabled(void);
/* refresh_certs: load the certificate and key again (new connections);
 * on failure the old ones stay and err says why. */
int      tls_refresh(char *err, size_t cap);

/* require_cert: the client must present a certificate the CA accepts. */
struct tls_conn *tls_conn_new(int fd, bool require_cert);
void     tls_conn_free(struct tls_conn *t);
/*
 * As read()/writev(): bytes moved; 0 from tls_read when the peer closed;
 * -1 with errno EAGAIN when the socket must become readable, or writable
 * (then *want_write), before trying again; -1 with EIO on a TLS error.
 */
ssize_t  tls_read(struct tls_conn *t, void *buf, size_t n, bool *want_write);
ssize_t  tls_writev(struct tls_conn *t, const struct iovec *iov, int cnt, bool *want_read);
/* Decrypted bytes buffered inside OpenSSL (no socket event will say). */
bool     tls_pending(struct tls_conn *t);

#endif
