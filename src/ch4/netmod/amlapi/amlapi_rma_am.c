/*
 * amlapi netmod: native RMA messages (Baptista et al. 2003, §3.3, "the packed data with its
 * datatype in one message"). In a window that is not a shared-memory one (amlapi_rma_shm.c),
 * an operation on a contiguous target that is not a direct transfer (amlapi_rma_win.c) goes as
 * ONE aml active message to the target's handler (MPIDI_AMLAPI_H_RMA), which applies it to the
 * window memory in the target's progress and answers with one message: ACK for put and
 * accumulate, DATA with the target's bytes for get, get_accumulate, fetch_and_op and
 * compare_and_swap. MPIDIG's path for the same operation costs a larger header, its generic
 * handlers, a request at the target and, for a put, an extra acknowledgement round.
 *
 * Completion: an operation counts in the window's issued/done pair (amlapi_win.h) from its
 * start until its answer arrives, which is after it was applied at the target; the
 * completion hooks MPIDIG calls before it ends an epoch, a flush or an unlock wait for that
 * pair, so MPIDIG's flush, fence, PSCW and unlock see these operations complete (the locks
 * themselves are amlapi_rma_lock.c's).
 *
 * Atomicity and ordering: every accumulate-family operation of such a window, native or
 * MPIDIG's, is applied by the target's progress engine, one message at a time, so each is
 * atomic with respect to the others. Native messages from one origin to one target arrive in
 * the order they were sent (aml keeps per-peer order), which gives MPI's default
 * accumulate_ordering; the two paths are not ordered with each other, so an accumulate that
 * switches path first waits until the other path's accumulates are done at their targets
 * (native_acc_drain, mpidig_acc_drain): a cost only for programs that mix contiguous
 * and non-contiguous targets.
 *
 * A derived target datatype ships as a bounded list of blocks (amlapi_rma_layout.h, which the
 * target checks whole against its window; never a datatype rebuilt from a peer's bytes) in
 * the user header the first time and then as the number of the slot the target keeps it in
 * (TDT_SLOTS below). Dynamic windows are
 * native too: their displacements are addresses, which the target checks against the
 * regions attached to it (amlapi_rma_win.c's attach hook).
 *
 * Not native: struct target datatypes of several basic types, fetching accumulates above the
 * eager limit and accumulates above it on derived targets (a contiguous target's go in
 * pieces, acc_pieces), and windows on one node (amlapi_rma_shm.c's).
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"
#include "amlapi_rma_lock.h"
#include "amlapi_rma_layout.h"

enum {
    RMA_PUT = 1,
    RMA_GET,
    RMA_ACC,
    RMA_GACC,                   /* get_accumulate and fetch_and_op (op may be MPI_NO_OP) */
    RMA_CAS,
    RMA_ACK,                    /* answers */
    RMA_DATA
};

static const char *const kind_name[] = { "?", "PUT", "GET", "ACC", "GACC", "CAS", "ACK", "DATA" };

/* the target's datatype */
enum {
    TDT_NONE = 0,               /* contiguous: count elements of dt */
    TDT_FULL,                   /* derived, its layout after the header: keep it in slot */
    TDT_SLOT                    /* derived, the one kept in slot */
};

/* Datatypes kept per (origin, target) pair. The origin decides what each slot holds (round
 * robin) and the target does what it is told in message order, so the origin's table is
 * always the target's: a repeated datatype ships as its slot number alone, and a datatype
 * the table does not hold (first use, or replaced since) ships whole again. Not a tunable:
 * both ends must agree on it. */
#define TDT_SLOTS 32

/* a request: the data (packed origin; for CAS origin then compare) follows; a TDT_FULL one's
 * layout follows this header in the user header */
typedef struct {
    uint8_t kind;
    uint8_t tdt;                /* TDT_* */
    uint8_t slot;
    uint8_t lock;               /* LOCK_*: the origin's lock request rides along (the first
                                 * operation of its epoch to this target) */
    int32_t dt;                 /* the target's basic elements: a predefined datatype */
    int32_t op;                 /* ACC/GACC: a predefined op */
    uint32_t flat_len;          /* TDT_FULL: bytes of the layout */
    uint64_t win_id;            /* MPIDIG's window id, the same at every rank */
    uint64_t off;               /* byte offset in the target's window */
    uint64_t count;             /* elements of dt (TDT_NONE) or of the derived datatype */
    uint64_t op_id;             /* the origin's record, named in the answer */
    int32_t rank;               /* the origin's rank in the window */
    uint32_t pad;
} rma_hdr_t;

enum { LOCK_NONE = 0, LOCK_SHARED_REQ, LOCK_EXCL_REQ };

/* an answer: DATA carries the target's bytes from before the operation */
typedef struct {
    uint8_t kind;
    uint8_t pad[7];
    uint64_t op_id;
} rma_reply_t;

/* An accumulate above acc_max, sent as several native messages of whole elements (MPI makes
 * an accumulate atomic per basic element, not whole): its request and packed origin data are
 * the group's, released when the last piece is answered. */
typedef struct am_group {
    int left;                   /* pieces unanswered, +1 while they are being sent */
    MPIR_Request *req;
    void *tmp;
} am_group_t;

/* an operation waiting for its answer */
typedef struct am_op {
    uint64_t id;
    struct am_op *next;
    struct MPIDI_AMLAPI_win *w;
    int peer;
    uint8_t want;               /* RMA_ACK or RMA_DATA */
    uint8_t acc;                /* an accumulate-family operation (w->acc_pending) */
    int lock_rank;              /* carried the lock request to this rank: the answer grants */
    MPIR_Request *req;          /* request-based operations: completed with it */
    void *tmp;                  /* packed origin data, freed at completion */
    void *dst;                  /* DATA: contiguous destination, or the staging buffer */
    size_t bytes;               /* DATA: bytes expected */
    void *result;               /* DATA into a non-contiguous result: unpacked from dst */
    MPI_Aint rcount;
    MPI_Datatype rdt;
    am_group_t *grp;            /* a piece of a larger accumulate */
    uint64_t two[4];            /* compare_and_swap: origin then compare value, when they fit */
} am_op_t;

#define OPS_HASH 256
static am_op_t *ops[OPS_HASH];
/* finished records kept for the next operations: an atomic's round trip is a third of a
 * microsecond on a node, where calloc and free cost a noticeable part */
#define OPS_SPARE 64
static am_op_t *spare;
static int nspare;

static am_op_t *op_alloc(void)
{
    am_op_t *o = spare;
    if (!o)
        return MPL_calloc(1, sizeof(*o), MPL_MEM_RMA);
    spare = o->next;
    nspare--;
    memset(o, 0, sizeof(*o));
    return o;
}

static void op_release(am_op_t * o)
{
    if (nspare >= OPS_SPARE) {
        MPL_free(o);
        return;
    }
    o->next = spare;
    spare = o;
    nspare++;
}
static uint64_t next_id = 1;
static MPI_Aint inline_max;     /* largest header + data of aml_amsend_small, -1: none */
/* Largest accumulate data in one native message: what goes eager. A larger message may go by
 * rendezvous, whose data lands (and would be applied) after later messages' from the same
 * origin, breaking accumulate ordering. A larger accumulate on a contiguous target goes as
 * pieces of this size (acc_pieces); MPIDIG takes the rest, after the native ones. */
