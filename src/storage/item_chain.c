/*
 * item_chain.c -- chained items (-o slab_chunk_max): a value too large
 * for the largest class's chunk is stored across several chunks, as
 * memcached's chunked items are, so that class's chunks can stay small
 * (a slab move then drops a few small items, not one huge one) and a
 * large item wastes at most the rounding of one small chunk.
 *
 * Layout. The head is an ordinary item in the class that fits it: header,
 * key, the handle of the first body chunk, then the value's last bytes
 * (its "tail", at least the final "\r\n"). The value's first bytes fill
 * body chunks of the largest class (the "body class") in order, each a
 * 32-byte header and data:
 *   h_next   the next body chunk's handle (SLAB_HANDLE_NONE: the tail is next)
 *   flags    the head's handle
 *   nbytes   value bytes in this chunk
 *   cas_key  CHAIN_TAG << 8: key length 0, which no item has
 *   refs     0: neither linked nor free
 * Only the head is linked, referenced, on probation or on flash's
 * candidate list; the body chunks live exactly as long as the head's
 * chunk: a body is freed (its tag cleared, under the body class's lock)
 * before its head, so a tagged body always names a live head.
 *
 * Locks. A head's chunk is freed with its class lock held and then the
 * body class's, taken in that order (the body class has the highest id).
 * Code holding the body class's lock only try-locks a head's class and
 * partition (item_chain_examine), so there is no cycle.
 *
 * Not chained: flash stubs (their value is on flash), values of items
 * that fit a chunk. A chained item is never written to flash (evicted
 * as from RAM alone). When a slab of the body class moves, its bodies are
 * copied into free chunks of the class where there are some (chunk
 * rescue, as memcached's page mover); a head's slab moving drops the item
 * (its copy would have to re-point every body).
 */
#include "item.h"

#include <assert.h>
#include <string.h>

#include "assoc.h"
#include "item_int.h"
#include "slab.h"

#define CHAIN_TAG   0x43484e4bull   /* "CHNK" */
#define ITEM_HDR    offsetof(struct item, data)

uint32_t item_chain_max = UINT32_MAX;   /* chained past this total size */
uint8_t  item_chain_cls;                /* the body class; 0: none */
static uint32_t chain_body;             /* value bytes per body chunk */
/* Classes a head was ever taken from: their class is fixed (slab_clsid),
 * so such a class is not homed elsewhere (item_class_homed). */
static _Atomic bool head_class[SLAB_CLASS_MAX + 1];

void
item_chain_setup(void)
{
    uint8_t top = slab_class_count();
    size_t max = top > 0 ? slab_class_chunk_size(top) : 0;

    item_chain_cls = 0;
    item_chain_max = UINT32_MAX;
    chain_body = 0;
    for (size_t c = 0; c <= SLAB_CLASS_MAX; c++) {
        atomic_store_explicit(&head_class[c], false, memory_order_relaxed);
    }
    if (top > 0 && max < slab_size()) {
        item_chain_cls = top;
        item_chain_max = (uint32_t)max;
        chain_body = (uint32_t)(max - ITEM_HDR);
    }
}

/* --- geometry ------------------------------------------------------------------ */

/*
 * How a value of nbytes (with "\r\n") under a key of nkey is split: the
 * fewest full body chunks that leave a tail fitting a head of the largest
 * chunk size; a tail of at least 2 bytes (the last body chunk gives up
 * what the tail lacks).
 */
struct chain_plan {
    uint32_t nbody;
    uint32_t tail;
    uint32_t last;              /* bytes in the last body chunk */
};

static struct chain_plan
chain_plan(size_t nkey, uint32_t nbytes)
{
    struct chain_plan p;
    uint32_t tail_max = item_chain_max - (uint32_t)(ITEM_HDR + nkey + sizeof(uint32_t));

    p.nbody = (nbytes - tail_max + chain_body - 1) / chain_body;
    if (p.nbody == 0) {
        p.nbody = 1;
    }
    int64_t tail = (int64_t)nbytes - (int64_t)p.nbody * chain_body;
    p.tail = tail < 2 ? 2 : (uint32_t)tail;
    p.last = nbytes - p.tail - (p.nbody - 1) * chain_body;
    assert(p.last > 0 && p.last <= chain_body);
    return p;
}

bool
item_chain_needed(size_t nkey, uint32_t vlen)
{
    return item_chain_cls != 0 && item_total_size(nkey, vlen) > item_chain_max;
}

