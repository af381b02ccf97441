/*
 * item_restore.c -- a warm restart (-e, restart.h) relinks the items a
 * graceful stop left in the slabs.
 *
 * Slabs come back with their classes (slab_restore_table). Every chunk of
 * every slab is then judged from what it holds, in three walks:
 *   1. chunks not linked lose whatever reference count they held (a chunk
 *      being filled or sent when the server stopped is free now);
 *   2. each linked item is checked (a key of 1 to 250 bytes, a size its
 *      chunk holds, a value ending in "\r\n", a chained value's bodies
 *      all there) and dropped if it fails or its time has passed (expired,
 *      or stored before a flush_all); the others get the table's one
 *      reference and go into the hash table, their chained bodies marked;
 *   3. each slab's free list is built from the rest.
 * A flash stub is kept when the record it points at is in a flash slab
 * the flash tier got back (flash_state_restore): a read then checks the
 * record's key and checksum as any other does. Nothing here runs while
 * anything else touches the cache: before the workers start.
 */
#include "item.h"

#include <string.h>

#include "assoc.h"
#include "clock.h"
#include "item_int.h"
#include "slab.h"

#define KEY_MAX       250
#define BODY_MARK     UINT32_MAX    /* refs of a body whose head came back (walk 2 to 3) */
#define FLAGS_KEPT    (ITEM_FETCHED | ITEM_ACTIVE | ITEM_STALE | ITEM_TOKEN_SENT | \
                       ITEM_KEY_BINARY | ITEM_FLASH)

struct restore_walk {
    rel_time_t            now;
    struct item_restored *out;
};

static bool
linked(struct item *it)
{
    uint32_t f = atomic_load_explicit(&it->refs, memory_order_relaxed) >> ITEM_REF_BITS;

    return (f & (ITEM_LINKED | ITEM_FREE)) == ITEM_LINKED;
}

static bool
clear_loose(struct item *it, void *arg)
{
    (void)arg;
    if (!linked(it)) {
        atomic_store_explicit(&it->refs, 0, memory_order_relaxed);
    }
    return false;
}

static void
mark_body(struct item *b)
{
    atomic_store_explicit(&b->refs, BODY_MARK, memory_order_relaxed);
}

/* Whether linked item it is whole: its chunk holds it, its value ends;
 * a stub's record is in a flash slab still there. */
static bool
whole(struct item *it)
{
    size_t nkey = item_nkey(it);

    if (item_iflags(it) & ITEM_FLASH) {
        struct item_stub st = item_stub_of(it);
        return nkey == 0 && it->nbytes >= 2 && (st.fp >> 24) != 0 &&
               ITEM_STUB_SIZE <= slab_class_chunk_size(slab_cls_of(it)) &&
               flash_loc_valid(&st.loc);
    }
    if (nkey == 0 || nkey > KEY_MAX || it->nbytes < 2) {
        return false;
    }
    if (item_chained(it)) {
        return item_chain_restore(it, mark_body);
    }
    return item_ntotal(it) <= slab_class_chunk_size(slab_cls_of(it)) &&
           memcmp(item_value(it) + it->nbytes - 2, "\r\n", 2) == 0;
}

static bool
relink(struct item *it, void *arg)
{
    struct restore_walk *w = arg;

    if (!linked(it)) {
        return false;
    }
    if (!whole(it)) {
        w->out->broken++;
        atomic_store_explicit(&it->refs, 0, memory_order_relaxed);
        return false;
    }
    if (item_is_stale_by_time(it, w->now)) {
        w->out->expired++;
        atomic_store_explicit(&it->refs, 0, memory_order_relaxed);
        return false;
    }
    uint8_t f = (uint8_t)(item_iflags(it) & FLAGS_KEPT);
    uint8_t cls = slab_cls_of(it);
    uint32_t hv = item_hash(it);
    struct item_class_state *l = &item_classes[cls];

    atomic_store(&it->refs, ((uint32_t)(f | ITEM_LINKED) << ITEM_REF_BITS) | 1u);
    it->h_next = SLAB_HANDLE_NONE;
    assoc_lock(hv);
    assoc_insert(it, hv);
    assoc_unlock(hv);
    atomic_fetch_add_explicit(&l->number, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->bytes, item_ntotal(it), memory_order_relaxed);
    item_note_ttl(cls, it->exptime);
    if (f & ITEM_FLASH) {
        flash_note_used(1, flash_rec_len((uint8_t)(item_stub_of(it).fp >> 24), it->nbytes));
        w->out->stubs++;
    }
    if (item_cas(it) > w->out->max_cas) {
        w->out->max_cas = item_cas(it);
    }
    w->out->items++;
    w->out->bytes += item_ntotal(it);
    return false;
}

static bool
in_use(struct item *it, void *arg)
{
    (void)arg;
    if (linked(it)) {
        return true;
    }
    if (atomic_load_explicit(&it->refs, memory_order_relaxed) == BODY_MARK) {
        atomic_store_explicit(&it->refs, 0, memory_order_relaxed);
        return true;
    }
    return false;
}

void
item_restore(uint32_t nslabs, struct item_restored *out)
{
    struct restore_walk w = { clock_now(), out };

    memset(out, 0, sizeof(*out));
    for (uint32_t sid = 0; sid < nslabs; sid++) {
        slab_restore_visit(sid, clear_loose, NULL);
    }
    for (uint32_t sid = 0; sid < nslabs; sid++) {
        slab_restore_visit(sid, relink, &w);
    }
    for (uint32_t sid = 0; sid < nslabs; sid++) {
        (void)slab_restore_chunks(sid, in_use, NULL);
    }
    if (out->max_cas >= atomic_load(&item_cas_seq)) {
        atomic_store(&item_cas_seq, out->max_cas);
    }
}

void
item_state_save(struct item_state *out)
{
    out->cas_seq = atomic_load(&item_cas_seq);
    out->oldest_live = atomic_load(&item_oldest_live);
    out->oldest_cas = atomic_load(&item_oldest_cas);
}

void
item_state_restore(const struct item_state *in)
{
    atomic_store(&item_cas_seq, in->cas_seq);
    atomic_store(&item_oldest_live, in->oldest_live);
    atomic_store(&item_oldest_cas, in->oldest_cas);
}