static MPI_Aint acc_max;
static size_t max_uhdr;        /* aml's largest user header */
static unsigned long long pv_msgs, pv_bytes, pv_types_shipped, pv_types_cached;

/* what both per-peer tables' entries start with */
typedef struct peer_ent {
    struct peer_ent *next;
    int peer;
} peer_ent_t;

/* the origin's view of one target's slots */
typedef struct tdt_sent {
    peer_ent_t e;
    int victim;
    struct {
        uint64_t hash;
        int len;                /* 0: empty */
        void *flat;
    } s[TDT_SLOTS];
} tdt_sent_t;

/* the target's slots for one origin */
typedef struct tdt_have {
    peer_ent_t e;
    MPIDI_AMLAPI_layout_t *s[TDT_SLOTS];
} tdt_have_t;

#define TDT_HASH 64
static peer_ent_t *sent_tab[TDT_HASH], *have_tab[TDT_HASH];

/* peer's entry in tab, made (zeroed, size bytes) on first use; NULL when out of memory */
static void *peer_entry(peer_ent_t ** tab, int peer, size_t size)
{
    peer_ent_t *t;
    for (t = tab[peer % TDT_HASH]; t; t = t->next)
        if (t->peer == peer)
            return t;
    t = MPL_calloc(1, size, MPL_MEM_RMA);
    if (t) {
        t->peer = peer;
        t->next = tab[peer % TDT_HASH];
        tab[peer % TDT_HASH] = t;
    }
    return t;
}

static void op_insert(am_op_t * o)
{
    o->id = next_id++;
    o->next = ops[o->id % OPS_HASH];
    ops[o->id % OPS_HASH] = o;
}

static am_op_t *op_take(uint64_t id)
{
    for (am_op_t ** p = &ops[id % OPS_HASH]; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            am_op_t *o = *p;
            *p = o->next;
            return o;
        }
    return NULL;
}

static void group_release(am_group_t * g)
{
    if (--g->left > 0)
        return;
    MPL_free(g->tmp);
    if (g->req)
        MPID_Request_complete(g->req);
    MPL_free(g);
}

static void op_finish(am_op_t * o)
{
    if (o->result) {
        MPI_Aint n;
        (void) MPIR_Typerep_unpack(o->dst, (MPI_Aint) o->bytes, o->result, o->rcount, o->rdt, 0,
                                   &n);
        MPIR_Datatype_release_if_not_builtin(o->rdt);
        MPL_free(o->dst);
    }
    MPL_free(o->tmp);
    o->w->done++;
    o->w->acc_pending -= o->acc;
    MPIDI_AMLAPI_progress_made();
    if (o->req)
        MPID_Request_complete(o->req);
    if (o->grp)
        group_release(o->grp);
    op_release(o);
}

/* an operation that failed before it was sent */
static void op_discard(am_op_t * o)
{
    if (!o)
        return;
    if (o->result) {
        MPIR_Datatype_release_if_not_builtin(o->rdt);
        MPL_free(o->dst);
    }
    MPL_free(o->tmp);
    MPL_free(o);
}

static void free_arg(aml_t * aml, void *arg)
{
    MPL_free(arg);
}

/* ---- the target ----------------------------------------------------------------------- */

/* copy: 0 data stays as it is until sent (window memory a get reads), 1 copy it first (it
 * changes, or lives on the caller's stack), 2 data is ours (MPL_malloc'd): freed once sent */
static void answer(int peer, uint8_t kind, uint64_t op_id, const void *data, size_t len,
                   int copy)
{
    rma_reply_t r = { kind, {0}, op_id };
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    int rc;
    if ((MPI_Aint) (sizeof(r) + len) <= inline_max) {
        rc = aml_amsend_small(aml, peer, MPIDI_AMLAPI_H_RMA, &r, sizeof(r), data, len);
        if (copy == 2)
            MPL_free((void *) data);
    } else {
        void *buf = (void *) data;
        if (copy == 1) {
            /* the window's bytes change before the answer has left */
            buf = MPL_malloc(len, MPL_MEM_RMA);
            if (!buf)
                MPIDI_AMLAPI_fatal("out of memory answering an RMA operation of rank %d", peer);
            memcpy(buf, data, len);
        }
        aml_xfer_t x = { peer, MPIDI_AMLAPI_H_RMA, &r, sizeof(r), buf, len, NULL, NULL, NULL,
            copy ? free_arg : NULL, copy ? buf : NULL, AML_PROTO_AUTO
        };
        rc = aml_xfer(aml, &x);
    }
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("cannot answer an RMA operation of rank %d: %s", peer,
                           aml_strerror(rc));
}

/* The target's bytes of h->count elements of layout l at addr, packed into a buffer of ours. */
static void *pack_target(const rma_hdr_t * h, int src, const MPIDI_AMLAPI_layout_t * l,
                         char *addr, size_t bytes)
{
    void *tmp = MPL_malloc(bytes, MPL_MEM_RMA);
    if (!tmp)
        MPIDI_AMLAPI_fatal("out of memory answering an RMA %s of rank %d", kind_name[h->kind],
                           src);
    MPIDI_AMLAPI_layout_gather(l, h->count, addr, tmp);
    return tmp;
}

/* op applied to h->count elements of layout l at addr (bsize: h->dt's size), block by block:
 * each block is a run of h->dt */
static int apply_layout(const rma_hdr_t * h, const MPIDI_AMLAPI_layout_t * l, char *addr,
                        const char *data, MPI_Aint bsize)
{
    int err = MPI_SUCCESS;
    for (uint64_t i = 0; i < h->count && err == MPI_SUCCESS; i++)
        for (uint32_t j = 0; j < l->n && err == MPI_SUCCESS; j++) {
            int n = (int) (l->b[j].len / (uint64_t) bsize);
            err = MPIDI_AMLAPI_rma_apply(data, n, h->dt, MPIDI_AMLAPI_layout_at(l, addr, i, j), n,
                                         h->dt, h->op);
            data += l->b[j].len;
        }
    return err;
}

/* Applies a request whose data is in hand (addr: the window's bytes at the request's offset;
 * l: its derived target layout, or NULL for h->count elements of h->dt) and answers. */
