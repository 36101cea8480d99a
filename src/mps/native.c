/* The native back end: zero-copy channels (one node), one-transfer channels (between nodes).
 *
 * A channel's two ends share an arena, one MPI-3 shared-memory window made once, at
 * MPS_Channel_create (on amlapi the window lives in the node's shared segment: amlapi_rma_shm.c).
 * Each end's part of it holds a control block the *other* end writes into, and the data area
 * its send pools take their buffers from. Sending a buffer lends it: its offset, size and tag
 * go into the other end's inbox ring, the receiver's MPS_Buf_get returns a pointer to the very
 * bytes the sender wrote, and MPS_Buf_release puts the offset into the sender's return ring,
 * which gives the buffer back to its send pool. No byte of the data is copied and no message
 * is sent: only ownership moves (the poster's "buffer must belong to application OR I/O").
 *
 * Between nodes (the RMA path below) the same rings are written with MPI RMA into a window
 * from MPI_Win_allocate, and the receiver reads a handed-off buffer into its own with one
 * MPI_Get (one transfer, registered once; unmeasured: written and tested on one node only).
 *
 * What stays on the message path (EMPS's code, MPI_Isend/pre-posted MPI_Irecv): messages
 * that are not pool hand-offs (a plain MPI_Isend of a pool buffer, as in the poster's
 * example; a send when the other end has no receive pool), and pools the arena has no room
 * for. MPS_Pool_counters tells hand-offs from copied bytes.
 *
 * Order: a send pool's messages arrive in order on both paths, and across a switch between
 * them: a send by message (no receive pool at the other end yet, or a pool the arena had no
 * room for) puts the channel in message mode, and hand-offs resume only once the receiver's
 * pools have handed out as many messages as were sent (msgs_taken); a receive pool cannot
 * finalize with hand-offs not taken, so the other switch keeps order by itself.
 *
 * Rings are single producer/single consumer over C11 atomics in the shared window; MPI's
 * unified memory model (checked: MPI_WIN_MODEL) makes the stores visible to the other
 * process. Whether the receiver takes hand-offs and the inbox tail are one word, so a
 * receive pool cannot detach (finalize) while a hand-off is being published to it.
 *
 * Ownership guard (MPS_GUARD=1, a checking mode, off by default): a lent buffer is read-only
 * in the sender's mapping until it comes back, and the other end's arena is inaccessible in
 * the receiver's mapping except for the buffers it holds; an access outside ownership faults,
 * and a SIGSEGV handler names the link before the process dies. */
#define _GNU_SOURCE
#include "mps_impl.h"
#include "native_check.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NAT_RING 1024               /* descriptors; at most this many arena buffers per end */
#define NAT_MAX_ALLOCS 64           /* send pools in one end's arena at a time */
#define NAT_ATTACHED (1ull << 63)   /* in in_word: the owner's receive pool takes hand-offs */
#define NAT_TAIL_MASK (NAT_ATTACHED - 1)

struct nat_desc {
    uint64_t off;                   /* in the sender's data area */
    uint32_t len;                   /* the buffer's stride (pages, for the guard) */
    int32_t bytes, tag;
    int32_t pad;
};

/* at the start of each end's part; the owner reads it, the other end writes into it */
struct nat_ctl {
    _Alignas(64) _Atomic uint64_t in_word;     /* NAT_ATTACHED | inbox tail (other end) */
    _Alignas(64) _Atomic uint64_t in_head;     /* inbox head (owner) */
    _Alignas(64) _Atomic uint64_t ret_tail;    /* return ring tail (other end) */
    _Alignas(64) _Atomic uint64_t ret_head;    /* return ring head (owner) */
    _Alignas(64) _Atomic uint64_t msgs_taken;  /* pool messages (not hand-offs) the owner's
                                                  receive pools handed out (owner) */
    /* RMA path: the owner's own counters (the other end never reads them) */
    _Alignas(64) uint64_t in_head_local;       /* inbox head */
    uint64_t ret_out;                          /* tail of the other end's return ring */
    _Alignas(64) struct nat_desc in[NAT_RING];
    uint64_t ret[NAT_RING];
};

