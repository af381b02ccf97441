/*
 * tls_lib.h -- OpenSSL's functions, loaded when TLS is asked for.
 *
 * libssl and libcrypto take a couple of MB of every process that maps
 * them (relocated data and the pages around it), TLS or not. slabcache
 * opens them with dlopen() only when -Z is given, so a server without TLS
 * does not carry them. Each function is a pointer of the header's own type
 * (typeof), filled by tls_lib_load(); tls.c calls them by their usual
 * names through the redirections below, after the OpenSSL headers.
 */
#ifndef SC_TLS_LIB_H
#define SC_TLS_LIB_H

#include <stddef.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define TLS_LIB_FUNCS(X)                \
    X(BIO_number_read)                  \
    X(ERR_clear_error)                  \
    X(ERR_error_string_n)               \
    X(ERR_get_error)                    \
    X(OPENSSL_sk_pop_free)              \
    X(SSL_CTX_check_private_key)        \
    X(SSL_CTX_ctrl)                     \
    X(SSL_CTX_free)                     \
    X(SSL_CTX_load_verify_locations)    \
    X(SSL_CTX_new)                      \
    X(SSL_CTX_sess_set_new_cb)          \
    X(SSL_CTX_set_cipher_list)          \
    X(SSL_CTX_set_client_CA_list)       \
    X(SSL_CTX_set_options)              \
    X(SSL_CTX_set_session_id_context)   \
    X(SSL_CTX_set_verify)               \
    X(SSL_CTX_use_PrivateKey_file)      \
    X(SSL_CTX_use_certificate_chain_file) \
    X(SSL_free)                         \
    X(SSL_get_error)                    \
    X(SSL_get_rbio)                     \
    X(SSL_is_init_finished)             \
    X(SSL_load_client_CA_file)          \
    X(SSL_new)                          \
    X(SSL_pending)                      \
    X(SSL_read)                         \
    X(SSL_set_accept_state)             \
    X(SSL_set_fd)                       \
    X(SSL_set_verify)                   \
    X(SSL_shutdown)                     \
    X(SSL_write)                        \
    X(TLS_server_method)                \
    X(X509_NAME_free)

#define TLS_LIB_DECLARE(name) extern __typeof__(name) *tls_fn_##name;
TLS_LIB_FUNCS(TLS_LIB_DECLARE)
#undef TLS_LIB_DECLARE

/* Open the library (once) and fill every pointer; -1 with the reason in
 * err when it or one of the functions is missing. */
int  tls_lib_load(char *err, size_t cap);

/* The build keeps this list and TLS_LIB_FUNCS the same: a name missing
 * here links to no library (undefined), one missing there is undeclared. */
#ifdef TLS_LIB_REDIRECT
#define BIO_number_read                     tls_fn_BIO_number_read
#define ERR_clear_error                     tls_fn_ERR_clear_error
#define ERR_error_string_n                  tls_fn_ERR_error_string_n
#define ERR_get_error                       tls_fn_ERR_get_error
#define OPENSSL_sk_pop_free                 tls_fn_OPENSSL_sk_pop_free
#define SSL_CTX_check_private_key           tls_fn_SSL_CTX_check_private_key
#define SSL_CTX_ctrl                        tls_fn_SSL_CTX_ctrl
#define SSL_CTX_free                        tls_fn_SSL_CTX_free
#define SSL_CTX_load_verify_locations       tls_fn_SSL_CTX_load_verify_locations
#define SSL_CTX_new                         tls_fn_SSL_CTX_new
#define SSL_CTX_sess_set_new_cb             tls_fn_SSL_CTX_sess_set_new_cb
#define SSL_CTX_set_cipher_list             tls_fn_SSL_CTX_set_cipher_list
#define SSL_CTX_set_client_CA_list          tls_fn_SSL_CTX_set_client_CA_list
#define SSL_CTX_set_options                 tls_fn_SSL_CTX_set_options
#define SSL_CTX_set_session_id_context      tls_fn_SSL_CTX_set_session_id_context
#define SSL_CTX_set_verify                  tls_fn_SSL_CTX_set_verify
#define SSL_CTX_use_PrivateKey_file         tls_fn_SSL_CTX_use_PrivateKey_file
#define SSL_CTX_use_certificate_chain_file  tls_fn_SSL_CTX_use_certificate_chain_file
#define SSL_free                            tls_fn_SSL_free
#define SSL_get_error                       tls_fn_SSL_get_error
#define SSL_get_rbio                        tls_fn_SSL_get_rbio
#define SSL_is_init_finished                tls_fn_SSL_is_init_finished
#define SSL_load_client_CA_file             tls_fn_SSL_load_client_CA_file
#define SSL_new                             tls_fn_SSL_new
#define SSL_pending                         tls_fn_SSL_pending
#define SSL_read                            tls_fn_SSL_read
#define SSL_set_accept_state                tls_fn_SSL_set_accept_state
#define SSL_set_fd                          tls_fn_SSL_set_fd
#define SSL_set_verify                      tls_fn_SSL_set_verify
#define SSL_shutdown                        tls_fn_SSL_shutdown
#define SSL_write                           tls_fn_SSL_write
#define TLS_server_method                   tls_fn_TLS_server_method
#define X509_NAME_free                      tls_fn_X509_NAME_free
#endif

#endif
