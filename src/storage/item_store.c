/*
 * item_store.c -- memcached's storage commands on items: set, add,
 * replace and cas (with the meta protocol's compare and stale rules),
 * append/prepend and incr/decr, including rebuilding an item that grows
 * while readers may still hold the old one.
 */
#include "item.h"

#include <stdio.h>
#include <string.h>

#include "assoc.h"
#include "hash.h"
#include "item_int.h"
#include "num.h"
#include "slab.h"


/* --- storage commands ----------------------------------------------------------- */

/*
 * Rebuilds (struct item_rebuild in item.h): the new item is first taken
 * from a free chunk under the partition lock (item_alloc_nowait), so
 * concurrent appends to one key all land. Only when that finds nothing is
 * the stored item pinned (a reference keeps its bytes and address) and
 * the caller asked for memory; its allocation is filled outside the lock
 * and linked only if the pinned item is still the one under the key.
 */
static struct item *
pin_locked(struct item *it)
{
    atomic_fetch_add(&it->refs, 1);
    return it;
}

/* Under the lock again: is old still what the key maps to, and alive? A
 * flush_all or its expiry while unlocked ends it: the rebuild starts over
 * and finds nothing, rather than relinking the value with a fresh time. */
static bool
still_linked(struct item *old, uint32_t hv)
{
    return (item_iflags(old) & ITEM_LINKED) &&
           assoc_has(old, hv) &&
           !item_is_dead(old, clock_now());
}

item_status_t
item_rebuild_want(struct item_rebuild *rb, struct item *old, const char *key, size_t nkey,
             uint32_t flags, rel_time_t exptime, uint32_t vlen)
{
    if (rb == NULL) {
        return ITEM_NO_MEMORY;
    }
    rb->old = old != NULL ? pin_locked(old) : NULL;
    rb->key = old != NULL ? item_key(old) : key;
    rb->nkey = old != NULL ? item_nkey(old) : nkey;
    rb->flags = flags;
    rb->exptime = exptime;
    rb->vlen = vlen;
    rb->need = true;
    return ITEM_NEED_MEMORY;
}

void
item_rebuild_drop(struct item_rebuild *rb)
{
    if (rb->fresh != NULL) {
        item_release(rb->fresh);
    }
    if (rb->old != NULL) {
        item_release(rb->old);
    }
    rb->fresh = rb->old = NULL;
    rb->need = false;
}

/* A rebuild's chunk: the class a nowait allocation or rb->fresh came from. */
static void
rebuild_took(struct item_rebuild *rb, struct item *it)
{
    if (rb != NULL) {
        rb->cls = slab_cls_of(it);
    }
}

/* joined's value = old's and it's, in order. */
static void
concat_fill(struct item *joined, struct item *old, struct item *it, bool append)
{
    uint32_t ovlen = item_vlen(old), nvlen = item_vlen(it);

    if (append) {
        item_value_copy(joined, 0, old, 0, ovlen);
        item_value_copy(joined, ovlen, it, 0, nvlen + 2);
    } else {
        item_value_copy(joined, 0, it, 0, nvlen);
        item_value_copy(joined, nvlen, old, 0, ovlen + 2);
    }
    item_iflags_set(joined, item_iflags(old) & ITEM_KEY_BINARY);
}

/* The CAS a store gives its item (under the lock; old: the item it
 * replaces, or NULL). */
static uint64_t
store_cas(const struct item_store_meta *m, const struct item *old)
{
    if (m != NULL && m->has_cas_in) {
        return m->cas_in;
    }
    if (m != NULL && m->keep_cas && old != NULL) {
        return item_cas((struct item *)old);
    }
    return item_cas_next();
}

/* Under the lock: touch/gat change these in place, so copy them last. */
static void
concat_link(struct item *joined, struct item *old, uint32_t hv,
            const struct item_store_meta *m)
{
    joined->exptime = old->exptime;
    joined->flags = old->flags;
    do_item_replace_as(old, joined, hv, store_cas(m, old));
}

