/*
 * The rings: one single-producer/single-consumer ring of 16-byte units per ordered pair.
 *
 * A record is a header, hdr, data, padded to whole units: a short record (hlen + len up to
 * VNODE_SHORT_MAX) has a 4-byte header, so an 8-byte MPI message (28 bytes with aml's and
 * MPI's headers) takes 2 units and two of them share a cache line; a long one has 16 bytes
 * (vnode_long_hdr_t), which keeps large payloads 16-byte aligned. Why units and not 64-byte
 * cells: a stream of small messages is bound by the cache lines that move from the sender's
 * core to the receiver's. With one cell per message our MPI message rate was the same at 8,
 * 24 and 40 bytes, while Open MPI's is 1.6x higher at 8 bytes than at 24: its fast boxes
 * put two 8-byte messages in a line.
 *
 * A record never wraps: when it does not fit before the ring's end the sender fills the rest
 * with a PAD record and starts at unit 0. The sender writes the record's bytes after its
 * first word, then the first word with a release store (mark: VNODE_MARK of the record's
 * index, which is 64 bits and never reused); the receiver acquire-loads the word at the index
 * it expects: 0 is "nothing yet", the expected mark a record, anything else a malformed one.
 * Old payload where the receiver looks next must never look like a header, so that unit's
 * first word is 0 until the record is published: the receiver zeroes the first word of every
 * line it consumed before it publishes its tail (rx_publish), and the sender zeroes the unit
 * after a record when it is inside the record's last line (the room check keeps it free).
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
 * receiver writes a ring's "direct" word to tell the sender which. Sender: store the first
 * word, fence, load direct (then the bitmap, then the receiver's sleeping word). Receiver
 * demoting a peer: store direct = 0, fence, look at the ring once more: one of them sees the
 * other. The receiver clears a bit (fetch_and, fence) before draining that ring, so a packet
 * published after the clear sets it again. A peer found through the summary takes a free direct slot;
 * a direct peer idle for VNODE_IDLE_DEMOTE polls gives its slot up. When every peer fits in
 * the direct slots the summary is never touched: a small packet costs at most a cache line.
 *
 * No fence while the receiver polls: the sender's fence exists for receivers that may go to
 * sleep or demote it. With every peer direct (nothing is ever demoted) and a receiver that has
 * never slept, the sender only checks the receiver's sleepy word after its store; a receiver
 * about to sleep for the first time sets that word and calls membarrier, which fences every
 * sender's core (vnode_bell.c). The fence drained the store buffer after every packet, waiting
 * for the record's line to come back from the receiver's core: much of the sender's time in
 * a stream of 8-byte MPI messages, whose rate rose without it
 * (docs/benchmarks/2026-11-27-defaults.md, MPIR_CVAR_AMLAPI_VNODE_MEMBARRIER;
 * docs/benchmarks/2026-11-28-figures-from-the-code.md).
 */
#include "vnode_impl.h"
#include "vnode_bits.h"
#include <stdio.h>
#include <string.h>

#define LINE_UNITS (VNODE_CELL / VNODE_UNIT)

static inline char *unit_at(char *units, uint64_t pos)
{
    return units + pos * VNODE_UNIT;
}

/* A record's first word: 0 (empty) or its mark, lengths for a short one */
static inline uint32_t *word_at(char *units, uint64_t pos)
{
    return (uint32_t *) unit_at(units, pos);
}

