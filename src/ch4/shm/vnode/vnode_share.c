/*
 * Shared single copy: both ranks of a large on-node transfer copy it, each from its own end,
 * so two cores move one message (process_vm_readv by the claimer, process_vm_writev by the
 * exporter for a read; the other way round for a write). Reader and exporter together
 * finish a large copy sooner than one reader alone
 * (docs/benchmarks/2026-11-28-figures-from-the-code.md).
 *
 * A slot of the exporter's block in the segment describes the range (vnode_xslot_t). The
 * claimer moves its phase OPEN -> CLAIMED with a CAS (one copy of a range at a time; a
 * second claimer finds it taken and copies plainly), writes its side of the copy and a new
 * job number into `next`, then BUSY with a release store. From then on both take chunks
 * from `next` and add what they copied to `done`; the copy is complete when done == rlen,
 * and the claimer then moves BUSY back to OPEN, so the range serves the next copy too (an
 * RMA window is exported once and copied into by every large put). The exporter looks at
 * its used slots in vnode_help and leaves a slot alone once no chunk is left; it frees the
 * slot in vnode_unexport, after the claimer told it (by a packet of the embedder) that it
 * finished, so the claimer never touches a slot it no longer owns. The generation in the
 * key and the state word makes a stale key fail instead of copying into a reused range.
 *
 * `next` is job << 32 | chunk. The claimer owns the job's fields, so it takes chunks by
 * fetch_add; the exporter reads the fields after `next` and takes a chunk by CAS on the
 * `next` it read. A claimer puts its new job number (with no chunk free) into `next`
 * before it changes any field, so an exporter that read some fields of a newer copy fails
 * its CAS and reads again: it never copies one job's chunk with another's addresses. While a
 * job still has a chunk to take it cannot be complete, so its fields stay as they were until
 * the CAS.
 *
 * Neither side waits for the other for long: a claimer whose exporter is busy elsewhere
 * copies every chunk itself, and waits only for a chunk the exporter has taken and is
 * copying now (briefly here; after that its embedder completes it later).
 *
 * Sharing pays only when the exporter has a core to spare. A rank says in its block when it
 * is making a copy of its own (`copying`; helping is not counted: that core works for the
 * claimers), and a claimer whose exporter is does not share: it copies the whole range in
 * one system call. Where both ranks receive at once (bidirectional
 * traffic) the chunks would all fall to the claimer, one system call each, and sharing cost
 * a fifth of the bandwidth at 64-256 KiB (docs/benchmarks/2026-11-28-one-sided.md).
 */
#include "vnode_impl.h"
#include <string.h>

/* smaller chunks gain nothing (docs/benchmarks/2026-11-28-figures-from-the-code.md) */
#define CHUNK_MIN 32768
#define WAIT_DONE_MS 0.1      /* at most this long for the exporter's last chunk (a 256 KiB
                                 * chunk is copied well within it): then the embedder
                                 * completes it later */
#define KEY(slot, gen) ((uint64_t) (gen) << 8 | (slot) | 0x80)  /* never 0 */

static inline uint64_t state_of(uint32_t gen, int phase)
{
    return (uint64_t) gen << 2 | (uint64_t) phase;
}

int vnode_export(vnode_t * v, void *addr, size_t len, uint64_t * key)
{
    *key = 0;
    if (!v->attached || !v->single_copy || !v->cfg.share_min || len < v->cfg.share_min ||
        v->xused == ~0ULL)
        return VNODE_OK;
    unsigned i = (unsigned) __builtin_ctzll(~v->xused);
    vnode_xslot_t *x = vnode_xslot(v, v->local, i);
    uint32_t gen = ++v->xgen[i] & 0x3fffffff;
    if (!gen)
        gen = v->xgen[i] = 1;
    x->addr = v->xaddr[i] = (uint64_t) (uintptr_t) addr;
    x->len = v->xlen[i] = len;
    VNODE_STORE(&x->state, state_of(gen, VNODE_X_OPEN), RELEASE);
    v->xused |= 1ULL << i;
    *key = KEY(i, gen);
    return VNODE_OK;
}

