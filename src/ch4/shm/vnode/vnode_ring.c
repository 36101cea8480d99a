/*
 * The rings: one single-producer/single-consumer ring of 64-byte cells per ordered pair.
 *
 * A record is a 16-byte header (vnode_cell_hdr_t), hdr, data, padded to whole cells; it never
 * wraps: when it does not fit before the ring's end the sender fills the rest with a PAD
 * record and starts at cell 0. The sender writes the payload, then the header's seq word (the
 * record's first cell index, 64 bits: never reused) with a release store; the receiver
 * acquire-loads seq at the index it expects. Indices start at ncells, so the zeroed segment
 * never looks valid. The receiver zeroes the first word of every continuation cell it
 * consumed: a later record may start there, and stale payload must not look like its seq.
 *
 * Room: the sender keeps its head and a cached copy of the receiver's tail in process
 * memory; the receiver publishes its tail lazily (every quarter ring), and at once while the
 * sender says it waits (tx_wait, set by the sender on VNODE_AGAIN, cleared by its next
 * successful send). Sender: store tx_wait, fence, load tail. Receiver: store tail, fence,
 * load tx_wait (then the sender's sleeping word): either the sender sees the room or the
 * receiver sees the waiter, and wakes it if it sleeps.
 *
 * Finding work: a receiver polls up to cfg.direct peers' rings directly; the other senders
 * set their bit in its summary bitmap after publishing a packet (only when it is clear). The
 * receiver writes a ring's "direct" word to tell the sender which. Sender: store seq, fence,
 * load direct (then the bitmap, then the receiver's sleeping word). Receiver demoting a peer:
 * store direct = 0, fence, look at the ring once more: one of them sees the other. The
 * receiver clears a bit (fetch_and, fence) before draining that ring, so a packet published
 * after the clear sets it again. A peer found through the summary takes a free direct slot;
 * a direct peer idle for VNODE_IDLE_DEMOTE polls gives its slot up. When every peer fits in
 * the direct slots the summary is never touched: a small packet costs one cache line.
 */
#include "vnode_impl.h"
#include <stdio.h>
#include <string.h>

static inline vnode_cell_hdr_t *cell_at(char *cells, uint64_t pos)
{
    return (vnode_cell_hdr_t *) (cells + pos * VNODE_CELL);
}

int vnode_ring_setup(vnode_t * v)
{
    uint64_t base = v->L.ncells;
    v->all_direct = v->nlocal - 1 <= v->cfg.direct;
    v->nwords = (v->nlocal + 63) / 64;
    v->summary = vnode_summary_of(v, v->local);
    v->ndirect = 0;
    for (int p = 0; p < v->nlocal; p++) {
        if (p == v->local)
            continue;
        vnode_tx_t *t = &v->tx[p];
        t->ctl = vnode_ring(v, v->local, p);
        t->cells = (char *) (t->ctl + 1);
        t->head = t->tail = base;
        vnode_rx_t *r = &v->rx[p];
        r->ctl = vnode_ring(v, p, v->local);
        r->cells = (char *) (r->ctl + 1);
        r->tail = r->pub = base;
        r->slot = -1;
        /* our inbound rings are ours to set up; the attach count publishes them */
        VNODE_STORE(&r->ctl->tail, base, RELAXED);
        VNODE_STORE(&r->ctl->direct, v->all_direct ? 1 : 0, RELAXED);
        if (v->all_direct) {
            r->slot = v->ndirect;
            v->direct[v->ndirect++] = p;
        }
    }
    return VNODE_OK;
}

/* The first send to a peer writes its whole ring once (the seq words are zero, nothing is
 * published): the pages are faulted in and the lines are in this core's cache before the
 * first lap, which otherwise pays a page fault per 4 KiB and a fetch from memory per cell
 * (2 ranks, 1-byte ping-pong: the first ~1000 messages 0.22-0.28 us instead of 0.14-0.18).
 * Only rings in use are touched: a large node's unused pairs commit no memory. */
static void touch_ring(vnode_t * v, vnode_tx_t * t)
{
    for (uint64_t i = 0; i < v->L.ncells; i++)
        VNODE_STORE(&cell_at(t->cells, i)->seq, 0, RELAXED);
    t->touched = true;
}