static void apply_req(const rma_hdr_t * h, int src, char *addr, size_t bytes, const char *data,
                      const MPIDI_AMLAPI_layout_t * l)
{
    int err = MPI_SUCCESS;
    MPI_Aint n, bsize;
    char small[64];             /* the old bytes of a small fetching operation */
    void *old;
    MPIR_Datatype_get_size_macro(h->dt, bsize);
    n = (MPI_Aint) bytes / bsize;       /* basic elements in the data */
    switch (h->kind) {
        case RMA_PUT:
            if (l)
                MPIDI_AMLAPI_layout_scatter(l, h->count, addr, data);
            else if (data != addr)
                memcpy(addr, data, bytes);
            answer(src, RMA_ACK, h->op_id, NULL, 0, 0);
            break;
        case RMA_GET:
            if (l)
                answer(src, RMA_DATA, h->op_id, pack_target(h, src, l, addr, bytes), bytes, 2);
            else
                answer(src, RMA_DATA, h->op_id, addr, bytes, 0);
            break;
        case RMA_ACC:
            if (l)
                err = apply_layout(h, l, addr, data, bsize);
            else
                err = MPIDI_AMLAPI_rma_apply(data, (int) n, h->dt, addr, (int) h->count, h->dt,
                                             h->op);
            answer(src, RMA_ACK, h->op_id, NULL, 0, 0);
            break;
        case RMA_GACC:
        case RMA_CAS:
            /* The old bytes are taken before the operation changes them and answered only
             * after it has: the answer completes the origin's flush, after which a third
             * rank may load the target's memory (MPICH's win_shared_gacc_flush_load at
             * times read the old value when the answer left first). */
            if (l) {
                old = pack_target(h, src, l, addr, bytes);
            } else {
                old = bytes <= sizeof(small) ? small : MPL_malloc(bytes, MPL_MEM_RMA);
                if (!old)
                    MPIDI_AMLAPI_fatal("out of memory answering an RMA %s of rank %d",
                                       kind_name[h->kind], src);
                memcpy(old, addr, bytes);
            }
            if (h->kind == RMA_GACC && l)
                err = apply_layout(h, l, addr, data, bsize);
            else if (h->kind == RMA_GACC)
                err = MPIDI_AMLAPI_rma_apply(data, (int) n, h->dt, addr, (int) h->count, h->dt,
                                             h->op);
            else if (!memcmp(addr, data + bytes, bytes))
                memcpy(addr, data, bytes);
            answer(src, RMA_DATA, h->op_id, old, bytes, old == small ? 1 : 2);
            break;
    }
    if (err != MPI_SUCCESS)
        MPIDI_AMLAPI_fatal("RMA %s from rank %d: applying op %#x to datatype %#x failed",
                           kind_name[h->kind], src, (unsigned) h->op, (unsigned) h->dt);
}

typedef struct landing {
    struct landing *next;       /* deferred ones: in arrival order */
    MPIR_Win *win;
    rma_hdr_t h;
    int src;
    char *addr;
    size_t bytes;
    char *buf;                  /* the landed data; == addr for a contiguous put */
    MPIDI_AMLAPI_layout_t *layout;      /* a reference held until applied */
} landing_t;

/* Operations of an origin whose request for this rank's window lock waits (amlapi_rma_lock.c:
 * the origin sends its lock request and its first operations back to back), in arrival
 * order, applied when the lock is granted. */
static landing_t *deferred_head, *deferred_tail;
static unsigned long long pv_deferred;

static void apply_landing(landing_t * l)
{
    apply_req(&l->h, l->src, l->addr, l->bytes, l->buf, l->layout);
    if (l->buf != l->addr)
        MPL_free(l->buf);
    MPIDI_AMLAPI_layout_release(l->layout);
    MPL_free(l);
}

static void defer(landing_t * l)
{
    l->next = NULL;
    if (deferred_tail)
        deferred_tail->next = l;
    else
        deferred_head = l;
    deferred_tail = l;
    pv_deferred++;
}

/* amlapi_rma_lock.c granted peer its lock of win: its deferred operations, in order */
static void run_deferred(MPIR_Win * win, int peer)
{
    landing_t **pp = &deferred_head, *prev = NULL;
    while (*pp) {
        landing_t *l = *pp;
        if (l->win == win && l->src == peer) {
            *pp = l->next;
            if (deferred_tail == l)
                deferred_tail = prev;
            apply_landing(l);
        } else {
            prev = l;
            pp = &l->next;
        }
    }
}

static void landed(aml_t * aml, void *arg)
{
    landing_t *l = arg;
    if (MPIDI_AMLAPI_lk_waiting(l->win, l->src))
        defer(l);
    else
        apply_landing(l);
}

/* The request's derived target layout, with a reference for the caller: checked and kept
 * in its slot (TDT_FULL), or the one kept (TDT_SLOT). bsize: the basic element's size. */
static MPIDI_AMLAPI_layout_t *target_layout(const rma_hdr_t * h, const aml_msg_info_t * info,
                                            MPI_Aint bsize)
{
    tdt_have_t *t = peer_entry(have_tab, info->src, sizeof(tdt_have_t));
    MPIDI_AMLAPI_layout_t *l;
    if (!t)
        MPIDI_AMLAPI_fatal("out of memory keeping RMA datatypes of rank %d", info->src);
    if (h->slot >= TDT_SLOTS)
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: datatype slot %u",
                           kind_name[h->kind], info->src, h->slot);
    if (h->tdt == TDT_FULL) {
        const char *why;
        if (h->flat_len == 0 || h->flat_len > max_uhdr ||
            info->uhdr_len != sizeof(*h) + ((h->flat_len + 7) & ~7u))
            MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: a %u-byte datatype in a "
                               "%zu-byte header", kind_name[h->kind], info->src, h->flat_len,
                               info->uhdr_len);
        why = MPIDI_AMLAPI_layout_parse((const char *) info->uhdr + sizeof(*h), h->flat_len,
                                        (uint64_t) bsize, &l);
        if (why && !strcmp(why, "out of memory"))
            MPIDI_AMLAPI_fatal("out of memory keeping an RMA datatype of rank %d", info->src);
        if (why)
            MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: datatype layout: %s",
                               kind_name[h->kind], info->src, why);
        MPIDI_AMLAPI_layout_release(t->s[h->slot]);
        t->s[h->slot] = l;
    } else {
        l = t->s[h->slot];
        if (!l || info->uhdr_len != sizeof(*h))
            MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: datatype slot %u %s",
                               kind_name[h->kind], info->src, h->slot,
                               l ? "with a longer header" : "holds no datatype");
    }
    l->refs++;
    return l;
}

/* Whether [a, b) (a < b, from MPIDI_AMLAPI_layout_place) is this rank's window memory:
 * within the window, or covered by regions attached to a dynamic window (whose offsets are
 * addresses). Regions may adjoin and an operation may span them (MPICH's
 * win_dynamic_rma_flush_get attaches two halves of one array and accumulates across both). */
static int in_window(MPIR_Win * win, uint64_t a, uint64_t b)
{
    if (win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC) {
        struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
        uint64_t at = a, reach;
        /* from the start, jump to the furthest end of a region holding the current byte */
        while (at < b) {
            reach = at;
            for (struct MPIDI_AMLAPI_region * r = w ? w->regions : NULL; r; r = r->next)
                if (at >= r->base && at < r->base + r->size && r->base + r->size > reach)
                    reach = r->base + r->size;
            if (reach == at)
                return 0;
            at = reach;
        }
        return 1;
    }
    return win->size >= 0 && b <= (uint64_t) win->size;
}

static const char *window_what(MPIR_Win * win)
{
    return win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC ? "regions attached to the dynamic window"
        : "window";
}

