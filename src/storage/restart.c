/*
 * restart.c -- the memory file and its metadata (see restart.h for the why).
 *
 * PATH.meta is one block: a header (magic, format, version, the item
 * header's size), the geometry, the clock, the item state, the hash
 * table's power, the slab table (one class byte per slab), then an FNV-1a
 * checksum of everything before it. Written whole to PATH.meta.tmp,
 * synced, renamed over PATH.meta: a reader sees all of it or none.
 */
#include "restart.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assoc.h"
#include "clock.h"
#include "config.h"
#include "item_int.h"
#include "slab.h"

#define META_MAGIC "slabcache meta\n"

struct meta_header {
    char     magic[16];
    uint32_t format;
    uint32_t item_header;
    char     version[32];
};

/* The fixed part after the header. */
struct meta_body {
    struct restart_geometry geo;
    int64_t  started;
    int64_t  stopped;
    uint64_t cas_seq;
    uint64_t oldest_cas;
    uint32_t oldest_live;
    uint32_t hashpower;
    uint32_t nslabs;
    uint32_t has_flash;
    uint64_t room_classes[SLAB_ROOM_WORDS];
};

/* With has_flash, after the slab table; then flash_nslabs slot states. */
struct meta_flash {
    uint64_t size;
    uint64_t records_live;
    uint32_t slab_size;
    uint32_t nslabs;
    uint32_t page_slabs;
    uint32_t next_seq;
};

static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

#define FNV_INIT 0xcbf29ce484222325ull

static void
meta_path(const char *path, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s%s", path, suffix);
}

static void
header_fill(struct meta_header *h)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, META_MAGIC, sizeof(META_MAGIC));
    h->format = RESTART_FORMAT;
    h->item_header = (uint32_t)item_total_size(0, 0);
    snprintf(h->version, sizeof(h->version), "%s", PACKAGE_VERSION);
}

int
restart_open_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int
restart_empty_file(int fd)
{
    return ftruncate(fd, 0);
}

void
restart_geometry(size_t maxbytes, struct restart_geometry *g)
{
    memset(g, 0, sizeof(*g));
    g->maxbytes = maxbytes;
    g->slab_size = slab_size();
    g->handle_shift = slab_arena.handle_shift;
    g->nclasses = slab_class_count();
    for (uint32_t c = 1; c <= g->nclasses && c < 256; c++) {
        g->chunk[c] = (uint32_t)slab_class_chunk_size((uint8_t)c);
    }
    g->chain_class = item_chain_class();
    g->cas_enabled = item_cas_enabled;
}

static int
read_all(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int
write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;

    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The file's bytes as a meta, or the reason it is not one. */
static restart_status_t
meta_parse(int fd, struct restart_meta *m, char *err, size_t n)
{
    struct meta_header h, want;
    struct meta_body b;
    uint64_t sum, have;

    if (read_all(fd, &h, sizeof(h)) != 0) {
        snprintf(err, n, "truncated");
        return RESTART_BAD;
    }
    header_fill(&want);
    if (memcmp(h.magic, want.magic, sizeof(h.magic)) != 0) {
        snprintf(err, n, "not a slabcache metadata file");
        return RESTART_BAD;
    }
    /* Another format, version or item layout: readable, not usable (the
     * body's layout may differ too, so it is not read). */
    if (h.format != want.format || h.item_header != want.item_header ||
        memcmp(h.version, want.version, sizeof(h.version)) != 0) {
        m->geo.maxbytes = 0;    /* restart_compatible says why */
        snprintf(err, n, "written by slabcache %.32s (format %u)", h.version, h.format);
        return RESTART_FOUND;
    }
    if (read_all(fd, &b, sizeof(b)) != 0) {
        snprintf(err, n, "truncated");
        return RESTART_BAD;
    }
    if (b.nslabs > (1u << 26)) {
        snprintf(err, n, "a slab table of %u slabs", b.nslabs);
        return RESTART_BAD;
    }
    m->cls = malloc(b.nslabs > 0 ? b.nslabs : 1);
    if (m->cls == NULL || read_all(fd, m->cls, b.nslabs) != 0) {
        snprintf(err, n, m->cls == NULL ? "out of memory" : "truncated");
        return RESTART_BAD;
    }
    sum = fnv1a(fnv1a(fnv1a(FNV_INIT, &h, sizeof(h)), &b, sizeof(b)), m->cls, b.nslabs);
    if (b.has_flash) {
        struct meta_flash f;
        if (read_all(fd, &f, sizeof(f)) != 0 || f.nslabs == 0 || f.nslabs > (1u << 26)) {
            snprintf(err, n, "truncated");
            return RESTART_BAD;
        }
        size_t len = (size_t)f.nslabs * sizeof(*m->flash.slots);
        m->flash.slots = malloc(len);
        if (m->flash.slots == NULL || read_all(fd, m->flash.slots, len) != 0) {
            snprintf(err, n, m->flash.slots == NULL ? "out of memory" : "truncated");
            return RESTART_BAD;
        }
        sum = fnv1a(fnv1a(sum, &f, sizeof(f)), m->flash.slots, len);
        m->has_flash = true;
        m->flash.size = f.size;
        m->flash.records_live = f.records_live;
        m->flash.slab_size = f.slab_size;
        m->flash.nslabs = f.nslabs;
        m->flash.page_slabs = f.page_slabs;
        m->flash.next_seq = f.next_seq;
    }
    if (read_all(fd, &have, sizeof(have)) != 0) {
        snprintf(err, n, "truncated");
        return RESTART_BAD;
    }
    if (sum != have) {
        snprintf(err, n, "checksum mismatch");
        return RESTART_BAD;
    }
    m->geo = b.geo;
    m->started = b.started;
    m->stopped = b.stopped;
    m->items.cas_seq = b.cas_seq;
    m->items.oldest_cas = b.oldest_cas;
    m->items.oldest_live = b.oldest_live;
    m->hashpower = b.hashpower;
    m->nslabs = b.nslabs;
    memcpy(m->room_classes, b.room_classes, sizeof(m->room_classes));
    return RESTART_FOUND;
}

restart_status_t
restart_read(const char *path, struct restart_meta *m, char *err, size_t n)
{
    char mp[4096];
    restart_status_t st;

    memset(m, 0, sizeof(*m));
    err[0] = '\0';
    meta_path(path, ".meta", mp, sizeof(mp));
    int fd = open(mp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return RESTART_NONE;
        }
        snprintf(err, n, "%s: %s", mp, strerror(errno));
        return RESTART_BAD;
    }
    st = meta_parse(fd, m, err, n);
    close(fd);
    if (st == RESTART_BAD) {
        restart_meta_free(m);
        return st;
    }
    /* Used once: a crash from here on leaves no metadata, so the next
     * start is cold rather than one that trusts slabs written since. */
    if (unlink(mp) != 0) {
        snprintf(err, n, "cannot remove %s: %s", mp, strerror(errno));
        restart_meta_free(m);
        return RESTART_BAD;
    }
    return st;
}

