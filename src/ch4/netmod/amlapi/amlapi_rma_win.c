/*
 * amlapi netmod: windows and direct RMA (Baptista et al. 2003, §3.2). A window made by
 * MPI_Win_create, MPI_Win_allocate or MPI_Win_allocate_shared exposes each rank's memory through
 * aml (aml_xmem_expose) and every rank opens every other rank's key: a contiguous put or get to
 * a target it could open is then a direct operation, with no message and no handler at the
 * target -- a single copy for a rank of this node, UCX RMA for one of another host. Other
 * operations (a non-contiguous target, accumulates, dynamic windows, a target whose memory
 * aml cannot reach directly) are native messages (amlapi_rma_am.c) or MPICH's MPIDIG, which
 * calls the completion hooks (amlapi_rma.h) before it ends an epoch, a flush or an unlock;
 * every operation first takes its target's lock when a lock epoch has not yet
 * (amlapi_rma_lock.c).
 *
 * Every RMA operation starts here (MPIDI_AMLAPI_rma_put & co.): one descriptor
 * (MPIDI_AMLAPI_rma_desc_t, amlapi_win.h) and one table, rma_paths, that lists for each kind
 * of operation its paths in the order they are tried -- shared-memory window
 * (amlapi_rma_shm.c), direct operation (below), native message (amlapi_rma_am.c), MPIDIG --
 * each of which takes the operation or says MPIDI_AMLAPI_RMA_NOT_MINE. rma_dispatch walks
 * the row and does once what every path shared: the lock request before the paths of a
 * window that is not a shared-memory one, and the request of an operation that finished in
 * the call.
 *
 * Only transfers of at least the target's eager limit go direct (aml_xkey_threshold): below
 * it an active message through the FIFOs or UCX is cheaper; from it, on the node, two cores
 * share the copy (vnode_share.c). Where UCX's RMA is software run by the target's progress
 * (tcp, or no RMA lane: aml_xkey_soft), it needs the target as a message does and moves large
 * data slower than UCX's message rendezvous, so above MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX
 * those go as native messages (docs/benchmarks/2026-11-26-rma.md has the measurements). A put
 * completes when its data is at the target (aml_put_direct), so flush_local waits as long as
 * flush: simpler, and a single copy is complete at return anyway.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"
#include "amlapi_rma_lock.h"

/* what each rank tells the others at window creation */
typedef struct {
    uint64_t base, size;
    int64_t disp_unit, key_len;
} win_info_t;

/* a direct operation that needs more than the window's counter at completion */
typedef struct {
    struct MPIDI_AMLAPI_win *w;
    MPIR_Request *req;          /* rput/rget: completed with the operation */
    void *tmp;                  /* packed origin (put) or staging (get), freed at completion */
    void *origin;               /* get into a non-contiguous origin: unpacked there */
    MPI_Aint count;
    MPI_Datatype dt;
} rma_op_t;

static unsigned long long pv_puts, pv_gets, pv_bytes, pv_soft;

static void op_done_plain(aml_t * aml, void *arg)
{
    ((struct MPIDI_AMLAPI_win *) arg)->done++;
    MPIDI_AMLAPI_progress_made();
}

static void op_done(aml_t * aml, void *arg)
{
    rma_op_t *o = arg;
    if (o->origin) {
        MPI_Aint n;
        MPI_Aint size;
        MPIR_Datatype_get_size_macro(o->dt, size);
        /* a get into a non-contiguous origin: the data came to o->tmp */
        (void) MPIR_Typerep_unpack(o->tmp, size * o->count, o->origin, o->count, o->dt, 0, &n);
        MPIR_Datatype_release_if_not_builtin(o->dt);
    }
    MPL_free(o->tmp);
    o->w->done++;
    MPIDI_AMLAPI_progress_made();
    if (o->req)
        MPID_Request_complete(o->req);
    MPL_free(o);
}

/* ---- windows -------------------------------------------------------------------------- */