struct mps_nat_chan {
    struct mps_nat_chan *next;
    int link, nth;                  /* both ends free arenas in (link, nth) order */
    char name[MPS_MAX_NAME];
    MPI_Win win;
    struct nat_ctl *mine, *peer;
    char *data, *pdata;             /* data areas: mine, the other end's (in my mapping) */
    size_t arena;                   /* bytes of each data area */
    size_t ctl;                     /* bytes before it (the control block, in pages) */
    size_t moff, poff;              /* where the control block starts in my / the other end's
                                       part: the first page boundary (MPIs need not align) */
    int guard;
    int remote;                     /* RMA path: no shared mapping, MPI RMA into the window */
    int rank, prank;                /* in the channel's communicator */
    /* order: once a pool send went by message, hand-offs wait until the receiver has taken
     * every such message (the two paths would not keep MPI's order with each other) */
    uint64_t msgs_sent;
    int msg_mode;
    int nbufs;                      /* arena buffers in use (<= NAT_RING) */
    int nalloc;
    struct { size_t off, len; int nbufs; } alloc[NAT_MAX_ALLOCS];
};

static struct mps_nat_chan *chans;
static size_t page;
static char refusal[256];

const char *mps_nat_refusal(void)
{
    return refusal;
}

size_t mps_nat_page(void)
{
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

int mps_native_wanted(void)
{
    const char *e = getenv("MPS_BACKEND");
    if (e && !strcmp(e, "emps"))
        return 0;
    /* amlapi registers its own control variables: their presence identifies it whatever the
     * version string says (a renamed build, another MPICH device reports differently) */
    int provided, idx, amlapi = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS) {
        amlapi = MPI_T_cvar_get_index("MPIR_CVAR_AMLAPI_RMA_SHM_COPY", &idx) == MPI_SUCCESS;
        MPI_T_finalize();
    }
    /* MPS_BACKEND=native asks for it over any MPI-3 library (it uses shared-memory windows
     * only); the default takes it where the library is amlapi */
    return amlapi || (e && !strcmp(e, "native"));
}

static size_t round_page(size_t n)
{
    return (n + page - 1) & ~(page - 1);
}

static int guard_on(void)
{
    /* off by default: a protection change costs a TLB shootdown on every core the process
     * ran on; four per hand-off cost more than the 1 MiB copy the hand-off saves
     * (docs/benchmarks/2026-11-28-figures-from-the-code.md; the hand-off:
     * docs/benchmarks/2026-11-25-mps.md) */
    const char *e = getenv("MPS_GUARD");
    return e && *e && strcmp(e, "0");
}

static void guard(void *a, size_t len, int prot, struct mps_nat_chan *nc)
{
    if (nc->guard)
        mprotect(a, len, prot);
}

/* ---- the ownership guard's fault handler ---- */

static struct sigaction old_segv;