int vnode_ring_setup(vnode_t * v)
{
    uint64_t base = v->L.nunits;
    v->all_direct = v->nlocal - 1 <= v->cfg.direct;
    v->nwords = (v->nlocal + 63) / 64;
    v->summary = vnode_summary_of(v, v->local);
    v->ndirect = 0;
    vnode_fence_setup(v);
    for (int p = 0; p < v->nlocal; p++) {
        if (p == v->local)
            continue;
        vnode_tx_t *t = &v->tx[p];
        t->ctl = vnode_ring(v, v->local, p);
        t->units = (char *) (t->ctl + 1);
        t->head = t->tail = base;
        /* a receiver with a summary demotes peers, and that needs our fence (see the top) */
        t->sleepy = v->asym && v->all_direct ? &vnode_rank(v, p)->sleepy : NULL;
        vnode_rx_t *r = &v->rx[p];
        r->ctl = vnode_ring(v, p, v->local);
        r->units = (char *) (r->ctl + 1);
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

/* The first send to a peer writes each line of its ring once (zeroes over the zeroed
 * segment, nothing is published): the pages are faulted in and the lines are in this core's
 * cache before the first lap, which otherwise pays a page fault per 4 KiB and a fetch from
 * memory per line (the first messages of a 1-byte ping-pong were slower for it:
 * docs/benchmarks/2026-11-28-figures-from-the-code.md). Only rings in use are touched: a
 * large node's unused pairs commit no memory. */
static void touch_ring(vnode_t * v, vnode_tx_t * t)
{
    for (uint64_t i = 0; i < v->L.nunits; i += LINE_UNITS)
        VNODE_STORE(word_at(t->units, i), 0, RELAXED);
    t->touched = true;
}

/* Room for a record of k units at the sender's head, after a PAD record when the ring's end
 * is too short for it: the unit it starts at (index in *pos), or NULL when the ring has no room
 * now (the sender is then marked waiting, and nothing is written). */
static inline char *tx_room(vnode_t * v, vnode_tx_t * t, uint64_t k, uint64_t * pos)
{
    uint64_t nunits = v->L.nunits;
    if (__builtin_expect(!t->touched, 0))
        touch_ring(v, t);
    uint64_t at = t->head & v->mask;
    uint64_t pad = at + k > nunits ? nunits - at : 0;
    uint64_t need = pad + k + 1;        /* + the unit after it, the receiver's next look */

    if (t->head + need - t->tail > nunits) {
        t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
        if (t->head + need - t->tail > nunits) {
            if (!t->waiting) {
                VNODE_STORE(&t->ctl->tx_wait, 1, RELAXED);
                t->waiting = true;
                v->nwait++;
            }
            VNODE_FENCE();
            t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
            if (t->head + need - t->tail > nunits) {
                t->want = (uint32_t) need;
                v->stats.ring_full++;
                return NULL;
            }
        }
    }
    if (pad) {
        vnode_long_hdr_t *h = (vnode_long_hdr_t *) unit_at(t->units, at);
        h->len = (uint32_t) (pad * VNODE_UNIT - VNODE_LONG_HDR);
        h->hlen = VNODE_PAD_HLEN;
        h->src = (uint16_t) v->local;
        at = 0;         /* a line start: the receiver zeroed it (rx_publish) */
        VNODE_STORE(&h->word, VNODE_MARK(t->head), RELEASE);
        t->head += pad;
    }
    *pos = at;
    return unit_at(t->units, at);
}

/* Rings peer's doorbell if it sleeps; only one waker per sleep (ARMED -> RUNG). The caller
 * fenced after publishing what peer should see. */
static inline void wake_peer(vnode_t * v, int peer)
{
    uint32_t *s = &vnode_rank(v, peer)->sleeping;
    uint32_t armed = VNODE_ARMED;
    if (VNODE_LOAD(s, RELAXED) == VNODE_ARMED &&
        __atomic_compare_exchange_n(s, &armed, VNODE_RUNG, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
        vnode_bell_ring(v, peer);
}

/* Publishes the record of k units written at unit pos with its first word, then tells the
 * receiver: its summary bit unless it polls this ring directly, its doorbell if it sleeps. */
static inline void tx_publish(vnode_t * v, int dst, vnode_tx_t * t, uint64_t pos, uint64_t k,
                              uint32_t word)
{
    /* the receiver looks at the next unit next: inside this line it is ours to zero (the
     * line is here already); a line start the receiver zeroed before it let us reuse it, and
     * zeroing it here would pull the line the receiver polls next away from it */
    if ((pos + k) % LINE_UNITS)
        VNODE_STORE(word_at(t->units, pos + k), 0, RELAXED);
    VNODE_STORE(word_at(t->units, pos), word, RELEASE);
    t->head += k;
    if (t->waiting) {
        VNODE_STORE(&t->ctl->tx_wait, 0, RELAXED);
        t->waiting = false;
        v->nwait--;
    }
    v->stats.pkts_sent++;

    if (t->sleepy) {
        /* the load stays after the store (the membarrier orders the hardware, vnode_bell.c) */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (__builtin_expect(!VNODE_LOAD(t->sleepy, RELAXED), 1)) {
            v->stats.unfenced++;
            return;     /* it polls, and will see the record */
        }
    }
    VNODE_FENCE();
    if (!VNODE_LOAD(&t->ctl->direct, RELAXED)) {
        uint64_t *w = vnode_summary_of(v, dst) + v->local / 64;
        uint64_t bit = 1ULL << (v->local % 64);
        if (!(VNODE_LOAD(w, RELAXED) & bit)) {
            __atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST);
            VNODE_FENCE();
        }
    }
    wake_peer(v, dst);
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
    size_t body = hlen + len;
    uint64_t k = vnode_rec_units(body), pos;
    char *u = tx_room(v, t, k, &pos);
    if (!u)
        return VNODE_AGAIN;
    uint32_t word;
    if (body <= VNODE_SHORT_MAX) {
        vnode_copy_small(u + VNODE_SHORT_HDR, hdr, hlen);
        if (len)
            vnode_copy_small(u + VNODE_SHORT_HDR + hlen, data, len);
        word = VNODE_SHORT_WORD(t->head, body, hlen);
    } else {
        vnode_long_hdr_t *h = (vnode_long_hdr_t *) u;
        h->len = (uint32_t) body;
        h->hlen = (uint16_t) hlen;
        h->src = (uint16_t) v->local;
        memcpy(u + VNODE_LONG_HDR, hdr, hlen);
        if (len)
            memcpy(u + VNODE_LONG_HDR + hlen, data, len);
        word = VNODE_MARK(t->head);
    }
    tx_publish(v, dst, t, pos, k, word);
    return VNODE_OK;
}

int vnode_reserve(vnode_t * v, int dst, size_t len, void **at)
{
    if (!v->attached || dst < 0 || dst >= v->nlocal || dst == v->local || len < 1 ||
        len > VNODE_SHORT_MAX || len > v->cfg.max_pkt)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_reserve to local rank %d of %d "
                          "(len %zu, short records up to %d, max_pkt %zu)%s", dst, v->nlocal,
                          len, VNODE_SHORT_MAX, v->cfg.max_pkt,
                          v->attached ? "" : " before vnode_attach");
    vnode_tx_t *t = &v->tx[dst];
    uint64_t k = vnode_rec_units(len), pos;
    char *u = tx_room(v, t, k, &pos);
    if (!u)
        return VNODE_AGAIN;
    t->rsv_pos = pos;
    t->rsv_word = VNODE_SHORT_WORD(t->head, len, len);
    t->rsv_k = (uint32_t) k;
    *at = u + VNODE_SHORT_HDR;
    return VNODE_OK;
}

int vnode_commit(vnode_t * v, int dst)
{
    vnode_tx_t *t = dst >= 0 && dst < v->nlocal ? &v->tx[dst] : NULL;
    if (!t || !t->rsv_k)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_commit to local rank %d with no "
                          "vnode_reserve before it", dst);
    tx_publish(v, dst, t, t->rsv_pos, t->rsv_k, t->rsv_word);
    t->rsv_k = 0;
    return VNODE_OK;
}

/* Something to look at: a record, or a malformed word that the next drain reports */
static bool rx_ready(vnode_t * v, int p)
{
    vnode_rx_t *r = &v->rx[p];
    return VNODE_LOAD(word_at(r->units, r->tail & v->mask), ACQUIRE) != 0;
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
               "local rank %d at unit index %llu: %s", p, v->local,
               (unsigned long long) v->rx[p].tail, what);
    v->err_peer = p;
    return VNODE_ERR_MALFORMED;
}