static size_t
head_size(size_t nkey, uint32_t tail)
{
    return ITEM_HDR + nkey + sizeof(uint32_t) + tail;
}

uint8_t
item_chain_head_class(size_t nkey, uint32_t vlen)
{
    return slab_clsid(head_size(nkey, chain_plan(nkey, vlen + 2).tail));
}

uint32_t
item_chain_bodies(size_t nkey, uint32_t vlen)
{
    return chain_plan(nkey, vlen + 2).nbody;
}

static uint32_t
head_first(struct item *it)
{
    uint32_t h;

    memcpy(&h, it->data + item_nkey(it), sizeof(h));
    return h;
}

static char *
head_tail(struct item *it)
{
    return it->data + item_nkey(it) + sizeof(uint32_t);
}

size_t
item_chain_ntotal(struct item *it)
{
    struct chain_plan p = chain_plan(item_nkey(it), it->nbytes);

    return head_size(item_nkey(it), p.tail) + (size_t)p.nbody * ITEM_HDR +
           (it->nbytes - p.tail);
}

/* --- bodies ------------------------------------------------------------------- */

static bool
body_tagged(struct item *b)
{
    return atomic_load_explicit(&b->cas_key, memory_order_acquire) == CHAIN_TAG << 8;
}

struct item *
item_chain_body_head(struct item *b)
{
    if ((item_iflags(b) & (ITEM_LINKED | ITEM_FREE)) != 0 || !body_tagged(b)) {
        return NULL;
    }
    return slab_handle_item(b->flags);
}

/* Body class lock held: free the chain starting at handle h; the chunks
 * that went to the class's free list (not to a draining slab). */
static uint32_t
bodies_free_locked(uint32_t h)
{
    uint32_t freed = 0;

    while (h != SLAB_HANDLE_NONE) {
        struct item *b = slab_handle_item(h);
        uint32_t sid = slab_sid_of(b);
        h = b->h_next;
        atomic_store_explicit(&b->cas_key, 0, memory_order_relaxed);
        freed += !slab_draining(sid);
        slab_free_locked(item_chain_cls, sid, b);
    }
    return freed;
}

void
item_free_locked(uint8_t cls, struct item *it)
{
    if (item_chained(it) && cls != item_chain_cls) {
        slab_lock(item_chain_cls);
        item_chain_free_locked(cls, it);
        slab_unlock(item_chain_cls);
        return;
    }
    item_chain_free_locked(cls, it);
}

uint32_t
item_chain_free_locked(uint8_t cls, struct item *it)
{
    uint32_t freed = 0;

    if (item_chained(it)) {
        freed = bodies_free_locked(head_first(it));
    }
    slab_free_locked(cls, slab_sid_of(it), it);
    return freed;
}

bool
item_chain_body_busy_locked(struct item *b)
{
    struct item *h = item_chain_body_head(b);

    if (h == NULL) {
        return (item_iflags(b) & ITEM_FREE) == 0;   /* being filled */
    }
    return (item_iflags(h) & (ITEM_LINKED | ITEM_FREE)) != ITEM_LINKED ||
           item_refcount(h) != 1;
}

bool
item_chains(size_t nkey, uint32_t vlen)
{
    return item_chain_needed(nkey, vlen);
}

uint8_t
item_chain_class(void)
{
    return item_chain_cls;
}

void
item_chain_touch(struct item *it)
{
    /* Partition lock held: the chain cannot change. Slab-level policies
     * judge a slab by its last access (lra): a read of a chained item
     * counts for the slabs its value lies in, not only its head's. */
    uint32_t last = SLAB_ID_NONE;

    for (uint32_t h = head_first(it); h != SLAB_HANDLE_NONE;) {
        struct item *b = slab_handle_item(h);
        uint32_t sid = slab_sid_of(b);
        if (sid != last) {
            slab_touch(sid);
            last = sid;
        }
        h = b->h_next;
    }
}