static int request_handler(const aml_msg_info_t * info, aml_recv_t * recv)
{
    rma_hdr_t h;
    MPIR_Win *win;
    MPI_Aint size = 0;
    size_t bytes, want;
    char *addr;
    MPIDI_AMLAPI_layout_t *layout = NULL;
    int64_t lo = 0, hi = 0;
    uint64_t a, b, nbytes = 0;
    const char *why;
    int waiting;

    memcpy(&h, info->uhdr, sizeof(h));
    if (h.kind < RMA_PUT || h.kind > RMA_CAS || h.tdt > TDT_SLOT ||
        (h.tdt == TDT_NONE && info->uhdr_len != sizeof(h)))
        MPIDI_AMLAPI_fatal("malformed RMA message from rank %d: kind %u, datatype mode %u, "
                           "%zu-byte header", info->src, h.kind, h.tdt, info->uhdr_len);
    win = MPIDIU_map_lookup(MPIDI_global.win_map, h.win_id);
    if (win == MPIDIU_MAP_NOT_FOUND)
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: no window %#llx here",
                           kind_name[h.kind], info->src, (unsigned long long) h.win_id);
    /* only a member of the window's group touches it: the rank the origin names must be
     * the sender (one lookup, not a search of the group) */
    if (h.lock > LOCK_EXCL_REQ || h.rank < 0 || h.rank >= win->comm_ptr->local_size ||
        MPIDI_AMLAPI_peer(win->comm_ptr, h.rank) != info->src)
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: lock request %u, it says it "
                           "is rank %d of window %#llx, which it is not", kind_name[h.kind],
                           info->src, h.lock, (int) h.rank, (unsigned long long) h.win_id);
    if (HANDLE_IS_BUILTIN(h.dt))
        MPIR_Datatype_get_size_macro(h.dt, size);
    if (size <= 0 || ((h.kind == RMA_ACC || h.kind == RMA_GACC) && !HANDLE_IS_BUILTIN(h.op)))
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: datatype %#x, op %#x",
                           kind_name[h.kind], info->src, (unsigned) h.dt, (unsigned) h.op);
    /* the bytes the operation touches, [off + lo, off + hi), all within the window: every
     * number checked before it is used (amlapi_rma_layout.h) */
    if (h.tdt != TDT_NONE) {
        layout = target_layout(&h, info, size);
        why = h.kind == RMA_CAS ? "compare-and-swap of a derived datatype" :
            MPIDI_AMLAPI_layout_span(layout, h.count, &lo, &hi, &nbytes);
    } else if (h.count > MPIDI_AMLAPI_LAYOUT_MAX_LEN) {
        why = "element count out of range";
    } else {
        why = NULL;
        hi = (int64_t) (h.count * (uint64_t) size);     /* <= 2^40 * 64 */
        nbytes = (uint64_t) hi;
    }
    if (!why && nbytes > 0)
        why = MPIDI_AMLAPI_layout_place(h.off, lo, hi, &a, &b);
    if (!why && nbytes > 0 && !in_window(win, a, b))
        why = "outside the window";
    if (why)
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: %llu elements (basic %#x, "
                           "%s datatype, span %lld..%lld) at offset %#llx of the %s: %s",
                           kind_name[h.kind], info->src, (unsigned long long) h.count,
                           (unsigned) h.dt, layout ? "derived" : "contiguous", (long long) lo,
                           (long long) hi, (unsigned long long) h.off, window_what(win), why);
    bytes = (size_t) nbytes;
    want = h.kind == RMA_GET ? 0 : h.kind == RMA_CAS ? 2 * bytes : bytes;
    if (info->msg_len != want || (h.kind == RMA_CAS && h.count != 1))
        MPIDI_AMLAPI_fatal("malformed RMA %s message from rank %d: %zu data bytes for %zu",
                           kind_name[h.kind], info->src, info->msg_len, want);
    /* element 0's start, which a derived layout may place outside the window (its span is
     * inside): integer arithmetic */
    addr = nbytes == 0 ? (char *) win->base :
        win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC ? (char *) (uintptr_t) h.off
        : (char *) ((uintptr_t) win->base + h.off);
    /* the origin's lock request for this window waits behind another holder: the operation
     * waits too (it cannot start waiting later: a new request of this origin follows the
     * unlock of the epoch this operation belongs to) */
    if (h.lock != LOCK_NONE)
        MPIDI_AMLAPI_lk_request_carried(win, h.rank, h.lock == LOCK_EXCL_REQ ?
                                        MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED);
    waiting = MPIDI_AMLAPI_lk_waiting(win, info->src);
    if ((info->data || want == 0) && !waiting) {
        apply_req(&h, info->src, addr, bytes, info->data, layout);
        MPIDI_AMLAPI_layout_release(layout);
    } else {
        landing_t *l = MPL_malloc(sizeof(*l), MPL_MEM_RMA);
        if (!l)
            MPIDI_AMLAPI_fatal("out of memory receiving an RMA operation of rank %d", info->src);
        l->win = win;
        l->h = h;
        l->src = info->src;
        l->addr = addr;
        l->bytes = bytes;
        l->layout = layout;
        /* a contiguous put lands in the window itself unless it must wait for the lock; the
         * others next to it, applied at completion */
        l->buf = h.kind == RMA_PUT && !layout && !waiting ? addr :
            want ? MPL_malloc(want, MPL_MEM_RMA) : NULL;
        if (want && !l->buf)
            MPIDI_AMLAPI_fatal("out of memory receiving an RMA operation of rank %d", info->src);
        if (info->data || want == 0) {
            if (want)
                memcpy(l->buf, info->data, want);
            defer(l);
        } else {
            recv->buf = l->buf;
            recv->compl_fn = landed;
            recv->compl_arg = l;
        }
    }
    pv_bytes += want;
    return 0;
}

/* ---- the origin: answers -------------------------------------------------------------- */

static void data_landed(aml_t * aml, void *arg)
{
    op_finish(arg);
}

static int answer_handler(const aml_msg_info_t * info, aml_recv_t * recv)
{
    rma_reply_t r;
    am_op_t *o;

    memcpy(&r, info->uhdr, sizeof(r));
    o = op_take(r.op_id);
    if (!o || o->peer != info->src || o->want != r.kind ||
        info->msg_len != (r.kind == RMA_DATA ? o->bytes : 0))
        MPIDI_AMLAPI_fatal("malformed RMA answer from rank %d: %s for operation %llu (%s), %zu "
                           "data bytes", info->src, r.kind <= RMA_DATA ? kind_name[r.kind] : "?",
                           (unsigned long long) r.op_id,
                           o ? "not that kind or peer" : "none awaits it", info->msg_len);
    /* applied under the lock its request asked for: the grant, which was not sent apart */
    if (o->lock_rank >= 0)
        MPIDI_AMLAPI_lk_granted(o->w, o->lock_rank);
    if (info->msg_len == 0) {
        op_finish(o);
    } else if (info->data) {
        memcpy(o->dst, info->data, o->bytes);
        op_finish(o);
    } else {
        recv->buf = o->dst;
        recv->compl_fn = data_landed;
        recv->compl_arg = o;
    }
    return 0;
}