int vnode_send(vnode_t * v, int dst, const void *hdr, size_t hlen, const void *data,
               size_t len)
{
    if (!v->attached || dst < 0 || dst >= v->nlocal || dst == v->local || hlen < 1 ||
        hlen >= VNODE_PAD_HLEN || len > v->cfg.max_pkt || hlen + len > v->cfg.max_pkt)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_send to local rank %d of %d "
                          "(hlen %zu, len %zu, max_pkt %zu)%s", dst, v->nlocal, hlen, len,
                          v->cfg.max_pkt, v->attached ? "" : " before vnode_attach");
    vnode_tx_t *t = &v->tx[dst];
    uint64_t ncells = v->L.ncells;
    if (__builtin_expect(!t->touched, 0))
        touch_ring(v, t);
    uint64_t k = (VNODE_CELL_HDR + hlen + len + VNODE_CELL - 1) / VNODE_CELL;
    uint64_t pos = t->head & v->mask;
    uint64_t pad = pos + k > ncells ? ncells - pos : 0;
    uint64_t need = pad + k;

    if (t->head + need - t->tail > ncells) {
        t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
        if (t->head + need - t->tail > ncells) {
            if (!t->waiting) {
                VNODE_STORE(&t->ctl->tx_wait, 1, RELAXED);
                t->waiting = true;
                v->nwait++;
            }
            VNODE_FENCE();
            t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
            if (t->head + need - t->tail > ncells) {
                t->want = (uint32_t) need;
                v->stats.ring_full++;
                return VNODE_AGAIN;
            }
        }
    }
    vnode_cell_hdr_t *c;
    if (pad) {
        c = cell_at(t->cells, pos);
        c->len = (uint32_t) (pad * VNODE_CELL - VNODE_CELL_HDR);
        c->src = (uint16_t) v->local;
        c->hlen = VNODE_PAD_HLEN;
        VNODE_STORE(&c->seq, t->head, RELEASE);
        t->head += pad;
        pos = 0;
    }
    c = cell_at(t->cells, pos);
    memcpy(c + 1, hdr, hlen);
    if (len)
        memcpy((char *) (c + 1) + hlen, data, len);
    c->len = (uint32_t) (hlen + len);
    c->src = (uint16_t) v->local;
    c->hlen = (uint16_t) hlen;
    VNODE_STORE(&c->seq, t->head, RELEASE);
    t->head += k;
    if (t->waiting) {
        VNODE_STORE(&t->ctl->tx_wait, 0, RELAXED);
        t->waiting = false;
        v->nwait--;
    }
    v->stats.pkts_sent++;

    VNODE_FENCE();
    if (!VNODE_LOAD(&t->ctl->direct, RELAXED)) {
        uint64_t *w = vnode_summary_of(v, dst) + v->local / 64;
        uint64_t bit = 1ULL << (v->local % 64);
        if (!(VNODE_LOAD(w, RELAXED) & bit)) {
            __atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST);
            VNODE_FENCE();
        }
    }
    vnode_wake(v, dst);
    return VNODE_OK;
}

static bool rx_ready(vnode_t * v, int p)
{
    vnode_rx_t *r = &v->rx[p];
    return VNODE_LOAD(&cell_at(r->cells, r->tail & v->mask)->seq, ACQUIRE) == r->tail;
}

static int malformed(vnode_t * v, int p, const char *fmt, ...)
    __attribute__ ((format(printf, 3, 4)));

static int malformed(vnode_t * v, int p, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    vnode_fail(v, VNODE_ERR_MALFORMED, "vnode: malformed packet from local rank %d to "
               "local rank %d at cell index %llu: %s", p, v->local,
               (unsigned long long) v->rx[p].tail, what);
    v->err_peer = p;
    return VNODE_ERR_MALFORMED;
}

/* Publishes the tail when due, and wakes a sender waiting for room. */
static void rx_publish(vnode_t * v, int p, vnode_rx_t * r)
{
    if (r->tail - r->pub < v->L.ncells / 4 && !VNODE_LOAD(&r->ctl->tx_wait, RELAXED))
        return;
    VNODE_STORE(&r->ctl->tail, r->tail, RELEASE);
    r->pub = r->tail;
    VNODE_FENCE();
    if (VNODE_LOAD(&r->ctl->tx_wait, RELAXED))
        vnode_wake(v, p);
}