static void segv(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (struct mps_nat_chan *nc = chans; nc; nc = nc->next) {
        const char *who = NULL;
        char *base = NULL;
        if (a >= (uintptr_t)nc->data && a < (uintptr_t)nc->data + nc->arena)
            who = "a buffer this process sent (it belongs to the receiver until it releases it)", base = nc->data;
        else if (nc->pdata && a >= (uintptr_t)nc->pdata && a < (uintptr_t)nc->pdata + nc->arena)
            who = "a buffer of the other end this process does not hold (not got, or already released)",
            base = nc->pdata;
        if (!who)
            continue;
        char msg[512];
        int n = snprintf(msg, sizeof(msg), "MPS: ownership violation on link '%s': access at offset %zu of %s "
                         "(MPS_GUARD=1 checks this)\n", nc->name, (size_t)(a - (uintptr_t)base), who);
        if (n > 0 && write(2, msg, (size_t)n) < 0)
            n = 0;
        /* die of the fault, as the program would have */
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    if (old_segv.sa_flags & SA_SIGINFO && old_segv.sa_sigaction) {
        old_segv.sa_sigaction(sig, si, uc);
        return;
    }
    if (old_segv.sa_handler != SIG_DFL && old_segv.sa_handler != SIG_IGN) {
        old_segv.sa_handler(sig);
        return;
    }
    signal(SIGSEGV, SIG_DFL);
}

static void install_segv(void)
{
    static int done;
    if (done)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    done = 1;
}

/* ---- channels ---- */

/* the RMA path instead of the shared arena, on one node (tests; MPS_RMA=1) */
static int rma_forced(void)
{
    const char *e = getenv("MPS_RMA");
    return e && *e && strcmp(e, "0");
}

int mps_nat_chan_open(mps_state *s, mps_channel *ch, const mps_topo_link *l, MPI_Comm comm)
{
    mps_nat_page();
    /* both ends must agree: native wanted on both; one node (shared arena) on both, else the
     * RMA path */
    MPI_Comm node;
    int nsize = 0, rc;
    if ((rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node)) != MPI_SUCCESS)
        return mps_mpi_error("MPI_Comm_split_type (native channel)", rc);
    MPI_Comm_size(node, &nsize);
    MPI_Comm_free(&node);
    int want[2] = {s->be == &mps_native_backend, nsize == 2 && !rma_forced()}, both[2];
    if ((rc = MPI_Allreduce(want, both, 2, MPI_INT, MPI_MIN, comm)) != MPI_SUCCESS)
        return mps_mpi_error("MPI_Allreduce (native channel)", rc);
    snprintf(refusal, sizeof(refusal), "%s", !both[0] ? "the EMPS back end runs on an end" : "");
    if (!both[0])
        return MPS_SUCCESS;     /* messages (EMPS's path) */
    int remote = !both[1];

    /* the arena: room for two pools of the link's size per end (MPS_ARENA_BYTES: other) */
    size_t arena = 2 * round_page((size_t)l->bufsize) * (size_t)l->bufcount;
    const char *e = getenv("MPS_ARENA_BYTES");
    if (e && *e) {
        unsigned long long v;
        if (mps_parse_arena_bytes(e, &v) != 0)
            return mps_error(MPS_ERR_ARG, "MPS_ARENA_BYTES=%s: not a number of bytes in 0..%llu", e,
                             (unsigned long long)MPS_ARENA_MAX);
        arena = (size_t)v;
    }
    arena = round_page(arena < 65536 ? 65536 : arena);
    size_t ctl = round_page(sizeof(struct nat_ctl));
    struct mps_nat_chan *nc = calloc(1, sizeof(*nc));
    if (!nc)
        return mps_error(MPS_ERR_NOMEM, "MPS_Channel_create: out of memory");
    MPI_Comm_rank(comm, &nc->rank);
    nc->prank = ch->rrank;
    void *base = NULL, *pbase = NULL;
    int ok = 1;
    if (remote) {
        /* registered once with the transports (amlapi exposes a window's memory at creation);
         * one passive-target epoch for the channel's life */
        rc = MPI_Win_allocate((MPI_Aint)(ctl + arena + page), 1, MPI_INFO_NULL, comm, &base, &nc->win);
        if (rc == MPI_SUCCESS)
            MPI_Win_lock_all(0, nc->win);
    } else {
        MPI_Info info;
        MPI_Info_create(&info);
        /* each end's part starts on a page of its own (the guard protects whole pages) */
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
        rc = MPI_Win_allocate_shared((MPI_Aint)(ctl + arena + page), 1, info, comm, &base, &nc->win);
        MPI_Info_free(&info);
    }
    if (rc != MPI_SUCCESS) {
        free(nc);
        return mps_error(MPS_ERR_NOMEM, "MPS_Channel_create: link '%s': %s of %zu bytes per end failed "
                         "(MPS_ARENA_BYTES sets the arena)", l->name,
                         remote ? "MPI_Win_allocate" : "MPI_Win_allocate_shared", ctl + arena);
    }
    int *model, flag = 0;
    MPI_Win_get_attr(nc->win, MPI_WIN_MODEL, &model, &flag);
    /* loads and stores of the other end's accesses: the unified model */
    ok = flag && *model == MPI_WIN_UNIFIED;
    if (!ok)
        snprintf(refusal, sizeof(refusal), "the window is not in the unified memory model");
    /* the control block and arena start at the first page boundary of each part */
    nc->moff = (page - (uintptr_t)base % page) % page;
    if (!remote && ok) {
        MPI_Aint psize;
        int pdisp;
        MPI_Win_shared_query(nc->win, ch->rrank, &psize, &pdisp, &pbase);
        nc->poff = (page - (uintptr_t)pbase % page) % page;
        ok = (size_t)psize >= ctl + arena + page;
        if (!ok)
            snprintf(refusal, sizeof(refusal), "the other end's part of the shared window is smaller than asked");
    } else if (remote) {
        uint64_t m = nc->moff, o = 0;
        MPI_Sendrecv(&m, 1, MPI_UINT64_T, ch->rrank, 0, &o, 1, MPI_UINT64_T, ch->rrank, 0, comm, MPI_STATUS_IGNORE);
        nc->poff = (size_t)o;
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (remote)
            MPI_Win_unlock_all(nc->win);
        MPI_Win_free(&nc->win);
        free(nc);
        return MPS_SUCCESS;
    }
    nc->remote = remote;
    nc->mine = (struct nat_ctl *)((char *)base + nc->moff);
    nc->data = (char *)nc->mine + ctl;
    if (!remote) {
        nc->peer = (struct nat_ctl *)((char *)pbase + nc->poff);
        nc->pdata = (char *)nc->peer + ctl;
    }
    nc->arena = arena;
    nc->ctl = ctl;
    nc->link = ch->link;
    snprintf(nc->name, sizeof(nc->name), "%s", l->name);
    memset(nc->mine, 0, sizeof(struct nat_ctl));
    if (remote)
        MPI_Win_sync(nc->win);
    nc->guard = guard_on();
    for (struct mps_nat_chan *o = chans; o; o = o->next)
        nc->nth += o->link == nc->link;
    MPI_Barrier(comm);      /* both control blocks are zeroed before either end uses them */
    if (nc->guard) {
        install_segv();
        /* nothing of the other end's arena is ours until it lends it */
        if (!remote)
            mprotect(nc->pdata, arena, PROT_NONE);
    }
    nc->next = chans;
    chans = nc;
    ch->nat = nc;
    return MPS_SUCCESS;
}

