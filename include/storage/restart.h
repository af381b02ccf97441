/*
 * restart.h -- warm restart (-e PATH / -o memory_file=PATH, as memcached
 * spells it): the cache survives a graceful stop and the next start.
 *
 * The slabs live in a shared mapping of the file at PATH (slab_set_file),
 * best on tmpfs, so their contents outlive the process. What indexes them
 * does not: a graceful stop (SIGUSR1, or `shutdown graceful` with -A)
 * writes PATH.meta -- the slab table (each slab's class), the geometry
 * that gave the slabs their layout, the clock, the CAS counter and the
 * flush_all point, the hash table's size, and with the flash tier its
 * slot table and the writer's place (the stubs in RAM point into the
 * flash file, which is then kept) -- under a checksum, to a
 * temporary file renamed into place last: the rename is the marker that
 * the stop finished. The next start reads it and deletes it before
 * serving, so a crash, a SIGKILL or a power cut afterwards leaves no
 * metadata and the start after that is cold: no item is served from a
 * half-written state. A start whose geometry differs (-m, -I, -f, -n,
 * slab_chunk_max, -C, a different version or item layout) logs why and
 * starts cold; a metadata file that cannot be read (empty, truncated, a
 * wrong checksum) stops the start with an error, as memcached does.
 * The items themselves are checked one by one as they are relinked
 * (item_restore).
 */
#ifndef SC_RESTART_H
#define SC_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "flash.h"
#include "item.h"
#include "slab.h"

#define RESTART_FORMAT 4    /* bumped by any change to what is saved or to the item layout */

/* What lays the slabs out: equal, or the file's contents mean nothing. */
struct restart_geometry {
    uint64_t maxbytes;
    uint64_t slab_size;
    uint32_t handle_shift;
    uint32_t nclasses;
    uint32_t chunk[256];        /* chunk size of each class, 1..nclasses */
    uint32_t chain_class;       /* chained values' body class, or 0 */
    uint32_t cas_enabled;
};

struct restart_meta {
    struct restart_geometry geo;
    int64_t           started;      /* the clock's zero (clock_started) */
    int64_t           stopped;      /* wall time of the graceful stop */
    struct item_state items;
    uint32_t          hashpower;
    uint32_t          nslabs;
    uint8_t          *cls;          /* nslabs entries; owned: restart_meta_free */
    uint64_t          room_classes[SLAB_ROOM_WORDS]; /* slab_room's: asked, past */
    bool              has_flash;    /* the flash tier's slot table follows */
    struct flash_state flash;       /* slots owned: restart_meta_free */
};

typedef enum restart_status {
    RESTART_NONE,       /* no metadata: a cold start */
    RESTART_FOUND,      /* read whole; compare its geometry before use */
    RESTART_BAD,        /* present but unreadable: the start must stop */
} restart_status_t;

/* Open (creating it) and lock the memory file for this process; -1 with
 * errno on failure (EWOULDBLOCK: another process holds it). */
int              restart_open_file(const char *path);
/* Empty the memory file (a cold start keeps nothing of it). */
int              restart_empty_file(int fd);
/* Read PATH.meta into *m and delete it; err gets the reason for BAD. */
restart_status_t restart_read(const char *path, struct restart_meta *m, char *err, size_t n);
/* This process's geometry (after slab_setup*, item_setup). */
void             restart_geometry(size_t maxbytes, struct restart_geometry *g);
/* Whether m's geometry is this one's; why gets the first difference. */
bool             restart_compatible(const struct restart_meta *m, size_t maxbytes,
                                    char *why, size_t n);
/* Write PATH.meta for the cache as it stands (nothing else running, the
 * flash tier quiesced); 0, or -1 with errno. */
int              restart_save(const char *path, size_t maxbytes);
void             restart_meta_free(struct restart_meta *m);

#endif