/* Publishes the tail when due, and wakes a sender waiting for room. */
static void rx_publish(vnode_t * v, int p, vnode_rx_t * r)
{
    if (r->tail - r->pub < v->L.nunits / 4 && !VNODE_LOAD(&r->ctl->tx_wait, RELAXED))
        return;
    /* the start of every line the sender may now reuse reads 0 until it writes there again
     * (vnode_send zeroes only a next unit inside the line it wrote). Also for speed: the
     * sender's next lap takes these lines from this core's cache in one transfer; left
     * shared, a 2-4 KiB ping-pong whose receiver copies the data out was slower
     * (docs/benchmarks/2026-11-28-figures-from-the-code.md). */
    for (uint64_t u = (r->pub + LINE_UNITS - 1) & ~(uint64_t) (LINE_UNITS - 1); u < r->tail;
         u += LINE_UNITS)
        VNODE_STORE(word_at(r->units, u & v->mask), 0, RELAXED);
    VNODE_STORE(&r->ctl->tail, r->tail, RELEASE);
    r->pub = r->tail;
    VNODE_FENCE();
    if (VNODE_LOAD(&r->ctl->tx_wait, RELAXED))
        wake_peer(v, p);
}

/* Delivers up to max packets from p's ring: their number or VNODE_ERR_MALFORMED. */
static int rx_drain(vnode_t * v, int p, int max, vnode_rx_fn_t fn, void *arg)
{
    vnode_rx_t *r = &v->rx[p];
    uint64_t nunits = v->L.nunits, mask = v->mask;
    int n = 0;
    while (n < max) {
        uint64_t pos = r->tail & mask;
        char *u = unit_at(r->units, pos);
        uint32_t word = VNODE_LOAD((uint32_t *) u, ACQUIRE);
        if (word == 0)
            break;
        if ((word & 0xffff) != VNODE_MARK(r->tail))
            return malformed(v, p, "mark 0x%x in unit %llu, expected 0x%x or 0",
                             (unsigned) (word & 0xffff), (unsigned long long) pos,
                             (unsigned) VNODE_MARK(r->tail));
        /* read once: a broken peer must not change what was validated */
        uint32_t len = (word >> 16) & 0xff;
        unsigned hlen = word >> 24;
        const char *h = u + VNODE_SHORT_HDR;
        bool is_long = len == 0;
        if (is_long) {
            const vnode_long_hdr_t *lh = (const vnode_long_hdr_t *) u;
            unsigned src = VNODE_LOAD(&lh->src, RELAXED);
            len = VNODE_LOAD(&lh->len, RELAXED);
            hlen = VNODE_LOAD(&lh->hlen, RELAXED);
            h = u + VNODE_LONG_HDR;
            if (src != (unsigned) p)
                return malformed(v, p, "source field %u in the ring of local rank %d", src, p);
            if (hlen == VNODE_PAD_HLEN) {
                if (pos == 0 || nunits - pos >= v->L.max_units ||
                    len != (nunits - pos) * VNODE_UNIT - VNODE_LONG_HDR)
                    return malformed(v, p, "PAD record at unit %llu covering %u bytes; a PAD "
                                     "only fills a ring end shorter than the largest record "
                                     "(%u units)", (unsigned long long) pos, len,
                                     v->L.max_units);
                r->tail += nunits - pos;
                continue;
            }
        }
        if (len == 0 || len > v->cfg.max_pkt)
            return malformed(v, p, "length %u, must be 1..%zu", len, v->cfg.max_pkt);
        if (is_long && len <= VNODE_SHORT_MAX)   /* its size would be misread */
            return malformed(v, p, "long record of %u bytes (up to %d are short)", len,
                             VNODE_SHORT_MAX);
        if (hlen == 0 || hlen > len)
            return malformed(v, p, "header length %u of a %u-byte packet", hlen, len);
        uint64_t k = vnode_rec_units(len);
        if (pos + k > nunits)
            return malformed(v, p, "a %llu-unit record at unit %llu runs past the ring end "
                             "(%llu units)", (unsigned long long) k, (unsigned long long) pos,
                             (unsigned long long) nunits);
        fn(arg, p, h, hlen, h + hlen, len - hlen);
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
        int w = start / 64 + i < nw ? start / 64 + i : start / 64 + i - nw;
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
            v->rr_summary = p + 1 < v->nlocal ? p + 1 : 0;
            if (v->rx[p].slot < 0 && v->ndirect < v->cfg.direct)
                promote(v, p);
            else if (v->rx[p].slot < 0 && rx_ready(v, p))
                set_own_bit(v, p);      /* batch ended first: come back next poll */
        }
    }
    return total;
}