static int by_order(const void *a, const void *b)
{
    const struct mps_nat_chan *x = *(struct mps_nat_chan *const *)a, *y = *(struct mps_nat_chan *const *)b;
    return x->link != y->link ? x->link - y->link : x->nth - y->nth;
}

void mps_nat_free_all(void)
{
    int n = 0;
    for (struct mps_nat_chan *nc = chans; nc; nc = nc->next)
        n++;
    struct mps_nat_chan **v = malloc(sizeof(*v) * (n ? n : 1));
    n = 0;
    for (struct mps_nat_chan *nc = chans; nc; nc = nc->next)
        v[n++] = nc;
    /* MPI_Win_free is collective: both ends made the same arenas, and free them in one order */
    qsort(v, n, sizeof(*v), by_order);
    for (int i = 0; v && i < n; i++) {
        if (v[i]->guard) {
            mprotect(v[i]->data, v[i]->arena, PROT_READ | PROT_WRITE);
            if (v[i]->pdata)
                mprotect(v[i]->pdata, v[i]->arena, PROT_READ | PROT_WRITE);
        }
        if (v[i]->remote)
            MPI_Win_unlock_all(v[i]->win);
        MPI_Win_free(&v[i]->win);
        free(v[i]);
    }
    free(v);
    chans = NULL;
}

/* ---- the arena: first fit, page-aligned ---- */

int mps_nat_arena_alloc(struct mps_nat_chan *nc, size_t bytes, int nbufs, void **mem)
{
    /* the rings hold one entry per arena buffer: they can never fill */
    if (nc->nalloc == NAT_MAX_ALLOCS || nc->nbufs + nbufs > NAT_RING)
        return MPS_ERR_NOMEM;
    bytes = round_page(bytes);
    size_t at = 0;
    int k = 0;
    /* allocations are kept sorted by offset */
    for (; k < nc->nalloc; k++) {
        if (nc->alloc[k].off - at >= bytes)
            break;
        at = nc->alloc[k].off + nc->alloc[k].len;
    }
    if (at + bytes > nc->arena)
        return MPS_ERR_NOMEM;
    memmove(&nc->alloc[k + 1], &nc->alloc[k], sizeof(nc->alloc[0]) * (nc->nalloc - k));
    nc->alloc[k].off = at;
    nc->alloc[k].len = bytes;
    nc->alloc[k].nbufs = nbufs;
    nc->nbufs += nbufs;
    nc->nalloc++;
    *mem = nc->data + at;
    return MPS_SUCCESS;
}