/* Delivers up to max packets from p's ring: their number or VNODE_ERR_MALFORMED. */
static int rx_drain(vnode_t * v, int p, int max, vnode_rx_fn_t fn, void *arg)
{
    vnode_rx_t *r = &v->rx[p];
    uint64_t ncells = v->L.ncells, mask = v->mask;
    int n = 0;
    while (n < max) {
        uint64_t pos = r->tail & mask;
        vnode_cell_hdr_t *c = cell_at(r->cells, pos);
        uint64_t seq = VNODE_LOAD(&c->seq, ACQUIRE);
        if (seq != r->tail) {
            /* empty: a zeroed word, or a header of an earlier lap at this position */
            if (seq != 0 && (seq > r->tail || (seq & mask) != pos))
                return malformed(v, p, "sequence %llu in cell %llu, expected %llu or an "
                                 "earlier lap's", (unsigned long long) seq,
                                 (unsigned long long) pos, (unsigned long long) r->tail);
            break;
        }
        /* read once: a broken peer must not change what was validated */
        uint32_t len = VNODE_LOAD(&c->len, RELAXED);
        unsigned src = VNODE_LOAD(&c->src, RELAXED), hlen = VNODE_LOAD(&c->hlen, RELAXED);
        if (src != (unsigned) p)
            return malformed(v, p, "source field %u in the ring of local rank %d", src, p);
        if (hlen == VNODE_PAD_HLEN) {
            if (pos == 0 || ncells - pos >= v->L.max_cells ||
                len != (ncells - pos) * VNODE_CELL - VNODE_CELL_HDR)
                return malformed(v, p, "PAD record at cell %llu covering %u bytes; a PAD only "
                                 "fills a ring end shorter than the largest record (%u cells)",
                                 (unsigned long long) pos, len, v->L.max_cells);
            r->tail += ncells - pos;
            continue;
        }
        if (len == 0 || len > v->cfg.max_pkt)
            return malformed(v, p, "length %u, must be 1..%zu", len, v->cfg.max_pkt);
        if (hlen == 0 || hlen > len)
            return malformed(v, p, "header length %u of a %u-byte packet", hlen, len);
        uint64_t k = (VNODE_CELL_HDR + len + VNODE_CELL - 1) / VNODE_CELL;
        if (pos + k > ncells)
            return malformed(v, p, "a %llu-cell record at cell %llu runs past the ring end "
                             "(%llu cells)", (unsigned long long) k, (unsigned long long) pos,
                             (unsigned long long) ncells);
        const char *h = (const char *) (c + 1);
        fn(arg, p, h, hlen, h + hlen, len - hlen);
        for (uint64_t i = 1; i < k; i++)
            VNODE_STORE(&cell_at(r->cells, pos + i)->seq, 0, RELAXED);
        r->tail += k;
        n++;
    }
    if (r->tail != r->pub)
        rx_publish(v, p, r);
    v->stats.pkts_recv += n;
    return n;
}

static void promote(vnode_t * v, int p)
{
    vnode_rx_t *r = &v->rx[p];
    r->slot = v->ndirect;
    r->idle = 0;
    v->direct[v->ndirect++] = p;
    VNODE_STORE(&r->ctl->direct, 1, RELAXED);
}

static void set_own_bit(vnode_t * v, int p)
{
    __atomic_fetch_or(&v->summary[p / 64], 1ULL << (p % 64), __ATOMIC_SEQ_CST);
}

/* Direct peers idle for long give their slot up; a packet that raced with the demotion is
 * found by the last look and left to the summary. */
static void demote_idle(vnode_t * v)
{
    for (int i = 0; i < v->ndirect;) {
        int p = v->direct[i];
        vnode_rx_t *r = &v->rx[p];
        if (r->idle < VNODE_IDLE_DEMOTE) {
            i++;
            continue;
        }
        v->direct[i] = v->direct[--v->ndirect];
        if (i < v->ndirect)
            v->rx[v->direct[i]].slot = i;
        r->slot = -1;
        r->idle = 0;
        VNODE_STORE(&r->ctl->direct, 0, RELAXED);
        VNODE_FENCE();
        if (rx_ready(v, p))
            set_own_bit(v, p);
    }
}

