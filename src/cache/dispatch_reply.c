/*
 * dispatch_reply.c -- the reply API every command handler answers
 * through (dispatch.c, dispatch_meta.c, dispatch_bin.c, admin.c): fixed
 * answers and lines (logged at -vv, noreply included, as memcached), a
 * value's bytes copied or queued by reference, a storage command's data
 * block filled piece by piece, and when the output queue is full enough
 * to stop.
 */
#include "dispatch.h"

#include "log.h"
#include "outq.h"

void
dispatch_reply(struct dispatch_ctx *d, proto_rsp_t rsp)
{
    size_t len;
    const char *s = proto_rsp_str(rsp, &len);

    if (d->log_replies) {
        log_debug(">%d %.*s", d->fd, (int)(len >= 2 ? len - 2 : len), s);
    }
    outq_add(d->out, s, len);
}

void
dispatch_reply_line(struct dispatch_ctx *d, const char *text)
{
    char buf[PROTO_LINE_MAX];
    size_t n = proto_compose_line(buf, sizeof(buf), text);

    if (d->log_replies) {
        log_debug(">%d %s", d->fd, text);
    }
    outq_add(d->out, buf, n);
}

/* An answer the client asked not to get (noreply): -vv still logs it, as
 * memcached does ("NOREPLY STORED"). */
void
dispatch_reply_nr(struct dispatch_ctx *d, bool noreply, proto_rsp_t rsp)
{
    if (!noreply) {
        dispatch_reply(d, rsp);
    } else if (d->log_replies) {
        size_t len;
        const char *s = proto_rsp_str(rsp, &len);
        log_debug(">%d NOREPLY %.*s", d->fd, (int)(len >= 2 ? len - 2 : len), s);
    }
}

void
dispatch_reply_line_nr(struct dispatch_ctx *d, bool noreply, const char *text)
{
    if (!noreply) {
        dispatch_reply_line(d, text);
    } else if (d->log_replies) {
        log_debug(">%d NOREPLY %s", d->fd, text);
    }
}

void
dispatch_ref_release(void *ref)
{
    if (ref == NULL) {
        return;                 /* a piece of a chained value (reply_bytes) */
    }
    if (dispatch_ref_is_flash(ref)) {
        dispatch_flash_release(ref);
        return;
    }
    item_release(ref);
}

void
dispatch_reply_data(struct dispatch_ctx *d, struct item *it)
{
    dispatch_reply_bytes(d, it, it->nbytes);
}

void
dispatch_reply_bytes(struct dispatch_ctx *d, struct item *it, uint32_t len)
{
    struct item_spans si;
    char *p, *np;
    uint32_t n, nn;

    item_spans_begin(&si, it, 0, len);
    if (len < DISPATCH_COPY_MAX) {
        while (item_spans_next(&si, &p, &n)) {
            outq_add(d->out, p, n);
        }
        item_release(it);
        return;
    }
    /* By reference: a chained value as one piece per chunk, the caller's
     * one reference on the last (pieces are sent and rolled back in
     * order, so the item outlives all of them), which also keeps a reply
     * from counting thousands of references. A piece that cannot be
     * queued takes the whole value back out: never a torn value. */
    uint64_t mark = outq_mark(d->out);
    bool have = item_spans_next(&si, &p, &n);
    while (have) {
        bool more = item_spans_next(&si, &np, &nn);
        if (outq_add_ref(d->out, p, n, more ? NULL : it) != 0) {
            if (more) {
                outq_rollback(d->out, mark);
                item_release(it);
            }
            return;
        }
        p = np;
        n = nn;
        have = more;
    }
}

void
dispatch_fill_start(struct dispatch_ctx *d, struct item *it, uint32_t len)
{
    char *p = item_value(it);
    uint32_t n = 0;

    item_spans_begin(&d->fill, it, 0, len);
    (void)item_spans_next(&d->fill, &p, &n);
    d->data = p;
    d->ndata = n;
}

bool
dispatch_data_next(struct dispatch_ctx *d)
{
    char *p;
    uint32_t n;

    if (!item_spans_next(&d->fill, &p, &n)) {
        return false;
    }
    d->data = p;
    d->ndata = n;
    return true;
}

bool
dispatch_out_full(const struct dispatch_ctx *d)
{
    return outq_pending(d->out) > d->out_limit ||
           outq_copied(d->out) > d->out_copy_limit ||
           outq_segments(d->out) > d->out_segs_limit ||
           d->dump.flash_held >= DISPATCH_DUMP_FLASH_MAX;
}