void mps_nat_arena_free(struct mps_nat_chan *nc, void *mem)
{
    size_t off = (size_t)((char *)mem - nc->data);
    for (int k = 0; k < nc->nalloc; k++)
        if (nc->alloc[k].off == off) {
            guard(mem, nc->alloc[k].len, PROT_READ | PROT_WRITE, nc);
            nc->nbufs -= nc->alloc[k].nbufs;
            memmove(&nc->alloc[k], &nc->alloc[k + 1], sizeof(nc->alloc[0]) * (nc->nalloc - k - 1));
            nc->nalloc--;
            return;
        }
}

/* ---- the RMA path: the same rings, written with MPI RMA ----
 * For ends on different nodes (or MPS_RMA=1 on one node): no shared mapping. The window
 * registered both ends' arenas once with the transports. A send publishes the descriptor of
 * the sender's buffer into the receiver's inbox (MPI_Put, then MPI_Compare_and_swap of the
 * inbox word); the receiver's MPS_Buf_get reads the bytes straight from the sender's buffer
 * into one of its own pool buffers (one MPI_Get: UCX RMA between hosts, no copy at either
 * end, no registration per send) and gives the sender's buffer back at once through its
 * return ring. Receiver-driven, so a send needs no later progress by the sender (it may be
 * blocked in MPI) and the receiver takes messages only into buffers it has free. Words both
 * ends change are MPI atomics on both sides (the owner on its own part of the window). */

#define CTL(field) ((MPI_Aint)offsetof(struct nat_ctl, field))

/* displacement of `disp` (from the control block) in target's part of the window */
static MPI_Aint at(struct mps_nat_chan *nc, int target, MPI_Aint disp)
{
    return disp + (MPI_Aint)(target == nc->rank ? nc->moff : nc->poff);
}

static uint64_t r_fetch(struct mps_nat_chan *nc, int target, MPI_Aint disp)
{
    uint64_t v = 0, none = 0;
    disp = at(nc, target, disp);
    MPI_Fetch_and_op(&none, &v, MPI_UINT64_T, target, disp, MPI_NO_OP, nc->win);
    MPI_Win_flush(target, nc->win);
    return v;
}

static uint64_t r_cas(struct mps_nat_chan *nc, int target, MPI_Aint disp, uint64_t expect, uint64_t desired)
{
    uint64_t old = 0;
    disp = at(nc, target, disp);
    MPI_Compare_and_swap(&desired, &expect, &old, MPI_UINT64_T, target, disp, nc->win);
    MPI_Win_flush(target, nc->win);
    return old;
}

static void r_put(struct mps_nat_chan *nc, int target, MPI_Aint disp, const void *src, size_t len)
{
    disp = at(nc, target, disp);
    MPI_Put(src, (int)len, MPI_BYTE, target, disp, (int)len, MPI_BYTE, nc->win);
    MPI_Win_flush(target, nc->win);     /* complete at the target before what follows */
}

int mps_nat_remote(const struct mps_nat_chan *nc)
{
    return nc->remote;
}

static int r_handoff(MPS_pool_t p, struct nat_desc *d, int *done)
{
    struct mps_nat_chan *nc = p->nat;
    for (;;) {
        uint64_t w = r_fetch(nc, nc->prank, CTL(in_word));
        if (!(w & NAT_ATTACHED)) {
            *done = 0;
            return MPS_SUCCESS;
        }
        /* no room check: the inbox holds at most this end's arena buffers (<= NAT_RING) */
        uint64_t tail = w & NAT_TAIL_MASK;
        r_put(nc, nc->prank, CTL(in) + (MPI_Aint)((tail % NAT_RING) * sizeof(*d)), d, sizeof(*d));
        if (r_cas(nc, nc->prank, CTL(in_word), w, w + 1) == w) {
            *done = 1;
            return MPS_SUCCESS;
        }
    }
}

/* ---- sending: lend a buffer ---- */