/* Exposes this rank's window memory and opens every other rank's. Collective over the
 * window's communicator. A target whose key cannot be opened (a rank of this node where
 * single copy is not allowed) is left to MPIDIG. */
static int win_expose(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS, rc;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    MPIR_Comm *comm = win->comm_ptr;
    int n = comm->local_size, me = comm->rank;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    win_info_t *info = NULL;
    MPI_Aint *counts = NULL, *displs = NULL, total = 0;
    char *keys = NULL;
    const void *key = NULL;
    size_t key_len = 0;

    if (win->size > 0 && win->base) {
        rc = aml_xmem_expose(aml, win->base, (size_t) win->size, &w->xmem);
        MPIDI_AMLAPI_CHK(rc, "aml_xmem_expose");
        rc = aml_xmem_key(aml, w->xmem, &key, &key_len);
        MPIDI_AMLAPI_CHK(rc, "aml_xmem_key");
    }
    info = MPL_malloc(n * sizeof(*info), MPL_MEM_RMA);
    counts = MPL_malloc(n * sizeof(*counts), MPL_MEM_RMA);
    displs = MPL_malloc(n * sizeof(*displs), MPL_MEM_RMA);
    w->targets = MPL_calloc(n, sizeof(*w->targets), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!info || !counts || !displs || !w->targets, mpi_errno, MPI_ERR_NO_MEM,
                        "**nomem");
    info[me].base = (uint64_t) (uintptr_t) win->base;
    info[me].size = (uint64_t) win->size;
    info[me].disp_unit = win->disp_unit;
    info[me].key_len = (int64_t) key_len;
    mpi_errno = MPIR_Allgather(MPI_IN_PLACE, sizeof(*info), MPI_BYTE, info, sizeof(*info),
                               MPI_BYTE, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    for (int i = 0; i < n; i++) {
        counts[i] = (MPI_Aint) info[i].key_len;
        displs[i] = total;
        total += counts[i];
    }
    keys = MPL_malloc(total > 0 ? total : 1, MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!keys, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIR_Allgatherv(key, (MPI_Aint) key_len, MPI_BYTE, keys, counts, displs,
                                MPI_BYTE, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    for (int i = 0; i < n; i++) {
        struct MPIDI_AMLAPI_win_target *t = &w->targets[i];
        t->base = info[i].base;
        t->size = info[i].size;
        t->disp_unit = info[i].disp_unit;
        if (i == me || counts[i] == 0)
            continue;
        rc = aml_xkey_open(aml, MPIDI_AMLAPI_peer(comm, i), keys + displs[i],
                           (size_t) counts[i], &t->key);
        if (rc == AML_ERR_NOT_SUPPORTED)
            t->key = NULL;
        else
            MPIDI_AMLAPI_CHK(rc, "aml_xkey_open");
    }

  fn_exit:
    MPL_free(info);
    MPL_free(counts);
    MPL_free(displs);
    MPL_free(keys);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int win_new(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_AMLAPI_WIN(win) = MPL_calloc(1, sizeof(struct MPIDI_AMLAPI_win), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!MPIDI_AMLAPI_WIN(win), mpi_errno, MPI_ERR_NO_MEM, "**nomem");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* When the window has one node and every rank's memory is reachable by single copy,
 * amlapi_rma_shm.c takes all of it with the keys opened here; else direct operations. */
int MPIDI_AMLAPI_mpi_win_create_hook(MPIR_Win * win)
{
    int mpi_errno = win_new(win);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = win_expose(win);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_shm_win_init(win, 1);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIDIG put the memory of MPI_Win_allocate(_shared) in one shared segment per node: when
 * the window has one node, amlapi_rma_shm.c takes all of it; else direct operations. */
int MPIDI_AMLAPI_mpi_win_allocate_hook(MPIR_Win * win)
{
    int mpi_errno = win_new(win);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_shm_win_init(win, 0);
    MPIR_ERR_CHECK(mpi_errno);
    if (!MPIDI_AMLAPI_WIN(win)->shm)
        mpi_errno = win_expose(win);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_mpi_win_allocate_shared_hook(MPIR_Win * win)
{
    return MPIDI_AMLAPI_mpi_win_allocate_hook(win);
}

/* Dynamic windows: no direct operations (attach would have to expose each region and the
 * origins learn its key on first use); native RMA messages, which the target checks against
 * the regions attached here, and MPIDIG for the rest. */
int MPIDI_AMLAPI_mpi_win_create_dynamic_hook(MPIR_Win * win)
{
    return win_new(win);
}

int MPIDI_AMLAPI_mpi_win_attach_hook(MPIR_Win * win, void *base, MPI_Aint size)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    struct MPIDI_AMLAPI_region *r;
    if (!w || size <= 0)
        goto fn_exit;
    r = MPL_malloc(sizeof(*r), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!r, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    r->base = (uintptr_t) base;
    r->size = (size_t) size;
    r->next = w->regions;
    w->regions = r;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_mpi_win_detach_hook(MPIR_Win * win, const void *base)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    for (struct MPIDI_AMLAPI_region ** p = w ? &w->regions : NULL; p && *p; p = &(*p)->next)
        if ((*p)->base == (uintptr_t) base) {
            struct MPIDI_AMLAPI_region *r = *p;
            *p = r->next;
            MPL_free(r);
            break;
        }
    return MPI_SUCCESS;
}

/* MPIDIG_mpi_win_free has closed every epoch and run a barrier: no rank still accesses this
 * rank's memory, and this rank's own operations completed with its last epoch. */
int MPIDI_AMLAPI_mpi_win_free_hook(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    aml_t *aml = MPIDI_AMLAPI_global.aml;

    if (!w)
        goto fn_exit;
    mpi_errno = MPIDI_AMLAPI_rma_wait(win);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_shm_win_free(win);
    MPIR_ERR_CHECK(mpi_errno);
    if (w->targets) {
        for (int i = 0; i < win->comm_ptr->local_size; i++)
            if (w->targets[i].key)
                aml_xkey_close(aml, w->targets[i].key);
        MPL_free(w->targets);
        w->targets = NULL;
    }
    if (w->xmem) {
        int rc = aml_xmem_withdraw(aml, w->xmem);
        w->xmem = NULL;
        MPIDI_AMLAPI_CHK(rc, "aml_xmem_withdraw");
    }
    MPIDI_AMLAPI_lk_free(w);
    MPIDI_AMLAPI_pscw_free(w);
    while (w->regions) {
        struct MPIDI_AMLAPI_region *r = w->regions;
        w->regions = r->next;
        MPL_free(r);
    }
    MPL_free(w);
    MPIDI_AMLAPI_WIN(win) = NULL;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- operations ----------------------------------------------------------------------- */

int MPIDI_AMLAPI_rma_cmpl(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (likely(!w || w->issued == w->done))
        return MPI_SUCCESS;
    return MPIDI_AMLAPI_rma_wait(win);
}

/* How an operation goes: *generic when MPIDIG does it (no direct access to the target, a
 * non-contiguous target, or few bytes to another rank: an active message costs less there,
 * aml_xkey_threshold); else the bytes and, once the epoch is checked, the target address. */
typedef struct {
    int self, origin_contig;
    size_t bytes;
    MPI_Aint origin_true_lb;
    uint64_t raddr;
    struct MPIDI_AMLAPI_win_target *t;
} plan_t;

static int plan(MPIR_Win * win, int origin_count, MPI_Datatype origin_datatype,
                int target_rank, MPI_Aint target_disp, int target_count,
                MPI_Datatype target_datatype, plan_t * p, int *generic)
{
    int mpi_errno = MPI_SUCCESS, target_contig;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    size_t target_bytes;
    MPI_Aint target_true_lb;

    *generic = 1;
    p->self = target_rank == win->comm_ptr->rank;
    if (!w || !w->targets || (!p->self && !w->targets[target_rank].key))
        goto fn_exit;
    MPIDI_Datatype_check_origin_target_contig_size_lb(origin_datatype, target_datatype,
                                                      origin_count, target_count,
                                                      p->origin_contig, target_contig,
                                                      p->bytes, target_bytes,
                                                      p->origin_true_lb, target_true_lb);
    if (!target_contig || (!p->self && p->bytes <
                           aml_xkey_threshold(MPIDI_AMLAPI_global.aml,
                                              w->targets[target_rank].key)))
        goto fn_exit;
    /* RMA done by the target's software (UCX over TCP) needs its progress like a message
     * and moves large data slower than the message rendezvous: a native message then */
    if (!p->self && MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX >= 0 &&
        p->bytes > (size_t) MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX &&
        aml_xkey_soft(MPIDI_AMLAPI_global.aml, w->targets[target_rank].key)) {
        pv_soft++;
        goto fn_exit;
    }
    *generic = 0;
    MPIDIG_RMA_OP_CHECK_SYNC(target_rank, win);
    p->t = &w->targets[target_rank];
    if (p->bytes > 0)
        mpi_errno = MPIDI_AMLAPI_win_target_addr(p->t, target_disp, target_true_lb, p->bytes,
                                                 &p->raddr);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The record of an operation that needs more than the window's counter at completion (a
 * request, a packed or staged origin), or NULL; and the request, if one was asked for. */
static int new_op(struct MPIDI_AMLAPI_win *w, MPIR_Request ** request, int origin_contig,
                  rma_op_t ** op)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *req;
    *op = NULL;
    mpi_errno = MPIDI_AMLAPI_rma_request(request, &req);
    MPIR_ERR_CHECK(mpi_errno);
    if (origin_contig && !req)
        goto fn_exit;
    *op = MPL_calloc(1, sizeof(**op), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!*op, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    (*op)->w = w;
    (*op)->req = req;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static void op_free(rma_op_t * o)
{
    if (!o)
        return;
    if (o->origin)
        MPIR_Datatype_release_if_not_builtin(o->dt);
    MPL_free(o->tmp);
    MPL_free(o);
}

/* Starts the direct put (write) or get of p->bytes between local and the target. */
static int issue(struct MPIDI_AMLAPI_win *w, const plan_t * p, void *local, int write,
                 rma_op_t * o)
{
    int mpi_errno = MPI_SUCCESS, rc;
    aml_compl_fn_t fn = o ? op_done : op_done_plain;
    void *arg = o ? (void *) o : (void *) w;
    w->issued++;
    if (write)
        pv_puts++;
    else
        pv_gets++;
    pv_bytes += p->bytes;
    rc = write ? aml_put_direct(MPIDI_AMLAPI_global.aml, p->t->key, p->raddr, local, p->bytes,
                                NULL, fn, arg)
        : aml_get_direct(MPIDI_AMLAPI_global.aml, p->t->key, p->raddr, local, p->bytes, NULL,
                         fn, arg);
    if (rc != AML_OK) {
        w->issued--;
        MPIDI_AMLAPI_CHK(rc, write ? "aml_put_direct" : "aml_get_direct");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The direct path of a put (write) or get: p->bytes between the origin and the target's
 * memory with no message, where plan() allows. */
MPL_STATIC_INLINE_PREFIX int direct_xfer(const MPIDI_AMLAPI_rma_desc_t * d, int write)
{
    int mpi_errno, generic;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(d->win);
    void *local, *target;
    rma_op_t *o = NULL;
    plan_t p;

    mpi_errno = plan(d->win, d->origin_count, d->origin_datatype, d->target_rank,
                     d->target_disp, d->target_count, d->target_datatype, &p, &generic);
    MPIR_ERR_CHECK(mpi_errno);
    if (generic)
        return MPIDI_AMLAPI_RMA_NOT_MINE;
    /* a direct operation touches the target's memory with no message: after the grant */
    mpi_errno = MPIDI_AMLAPI_need_grant(d->win, d->target_rank);
    MPIR_ERR_CHECK(mpi_errno);
    if (p.bytes == 0)
        return MPIDI_AMLAPI_RMA_FINISHED;
    if (p.self) {
        target = (void *) (uintptr_t) p.raddr;
        if (write)
            mpi_errno = MPIR_Localcopy(d->origin_addr, d->origin_count, d->origin_datatype,
                                       target, (MPI_Aint) p.bytes, MPI_BYTE);
        else
            mpi_errno = MPIR_Localcopy(target, (MPI_Aint) p.bytes, MPI_BYTE, d->origin_addr,
                                       d->origin_count, d->origin_datatype);
        MPIR_ERR_CHECK(mpi_errno);
        return MPIDI_AMLAPI_RMA_FINISHED;
    }
    mpi_errno = new_op(w, d->request, p.origin_contig, &o);
    MPIR_ERR_CHECK(mpi_errno);
    local = MPIR_get_contig_ptr(d->origin_addr, p.origin_true_lb);
    if (!p.origin_contig && write) {
        mpi_errno = MPIDI_AMLAPI_pack(d->origin_addr, d->origin_count, d->origin_datatype,
                                      (MPI_Aint) p.bytes, &o->tmp);
        MPIR_ERR_CHECK(mpi_errno);
        local = o->tmp;
    } else if (!p.origin_contig) {
        /* the data comes to a staging buffer, unpacked into the origin at completion */
        o->tmp = MPL_malloc(p.bytes, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!o->tmp, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        o->origin = d->origin_addr;
        o->count = d->origin_count;
        o->dt = d->origin_datatype;
        MPIR_Datatype_add_ref_if_not_builtin(d->origin_datatype);
        local = o->tmp;
    }
    mpi_errno = issue(w, &p, local, write, o);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    op_free(o);
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int direct_put(const MPIDI_AMLAPI_rma_desc_t * d)
{
    return direct_xfer(d, 1);
}

MPL_STATIC_INLINE_PREFIX int direct_get(const MPIDI_AMLAPI_rma_desc_t * d)
{
    return direct_xfer(d, 0);
}

/* The last path: MPICH's generic active messages take whatever no other path did. The
 * target cannot hold their messages back until it grants its lock: the grant first. */
static int mpidig(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno = MPIDI_AMLAPI_need_grant(d->win, d->target_rank);
    void *o = d->origin_addr, *r = d->result_addr;
    int oc = d->origin_count, rcount = d->result_count, rank = d->target_rank;
    int tc = d->target_count;
    MPI_Datatype odt = d->origin_datatype, rdt = d->result_datatype, tdt = d->target_datatype;
    MPI_Aint disp = d->target_disp;

    if (mpi_errno)
        return mpi_errno;
    switch (d->kind) {
        case MPIDI_AMLAPI_RMA_PUT:
            return d->request ?
                MPIDIG_mpi_rput(o, oc, odt, rank, disp, tc, tdt, d->win, d->request) :
                MPIDIG_mpi_put(o, oc, odt, rank, disp, tc, tdt, d->win);
        case MPIDI_AMLAPI_RMA_GET:
            return d->request ?
                MPIDIG_mpi_rget(o, oc, odt, rank, disp, tc, tdt, d->win, d->request) :
                MPIDIG_mpi_get(o, oc, odt, rank, disp, tc, tdt, d->win);
        case MPIDI_AMLAPI_RMA_ACC:
            return d->request ?
                MPIDIG_mpi_raccumulate(o, oc, odt, rank, disp, tc, tdt, d->op, d->win,
                                       d->request) :
                MPIDIG_mpi_accumulate(o, oc, odt, rank, disp, tc, tdt, d->op, d->win);
        case MPIDI_AMLAPI_RMA_GACC:
            return d->request ?
                MPIDIG_mpi_rget_accumulate(o, oc, odt, r, rcount, rdt, rank, disp, tc, tdt,
                                           d->op, d->win, d->request) :
                MPIDIG_mpi_get_accumulate(o, oc, odt, r, rcount, rdt, rank, disp, tc, tdt,
                                          d->op, d->win);
        case MPIDI_AMLAPI_RMA_FOP:
            return MPIDIG_mpi_fetch_and_op(o, r, odt, rank, disp, d->op, d->win);
        default:
            return MPIDIG_mpi_compare_and_swap(o, d->compare_addr, r, odt, rank, disp, d->win);
    }
}

/* ---- the one decision: every operation's paths, in the order they are tried ----------- */

typedef int (*rma_path_fn) (const MPIDI_AMLAPI_rma_desc_t * d);

typedef struct {
    rma_path_fn shm;            /* a shared-memory window's (amlapi_rma_shm.c): all of it, and
                                 * no other window's */
    rma_path_fn direct;         /* no message at the target (above); NULL: none of the kind */
    rma_path_fn native;         /* one native amlapi message (amlapi_rma_am.c) */
    rma_path_fn mpidig;         /* MPIDIG's, which never says NOT_MINE */
} rma_paths_t;

static const rma_paths_t rma_paths[MPIDI_AMLAPI_RMA_KINDS] = {
    /* *INDENT-OFF* */
    /*                          shared memory          direct      native message        */
    [MPIDI_AMLAPI_RMA_PUT]  = { MPIDI_AMLAPI_shm_xfer, direct_put, MPIDI_AMLAPI_am_xfer, mpidig },
    [MPIDI_AMLAPI_RMA_GET]  = { MPIDI_AMLAPI_shm_xfer, direct_get, MPIDI_AMLAPI_am_xfer, mpidig },
    [MPIDI_AMLAPI_RMA_ACC]  = { MPIDI_AMLAPI_shm_acc,  NULL,       MPIDI_AMLAPI_am_acc,  mpidig },
    [MPIDI_AMLAPI_RMA_GACC] = { MPIDI_AMLAPI_shm_acc,  NULL,       MPIDI_AMLAPI_am_acc,  mpidig },
    [MPIDI_AMLAPI_RMA_FOP]  = { MPIDI_AMLAPI_shm_acc,  NULL,       MPIDI_AMLAPI_am_acc,  mpidig },
    [MPIDI_AMLAPI_RMA_CAS]  = { MPIDI_AMLAPI_shm_cas,  NULL,       MPIDI_AMLAPI_am_cas,  mpidig },
    /* *INDENT-ON* */
};

/* rput/rget/raccumulate/rget_accumulate that finished in the call: a complete request */
static int done_at_once(MPIR_Request ** request)
{
    int mpi_errno = MPI_SUCCESS;
    if (request) {
        *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__RMA);
        MPIR_ERR_CHKANDSTMT(*request == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail,
                            "**nomemreq");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The dispatcher: d's row of the table, path after path until one takes it. Whether the
 * shared-memory path is the operation's is the window's (w->shm, fixed at its creation), so
 * that is asked here, inline, not of the path. Any other window has amlapi_rma_lock.c's
 * passive-target locks: before its paths the first operation of an epoch to a target asks
 * for the target's lock, without waiting (a native message carries the request, the direct
 * and MPIDIG paths wait for the grant). Inlined into each entry point below with d->kind a
 * constant, so the row's paths are the direct calls of a cascade written out. */
ATTRIBUTE((always_inline)) static inline int rma_dispatch(const MPIDI_AMLAPI_rma_desc_t * d)
{
    const rma_paths_t *row = &rma_paths[d->kind];
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(d->win);
    int mpi_errno;

    if (w && w->shm) {
        mpi_errno = row->shm(d);
    } else {
        mpi_errno = MPIDI_AMLAPI_before_op(d->win, d->target_rank);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = row->direct ? row->direct(d) : MPIDI_AMLAPI_RMA_NOT_MINE;
        if (mpi_errno == MPIDI_AMLAPI_RMA_NOT_MINE)
            mpi_errno = row->native(d);
        if (mpi_errno == MPIDI_AMLAPI_RMA_NOT_MINE)
            mpi_errno = row->mpidig(d);
    }
    if (mpi_errno == MPIDI_AMLAPI_RMA_FINISHED)
        mpi_errno = done_at_once(d->request);
    return mpi_errno;
}

/* ---- the entry points (amlapi_rma.h): one descriptor each ----------------------------- */

int MPIDI_AMLAPI_rma_put(const void *origin_addr, int origin_count,
                         MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
                         int target_count, MPI_Datatype target_datatype, MPIR_Win * win,
                         MPIR_Request ** request)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_PUT, (void *) origin_addr, origin_count, origin_datatype, NULL, 0,
        MPI_DATATYPE_NULL, NULL, target_rank, target_disp, target_count, target_datatype,
        MPI_OP_NULL, win, request
    };
    return rma_dispatch(&d);
}

int MPIDI_AMLAPI_rma_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPIR_Win * win, MPIR_Request ** request)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_GET, origin_addr, origin_count, origin_datatype, NULL, 0,
        MPI_DATATYPE_NULL, NULL, target_rank, target_disp, target_count, target_datatype,
        MPI_OP_NULL, win, request
    };
    return rma_dispatch(&d);
}

int MPIDI_AMLAPI_rma_acc(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPI_Op op, MPIR_Win * win,
                         MPIR_Request ** request)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_ACC, (void *) origin_addr, origin_count, origin_datatype, NULL, 0,
        MPI_DATATYPE_NULL, NULL, target_rank, target_disp, target_count, target_datatype, op,
        win, request
    };
    return rma_dispatch(&d);
}

int MPIDI_AMLAPI_rma_get_acc(const void *origin_addr, int origin_count,
                             MPI_Datatype origin_datatype, void *result_addr, int result_count,
                             MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                             int target_count, MPI_Datatype target_datatype, MPI_Op op,
                             MPIR_Win * win, MPIR_Request ** request)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_GACC, (void *) origin_addr, origin_count, origin_datatype, result_addr,
        result_count, result_datatype, NULL, target_rank, target_disp, target_count,
        target_datatype, op, win, request
    };
    return rma_dispatch(&d);
}

int MPIDI_AMLAPI_rma_fop(const void *origin_addr, void *result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp, MPI_Op op, MPIR_Win * win)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_FOP, (void *) origin_addr, 1, datatype, result_addr, 1, datatype, NULL,
        target_rank, target_disp, 1, datatype, op, win, NULL
    };
    return rma_dispatch(&d);
}

int MPIDI_AMLAPI_rma_cas(const void *origin_addr, const void *compare_addr, void *result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                         MPIR_Win * win)
{
    MPIDI_AMLAPI_rma_desc_t d = {
        MPIDI_AMLAPI_RMA_CAS, (void *) origin_addr, 1, datatype, result_addr, 1, datatype,
        compare_addr, target_rank, target_disp, 1, datatype, MPI_OP_NULL, win, NULL
    };
    return rma_dispatch(&d);
}

void MPIDI_AMLAPI_win_pvars(void)
{
    static int registered;
    if (registered)
        return;
    registered = 1;
    MPIDI_AMLAPI_shm_win_pvars();
    MPIDI_AMLAPI_rma_am_pvars();
    MPIDI_AMLAPI_lk_pvars();
    MPIDI_AMLAPI_pscw_pvars();
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_direct_puts", &pv_puts,
                              "MPI_Put/MPI_Rput done as direct operations (no message at the "
                              "target: single copy on the node, UCX RMA between hosts)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_direct_gets", &pv_gets,
                              "MPI_Get/MPI_Rget done as direct operations");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_direct_bytes", &pv_bytes,
                              "data bytes moved by direct puts and gets");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_soft_messages", &pv_soft,
                              "contiguous puts and gets above MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX "
                              "to ranks whose UCX RMA is done in software (tcp), sent as "
                              "messages instead of direct operations");
}