static int poll_all(vnode_t * v, vnode_rx_fn_t fn, void *arg) __attribute__ ((noinline));

/* Every peer polled directly (no summary, no idle peers to demote): a ring with nothing in it
 * costs one load and no call. A blocked receive's loop runs this back to back; the general
 * poll's bookkeeping and frame had made each empty pass twice as long. */
static __attribute__ ((noinline))
int poll_direct(vnode_t * v, vnode_rx_fn_t fn, void *arg)
{
    int nd = v->ndirect, budget = VNODE_BATCH, total = 0;
    unsigned j = v->rr_direct < (unsigned) nd ? v->rr_direct : 0;
    v->rr_direct = j + 1 < (unsigned) nd ? j + 1 : 0;  /* the start rotates, for fairness */
    for (int i = 0; i < nd && budget > 0; i++) {
        int p = v->direct[j];
        j = j + 1 < (unsigned) nd ? j + 1 : 0;
        if (!rx_ready(v, p))
            continue;
        int n = rx_drain(v, p, budget < VNODE_PEER_BATCH ? budget : VNODE_PEER_BATCH, fn, arg);
        if (n < 0)
            return n;
        budget -= n;
        total += n;
    }
    return total;
}

/* The front, with no frame: an empty poll of all-direct peers is a load per peer. */
int vnode_poll(vnode_t * v, vnode_rx_fn_t fn, void *arg)
{
    if (__builtin_expect(v->all_direct && v->attached && !v->armed, 1)) {
        for (int i = 0; i < v->ndirect; i++)
            if (rx_ready(v, v->direct[i]))
                return poll_direct(v, fn, arg);
        return 0;
    }
    return poll_all(v, fn, arg);
}