/* may this channel hand off now (else the caller sends by message, and counts it) */
static int handoff_ok(struct mps_nat_chan *nc)
{
    if (!nc->msg_mode)
        return 1;
    uint64_t taken = nc->remote ? r_fetch(nc, nc->prank, (MPI_Aint)offsetof(struct nat_ctl, msgs_taken))
                                : atomic_load_explicit(&nc->peer->msgs_taken, memory_order_acquire);
    if (taken < nc->msgs_sent)
        return 0;
    nc->msg_mode = 0;
    return 1;
}

void mps_nat_msg_sent(struct mps_nat_chan *nc)
{
    nc->msg_mode = 1;
    nc->msgs_sent++;
}

void mps_nat_msg_taken(struct mps_nat_chan *nc)
{
    if (nc->remote) {
        uint64_t one = 1, old;
        MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, nc->rank,
                         (MPI_Aint)(offsetof(struct nat_ctl, msgs_taken) + nc->moff), MPI_SUM, nc->win);
        MPI_Win_flush(nc->rank, nc->win);
    } else {
        atomic_fetch_add_explicit(&nc->mine->msgs_taken, 1, memory_order_release);
    }
}

int mps_nat_handoff(MPS_pool_t p, int i, int bytes, int tag, int *done)
{
    struct mps_nat_chan *nc = p->nat;
    if (!handoff_ok(nc)) {
        *done = 0;
        return MPS_SUCCESS;
    }
    struct nat_ctl *c = nc->peer;
    char *buf = p->mem + p->stride * i;
    struct nat_desc d = {.off = (uint64_t)(buf - nc->data), .len = (uint32_t)p->stride, .bytes = bytes, .tag = tag};
    int guarded = 0;
    if (nc->remote) {
        guard(buf, p->stride, PROT_READ, nc);   /* until the receiver has read it */
        int rc = r_handoff(p, &d, done);
        if (!*done)
            guard(buf, p->stride, PROT_READ | PROT_WRITE, nc);
        p->handoffs += *done;
        return rc;
    }
    for (;;) {
        uint64_t w = atomic_load_explicit(&c->in_word, memory_order_acquire);
        if (!(w & NAT_ATTACHED)) {
            if (guarded)
                guard(buf, p->stride, PROT_READ | PROT_WRITE, nc);
            *done = 0;
            return MPS_SUCCESS;
        }
        uint64_t tail = w & NAT_TAIL_MASK;
        if (tail - atomic_load_explicit(&c->in_head, memory_order_acquire) >= NAT_RING) {
            mps_relax();    /* cannot happen while an end has <= NAT_RING arena buffers */
            continue;
        }
        if (!guarded) {
            /* read-only for the sender before the receiver can see it */
            guard(buf, p->stride, PROT_READ, nc);
            guarded = 1;
        }
        c->in[tail % NAT_RING] = d;
        /* publishes the descriptor; fails only if the receiver detached meanwhile */
        if (atomic_compare_exchange_strong_explicit(&c->in_word, &w, w + 1, memory_order_release,
                                                    memory_order_relaxed)) {
            *done = 1;
            p->handoffs++;
            return MPS_SUCCESS;
        }
    }
}

void mps_nat_progress_returns(mps_state *s, struct mps_nat_chan *nc)
{
    struct nat_ctl *c = nc->mine;
    if (nc->remote)
        MPI_Win_sync(nc->win);      /* returns the other end put into this window */
    uint64_t t = atomic_load_explicit(&c->ret_tail, memory_order_acquire);
    uint64_t h = atomic_load_explicit(&c->ret_head, memory_order_relaxed);
    if (h == t)
        return;
    for (; h != t; h++) {
        char *buf = nc->data + c->ret[h % NAT_RING];
        for (MPS_pool_t p = s->pools; p; p = p->next) {
            if (p->nat != nc || !p->in_arena || buf < p->mem || buf >= p->mem + p->stride * p->bufcount)
                continue;
            int i = (int)((size_t)(buf - p->mem) / p->stride);
            guard(buf, p->stride, PROT_READ | PROT_WRITE, nc);
            if (p->bufs[i].state == MPS_BUF_INFLIGHT)
                p->bufs[i].state = MPS_BUF_FREE;
            break;
        }
    }
    atomic_store_explicit(&c->ret_head, h, memory_order_release);
}

/* ---- receiving: borrow buffers ---- *//* ---- receiving: borrow buffers ---- */