/* The caller's allocation for a pinned item: fill (old's bytes cannot
 * change while pinned), then link if old is still the key's. */
static item_status_t
concat_commit(struct item *it, bool append, struct item_store_meta *m,
              struct item_rebuild *rb, uint32_t hv)
{
    struct item *old = rb->old, *joined = rb->fresh;

    concat_fill(joined, old, it, append);
    assoc_lock(hv);
    bool same = still_linked(old, hv) && (m->cas == 0 || item_cas(old) == m->cas);
    if (same) {
        concat_link(joined, old, hv, m);
        m->cas_out = item_cas(joined);
        m->vlen_out = item_vlen(joined);
        rebuild_took(rb, joined);
    }
    assoc_unlock(hv);
    item_rebuild_drop(rb);
    return same ? ITEM_OK : ITEM_RETRY;
}

/* append/prepend: a new item holding old and new values joined. */
static item_status_t
item_concat(struct item *it, bool append, struct item_store_meta *m,
            struct item_rebuild *rb)
{
    uint32_t hv = item_hash(it), nvlen = item_vlen(it);
    const char *key = item_key(it);
    uint8_t nkey = item_nkey(it);

    if (rb != NULL && rb->fresh != NULL) {
        return concat_commit(it, append, m, rb, hv);
    }
    assoc_lock(hv);
    struct item *old = do_item_find(key, nkey, hv);
    if (old == NULL) {
        assoc_unlock(hv);
        return ITEM_NOT_STORED;
    }
    if (m->cas != 0 && item_cas(old) != m->cas) {
        assoc_unlock(hv);
        return ITEM_EXISTS;
    }
    if (item_is_flash(old)) {
        assoc_unlock(hv);       /* memcached's extstore answers the same */
        return ITEM_NOT_STORED;
    }
    uint32_t ovlen = item_vlen(old);
    if ((uint64_t)ovlen + nvlen > UINT32_MAX - 2 || item_class_of(nkey, ovlen + nvlen) == 0) {
        assoc_unlock(hv);
        return ITEM_TOO_LARGE;
    }
    struct item *joined = item_alloc_nowait(key, nkey, old->flags, old->exptime,
                                            ovlen + nvlen);
    if (joined == NULL) {
        item_status_t st = item_rebuild_want(rb, old, key, nkey, old->flags, old->exptime,
                                        ovlen + nvlen);
        assoc_unlock(hv);
        return st;
    }
    concat_fill(joined, old, it, append);
    concat_link(joined, old, hv, m);
    m->cas_out = item_cas(joined);
    m->vlen_out = item_vlen(joined);
    rebuild_took(rb, joined);
    assoc_unlock(hv);
    item_release(joined);
    return ITEM_OK;
}

item_status_t
item_store(struct item *it, item_store_op_t op, uint64_t cas_in)
{
    struct item_store_meta m = { .has_cas = op == ITEM_OP_CAS,
                                 .cas = op == ITEM_OP_CAS ? cas_in : 0 };

    return item_store_meta(it, op, &m, NULL);
}

/* ms I: the cas was older than the item's; store anyway, marked stale,
 * with the item's TTL and any win already handed out for it. */
static bool
store_stale_ok(struct item *it, struct item *old, const struct item_store_meta *m)
{
    if (!m->stale_ok || m->cas == 0 || m->cas >= item_cas(old)) {
        return false;
    }
    it->exptime = old->exptime;
    item_iflags_set(it, ITEM_STALE | (item_iflags(old) & ITEM_TOKEN_SENT));
    return true;
}

item_status_t
item_store_meta(struct item *it, item_store_op_t op, struct item_store_meta *m,
                struct item_rebuild *rb)
{
    uint32_t hv = item_hash(it);
    item_status_t st = ITEM_NOT_STORED;