bool
restart_compatible(const struct restart_meta *m, size_t maxbytes, char *why, size_t n)
{
    struct restart_geometry g;

    if (m->geo.maxbytes == 0) {
        return false;           /* restart_read's err says why */
    }
    restart_geometry(maxbytes, &g);
    if (m->geo.maxbytes != g.maxbytes) {
        snprintf(why, n, "-m was %llu MB, now %llu MB",
                 (unsigned long long)(m->geo.maxbytes >> 20),
                 (unsigned long long)(g.maxbytes >> 20));
    } else if (m->geo.slab_size != g.slab_size) {
        snprintf(why, n, "-I was %llu, now %llu", (unsigned long long)m->geo.slab_size,
                 (unsigned long long)g.slab_size);
    } else if (m->geo.cas_enabled != g.cas_enabled) {
        snprintf(why, n, "-C changed");
    } else if (memcmp(&m->geo, &g, sizeof(g)) != 0) {
        snprintf(why, n, "the slab classes changed (-f, -n, slab_chunk_max, or their defaults)");
    } else if (m->nslabs > slab_table_capacity()) {
        snprintf(why, n, "%u slabs saved, room for %u now", m->nslabs, slab_table_capacity());
    } else {
        return true;
    }
    return false;
}

static int
meta_write(int fd, size_t maxbytes)
{
    struct meta_header h;
    struct meta_body b;
    struct item_state is;
    uint32_t nslabs = slab_table_count();
    uint8_t *cls = malloc(nslabs > 0 ? nslabs : 1);

    if (cls == NULL) {
        return -1;
    }
    for (uint32_t sid = 0; sid < nslabs; sid++) {
        struct slab_info info;
        cls[sid] = slab_table_info(sid, &info) ? info.cls : 0;
    }
    header_fill(&h);
    memset(&b, 0, sizeof(b));
    restart_geometry(maxbytes, &b.geo);
    item_state_save(&is);
    b.started = (int64_t)clock_started();
    b.stopped = (int64_t)time(NULL);
    b.cas_seq = is.cas_seq;
    b.oldest_cas = is.oldest_cas;
    b.oldest_live = is.oldest_live;
    b.hashpower = assoc_power();
    b.nslabs = nslabs;
    slab_room_classes_get(b.room_classes);
    struct flash_state fs;
    struct meta_flash f;
    b.has_flash = flash_state_save(&fs);
    uint64_t sum = fnv1a(fnv1a(fnv1a(FNV_INIT, &h, sizeof(h)), &b, sizeof(b)), cls, nslabs);
    int rc = write_all(fd, &h, sizeof(h)) == 0 && write_all(fd, &b, sizeof(b)) == 0 &&
             write_all(fd, cls, nslabs) == 0 ? 0 : -1;
    if (rc == 0 && b.has_flash) {
        size_t len = (size_t)fs.nslabs * sizeof(*fs.slots);
        memset(&f, 0, sizeof(f));
        f.size = fs.size;
        f.records_live = fs.records_live;
        f.slab_size = fs.slab_size;
        f.nslabs = fs.nslabs;
        f.page_slabs = fs.page_slabs;
        f.next_seq = fs.next_seq;
        sum = fnv1a(fnv1a(sum, &f, sizeof(f)), fs.slots, len);
        rc = write_all(fd, &f, sizeof(f)) == 0 && write_all(fd, fs.slots, len) == 0 ? 0 : -1;
    }
    if (rc == 0) {
        rc = write_all(fd, &sum, sizeof(sum));
    }
    free(fs.slots);
    free(cls);
    return rc;
}

int
restart_save(const char *path, size_t maxbytes)
{
    char mp[4096], tmp[4096];

    meta_path(path, ".meta", mp, sizeof(mp));
    meta_path(path, ".meta.tmp", tmp, sizeof(tmp));
    /* The slabs first: the metadata must never describe slabs that are
     * not all in the file yet. */
    if (slab_sync() != 0) {
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -1;
    }
    if (meta_write(fd, maxbytes) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    if (close(fd) != 0 || rename(tmp, mp) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

void
restart_meta_free(struct restart_meta *m)
{
    free(m->cls);
    m->cls = NULL;
    free(m->flash.slots);
    m->flash.slots = NULL;
    m->has_flash = false;
}