static int poll_all(vnode_t * v, vnode_rx_fn_t fn, void *arg)
{
    if (!v->attached)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_poll before vnode_attach");
    if (v->armed)
        vnode_disarm(v);
    /* busy direct peers must not starve the summary's: they get half the batch */
    int budget = v->all_direct ? VNODE_BATCH : VNODE_BATCH / 2, total = 0, nd = v->ndirect;
    if (nd) {
        /* the start rotates for fairness, with no division: a div per pass drew half of
         * vnode_poll's samples in a blocked receive's poll loop */
        unsigned j = v->rr_direct < (unsigned) nd ? v->rr_direct : 0;
        v->rr_direct = j + 1 < (unsigned) nd ? j + 1 : 0;
        for (int i = 0; i < nd && budget > 0; i++) {
            int p = v->direct[j];
            j = j + 1 < (unsigned) nd ? j + 1 : 0;
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

/* vnode_arm: a direct ring or the summary has work */
static bool rx_pending(vnode_t * v)
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

/* vnode_arm: a ring this rank waits on has room */
static bool tx_waited_room(vnode_t * v)
{
    if (!v->nwait)
        return false;
    for (int p = 0; p < v->nlocal; p++) {
        vnode_tx_t *t = &v->tx[p];
        if (!t->waiting)
            continue;
        t->tail = VNODE_LOAD(&t->ctl->tail, ACQUIRE);
        if (t->head + t->want - t->tail <= v->L.nunits)
            return true;
    }
    return false;
}

/* Before sleeping: the doorbell armed (vnode_bell.c), then one more look for work, since a
 * sender that published before it saw ARMED rings nothing (the protocol: vnode_bell.c). */
int vnode_arm(vnode_t * v)
{
    if (!v->attached)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_arm before vnode_attach");
    if (!vnode_arm_bell(v))
        return VNODE_AGAIN;
    if (rx_pending(v) || tx_waited_room(v)) {
        vnode_disarm(v);
        return VNODE_AGAIN;
    }
    return VNODE_OK;
}

#ifdef VNODE_TEST_HOOKS
void *vnode_test_cell(vnode_t * v, int dst, uint64_t * seq, uint64_t * nunits)
{
    vnode_tx_t *t = &v->tx[dst];
    *seq = t->head;
    *nunits = v->L.nunits;
    return unit_at(t->units, t->head & v->mask);
}

int vnode_test_ndirect(const vnode_t * v)
{
    return v->ndirect;
}
#endif