    m->cas_out = 0;
    m->vlen_out = item_vlen(it);
    if (m->key_binary) {
        item_iflags_set(it, ITEM_KEY_BINARY);
    }
    if (op == ITEM_OP_APPEND || op == ITEM_OP_PREPEND) {
        return item_concat(it, op == ITEM_OP_APPEND, m, rb);
    }
    /* A compared set or replace is a cas, as in memcached's mset. */
    if (m->has_cas && (op == ITEM_OP_SET || op == ITEM_OP_REPLACE)) {
        op = ITEM_OP_CAS;
    }

    assoc_lock(hv);
    struct item *old = do_item_find(item_key(it), item_nkey(it), hv);
    switch (op) {
    case ITEM_OP_SET:
        if (old != NULL) {
            do_item_replace_as(old, it, hv, store_cas(m, old));
        } else {
            do_item_link_as(it, hv, store_cas(m, NULL));
        }
        st = ITEM_OK;
        break;
    case ITEM_OP_ADD:
        if (old == NULL) {
            do_item_link_as(it, hv, store_cas(m, NULL));
            st = ITEM_OK;
        } else {
            do_item_mark(old);  /* memcached bumps on a failed add */
        }
        break;
    case ITEM_OP_REPLACE:
        if (old != NULL) {
            do_item_replace_as(old, it, hv, store_cas(m, old));
            st = ITEM_OK;
        }
        break;
    case ITEM_OP_APPEND:
    case ITEM_OP_PREPEND:
        break;                  /* handled by item_concat(), unlocked */
    case ITEM_OP_CAS:
        if (old == NULL) {
            st = ITEM_NOT_FOUND;
        } else if ((m->cas != 0 && item_cas(old) == m->cas) ||
                   store_stale_ok(it, old, m)) {
            do_item_replace_as(old, it, hv, store_cas(m, old));
            st = ITEM_OK;
        } else {
            st = ITEM_EXISTS;
        }
        break;
    }
    if (st == ITEM_OK) {
        m->cas_out = item_cas(it);
        m->vlen_out = item_vlen(it);
    }
    assoc_unlock(hv);
    return st;
}

/* Under the lock: read the counter, apply the delta, format the result. */
static item_status_t
arith_compute(struct item *it, bool incr, uint64_t delta, uint64_t *result,
              char *buf, uint32_t *len)
{
    uint64_t value;
    char *val = item_value(it);

    /* The value ends in "\r\n", so the digits always end at white space,
     * as memcached's safe_strtoull() requires. */
    /* A value on flash is not read here (memcached's extstore neither),
     * nor a chained one (too long for a number: memcached's chunked
     * items answer the same). */
    if (it->nbytes <= 2 || item_is_flash(it) || item_chained(it) ||
        !num_mc_strtoull(val, it->nbytes, &value)) {
        return ITEM_NON_NUMERIC;
    }
    if (incr) {
        value += delta;
    } else {
        value = delta > value ? 0 : value - delta;
    }
    *result = value;
    *len = (uint32_t)snprintf(buf, 24, "%llu", (unsigned long long)value);
    return ITEM_OK;
}

static void
write_counter(struct item *it, const char *buf, uint32_t len)
{
    uint32_t vlen = item_vlen(it);

    memcpy(item_value(it), buf, len);
    memset(item_value(it) + len, ' ', vlen - len);
    memcpy(item_value(it) + vlen, "\r\n", 2);
}

/*
 * memcached keeps the value's length when the number shrinks, padding with
 * spaces, and writes in place when nobody else holds the item. Same bytes
 * here; when a reader still holds it (e.g. a pipelined get not yet sent),
 * or the number grew, a new item is built (see struct item_rebuild).
 */
item_status_t
item_arith(const char *key, size_t nkey, bool incr, uint64_t delta,
           uint64_t *result, uint8_t *cls)
{
    return item_arith_meta(key, nkey, incr, delta, result, cls, NULL, NULL);
}