bool
item_chain_rescue_body_locked(struct item *h, struct item *b)
{
    uint32_t sid;
    struct item *nb = slab_pop_free_locked(item_chain_cls, &sid);

    if (nb == NULL) {
        return false;
    }
    uint32_t from = slab_handle(b), to = slab_handle(nb);
    nb->h_next = b->h_next;
    nb->flags = b->flags;
    nb->nbytes = b->nbytes;
    memcpy(nb->data, b->data, b->nbytes);
    atomic_store_explicit(&nb->cas_key, CHAIN_TAG << 8, memory_order_release);
    if (head_first(h) == from) {
        memcpy(h->data + item_nkey(h), &to, sizeof(to));
    } else {
        struct item *p = slab_handle_item(head_first(h));
        while (p->h_next != from) {
            assert(p->h_next != SLAB_HANDLE_NONE);
            p = slab_handle_item(p->h_next);
        }
        p->h_next = to;
    }
    atomic_store_explicit(&b->cas_key, 0, memory_order_relaxed);
    slab_free_locked(item_chain_cls, slab_sid_of(b), b);
    return true;
}

void
item_chain_release(struct item *it)
{
    slab_lock(item_chain_cls);
    bodies_free_locked(head_first(it));
    slab_unlock(item_chain_cls);
}

/* A chunk of the body class, reusing a dead item at its hand first. */
static struct item *
body_take(bool reclaim)
{
    uint32_t sid;
    struct item *b = slab_alloc(item_chain_cls, &sid);

    if (b == NULL && reclaim && item_clock_pull(item_chain_cls, false, 1) > 0) {
        b = slab_alloc(item_chain_cls, &sid);
    }
    return b;
}

bool
item_chain_head_class_used(uint8_t cls)
{
    return atomic_load_explicit(&head_class[cls], memory_order_relaxed);
}

struct item *
item_chain_alloc(const char *key, size_t nkey, uint32_t vlen, bool reclaim,
                 uint8_t *short_cls)
{
    struct chain_plan p = chain_plan(nkey, vlen + 2);
    uint8_t hcls = slab_clsid(head_size(nkey, p.tail));
    uint32_t first = SLAB_HANDLE_NONE, sid;
    struct item *prev = NULL, *head = NULL;

    (void)key;
    assert(hcls != 0);
    if (!atomic_load_explicit(&head_class[hcls], memory_order_relaxed)) {
        atomic_store_explicit(&head_class[hcls], true, memory_order_relaxed);
    }
    for (uint32_t i = 0; i < p.nbody; i++) {
        struct item *b = body_take(reclaim);
        if (b == NULL) {
            *short_cls = item_chain_cls;
            goto fail;
        }
        b->h_next = SLAB_HANDLE_NONE;
        b->nbytes = i + 1 < p.nbody ? chain_body : p.last;
        if (prev == NULL) {
            first = slab_handle(b);
        } else {
            prev->h_next = slab_handle(b);
        }
        prev = b;
    }
    head = slab_alloc(hcls, &sid);
    if (head == NULL && reclaim && item_clock_pull(hcls, false, 1) > 0) {
        head = slab_alloc(hcls, &sid);
    }
    if (head == NULL) {
        *short_cls = hcls;
        goto fail;
    }
    memcpy(head->data + nkey, &first, sizeof(first));
    /* Tag last: the body class's hand reads a tagged body's head. */
    for (uint32_t h = first; h != SLAB_HANDLE_NONE;) {
        struct item *b = slab_handle_item(h);
        b->flags = slab_handle(head);
        h = b->h_next;
        atomic_store_explicit(&b->cas_key, CHAIN_TAG << 8, memory_order_release);
    }
    return head;
fail:
    if (first != SLAB_HANDLE_NONE) {
        slab_lock(item_chain_cls);
        bodies_free_locked(first);
        slab_unlock(item_chain_cls);
    }
    return NULL;
}

/* --- the value's pieces --------------------------------------------------------- */

void
item_spans_begin(struct item_spans *si, struct item *it, uint32_t off, uint32_t len)
{
    si->it = it;
    si->pos = off;
    si->end = off + len;
    si->chained = item_chained(it);
    si->next = si->chained ? head_first(it) : SLAB_HANDLE_NONE;
    si->base = 0;
}

bool
item_spans_next(struct item_spans *si, char **p, uint32_t *n)
{
    while (si->pos < si->end) {
        if (!si->chained) {
            *p = item_value(si->it) + si->pos;
        } else if (si->next != SLAB_HANDLE_NONE) {
            struct item *b = slab_handle_item(si->next);
            uint32_t start = si->base, stop = start + b->nbytes;
            si->next = b->h_next;
            si->base = stop;
            if (si->pos >= stop) {
                continue;
            }
            uint32_t to = si->end < stop ? si->end : stop;
            *p = b->data + (si->pos - start);
            *n = to - si->pos;
            si->pos = to;
            return true;
        } else {
            *p = head_tail(si->it) + (si->pos - si->base);
        }
        *n = si->end - si->pos;
        si->pos = si->end;
        return true;
    }
    return false;
}