static int rma_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    if (info->uhdr_len >= sizeof(rma_hdr_t))
        return request_handler(info, recv);
    if (info->uhdr_len == sizeof(rma_reply_t))
        return answer_handler(info, recv);
    MPIDI_AMLAPI_fatal("malformed RMA message from rank %d: %zu-byte header", info->src,
                       info->uhdr_len);
}

int MPIDI_AMLAPI_rma_am_init(void)
{
    int mpi_errno = MPI_SUCCESS, rc;
    int64_t inl;
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_INLINE_LIMIT, &inl);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    inline_max = inl > 0 ? (MPI_Aint) inl : -1;
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_EAGER_LIMIT, &inl);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    acc_max = (MPI_Aint) inl;
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_MAX_UHDR, &inl);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    max_uhdr = (size_t) inl;
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_RMA, rma_handler, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");
    MPIDI_AMLAPI_lk_on_grant(run_deferred);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_AMLAPI_rma_am_finalize(void)
{
    while (spare) {
        am_op_t *o = spare;
        spare = o->next;
        MPL_free(o);
    }
    nspare = 0;
    for (int b = 0; b < TDT_HASH; b++) {
        while (have_tab[b]) {
            tdt_have_t *t = (tdt_have_t *) have_tab[b];
            have_tab[b] = t->e.next;
            for (int k = 0; k < TDT_SLOTS; k++)
                MPIDI_AMLAPI_layout_release(t->s[k]);
            MPL_free(t);
        }
        while (sent_tab[b]) {
            tdt_sent_t *t = (tdt_sent_t *) sent_tab[b];
            sent_tab[b] = t->e.next;
            for (int k = 0; k < TDT_SLOTS; k++)
                MPL_free(t->s[k].flat);
            MPL_free(t);
        }
    }
}

/* ---- the origin: operations ----------------------------------------------------------- */

typedef struct {
    int self, peer, rank;       /* rank: the target's in the window */
    uint64_t off;               /* in the target's window */
    char *laddr;                /* self: the bytes here (derived: where the layout starts) */
    size_t bytes;
    MPI_Datatype basic;
    uint64_t count;             /* elements of basic, or of the derived datatype */
    MPI_Datatype tdt;           /* the derived target datatype, or MPI_DATATYPE_NULL */
    /* ... its layout (amlapi_rma_layout.h) */
    uint64_t flat[(sizeof(MPIDI_AMLAPI_layout_wire_t) +
                   MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS * sizeof(MPIDI_AMLAPI_block_t)) / 8];
    int flat_len;
} am_plan_t;

/* The layout of one element of derived datatype dtp (amlapi_rma_layout.h) into p->flat: 0
 * when it does not fit in a message's user header or is not whole runs of basic elements
 * (MPIDIG takes those). */
static int make_layout(MPIR_Datatype * dtp, MPI_Aint bsize, am_plan_t * p)
{
    struct iovec iov[MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS];
    MPIDI_AMLAPI_layout_wire_t w = { dtp->extent, 0, 0 };
    MPI_Aint n, got_n, got_bytes;
    char *at = (char *) p->flat + sizeof(w);

    if (MPIR_Typerep_iov_len(1, dtp->handle, dtp->size, &n) != MPI_SUCCESS || n <= 0 ||
        n > MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS ||
        sizeof(rma_hdr_t) + MPIDI_AMLAPI_layout_wire_len((uint32_t) n) + 8 > max_uhdr)
        return 0;
    /* from address 0: each block's base is its displacement in the element */
    if (MPIR_Typerep_to_iov(NULL, 1, dtp->handle, 0, iov, n, dtp->size, &got_n,
                            &got_bytes) != MPI_SUCCESS || got_n != n || got_bytes != dtp->size)
        return 0;
    for (MPI_Aint i = 0; i < n; i++) {
        MPIDI_AMLAPI_block_t b = { (int64_t) (intptr_t) iov[i].iov_base, iov[i].iov_len };
        if (b.len == 0 || b.len % (uint64_t) bsize)
            return 0;
        memcpy(at, &b, sizeof(b));
        at += sizeof(b);
    }
    w.n = (uint32_t) n;
    memcpy(p->flat, &w, sizeof(w));
    p->flat_len = (int) MPIDI_AMLAPI_layout_wire_len(w.n);
    return 1;
}

/* Whether (target_count, target_datatype) at target_rank goes as a native message (*ok), and
 * where; MPI_ERR_RMA_RANGE or the epoch's error when it would but cannot. */
