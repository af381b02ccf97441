/*
 * faultio.c -- a device that fails on demand, for the flash tier's fault
 * tests (tests/integration/test_flash_faults.py). Preloaded into the
 * server (LD_PRELOAD), it stands between the server and libc's pread,
 * preadv and pwrite for one file, FAULTIO_PATH, and makes them fail as a
 * device does when the file FAULTIO_CTL says so. The product carries no
 * test hook: the server's own error paths are what is tested.
 *
 * FAULTIO_CTL holds words separated by blanks, read again whenever the
 * file changes (a test rewrites it to switch faults on and off):
 *   write=enospc   every write fails: ENOSPC (a full filesystem)
 *   write=eio      every write fails: EIO (a failing device)
 *   write=short    a write takes half its bytes, the next one fails
 *                  ENOSPC (a filesystem filling mid-write)
 *   read=eio       every read fails: EIO
 *   read=short     a read returns half the bytes asked for
 * Empty, or missing: no faults. Reads through io_uring do not pass
 * through libc: the tests that fault reads run with ext_io_uring=0, and
 * the ring's own error path is tested with a file truncated underneath.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum wmode { W_OK_ = 0, W_ENOSPC, W_EIO, W_SHORT };
enum rmode { R_OK_ = 0, R_EIO, R_SHORT };

static atomic_int target_fd = -1;
static atomic_int write_mode, read_mode;
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec ctl_mtime;
static off_t ctl_size = -1;
static __thread bool fail_next_write;

static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_preadv)(int, const struct iovec *, int, off_t);
static int (*real_open)(const char *, int, ...);
static int (*real_close)(int);

static void *
next_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);

    if (p == NULL) {
        fprintf(stderr, "faultio: no %s\n", name);
        abort();
    }
    return p;
}

/* At load, and again by any call that comes first (another library's
 * constructor may open a file before this one runs). */
__attribute__((constructor)) static void
faultio_init(void)
{
    if (real_close != NULL) {
        return;
    }
    real_pread = next_sym("pread");
    real_pwrite = next_sym("pwrite");
    real_preadv = next_sym("preadv");
    real_open = next_sym("open");
    real_close = next_sym("close");
}

/* Read FAULTIO_CTL again if it changed since the last look. */
static void
ctl_refresh(void)
{
    const char *path = getenv("FAULTIO_CTL");
    struct stat sb;
    char buf[256] = "";

    if (path == NULL) {
        return;
    }
    pthread_mutex_lock(&ctl_lock);
    if (stat(path, &sb) != 0) {
        sb.st_size = 0;
        sb.st_mtim = (struct timespec){ 0, 0 };
    }
    if (sb.st_size == ctl_size && sb.st_mtim.tv_sec == ctl_mtime.tv_sec &&
        sb.st_mtim.tv_nsec == ctl_mtime.tv_nsec) {
        pthread_mutex_unlock(&ctl_lock);
        return;
    }
    ctl_size = sb.st_size;
    ctl_mtime = sb.st_mtim;
    int fd = real_open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = real_pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        real_close(fd);
    }
    int w = W_OK_, r = R_OK_;
    for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t != NULL;
         t = strtok_r(NULL, " \t\r\n", &save)) {
        if (strcmp(t, "write=enospc") == 0) {
            w = W_ENOSPC;
        } else if (strcmp(t, "write=eio") == 0) {
            w = W_EIO;
        } else if (strcmp(t, "write=short") == 0) {
            w = W_SHORT;
        } else if (strcmp(t, "read=eio") == 0) {
            r = R_EIO;
        } else if (strcmp(t, "read=short") == 0) {
            r = R_SHORT;
        } else {
            fprintf(stderr, "faultio: unknown fault '%s'\n", t);
        }
    }
    atomic_store(&write_mode, w);
    atomic_store(&read_mode, r);
    pthread_mutex_unlock(&ctl_lock);
}

static bool
is_target(int fd)
{
    if (fd < 0 || fd != atomic_load(&target_fd)) {
        return false;
    }
    ctl_refresh();
    return true;
}

int
open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    const char *want = getenv("FAULTIO_PATH");

    faultio_init();

    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int fd = real_open(path, flags, mode);
    if (fd >= 0 && want != NULL && strcmp(path, want) == 0) {
        atomic_store(&target_fd, fd);
    }
    return fd;
}

int
close(int fd)
{
    int expect = fd;

    faultio_init();

    atomic_compare_exchange_strong(&target_fd, &expect, -1);
    return real_close(fd);
}

ssize_t
pwrite(int fd, const void *buf, size_t count, off_t off)
{
    faultio_init();
    if (!is_target(fd)) {
        return real_pwrite(fd, buf, count, off);
    }
    switch (atomic_load(&write_mode)) {
    case W_ENOSPC:
        errno = ENOSPC;
        return -1;
    case W_EIO:
        errno = EIO;
        return -1;
    case W_SHORT:
        if (fail_next_write || count < 2) {
            fail_next_write = false;
            errno = ENOSPC;
            return -1;
        }
        fail_next_write = true;
        return real_pwrite(fd, buf, count / 2, off);
    default:
        fail_next_write = false;
        return real_pwrite(fd, buf, count, off);
    }
}

ssize_t
pread(int fd, void *buf, size_t count, off_t off)
{
    faultio_init();
    if (!is_target(fd)) {
        return real_pread(fd, buf, count, off);
    }
    switch (atomic_load(&read_mode)) {
    case R_EIO:
        errno = EIO;
        return -1;
    case R_SHORT:
        return real_pread(fd, buf, count / 2, off);
    default:
        return real_pread(fd, buf, count, off);
    }
}

ssize_t
preadv(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
    faultio_init();
    if (!is_target(fd)) {
        return real_preadv(fd, iov, iovcnt, off);
    }
    switch (atomic_load(&read_mode)) {
    case R_EIO:
        errno = EIO;
        return -1;
    case R_SHORT: {
        ssize_t n = real_preadv(fd, iov, iovcnt, off);
        return n > 0 ? n / 2 : n;
    }
    default:
        return real_preadv(fd, iov, iovcnt, off);
    }
}