void
item_value_write(struct item *it, uint32_t off, const void *src, uint32_t n)
{
    struct item_spans si;
    const char *s = src;
    char *p;
    uint32_t k;

    item_spans_begin(&si, it, off, n);
    while (item_spans_next(&si, &p, &k)) {
        memcpy(p, s, k);
        s += k;
    }
}

void
item_value_copy(struct item *dst, uint32_t doff, struct item *src, uint32_t soff,
                uint32_t n)
{
    struct item_spans d, s;
    char *dp = NULL, *sp = NULL;
    uint32_t dn = 0, sn = 0;

    item_spans_begin(&d, dst, doff, n);
    item_spans_begin(&s, src, soff, n);
    for (;;) {
        if (dn == 0 && !item_spans_next(&d, &dp, &dn)) {
            break;
        }
        if (sn == 0 && !item_spans_next(&s, &sp, &sn)) {
            break;
        }
        uint32_t k = dn < sn ? dn : sn;
        memcpy(dp, sp, k);
        dp += k;
        sp += k;
        dn -= k;
        sn -= k;
    }
}

/* --- the body class's hand and slab moves ------------------------------------- */

/*
 * The body class's hand found body chunk b (its lock held): the head
 * that owns it, with the head's partition and class locked (try-locks
 * only: the body class ranks last), if it is linked and unreferenced and
 * b is its first body.
 */
bool
item_chain_lock_head(struct item *b, struct item **head, uint32_t *hv)
{
    struct item *h = item_chain_body_head(b);

    /* A tagged body's head is alive (freed after its bodies, under this
     * lock), so its key is readable and stable. */
    if (h == NULL || (item_iflags(h) & (ITEM_LINKED | ITEM_FREE)) != ITEM_LINKED ||
        item_refcount(h) != 1) {
        return false;
    }
    /* Judged once per lap, at its first body: judged at each, a read item
     * would spend its second chance at the first and go at the next. */
    if (head_first(h) != slab_handle(b)) {
        return false;
    }
    uint8_t hcls = slab_cls_of(h);
    *hv = item_hash(h);
    if (assoc_trylock(*hv) != 0) {
        return false;
    }
    if (hcls != item_chain_cls && slab_trylock(hcls) != 0) {
        assoc_unlock(*hv);
        return false;
    }
    if (!(item_iflags(h) & ITEM_LINKED) || item_refcount(h) != 1) {
        if (hcls != item_chain_cls) {
            slab_unlock(hcls);
        }
        assoc_unlock(*hv);
        return false;
    }
    *head = h;
    return true;
}

/* --- warm restart ------------------------------------------------------------- */

bool
item_chain_restore(struct item *head, void (*mark)(struct item *body))
{
    size_t nkey = item_nkey(head);
    struct chain_plan p;

    if (item_chain_cls == 0 || head->nbytes < 2 || nkey == 0) {
        return false;
    }
    p = chain_plan(nkey, head->nbytes);
    uint8_t hcls = slab_cls_of(head);
    if (head_size(nkey, p.tail) > slab_class_chunk_size(hcls) ||
        memcmp(head_tail(head) + p.tail - 2, "\r\n", 2) != 0) {
        return false;
    }
    uint32_t self = slab_handle(head), h = head_first(head);
    for (uint32_t k = 0; k < p.nbody; k++, h = slab_handle_item(h)->h_next) {
        if (!slab_restore_handle(h)) {
            return false;
        }
        struct item *b = slab_handle_item(h);
        if (slab_cls_of(b) != item_chain_cls || !body_tagged(b) || b->flags != self ||
            b->nbytes != (k + 1 == p.nbody ? p.last : chain_body)) {
            return false;
        }
    }
    if (h != SLAB_HANDLE_NONE) {
        return false;
    }
    for (h = head_first(head); h != SLAB_HANDLE_NONE; h = slab_handle_item(h)->h_next) {
        mark(slab_handle_item(h));
    }
    atomic_store_explicit(&head_class[hcls], true, memory_order_relaxed);
    return true;
}