int mps_nat_attach(MPS_pool_t p)
{
    struct mps_nat_chan *nc = p->nat;
    if (nc->remote) {
        uint64_t w = r_fetch(nc, nc->rank, CTL(in_word)), o;
        while ((o = r_cas(nc, nc->rank, CTL(in_word), w, w | NAT_ATTACHED)) != w)
            w = o;
        return MPS_SUCCESS;
    }
    atomic_fetch_or_explicit(&p->nat->mine->in_word, NAT_ATTACHED, memory_order_acq_rel);
    return MPS_SUCCESS;
}

int mps_nat_detach(MPS_pool_t p)
{
    struct mps_nat_chan *nc = p->nat;
    if (nc->remote) {
        for (;;) {
            uint64_t w = r_fetch(nc, nc->rank, CTL(in_word));
            if ((w & NAT_TAIL_MASK) != nc->mine->in_head_local)
                return MPS_ERR_BUSY;
            if (r_cas(nc, nc->rank, CTL(in_word), w, w & NAT_TAIL_MASK) == w)
                return MPS_SUCCESS;
        }
    }
    struct nat_ctl *c = p->nat->mine;
    uint64_t w = atomic_load_explicit(&c->in_word, memory_order_acquire);
    for (;;) {
        if ((w & NAT_TAIL_MASK) != atomic_load_explicit(&c->in_head, memory_order_relaxed))
            return MPS_ERR_BUSY;
        if (atomic_compare_exchange_strong_explicit(&c->in_word, &w, w & NAT_TAIL_MASK, memory_order_acq_rel,
                                                    memory_order_acquire))
            return MPS_SUCCESS;
    }
}

int mps_nat_pending(MPS_pool_t p)
{
    struct nat_ctl *c = p->nat->mine;
    if (p->nat->remote)
        return (int)((r_fetch(p->nat, p->nat->rank, CTL(in_word)) & NAT_TAIL_MASK) - c->in_head_local);
    uint64_t w = atomic_load_explicit(&c->in_word, memory_order_acquire);
    return (int)((w & NAT_TAIL_MASK) - atomic_load_explicit(&c->in_head, memory_order_relaxed));
}

/* A descriptor the other end wrote (read once into d): a buffer inside its arena, or the job
 * ends. */