/* ma's extras on the item now holding the counter; partition lock held. */
static void
arith_meta_done(struct item *it, struct item_arith_meta *m, uint32_t len)
{
    if (m == NULL) {
        return;
    }
    m->exptime_before = it->exptime;
    if (m->touch) {
        item_set_exptime(it, m->exptime);
        item_note_ttl(slab_cls_of(it), m->exptime);
    }
    m->cas_out = item_cas(it);
    m->exptime_out = it->exptime;
    m->vlen_out = len;
}

/* The CAS an arithmetic result gets: the client's (ma E), else the next. */
static uint64_t
arith_cas(const struct item_arith_meta *m)
{
    return m != NULL && m->has_cas_in ? m->cas_in : item_cas_next();
}

/* The caller's allocation for the pinned counter: link it if the pinned
 * item is still the key's (and still matches the CAS asked for). */
static item_status_t
arith_commit(bool incr, uint64_t delta, uint64_t *result, struct item_arith_meta *m,
             struct item_rebuild *rb, uint32_t hv)
{
    struct item *it = rb->old, *nit = rb->fresh;
    char buf[24];
    uint32_t len;

    assoc_lock(hv);
    bool same = still_linked(it, hv) &&
                (m == NULL || m->cas == 0 || item_cas(it) == m->cas);
    if (same) {
        /* Pinned, so its value is unchanged: recompute to format into
         * the new item. touch/gat may have moved exptime meanwhile. */
        arith_compute(it, incr, delta, result, buf, &len);
        write_counter(nit, buf, len);
        nit->exptime = it->exptime;
        nit->flags = it->flags;
        item_iflags_set(nit, item_iflags(it) & ITEM_KEY_BINARY);
        do_item_replace_as(it, nit, hv, arith_cas(m));
        arith_meta_done(nit, m, len);
        rebuild_took(rb, nit);
    }
    assoc_unlock(hv);
    item_rebuild_drop(rb);
    return same ? ITEM_OK : ITEM_RETRY;
}

item_status_t
item_arith_meta(const char *key, size_t nkey, bool incr, uint64_t delta,
                uint64_t *result, uint8_t *cls, struct item_arith_meta *m,
                struct item_rebuild *rb)
{
    uint32_t hv = hash_key(key, nkey);
    char buf[24];
    uint32_t len;

    if (rb != NULL && rb->fresh != NULL) {
        return arith_commit(incr, delta, result, m, rb, hv);
    }
    assoc_lock(hv);
    struct item *it = do_item_find(key, nkey, hv);
    if (it == NULL) {
        assoc_unlock(hv);
        return ITEM_NOT_FOUND;
    }
    if (m != NULL && m->cas != 0 && item_cas(it) != m->cas) {
        assoc_unlock(hv);
        return ITEM_EXISTS;
    }
    item_status_t st = arith_compute(it, incr, delta, result, buf, &len);
    if (st != ITEM_OK) {
        assoc_unlock(hv);
        return st;
    }
    item_report_cls(it, cls);
    uint32_t vlen = len + 2 <= it->nbytes ? it->nbytes - 2 : len;
    if (item_refcount(it) == 1 && vlen == item_vlen(it)) {
        write_counter(it, buf, len);
        item_set_cas(it, arith_cas(m));
        do_item_bump(it);
        arith_meta_done(it, m, len);
        assoc_unlock(hv);
        return ITEM_OK;
    }
    struct item *nit = item_alloc_nowait(key, nkey, it->flags, it->exptime, vlen);
    if (nit == NULL) {
        st = item_rebuild_want(rb, it, key, nkey, it->flags, it->exptime, vlen);
        assoc_unlock(hv);
        return st;
    }
    write_counter(nit, buf, len);
    item_iflags_set(nit, item_iflags(it) & ITEM_KEY_BINARY);
    do_item_replace_as(it, nit, hv, arith_cas(m));
    arith_meta_done(nit, m, len);
    rebuild_took(rb, nit);
    assoc_unlock(hv);
    item_release(nit);
    return ITEM_OK;
}
