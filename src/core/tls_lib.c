/*
 * tls_lib.c -- open OpenSSL when TLS is asked for (tls_lib.h).
 *
 * The library is the one whose headers the build compiled against (its
 * soname, read by configure), so the functions have the types the
 * headers gave tls.c. Loaded once, never closed: connections hold its objects until
 * exit.
 */
#include "config.h"

#include "tls_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#define TLS_LIB_DEFINE(name) __typeof__(name) *tls_fn_##name;
TLS_LIB_FUNCS(TLS_LIB_DEFINE)
#undef TLS_LIB_DEFINE

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool            loaded;

static int
lib_resolve(void *lib, char *err, size_t cap)
{
    void *sym;

#define TLS_LIB_RESOLVE(name)                                                   \
    sym = dlsym(lib, #name);                                                    \
    if (sym == NULL) {                                                          \
        snprintf(err, cap, "%s has no %s", TLS_LIBSSL, #name);                  \
        return -1;                                                              \
    }                                                                           \
    tls_fn_##name = (__typeof__(name) *)sym;
    TLS_LIB_FUNCS(TLS_LIB_RESOLVE)
#undef TLS_LIB_RESOLVE
    return 0;
}

int
tls_lib_load(char *err, size_t cap)
{
    int rc = 0;

    pthread_mutex_lock(&lock);
    if (!loaded) {
        void *lib = dlopen(TLS_LIBSSL, RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            snprintf(err, cap, "cannot load OpenSSL: %s", dlerror());
            rc = -1;
        } else if (lib_resolve(lib, err, cap) != 0) {
            dlclose(lib);
            rc = -1;
        } else {
            loaded = true;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}