static void desc_check(const struct mps_nat_chan *nc, const struct nat_desc *d)
{
    if (mps_nat_desc_ok(nc->arena, page, d->off, d->len, d->bytes))
        return;
    fprintf(stderr, "MPS: link '%s': corrupt hand-off (offset %llu, %u bytes of %d), aborting\n", nc->name,
            (unsigned long long)d->off, d->len, d->bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int mps_nat_take(MPS_pool_t p)
{
    struct mps_nat_chan *nc = p->nat;
    struct nat_ctl *c = nc->mine;
    int k = 0;
    while (p->loans[k].held)
        k++;
    if (nc->remote) {
        MPI_Win_sync(nc->win);      /* the descriptor the sender put */
        struct nat_desc d = c->in[c->in_head_local++ % NAT_RING];
        desc_check(nc, &d);
        /* a message larger than this pool's buffers: its first bufsize bytes, and MPS_Buf_get
         * says MPS_ERR_TRUNCATE (the application holds the buffer and releases it) */
        int n = d.bytes < p->bufsize ? d.bytes : p->bufsize;
        MPI_Get(p->dep + p->stride * k, n, MPI_BYTE, nc->prank, at(nc, nc->prank, (MPI_Aint)(nc->ctl + d.off)), n,
                MPI_BYTE, nc->win);
        MPI_Win_flush(nc->prank, nc->win);
        /* the sender's buffer is back in its pool: ret slot first, then the tail */
        uint64_t t = c->ret_out++;
        r_put(nc, nc->prank, CTL(ret) + (MPI_Aint)((t % NAT_RING) * sizeof(uint64_t)), &d.off, sizeof(d.off));
        t++;
        r_put(nc, nc->prank, CTL(ret_tail), &t, sizeof(t));
        p->loans[k] = (struct mps_loan){.held = 1, .off = (unsigned long long)(p->stride * k),
                                        .len = (unsigned)p->stride, .bytes = n, .tag = d.tag,
                                        .lost = d.bytes - n};
        p->handoffs++;
        return k;
    }
    uint64_t h = atomic_load_explicit(&c->in_head, memory_order_relaxed);
    struct nat_desc d = c->in[h % NAT_RING];
    atomic_store_explicit(&c->in_head, h + 1, memory_order_release);
    desc_check(nc, &d);     /* never hand out a buffer outside the other end's arena */
    guard(nc->pdata + d.off, d.len, PROT_READ | PROT_WRITE, nc);
    p->loans[k] = (struct mps_loan){.held = 1, .off = d.off, .len = d.len, .bytes = d.bytes, .tag = d.tag};
    p->handoffs++;
    return k;
}

void mps_nat_giveback(MPS_pool_t p, int k)
{
    struct mps_nat_chan *nc = p->nat;
    struct nat_ctl *c = nc->peer;
    struct mps_loan *l = &p->loans[k];
    if (nc->remote) {
        l->held = 0;        /* its own buffer: free for the next message */
        return;
    }
    guard(nc->pdata + l->off, l->len, PROT_NONE, nc);
    uint64_t t = atomic_load_explicit(&c->ret_tail, memory_order_relaxed);
    while (t - atomic_load_explicit(&c->ret_head, memory_order_acquire) >= NAT_RING)
        mps_relax();        /* the sender has at most NAT_RING buffers: it has room */
    c->ret[t % NAT_RING] = l->off;
    atomic_store_explicit(&c->ret_tail, t + 1, memory_order_release);
    l->held = 0;
}

void *mps_nat_loan_ptr(MPS_pool_t p, int k)
{
    return p->nat->remote ? p->dep + p->stride * k : p->nat->pdata + p->loans[k].off;
}

int mps_nat_in_peer(MPS_pool_t p, const void *a)
{
    if (!p->nat || !p->loans)
        return 0;
    const char *lo = p->nat->remote ? p->dep : p->nat->pdata;
    const char *hi = p->nat->remote ? p->dep + p->stride * p->bufcount : lo + p->nat->arena;
    return (const char *)a >= lo && (const char *)a < hi;
}

/* The native back end's medium checks and message path are EMPS's (emps.c): a channel the
 * arena cannot serve carries messages the standard way. */
static int native_medium_check(const mps_topo *t, const mps_topo_link *l)
{
    if (!strcmp(l->medium, "mpi") || !strcmp(l->medium, "shm"))
        return mps_emps_backend.medium_check(t, l);
    return mps_error(MPS_ERR_MEDIUM, "link '%s' (%s:%d): medium '%s' is not supported yet by the native back end "
                     "(it provides shm, zero-copy on one node, and mpi; choosing aml's UCX transport per link "
                     "is not reachable through the MPI library)", l->name, t->file, l->line, l->medium);
}

static int native_channel_check(const mps_topo *t, const mps_topo_link *l, MPI_Comm comm)
{
    return mps_emps_backend.channel_check(t, l, comm);
}
static int native_mem_alloc(MPS_pool_t p, size_t bytes, void **mem)
{
    return mps_emps_backend.mem_alloc(p, bytes, mem);
}
static void native_mem_free(MPS_pool_t p, void *mem)
{
    mps_emps_backend.mem_free(p, mem);
}
static int native_post_recv(MPS_pool_t p, int i)
{
    return mps_emps_backend.post_recv(p, i);
}
static int native_start_send(MPS_pool_t p, int i, int bytes, int tag)
{
    return mps_emps_backend.start_send(p, i, bytes, tag);
}
static int native_test(MPS_pool_t p, int i, int *done)
{
    return mps_emps_backend.test(p, i, done);
}
static int native_cancel_recv(MPS_pool_t p, int i, int *cancelled)
{
    return mps_emps_backend.cancel_recv(p, i, cancelled);
}

/* the table's operations are the message path (pool.c calls the arena's functions above
 * directly where a channel has one) */
const mps_backend mps_native_backend = {
    .name = "native",
    .medium_check = native_medium_check,
    .channel_check = native_channel_check,
    .mem_alloc = native_mem_alloc,
    .mem_free = native_mem_free,
    .post_recv = native_post_recv,
    .start_send = native_start_send,
    .test = native_test,
    .cancel_recv = native_cancel_recv,
};