void vnode_unexport(vnode_t * v, uint64_t key)
{
    unsigned i = key & 0x7f;
    if (!key || i >= VNODE_EXPORTS || !(v->xused & (1ULL << i)))
        return;
    VNODE_STORE(&vnode_xslot(v, v->local, i)->state, 0, RELEASE);
    v->xused &= ~(1ULL << i);
}

#ifdef VNODE_TEST_HOOKS
#include <unistd.h>
unsigned vnode_test_help_delay_us;
#endif

#define JOB(n) ((n) >> 32)
#define CHUNK_OF(n) ((n) & 0xffffffffULL)
#define NO_CHUNK 0xffffffffULL  /* in `next` while a claimer writes a copy's fields */

/* One chunk of job `next`'s copy; adds its bytes to *bytes (if given). */
static int copy_chunk(vnode_t * v, vnode_xslot_t * x, int peer, bool write, uint64_t mine,
                      uint64_t theirs, uint64_t rlen, uint64_t chunk, uint64_t k,
                      uint64_t * bytes)
{
    uint64_t off = k * chunk, len = rlen - off < chunk ? rlen - off : chunk;
    struct iovec l = { (void *) (uintptr_t) (mine + off), len };
    int rc = vnode_cma_xfer(v, peer, &l, 1, theirs + off, len, write);
    if (rc != VNODE_OK) {
        v->err_peer = peer;
        return rc;
    }
    __atomic_fetch_add(&x->done, len, __ATOMIC_ACQ_REL);
    if (bytes)
        *bytes += len;
    return VNODE_OK;
}

/* The claimer's loop: takes chunks of its own job until none is left. */
static int claimer_chunks(vnode_t * v, vnode_xslot_t * x, int peer, bool write, uint64_t mine,
                          uint64_t theirs, uint64_t rlen, uint64_t chunk)
{
    uint64_t nchunks = (rlen + chunk - 1) / chunk;
    for (;;) {
        uint64_t k = CHUNK_OF(__atomic_fetch_add(&x->next, 1, __ATOMIC_ACQ_REL));
        if (k >= nchunks)
            return VNODE_OK;
        int rc = copy_chunk(v, x, peer, write, mine, theirs, rlen, chunk, k, NULL);
        if (rc != VNODE_OK)
            return rc;
    }
}