/* Peers flagged in the summary, starting after the last one served (fairness). */
static int poll_summary(vnode_t * v, int budget, vnode_rx_fn_t fn, void *arg)
{
    int total = 0, nw = v->nwords, start = v->rr_summary, sb = start % 64;
    for (int i = 0; i <= nw && budget > 0; i++) {
        int w = (start / 64 + i) % nw;
        uint64_t word = VNODE_LOAD(&v->summary[w], RELAXED);
        if (i == 0)
            word &= ~0ULL << sb;
        else if (i == nw)
            word &= sb ? ~(~0ULL << sb) : 0;
        while (word && budget > 0) {
            int b = __builtin_ctzll(word);
            word &= word - 1;
            int p = w * 64 + b;
            __atomic_fetch_and(&v->summary[w], ~(1ULL << b), __ATOMIC_SEQ_CST);
            VNODE_FENCE();
            if (p >= v->nlocal || p == v->local)
                continue;       /* nobody sets these; ignore rather than trust */
            int n = rx_drain(v, p, budget < VNODE_PEER_BATCH ? budget : VNODE_PEER_BATCH, fn,
                             arg);
            if (n < 0)
                return n;
            budget -= n;
            total += n;
            v->rr_summary = (p + 1) % v->nlocal;
            if (v->rx[p].slot < 0 && v->ndirect < v->cfg.direct)
                promote(v, p);
            else if (v->rx[p].slot < 0 && rx_ready(v, p))
                set_own_bit(v, p);      /* batch ended first: come back next poll */
        }
    }
    return total;
}

int vnode_poll(vnode_t * v, vnode_rx_fn_t fn, void *arg)
{
    if (!v->attached)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_poll before vnode_attach");
    if (v->armed)
        vnode_disarm(v);
    /* busy direct peers must not starve the summary's: they get half the batch */
    int budget = v->all_direct ? VNODE_BATCH : VNODE_BATCH / 2, total = 0, nd = v->ndirect;
    if (nd) {
        unsigned start = v->rr_direct++;
        for (int i = 0; i < nd && budget > 0; i++) {
            int p = v->direct[(start + i) % nd];
            int n = rx_drain(v, p, budget < VNODE_PEER_BATCH ? budget : VNODE_PEER_BATCH, fn,
                             arg);
            if (n < 0)
                return n;
            v->rx[p].idle = n ? 0 : v->rx[p].idle + 1;
            budget -= n;
            total += n;
        }
    }
    if (!v->all_direct) {
        int n = poll_summary(v, VNODE_BATCH - total, fn, arg);
        if (n < 0)
            return n;
        total += n;
        demote_idle(v);
    }
    return total;
}

bool vnode_rx_pending(vnode_t * v)
{
    for (int i = 0; i < v->ndirect; i++)
        if (rx_ready(v, v->direct[i]))
            return true;
    if (!v->all_direct)
        for (int w = 0; w < v->nwords; w++)
            if (VNODE_LOAD(&v->summary[w], RELAXED))
                return true;
    return false;
}

bool vnode_tx_room(vnode_t * v)
{
    if (!v->nwait)
        return false;
    for (int p = 0; p < v->nlocal; p++) {
        vnode_tx_t *t = &v->tx[p];
        if (!t->waiting)
            continue;
        t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
        if (t->head + t->want - t->tail <= v->L.ncells)
            return true;
    }
    return false;
}

#ifdef VNODE_TEST_HOOKS
void *vnode_test_cell(vnode_t * v, int dst, uint64_t * seq, uint64_t * ncells)
{
    vnode_tx_t *t = &v->tx[dst];
    *seq = t->head;
    *ncells = v->L.ncells;
    return cell_at(t->cells, t->head & v->mask);
}

int vnode_test_ndirect(const vnode_t * v)
{
    return v->ndirect;
}
#endif