static int am_plan(MPIR_Win * win, int target_rank, MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, am_plan_t * p, int *ok)
{
    int mpi_errno = MPI_SUCCESS, contig;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    MPI_Aint size, true_lb, bsize;
    uint64_t raddr = 0;

    int dynamic = win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC;

    *ok = 0;
    p->tdt = MPI_DATATYPE_NULL;
    /* other windows need what win_expose learnt of each target (base, size, disp_unit);
     * a dynamic window's displacements are addresses, which only the target can check */
    if (!w || w->shm || (!w->targets && !dynamic))
        goto fn_exit;
    MPIDI_Datatype_check_contig_size_lb(target_datatype, target_count, contig, size, true_lb);
    if (!contig) {
        /* shipped with the data: flattened, then by its slot at the target */
        MPIR_Datatype *dtp;
        MPI_Aint ext, lo, hi;
        const struct MPIDI_AMLAPI_win_target *t = dynamic ? NULL : &w->targets[target_rank];
        if (HANDLE_IS_BUILTIN(target_datatype))
            goto fn_exit;
        MPIR_Datatype_get_ptr(target_datatype, dtp);
        /* a predefined pair type with a gap (MPI_SHORT_INT...) is not a builtin handle and
         * has no flattened form of its own: MPIDIG's */
        if (dtp->basic_type == MPI_DATATYPE_NULL || !HANDLE_IS_BUILTIN(dtp->basic_type) ||
            (!HANDLE_IS_BUILTIN(target_datatype) && MPIR_DATATYPE_IS_PREDEFINED(target_datatype)))
            goto fn_exit;
        MPIR_Datatype_get_size_macro(dtp->basic_type, bsize);
        if (bsize <= 0 || !make_layout(dtp, bsize, p))
            goto fn_exit;
        *ok = 1;
        MPIDIG_RMA_OP_CHECK_SYNC(target_rank, win);
        p->tdt = target_datatype;
        p->basic = dtp->basic_type;
        p->self = target_rank == win->comm_ptr->rank;
        p->peer = MPIDI_AMLAPI_peer(win->comm_ptr, target_rank);
        p->rank = target_rank;
        p->bytes = (size_t) size;
        p->count = (uint64_t) target_count;
        if (dynamic) {
            p->off = (uint64_t) target_disp;
            p->laddr = (char *) (uintptr_t) target_disp;
            goto fn_exit;
        }
        p->off = (uint64_t) target_disp * (uint64_t) t->disp_unit;
        ext = target_count > 0 ? (MPI_Aint) (target_count - 1) * dtp->extent : 0;
        lo = (MPI_Aint) p->off + dtp->true_lb + (ext < 0 ? ext : 0);
        hi = (MPI_Aint) p->off + dtp->true_ub + (ext > 0 ? ext : 0);
        MPIR_ERR_CHKANDJUMP2(size > 0 && (target_disp < 0 || lo < 0 || hi > (MPI_Aint) t->size),
                             mpi_errno, MPI_ERR_RMA_RANGE, "**amlapi_rmarange",
                             "**amlapi_rmarange %d %d", (int) lo, (int) (hi - lo));
        p->laddr = (char *) (uintptr_t) (t->base + p->off);
        goto fn_exit;
    }
    if (HANDLE_IS_BUILTIN(target_datatype)) {
        p->basic = target_datatype;
    } else {
        MPIR_Datatype *dtp;
        MPIR_Datatype_get_ptr(target_datatype, dtp);
        p->basic = dtp->basic_type;
        /* a struct of several basic types, or of a pair type that is not a builtin handle */
        if (p->basic == MPI_DATATYPE_NULL || !HANDLE_IS_BUILTIN(p->basic))
            goto fn_exit;
    }
    MPIR_Datatype_get_size_macro(p->basic, bsize);
    if (bsize <= 0)
        goto fn_exit;
    *ok = 1;
    MPIDIG_RMA_OP_CHECK_SYNC(target_rank, win);
    p->self = target_rank == win->comm_ptr->rank;
    p->peer = MPIDI_AMLAPI_peer(win->comm_ptr, target_rank);
    p->rank = target_rank;
    p->bytes = (size_t) size;
    p->count = (uint64_t) (size / bsize);
    if (dynamic) {
        p->off = (uint64_t) (target_disp + true_lb);
        p->laddr = (char *) (uintptr_t) p->off;
        goto fn_exit;
    }
    if (size > 0) {
        mpi_errno = MPIDI_AMLAPI_win_target_addr(&w->targets[target_rank], target_disp, true_lb,
                                                 (size_t) size, &raddr);
        MPIR_ERR_CHECK(mpi_errno);
    }
    p->off = size > 0 ? raddr - w->targets[target_rank].base : 0;
    p->laddr = (char *) (uintptr_t) raddr;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int new_op(MPIR_Win * win, const am_plan_t * p, uint8_t want, MPIR_Request ** request,
                  am_op_t ** op)
{
    int mpi_errno = MPI_SUCCESS;
    am_op_t *o = op_alloc();
    MPIR_ERR_CHKANDJUMP(!o, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    o->w = MPIDI_AMLAPI_WIN(win);
    o->peer = p->peer;
    o->want = want;
    o->lock_rank = -1;
    mpi_errno = MPIDI_AMLAPI_rma_request(request, &o->req);
    MPIR_ERR_CHECK(mpi_errno);
    *op = o;
  fn_exit:
    return mpi_errno;
  fn_fail:
    MPL_free(o);
    goto fn_exit;
}

/* Where a DATA answer goes: straight into a contiguous result, else staged and unpacked. */
static int set_result(am_op_t * o, void *result, MPI_Aint rcount, MPI_Datatype rdt)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, true_lb;
    MPIDI_Datatype_check_contig_size_lb(rdt, rcount, contig, size, true_lb);
    MPIR_ERR_CHKANDJUMP2((size_t) size != o->bytes, mpi_errno, MPI_ERR_TYPE,
                         "**amlapi_rmasize", "**amlapi_rmasize %d %d", (int) size,
                         (int) o->bytes);
    if (contig) {
        o->dst = MPIR_get_contig_ptr(result, true_lb);
    } else {
        o->dst = MPL_malloc(o->bytes, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!o->dst, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        o->result = result;
        o->rcount = rcount;
        o->rdt = rdt;
        MPIR_Datatype_add_ref_if_not_builtin(rdt);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The origin's data as p->bytes contiguous bytes: in place, or packed into o->tmp. */
static int origin_bytes(am_op_t * o, const void *addr, int count, MPI_Datatype dt,
                        const am_plan_t * p, const void **data)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, true_lb;
    MPIDI_Datatype_check_contig_size_lb(dt, count, contig, size, true_lb);
    MPIR_ERR_CHKANDJUMP2((size_t) size != p->bytes, mpi_errno, MPI_ERR_TYPE,
                         "**amlapi_rmasize", "**amlapi_rmasize %d %d", (int) size,
                         (int) p->bytes);
    if (contig) {
        *data = MPIR_get_contig_ptr(addr, true_lb);
    } else {
        mpi_errno = MPIDI_AMLAPI_pack(addr, count, dt, size, &o->tmp);
        MPIR_ERR_CHECK(mpi_errno);
        *data = o->tmp;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The derived target datatype's place in the message: its slot at the target when the
 * target holds it (h->tdt = TDT_SLOT), else the slot it goes to, its flattened bytes
 * appended to the user header in hbuf (TDT_FULL). *hlen: the user header's length. */
static int ship_type(const am_plan_t * p, rma_hdr_t * h, uint64_t * hbuf, size_t * hlen,
                     int *slot_used)
{
    int mpi_errno = MPI_SUCCESS;
    tdt_sent_t *t = peer_entry(sent_tab, p->peer, sizeof(tdt_sent_t));
    uint64_t hash = vnode_fnv1a(p->flat, (size_t) p->flat_len);
    int k;
    MPIR_ERR_CHKANDJUMP(!t, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    for (k = 0; k < TDT_SLOTS; k++)
        if (t->s[k].len == p->flat_len && t->s[k].hash == hash &&
            !memcmp(t->s[k].flat, p->flat, p->flat_len))
            break;
    h->flat_len = 0;
    *hlen = sizeof(*h);
    if (k < TDT_SLOTS) {
        h->tdt = TDT_SLOT;
        pv_types_cached++;
    } else {
        k = t->victim;
        t->victim = (t->victim + 1) % TDT_SLOTS;
        MPL_free(t->s[k].flat);
        t->s[k].len = 0;
        t->s[k].flat = MPL_malloc(p->flat_len, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!t->s[k].flat, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        memcpy(t->s[k].flat, p->flat, p->flat_len);
        t->s[k].len = p->flat_len;
        t->s[k].hash = hash;
        h->tdt = TDT_FULL;
        pv_types_shipped++;
        h->flat_len = (uint32_t) p->flat_len;
        memset((char *) hbuf + sizeof(*h), 0, ((size_t) p->flat_len + 7) & ~(size_t) 7);
        memcpy((char *) hbuf + sizeof(*h), p->flat, p->flat_len);
        *hlen += ((size_t) p->flat_len + 7) & ~(size_t) 7;
    }
    h->slot = (uint8_t) k;
    *slot_used = k;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int send_op(MPIR_Win * win, am_op_t * o, rma_hdr_t * h, const am_plan_t * p,
                   const void *data, size_t len)
{
    int mpi_errno = MPI_SUCCESS, rc, slot = -1;
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    uint64_t hbuf[AML_UHDR_LIMIT / sizeof(uint64_t)];
    size_t hlen = sizeof(*h);
    h->win_id = MPIDIG_WIN(win, win_id);
    h->dt = p->basic;
    h->off = p->off;
    h->count = p->count;
    op_insert(o);
    h->op_id = o->id;
    if (p->tdt != MPI_DATATYPE_NULL) {
        mpi_errno = ship_type(p, h, hbuf, &hlen, &slot);
        if (mpi_errno) {
            (void) op_take(o->id);
            goto fn_fail;
        }
    }
    h->rank = win->comm_ptr->rank;
    /* last, once nothing can fail before the send: the lock request goes with it */
    switch (MPIDI_AMLAPI_lk_carry(win, p->rank)) {
        case MPI_LOCK_SHARED:
            h->lock = LOCK_SHARED_REQ;
            o->lock_rank = p->rank;
            break;
        case MPI_LOCK_EXCLUSIVE:
            h->lock = LOCK_EXCL_REQ;
            o->lock_rank = p->rank;
            break;
    }
    memcpy(hbuf, h, sizeof(*h));
    o->w->issued++;
    o->w->acc_pending += o->acc;
    pv_msgs++;
    if ((MPI_Aint) (hlen + len) <= inline_max) {
        rc = aml_amsend_small(aml, o->peer, MPIDI_AMLAPI_H_RMA, hbuf, hlen, data, len);
    } else {
        /* data stays untouched until the answer: MPI's rules, or our o->tmp. An accumulate
         * goes in one packet or eager, never adaptive or rendezvous (which aml may pick below
         * the eager limit too, when the peer's credits are out): its data must land, and be
         * applied, before the next message from here is handled (acc_max). */
        aml_xfer_t x = { o->peer, MPIDI_AMLAPI_H_RMA, hbuf, hlen, data, len, NULL, NULL,
            NULL, NULL, NULL, AML_PROTO_AUTO
        };
        if (h->kind == RMA_ACC || h->kind == RMA_GACC || h->kind == RMA_CAS)
            x.protocol = AML_PROTO_ONEPACKET;
        rc = aml_xfer(aml, &x);
        if (rc == AML_ERR_INVAL && x.protocol == AML_PROTO_ONEPACKET) {
            x.protocol = AML_PROTO_EAGER;
            rc = aml_xfer(aml, &x);
        }
    }
    if (rc != AML_OK) {
        /* fatal below: the lock request that rode along is not taken back */
        (void) op_take(o->id);
        o->w->issued--;
        o->w->acc_pending -= o->acc;
        if (slot >= 0 && h->tdt == TDT_FULL)
            ((tdt_sent_t *) peer_entry(sent_tab, o->peer, sizeof(tdt_sent_t)))->s[slot].len = 0;
        MPIDI_AMLAPI_CHK(rc, "aml_amsend (RMA)");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIDIG's accumulates of this window (to target_rank, or under a window-wide epoch) done at
 * their targets: a native accumulate after them must not overtake them. */
static int mpidig_acc_drain(MPIR_Win * win, int target_rank)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDIG_win_target_t *t = MPIDIG_win_target_find(win, target_rank);
    MPIDIU_PROGRESS_WHILE(MPIR_cc_get(MPIDIG_WIN(win, remote_acc_cmpl_cnts)) != 0 ||
                          (t && MPIR_cc_get(t->remote_acc_cmpl_cnts) != 0), 0);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* An accumulate that is not this path's (NOT_MINE), once the window's native accumulates
 * are answered: the one MPIDIG takes next must not overtake them. Direct puts and gets need
 * no waiting for. */
static int native_acc_drain(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (w && w->acc_pending != 0)
        MPIDI_AMLAPI_WAIT_UNTIL(w->acc_pending == 0);
    mpi_errno = MPIDI_AMLAPI_RMA_NOT_MINE;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Put and get (amlapi_rma_win.c's table): one message, answered by an acknowledgement or the
 * target's bytes. */
int MPIDI_AMLAPI_am_xfer(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno, ok, put = d->kind == MPIDI_AMLAPI_RMA_PUT;
    am_plan_t p;
    am_op_t *o = NULL;
    const void *data = NULL;
    rma_hdr_t h = { put ? RMA_PUT : RMA_GET };

    mpi_errno = am_plan(d->win, d->target_rank, d->target_disp, d->target_count,
                        d->target_datatype, &p, &ok);
    if (mpi_errno || !ok)
        return mpi_errno ? mpi_errno : MPIDI_AMLAPI_RMA_NOT_MINE;
    if (p.bytes == 0 || p.self) {
        /* p.laddr: the layout's start for a derived target, the bytes' for a contiguous one */
        int derived = p.tdt != MPI_DATATYPE_NULL;
        MPI_Aint tcount = derived ? d->target_count : (MPI_Aint) p.bytes;
        MPI_Datatype tdt = derived ? d->target_datatype : MPI_BYTE;
        if (p.bytes && put)
            mpi_errno = MPIR_Localcopy(d->origin_addr, d->origin_count, d->origin_datatype,
                                       p.laddr, tcount, tdt);
        else if (p.bytes)
            mpi_errno = MPIR_Localcopy(p.laddr, tcount, tdt, d->origin_addr, d->origin_count,
                                       d->origin_datatype);
        return mpi_errno ? mpi_errno : MPIDI_AMLAPI_RMA_FINISHED;
    }
    mpi_errno = new_op(d->win, &p, put ? RMA_ACK : RMA_DATA, d->request, &o);
    MPIR_ERR_CHECK(mpi_errno);
    if (put) {
        mpi_errno = origin_bytes(o, d->origin_addr, d->origin_count, d->origin_datatype, &p,
                                 &data);
    } else {
        o->bytes = p.bytes;
        mpi_errno = set_result(o, d->origin_addr, d->origin_count, d->origin_datatype);
    }
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = send_op(d->win, o, &h, &p, data, put ? p.bytes : 0);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    op_discard(o);
    goto fn_exit;
}

/* An accumulate on a contiguous target above acc_max (p), as pieces of whole elements of at
 * most acc_max bytes, each one eager native message applied on arrival with the others' order
 * kept. MPIDIG's path, which took them before, applies MPICH's generic op element by element
 * after a rendezvous: docs/benchmarks/2026-11-28-one-sided.md measures both. */
static int acc_pieces(const MPIDI_AMLAPI_rma_desc_t * d, const am_plan_t * p)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint bsize;
    size_t step, at;
    const void *data = NULL;
    am_group_t *g;
    am_op_t *o = NULL;

    MPIR_Datatype_get_size_macro(p->basic, bsize);
    step = (size_t) (acc_max / bsize) * (size_t) bsize;
    if (step == 0)
        return native_acc_drain(d->win);        /* an element above the eager limit */
    g = MPL_calloc(1, sizeof(*g), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!g, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    g->left = 1;
    mpi_errno = MPIDI_AMLAPI_rma_request(d->request, &g->req);
    if (mpi_errno) {
        MPL_free(g);
        goto fn_fail;
    }
    {
        am_op_t packed = { 0 };
        mpi_errno = origin_bytes(&packed, d->origin_addr, d->origin_count, d->origin_datatype,
                                 p, &data);
        g->tmp = packed.tmp;
    }
    for (at = 0; mpi_errno == MPI_SUCCESS && at < p->bytes; at += step) {
        am_plan_t q = *p;
        rma_hdr_t h = { RMA_ACC };
        q.bytes = p->bytes - at < step ? p->bytes - at : step;
        q.count = q.bytes / (size_t) bsize;
        q.off = p->off + at;
        q.laddr = p->laddr + at;
        mpi_errno = new_op(d->win, &q, RMA_ACK, NULL, &o);
        if (mpi_errno)
            break;
        o->acc = 1;
        o->grp = g;
        g->left++;
        h.op = d->op;
        mpi_errno = send_op(d->win, o, &h, &q, (const char *) data + at, q.bytes);
        if (mpi_errno) {
            g->left--;
            op_discard(o);
        }
    }
    /* the pieces sent finish the group; an error leaves the request to them */
    group_release(g);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Accumulate, get_accumulate and fetch_and_op (fetch: the target's old bytes come back) */
int MPIDI_AMLAPI_am_acc(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno, ok, pieces, fetch = d->kind != MPIDI_AMLAPI_RMA_ACC;
    am_plan_t p;
    am_op_t *o = NULL;
    const void *data = NULL;
    MPI_Op op = d->op;
    rma_hdr_t h = { fetch ? RMA_GACC : RMA_ACC };

    mpi_errno = am_plan(d->win, d->target_rank, d->target_disp, d->target_count,
                        d->target_datatype, &p, &ok);
    /* an op the type does not support is MPIDIG's to refuse, as before: MPICH's own table of
     * which types each predefined op takes (not MPIR_Typerep_reduce_is_supported, which says
     * whether yaksa would apply it, and says no to everything when yaksa's reduction is off) */
    if (ok && op != MPI_NO_OP && op != MPI_REPLACE &&
        (!HANDLE_IS_BUILTIN(op) || (*MPIR_OP_HDL_TO_DTYPE_FN(op)) (p.basic) != MPI_SUCCESS))
        ok = 0;
    pieces = ok && !p.self && (MPI_Aint) p.bytes > acc_max;
    if (pieces && (fetch || p.tdt != MPI_DATATYPE_NULL || op == MPI_NO_OP))
        ok = 0;
    if (mpi_errno)
        return mpi_errno;
    if (!ok)
        return native_acc_drain(d->win);        /* MPIDIG's, after the native ones */
    mpi_errno = mpidig_acc_drain(d->win, d->target_rank);
    MPIR_ERR_CHECK(mpi_errno);
    if (p.bytes == 0 || (op == MPI_NO_OP && !fetch))
        return MPIDI_AMLAPI_RMA_FINISHED;
    if (pieces)
        return acc_pieces(d, &p);
    if (p.self) {
        /* applied here, now: the target's handler for others' operations runs in this
         * thread's progress, so this is atomic with respect to them */
        /* p.laddr: the layout's start for a derived target, the bytes' for a contiguous one */
        int derived = p.tdt != MPI_DATATYPE_NULL;
        if (fetch)
            mpi_errno = MPIR_Localcopy(p.laddr, derived ? d->target_count : (MPI_Aint) p.bytes,
                                       derived ? d->target_datatype : MPI_BYTE, d->result_addr,
                                       d->result_count, d->result_datatype);
        if (mpi_errno == MPI_SUCCESS && op != MPI_NO_OP)
            mpi_errno = MPIDI_AMLAPI_rma_apply(d->origin_addr, d->origin_count,
                                               d->origin_datatype, p.laddr,
                                               derived ? d->target_count : (int) p.count,
                                               derived ? d->target_datatype : p.basic, op);
        MPIR_ERR_CHECK(mpi_errno);
        return MPIDI_AMLAPI_RMA_FINISHED;
    }
    mpi_errno = new_op(d->win, &p, fetch ? RMA_DATA : RMA_ACK, d->request, &o);
    MPIR_ERR_CHECK(mpi_errno);
    o->acc = 1;
    if (op != MPI_NO_OP) {
        mpi_errno = origin_bytes(o, d->origin_addr, d->origin_count, d->origin_datatype, &p,
                                 &data);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (fetch) {
        o->bytes = p.bytes;
        mpi_errno = set_result(o, d->result_addr, d->result_count, d->result_datatype);
        MPIR_ERR_CHECK(mpi_errno);
    }
    h.op = op;
    if (op == MPI_NO_OP) {
        /* a fetch only: a get that the target answers the same way */
        h.kind = RMA_GET;
        mpi_errno = send_op(d->win, o, &h, &p, NULL, 0);
    } else {
        mpi_errno = send_op(d->win, o, &h, &p, data, p.bytes);
    }
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    op_discard(o);
    goto fn_exit;
}

int MPIDI_AMLAPI_am_cas(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno, ok;
    am_plan_t p;
    am_op_t *o = NULL;
    rma_hdr_t h = { RMA_CAS };
    char *two = NULL;

    mpi_errno = am_plan(d->win, d->target_rank, d->target_disp, 1, d->origin_datatype, &p, &ok);
    if (mpi_errno)
        return mpi_errno;
    if (!ok)
        return native_acc_drain(d->win);
    mpi_errno = mpidig_acc_drain(d->win, d->target_rank);
    MPIR_ERR_CHECK(mpi_errno);
    if (p.self) {
        memcpy(d->result_addr, p.laddr, p.bytes);
        if (MPIR_Compare_equal(d->compare_addr, p.laddr, d->origin_datatype))
            memcpy(p.laddr, d->origin_addr, p.bytes);
        goto fn_exit;
    }
    mpi_errno = new_op(d->win, &p, RMA_DATA, NULL, &o);
    MPIR_ERR_CHECK(mpi_errno);
    o->acc = 1;
    /* origin then compare value, one buffer the op owns */
    if (2 * p.bytes <= sizeof(o->two)) {
        two = (char *) o->two;
    } else {
        two = MPL_malloc(2 * p.bytes, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!two, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        o->tmp = two;
    }
    memcpy(two, d->origin_addr, p.bytes);
    memcpy(two + p.bytes, d->compare_addr, p.bytes);
    o->bytes = p.bytes;
    o->dst = d->result_addr;
    mpi_errno = send_op(d->win, o, &h, &p, two, 2 * p.bytes);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    op_discard(o);
    goto fn_exit;
}

void MPIDI_AMLAPI_rma_am_pvars(void)
{
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_am_ops", &pv_msgs,
                              "RMA operations this rank sent as native amlapi messages "
                              "instead of MPIDIG's");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_am_target_bytes", &pv_bytes,
                              "data bytes this rank received in native RMA messages as a target");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_am_types_shipped", &pv_types_shipped,
                              "native RMA messages from this rank that carried their derived "
                              "target datatype whole (its target did not hold it)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_am_types_cached", &pv_types_cached,
                              "native RMA messages from this rank that named their derived "
                              "target datatype by the slot its target keeps it in");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_am_deferred", &pv_deferred,
                              "native RMA messages to this rank's windows that arrived while "
                              "their origin's lock request waited, applied at its grant");
}