/* The copy is over: the range is open for the next one (unless its exporter took it back). */
static void reopen(vnode_share_t * s)
{
    vnode_xslot_t *x = s->slot;
    uint64_t busy = s->busy;
    __atomic_compare_exchange_n(&x->state, &busy, (busy & ~3ULL) | VNODE_X_OPEN, false,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    s->slot = NULL;
}

static inline void set_copying(vnode_t * v, uint32_t on)
{
    VNODE_STORE(&vnode_rank(v, v->local)->copying, on, RELAXED);
}

/* one system call, this rank copying (peer checked by the caller or vnode_cma_xfer) */
static int plain_copy(vnode_t * v, int peer, struct iovec *l, uint64_t raddr, size_t len,
                      int write)
{
    set_copying(v, 1);
    int rc = vnode_cma_xfer(v, peer, l, 1, raddr, len, write);
    set_copying(v, 0);
    return rc;
}

int vnode_copy_shared(vnode_t * v, int peer, uint64_t key, int write, void *local,
                      uint64_t raddr, size_t len, vnode_share_t * s)
{
    unsigned i = key & 0x7f;
    uint32_t gen = (uint32_t) (key >> 8);
    struct iovec l = { local, len };
    s->slot = NULL;
    if (!key || len < v->cfg.share_min || !v->cfg.share_min || peer < 0 || peer >= v->nlocal ||
        peer == v->local || !v->single_copy ||
        VNODE_LOAD(&vnode_rank(v, peer)->copying, RELAXED))
        return plain_copy(v, peer, &l, raddr, len, write);
    /* a key naming no slot reads slot 0's state only to report it */
    vnode_xslot_t *x = vnode_xslot(v, peer, i < VNODE_EXPORTS ? i : 0);
    uint64_t open = state_of(gen, VNODE_X_OPEN);
    uint64_t st = VNODE_LOAD(&x->state, ACQUIRE);
    /* read once: the range is checked and used as read */
    uint64_t xaddr = VNODE_LOAD(&x->addr, RELAXED), xlen = VNODE_LOAD(&x->len, RELAXED);
    if (i >= VNODE_EXPORTS || (key & 0x80) == 0 || (st >> 2) != gen || (st & 3) == 0 ||
        raddr < xaddr || len > xlen || raddr - xaddr > xlen - len) {
        vnode_fail(v, VNODE_ERR_MALFORMED, "vnode: export key %#llx of local rank %d does "
                   "not describe %zu bytes at %#llx (slot state %#llx)",
                   (unsigned long long) key, peer, len, (unsigned long long) raddr,
                   (unsigned long long) st);
        v->err_peer = peer;
        return VNODE_ERR_MALFORMED;
    }
    if (!__atomic_compare_exchange_n(&x->state, &open, state_of(gen, VNODE_X_CLAIMED), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return plain_copy(v, peer, &l, raddr, len, write);      /* copied before */
    /* up to four chunks of at least CHUNK_MIN, in whole pages, none much smaller than the
     * others (64 KiB + 1 in two, not 32 KiB + 32 KiB + 1 byte: a system call pins a page
     * whatever it copies): few system calls, and a helper that comes late still finds work;
     * the exporter copies the same offsets from its end */
    uint64_t nch = len / CHUNK_MIN < 1 ? 1 : len / CHUNK_MIN > 4 ? 4 : len / CHUNK_MIN;
    uint64_t chunk = ((len + nch - 1) / nch + 4095) & ~(uint64_t) 4095;
    /* a new job number before any field changes: an exporter still on the last copy, which
     * may read some of the new fields, then fails its CAS on the old `next` (the fences
     * pair with the one in help_slot); no chunk is free until the fields are complete */
    uint64_t job = JOB(VNODE_LOAD(&x->next, RELAXED)) + 1;
    VNODE_STORE(&x->next, job << 32 | NO_CHUNK, RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    VNODE_STORE(&x->raddr, (uint64_t) (uintptr_t) local, RELAXED);
    VNODE_STORE(&x->rlen, (uint64_t) len, RELAXED);
    VNODE_STORE(&x->chunk, chunk, RELAXED);
    VNODE_STORE(&x->claimer, (uint32_t) v->local, RELAXED);
    VNODE_STORE(&x->write, write ? 1u : 0u, RELAXED);
    VNODE_STORE(&x->xoff, raddr - xaddr, RELAXED);
    VNODE_STORE(&x->done, 0, RELAXED);
    VNODE_STORE(&x->next, job << 32, RELEASE);
    VNODE_STORE(&x->state, state_of(gen, VNODE_X_BUSY), RELEASE);
    v->stats.shared_copies++;
    s->slot = x;
    s->len = len;
    s->busy = state_of(gen, VNODE_X_BUSY);
    set_copying(v, 1);
    int rc = claimer_chunks(v, x, peer, write, (uint64_t) (uintptr_t) local, raddr, len,
                            chunk);
    set_copying(v, 0);
    if (rc < 0) {
        reopen(s);
        return rc;
    }
    /* the exporter copies its last chunk now, a few microseconds at most: waiting here is
     * cheaper than a pending operation, and leaves the range open for the next copy */
    if (vnode_share_test(v, s) == VNODE_OK)
        return VNODE_OK;
    double t0 = vnode_now_ms();
    while (VNODE_LOAD(&x->done, ACQUIRE) != len && vnode_now_ms() - t0 < WAIT_DONE_MS)
        VNODE_PAUSE();
    return vnode_share_test(v, s);
}

int vnode_share_test(vnode_t * v, vnode_share_t * s)
{
    vnode_xslot_t *x = s->slot;
    (void) v;
    if (!x)
        return VNODE_OK;
    if (VNODE_LOAD(&x->done, ACQUIRE) != s->len)
        return VNODE_AGAIN;
    reopen(s);
    return VNODE_OK;
}

/* Takes chunks of the copy of export i that a peer is making, until none is left (or the
 * copy ended and another began: the next poll sees that one). Returns the chunks copied. */
static int help_slot(vnode_t * v, vnode_xslot_t * x, unsigned i)
{
    int total = 0;
    for (;;) {
        uint64_t n = VNODE_LOAD(&x->next, ACQUIRE);
        if (CHUNK_OF(n) == NO_CHUNK)
            return total;       /* a claimer is writing a new copy's fields */
        uint64_t rlen = VNODE_LOAD(&x->rlen, RELAXED), chunk = VNODE_LOAD(&x->chunk, RELAXED);
        unsigned c = VNODE_LOAD(&x->claimer, RELAXED);
        uint64_t xoff = VNODE_LOAD(&x->xoff, RELAXED), raddr = VNODE_LOAD(&x->raddr, RELAXED);
        bool write = VNODE_LOAD(&x->write, RELAXED) != 0;
        /* a field of a newer copy read here means its job number is in `next` already:
         * the CAS below fails */
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (chunk != 0 && CHUNK_OF(n) * chunk >= rlen)
            return total;       /* nothing left: the claimer finishes, then we unexport */
#ifdef VNODE_TEST_HOOKS
        if (vnode_test_help_delay_us)
            usleep(vnode_test_help_delay_us);
#endif
        /* the fields are the job's only if the CAS succeeds: check them after it */
        if (!__atomic_compare_exchange_n(&x->next, &n, n + 1, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        /* chunks are whole pages (vnode_copy_shared): 1-byte ones would cost this rank a
         * system call per byte */
        if (c >= (unsigned) v->nlocal || c == (unsigned) v->local || chunk == 0 ||
            (chunk & 4095)) {
            vnode_fail(v, VNODE_ERR_MALFORMED, "vnode: the copy of export %u claims to be "
                       "local rank %u's, chunks of %llu bytes", i, c,
                       (unsigned long long) chunk);
            v->err_peer = c < (unsigned) v->nlocal ? (int) c : -1;
            return VNODE_ERR_MALFORMED;
        }
        /* the claimer checked its copy against the range in the slot; we check it against
         * our own record of the range (the slot is writable by every local rank): it is our
         * memory */
        if (xoff > v->xlen[i] || rlen > v->xlen[i] - xoff) {
            vnode_fail(v, VNODE_ERR_MALFORMED, "vnode: local rank %u's copy of export %u "
                       "covers %llu bytes from offset %llu of its %llu bytes", c, i,
                       (unsigned long long) rlen, (unsigned long long) xoff,
                       (unsigned long long) v->xlen[i]);
            v->err_peer = (int) c;
            return VNODE_ERR_MALFORMED;
        }
        /* the claimer reads our range: we write to it; it writes: we read from it */
        int rc = copy_chunk(v, x, (int) c, !write, v->xaddr[i] + xoff, raddr, rlen, chunk,
                            CHUNK_OF(n), &v->stats.helped_bytes);
        if (rc < 0)
            return rc;
        total++;
    }
}

int vnode_help(vnode_t * v)
{
    int total = 0;
    for (uint64_t used = v->xused; used; used &= used - 1) {
        unsigned i = (unsigned) __builtin_ctzll(used);
        vnode_xslot_t *x = vnode_xslot(v, v->local, i);
        uint64_t st = VNODE_LOAD(&x->state, ACQUIRE);
        if ((st & 3) != VNODE_X_BUSY || (st >> 2) != (v->xgen[i] & 0x3fffffff))
            continue;
        int n = help_slot(v, x, i);
        if (n < 0)
            return n;
        total += n;
    }
    return total;
}
