/*
 * amlapi netmod: torus collectives (issue 16). MPIDI_NM_mpi_{bcast, allreduce, reduce,
 * allgather, allgatherv, alltoall, barrier} (amlapi_coll.h) come here first; when the
 * communicator sits on a torus whose shape coll_torus knows and one of its schedules applies,
 * this file runs that schedule over MPICH's collective point-to-point (MPIC_Isend/Irecv, the
 * collective context, error bits in the tag), else the caller runs MPICH's own algorithm
 * (MPIR_<Coll>_impl). coll_torus's core (the generators, the walk) includes no MPICH header;
 * this file is its executor.
 *
 * The topology of COMM_WORLD is set up once at init: from MPIR_CVAR_AMLAPI_TORUS_MAP_FILE (a
 * line per rank), else MPIR_CVAR_AMLAPI_TORUS_SHAPE, else the XYZT default over MPICH's node
 * map (one t per rank of a node); a bad file or shape fails MPI_Init naming it. A
 * communicator's own topology is induced from it on its first collective (coll_torus's
 * sub-box rule) and kept until the communicator is freed.
 *
 * Every rank must take the same decision, or the collective deadlocks: it depends only on
 * what MPI requires to be the same at all ranks (the communicator, the root, the number of
 * bytes, for reductions the datatype and op). A non-contiguous buffer is packed into scratch
 * and unpacked after, so the local layout never changes the choice.
 *
 * Nonblocking, neighbourhood and intercommunicator collectives stay MPICH's.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "coll_torus.h"
#include "uthash.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_AMLAPI_COLL_TORUS
      category    : CH4_AMLAPI
      type        : enum
      default     : auto
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : |-
        Torus-aware collectives (coll_torus: bcast over edge-disjoint spanning trees,
        allreduce/reduce dimension by dimension, allgather(v), alltoall, barrier) for
        communicators on a torus.
        auto - only when the job describes its torus (MPIR_CVAR_AMLAPI_TORUS_MAP_FILE or
               MPIR_CVAR_AMLAPI_TORUS_SHAPE): otherwise the network is not known to be a
               torus, and MPICH's algorithms run
        on   - wherever a schedule applies, over the described torus or else the default
               shape (the node count factorised like MPI_Dims_create, the ranks of a node
               along t); for testing
        off  - never

    - name        : MPIR_CVAR_AMLAPI_TORUS_SHAPE
      category    : CH4_AMLAPI
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        The torus the nodes of the job form, as extents joined by 'x', each followed by 'm'
        for a mesh dimension (a torus otherwise), and an optional last "xNt" for N ranks per
        node: "8x8x8", "4mx4x4", "4x4x4x2t". Without MPIR_CVAR_AMLAPI_TORUS_MAP_FILE, ranks
        are placed in XYZT order (x fastest). Its node count must be MPICH's.

    - name        : MPIR_CVAR_AMLAPI_TORUS_MAP_FILE
      category    : CH4_AMLAPI
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        A file giving each rank's torus coordinates, one line per COMM_WORLD rank in rank
        order, "x y z [t]" ('#' starts a comment). With MPIR_CVAR_AMLAPI_TORUS_SHAPE, the
        extents and mesh dimensions are the shape's; without, the largest coordinates + 1,
        torus in every dimension. It must be a bijection onto the shape; errors name the file
        and line.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* Eight tags of hcoll's reserved range, one per coll_torus channel: an amlapi build has no
 * hcoll, and MPICH's blocking algorithms use the tags below it. */
#define CT_TAG(chan) (MPIR_FIRST_HCOLL_TAG + (chan))

static ct_topo world;
static int world_ok;            /* world holds COMM_WORLD's topology */
int MPIDI_AMLAPI_coll_torus_active;

static unsigned long long pv_runs, pv_bytes;

/* A schedule depends only on its arguments, and making one costs up to 160 us (a 1 MiB bcast
 * of 516 steps at 8 ranks) against 0.3-0.9 us for the small ones: the last few made for a
 * communicator are kept for its repeated calls. */
#define SCHED_CACHE 8
typedef struct {
    int coll, root, commutative;
    int64_t count;
    size_t elem_size;
    ct_sched s;                 /* valid when s.steps */
} cached_sched;

/* communicators' induced topologies (state 1) or "does not apply" (state -1) */
typedef struct comm_topo {
    MPIR_Comm *comm;
    int state;
    ct_topo t;
    cached_sched cache[SCHED_CACHE];
    int next;                   /* the slot to reuse next (round robin) */
    UT_hash_handle hh;
} comm_topo;

static void comm_topo_free(comm_topo * c)
{
    if (c->state > 0)
        ct_topo_free(&c->t);
    for (int i = 0; i < SCHED_CACHE; i++)
        if (c->cache[i].s.steps)
            ct_sched_free(&c->cache[i].s);
    MPL_free(c);
}
static comm_topo *comm_topos;

int MPIDI_AMLAPI_coll_init(void)
{
    int mpi_errno = MPI_SUCCESS;
    const char *shape = MPIR_CVAR_AMLAPI_TORUS_SHAPE;
    const char *file = MPIR_CVAR_AMLAPI_TORUS_MAP_FILE;
    int described = (shape && *shape) || (file && *file), rc;

    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG,
                              "amlapi_coll_torus_runs", &pv_runs, 1, MPI_T_ENUM_NULL,
                              MPI_T_VERBOSITY_USER_BASIC, MPI_T_BIND_NO_OBJECT,
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,
                              NULL, NULL, "AMLAPI",
                              "collectives run by coll_torus's torus schedules");
    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG,
                              "amlapi_coll_torus_bytes", &pv_bytes, 1, MPI_T_ENUM_NULL,
                              MPI_T_VERBOSITY_USER_BASIC, MPI_T_BIND_NO_OBJECT,
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,
                              NULL, NULL, "AMLAPI",
                              "bytes this rank sent in coll_torus's schedules");
    if (MPIR_CVAR_AMLAPI_COLL_TORUS == MPIR_CVAR_AMLAPI_COLL_TORUS_off ||
        (MPIR_CVAR_AMLAPI_COLL_TORUS == MPIR_CVAR_AMLAPI_COLL_TORUS_auto && !described))
        return MPI_SUCCESS;

    if (file && *file) {
        rc = ct_topo_from_file(&world, file, MPIR_Process.size, *shape ? shape : NULL);
        if (rc != CT_OK)
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_torus",
                                 "**amlapi_torus %s %s", "MPIR_CVAR_AMLAPI_TORUS_MAP_FILE",
                                 ct_strerror());
    } else {
        rc = ct_topo_default(&world, MPIR_Process.size, MPIR_Process.node_map,
                             *shape ? shape : NULL);
        if (rc != CT_OK && described)
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_torus",
                                 "**amlapi_torus %s %s", "MPIR_CVAR_AMLAPI_TORUS_SHAPE",
                                 ct_strerror());
        if (rc != CT_OK)
            return MPI_SUCCESS;     /* e.g. nodes with different rank counts: no torus */
    }
    if (MPIR_CVAR_AMLAPI_COLL_TORUS == MPIR_CVAR_AMLAPI_COLL_TORUS_auto &&
        ct_topo_nnodes(&world) < 2) {
        /* a torus of one node has no links to spare: its ranks share memory, where MPICH's
         * algorithms are faster (1 MiB bcast at 4 ranks: 1.1-1.3 ms against 2.9-5.7 ms) */
        ct_topo_free(&world);
        return MPI_SUCCESS;
    }
    world_ok = 1;
    MPIDI_AMLAPI_coll_torus_active = 1;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_AMLAPI_coll_finalize(void)
{
    comm_topo *c, *tmp;
    HASH_ITER(hh, comm_topos, c, tmp) {
        HASH_DEL(comm_topos, c);
        comm_topo_free(c);
    }
    if (world_ok)
        ct_topo_free(&world);
    world_ok = 0;
    MPIDI_AMLAPI_coll_torus_active = 0;
}

void MPIDI_AMLAPI_coll_comm_free(MPIR_Comm * comm)
{
    comm_topo *c;
    HASH_FIND_PTR(comm_topos, &comm, c);
    if (c) {
        HASH_DEL(comm_topos, c);
        comm_topo_free(c);
    }
}

/* comm's torus, or NULL when coll_torus does not apply to it */
static comm_topo *topo_of(MPIR_Comm * comm)
{
    comm_topo *c;
    if (!world_ok || comm->comm_kind != MPIR_COMM_KIND__INTRACOMM || comm->local_size < 2)
        return NULL;
    HASH_FIND_PTR(comm_topos, &comm, c);
    if (!c) {
        int n = comm->local_size, ok = 1;
        int *members = MPL_malloc(sizeof(int) * n, MPL_MEM_COLL);
        c = MPL_calloc(1, sizeof(*c), MPL_MEM_COLL);
        if (!members || !c) {
            MPL_free(members);
            MPL_free(c);
            return NULL;
        }
        for (int r = 0; r < n && ok; r++) {
            int lpid = -1, avtid = 0;
            MPIDIU_comm_rank_to_pid(comm, r, &lpid, &avtid);
            ok = avtid == 0;    /* a process of another job (spawn) is not on our torus */
            members[r] = lpid;
        }
        c->comm = comm;
        c->state = ok && ct_topo_sub(&c->t, &world, members, n) == CT_OK ? 1 : -1;
        MPL_free(members);
        HASH_ADD_PTR(comm_topos, comm, c, MPL_MEM_COLL);
    }
    return c->state > 0 ? c : NULL;
}

/* Runs rank s->rank's schedule: sendbuf/recvbuf hold elements of dtype (contiguous, of size
 * s->elem_size); op for reductions. */
static int run(const ct_sched * s, MPIR_Comm * comm, const void *sendbuf, void *recvbuf,
               MPI_Datatype dtype, MPI_Op op, MPIR_Errflag_t * errflag)
{
    int mpi_errno = MPI_SUCCESS, n = s->nsteps, nreq = 0, walking = 0;
    size_t es = s->elem_size;
    ct_walk w;
    char *tmp = NULL;
    MPIR_Request **reqs = NULL;
    int *req_step = NULL;

    if (n == 0)
        return MPI_SUCCESS;
    if (s->tmp_elems)
        tmp = MPL_malloc((size_t) s->tmp_elems * es, MPL_MEM_COLL);
    reqs = MPL_malloc(sizeof(*reqs) * n, MPL_MEM_COLL);
    req_step = MPL_malloc(sizeof(int) * n, MPL_MEM_COLL);
    if ((s->tmp_elems && !tmp) || !reqs || !req_step || ct_walk_init(&w, s) != CT_OK)
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
    walking = 1;
    char *bufs[CT_NBUFS] = { (char *) sendbuf, recvbuf, tmp };
    pv_runs++;
    while (!ct_walk_finished(&w)) {
        int i;
        while ((i = ct_walk_next(&w)) >= 0) {
            const ct_step *st = &s->steps[i];
            char *dst = bufs[st->buf] + (size_t) st->off * es;
            MPI_Aint bytes = (MPI_Aint) ((size_t) st->len * es);
            if (st->op == CT_SEND) {
                mpi_errno = MPIC_Isend(dst, bytes, MPI_BYTE, st->peer, CT_TAG(st->chan), comm,
                                       &reqs[nreq], errflag);
                MPIR_ERR_CHECK(mpi_errno);
                pv_bytes += bytes;
            } else if (st->op == CT_RECV) {
                mpi_errno = MPIC_Irecv(dst, bytes, MPI_BYTE, st->peer, CT_TAG(st->chan), comm,
                                       &reqs[nreq]);
                MPIR_ERR_CHECK(mpi_errno);
            }
            if (st->op == CT_SEND || st->op == CT_RECV) {
                req_step[nreq++] = i;
                ct_walk_posted(&w, i);
                continue;
            }
            char *src = bufs[st->sbuf] + (size_t) st->soff * es;
            if (st->op == CT_COPY) {
                if (src != dst)
                    memmove(dst, src, (size_t) st->len * es);
            } else if (st->op == CT_REDUCE_LEFT) {
                mpi_errno = MPIR_Reduce_local(src, dst, st->len, dtype, op);
            } else {
                /* dst = dst op src, src being scratch: src = dst op src, then copy */
                mpi_errno = MPIR_Reduce_local(dst, src, st->len, dtype, op);
                memcpy(dst, src, (size_t) st->len * es);
            }
            MPIR_ERR_CHECK(mpi_errno);
            ct_walk_done(&w, i);
        }
        if (ct_walk_finished(&w))
            break;
        /* wait until one message completes, making progress (a blocked call: progress
         * may yield or sleep on an oversubscribed node) */
        int k;
        MPID_Progress_state state;
        MPID_Progress_start(&state);
        for (;;) {
            for (k = 0; k < nreq && !MPIR_Request_is_complete(reqs[k]); k++);
            if (k < nreq)
                break;
            mpi_errno = MPID_Progress_wait(&state);
            if (mpi_errno != MPI_SUCCESS) {
                MPID_Progress_end(&state);
                MPIR_ERR_POP(mpi_errno);
            }
        }
        MPID_Progress_end(&state);
        MPIR_Request *req = reqs[k];
        if (req->kind == MPIR_REQUEST_KIND__RECV)
            MPIR_Process_status(&req->status, errflag);     /* a peer's failure, in the tag */
        MPIR_Request_free(req);
        ct_walk_done(&w, req_step[k]);
        reqs[k] = reqs[nreq - 1];
        req_step[k] = req_step[nreq - 1];
        nreq--;
    }
  fn_exit:
    if (walking)
        ct_walk_free(&w);
    MPL_free(tmp);
    MPL_free(reqs);
    MPL_free(req_step);
    return mpi_errno;
  fn_fail:
    /* the messages posted are completed before their buffers go */
    for (int k = 0; k < nreq; k++) {
        MPIR_Errflag_t ef = MPIR_ERR_NONE;
        MPIC_Wait(reqs[k], &ef);
        MPIR_Request_free(reqs[k]);
    }
    nreq = 0;
    goto fn_exit;
}

/* A buffer of count elements of dtype as contiguous bytes: the user's memory when dtype is
 * contiguous, else packed scratch (in: filled from the buffer; out: unpacked at the end). */
typedef struct {
    char *p;
    void *tmp;
} view_t;

static int view(const void *buf, MPI_Aint count, MPI_Datatype dtype, int in, view_t * v)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, lb, extent;
    MPIR_Datatype_is_contig(dtype, &contig);
    MPIR_Datatype_get_size_macro(dtype, size);
    v->tmp = NULL;
    if (contig) {
        MPIR_Type_get_true_extent_impl(dtype, &lb, &extent);
        v->p = (char *) buf + lb;
        return MPI_SUCCESS;
    }
    v->tmp = MPL_malloc(count * size > 0 ? count * size : 1, MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(!v->tmp, mpi_errno, MPI_ERR_OTHER, "**nomem");
    v->p = v->tmp;
    if (in)
        mpi_errno = MPIR_Localcopy(buf, count, dtype, v->p, count * size, MPI_BYTE);
  fn_fail:
    return mpi_errno;
}

static int view_done(view_t * v, void *buf, MPI_Aint count, MPI_Datatype dtype, int out)
{
    int mpi_errno = MPI_SUCCESS;
    if (v->tmp && out) {
        MPI_Aint size;
        MPIR_Datatype_get_size_macro(dtype, size);
        mpi_errno = MPIR_Localcopy(v->p, count * size, MPI_BYTE, buf, count, dtype);
    }
    MPL_free(v->tmp);
    v->tmp = NULL;
    return mpi_errno;
}

/* comm's schedule for a collective (kept in its cache), or NULL: not applicable, the caller
 * falls back */
static const ct_sched *schedule(int coll, MPIR_Comm * comm, int root, int64_t count,
                                size_t elem_size, int commutative)
{
    comm_topo *c = topo_of(comm);
    ct_params p = { 0 };
    if (!c || count <= 0)
        return NULL;
    for (int i = 0; i < SCHED_CACHE; i++) {
        cached_sched *e = &c->cache[i];
        if (e->s.steps && e->coll == coll && e->root == root && e->count == count &&
            e->elem_size == elem_size && e->commutative == commutative)
            return &e->s;
    }
    cached_sched *e = &c->cache[c->next];
    if (e->s.steps)
        ct_sched_free(&e->s);
    memset(&e->s, 0, sizeof(e->s));
    p.commutative = commutative;
    if (ct_select(&e->s, coll, &c->t, comm->rank, root, count, elem_size, &p) != CT_OK) {
        ct_sched_free(&e->s);
        return NULL;
    }
    if (!e->s.steps) {
        /* an empty schedule (nothing to do here) is not cached */
        return &e->s;
    }
    e->coll = coll;
    e->root = root;
    e->count = count;
    e->elem_size = elem_size;
    e->commutative = commutative;
    c->next = (c->next + 1) % SCHED_CACHE;
    return &e->s;
}

int MPIDI_AMLAPI_torus_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                             MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno = MPI_SUCCESS, mpi_errno2;
    MPI_Aint size;
    const ct_sched *s;
    view_t v;

    MPIR_Datatype_get_size_macro(datatype, size);
    if (!(s = schedule(CT_COLL_BCAST, comm, root, count * size, 1, 1)))
        return MPI_SUCCESS;
    *done = 1;
    mpi_errno = view(buffer, count, datatype, comm->rank == root, &v);
    if (mpi_errno == MPI_SUCCESS) {
        mpi_errno = run(s, comm, NULL, v.p, MPI_BYTE, MPI_OP_NULL, errflag);
        mpi_errno2 = view_done(&v, buffer, count, datatype, comm->rank != root);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = mpi_errno2;
    }
    return mpi_errno;
}

/* reductions work on elements of the user's datatype, which every rank passes alike: it
 * must be contiguous with no gaps */
static int reducible(MPI_Datatype datatype, MPI_Aint * extent, MPI_Aint * lb)
{
    int contig;
    MPI_Aint size, true_extent;
    MPIR_Datatype_is_contig(datatype, &contig);
    MPIR_Datatype_get_size_macro(datatype, size);
    MPIR_Datatype_get_extent_macro(datatype, *extent);
    MPIR_Type_get_true_extent_impl(datatype, lb, &true_extent);
    return contig && size > 0 && *extent == size && true_extent == size;
}

int MPIDI_AMLAPI_torus_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                              MPI_Datatype datatype, MPI_Op op, int root, MPIR_Comm * comm,
                              MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint extent, lb;
    const ct_sched *s;
    int all = root < 0;         /* allreduce */
    char *scratch = NULL;

    if (!reducible(datatype, &extent, &lb) ||
        !(s = schedule(all ? CT_COLL_ALLREDUCE : CT_COLL_REDUCE, comm, all ? 0 : root, count,
                       extent, MPIR_Op_is_commutative(op))))
        return MPI_SUCCESS;
    *done = 1;
    if (!all && comm->rank != root) {
        /* a non-root's recvbuf is insignificant: the schedule works in scratch */
        scratch = MPL_malloc(count * extent, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!scratch, mpi_errno, MPI_ERR_OTHER, "**nomem");
        recvbuf = scratch;
        lb = 0;
    }
    if (sendbuf == MPI_IN_PLACE)
        sendbuf = (char *) recvbuf + lb;
    else
        sendbuf = (const char *) sendbuf + lb;
    mpi_errno = run(s, comm, sendbuf, scratch ? recvbuf : (char *) recvbuf + lb, datatype, op,
                    errflag);
  fn_fail:
    MPL_free(scratch);
    return mpi_errno;
}

/* allgather (recvcounts NULL: recvcount each) and allgatherv, on bytes */
int MPIDI_AMLAPI_torus_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                  MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                                  const MPI_Aint * recvcounts, const MPI_Aint * displs,
                                  MPI_Datatype recvtype, MPIR_Comm * comm,
                                  MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno = MPI_SUCCESS, contig, P = comm->local_size, me = comm->rank;
    MPI_Aint size, extent, lb, true_extent;
    comm_topo *c = topo_of(comm);
    int64_t *cnt = NULL, *dsp = NULL, total = 0;
    char *packed = NULL, *base;
    ct_sched own = { 0 };       /* allgatherv's: counts vary, so it is not cached */
    const ct_sched *s = &own;
    ct_params p = { 0 };

    if (!c)
        return MPI_SUCCESS;
    MPIR_Datatype_get_size_macro(recvtype, size);
    MPIR_Datatype_get_extent_macro(recvtype, extent);
    MPIR_Datatype_is_contig(recvtype, &contig);
    MPIR_Type_get_true_extent_impl(recvtype, &lb, &true_extent);
    cnt = MPL_malloc(sizeof(int64_t) * 2 * P, MPL_MEM_COLL);
    if (!cnt)
        return MPI_SUCCESS;
    dsp = cnt + P;
    /* blocks as bytes: in place in recvbuf when recvtype is contiguous, else packed one
     * after another in scratch */
    for (int r = 0; r < P; r++) {
        MPI_Aint c = recvcounts ? recvcounts[r] : recvcount;
        cnt[r] = c * size;
        dsp[r] = contig ? (recvcounts ? displs[r] : r * recvcount) * extent : total;
        total += cnt[r];
    }
    p.commutative = 1;
    if (total == 0 ||
        (recvcounts ? ct_allgatherv(&own, &c->t, me, cnt, dsp, 1, &p) != CT_OK :
         /* allgather: blocks of cnt[0] bytes at r * cnt[0], contiguous or packed alike */
         !(s = schedule(CT_COLL_ALLGATHER, comm, 0, cnt[0], 1, 1)))) {
        ct_sched_free(&own);
        MPL_free(cnt);
        return MPI_SUCCESS;
    }
    *done = 1;
    if (contig) {
        base = (char *) recvbuf + lb;
    } else {
        packed = MPL_malloc(total, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!packed, mpi_errno, MPI_ERR_OTHER, "**nomem");
        base = packed;
    }
    char *mine = base + dsp[me];
    if (sendbuf == MPI_IN_PLACE) {
        if (!contig) {
            MPI_Aint c = recvcounts ? recvcounts[me] : recvcount;
            MPI_Aint d = recvcounts ? displs[me] : me * recvcount;
            mpi_errno = MPIR_Localcopy((char *) recvbuf + d * extent, c, recvtype, mine,
                                       cnt[me], MPI_BYTE);
            MPIR_ERR_CHECK(mpi_errno);
        }
    } else {
        mpi_errno = MPIR_Localcopy(sendbuf, sendcount, sendtype, mine, cnt[me], MPI_BYTE);
        MPIR_ERR_CHECK(mpi_errno);
    }
    /* the schedule reads the own block (SEND) before it writes that block of RECV, so in
     * place they may be the same memory */
    mpi_errno = run(s, comm, mine, base, MPI_BYTE, MPI_OP_NULL, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (!contig)
        for (int r = 0; r < P; r++) {
            MPI_Aint c = recvcounts ? recvcounts[r] : recvcount;
            MPI_Aint d = recvcounts ? displs[r] : r * recvcount;
            mpi_errno = MPIR_Localcopy(packed + dsp[r], cnt[r], MPI_BYTE,
                                       (char *) recvbuf + d * extent, c, recvtype);
            MPIR_ERR_CHECK(mpi_errno);
        }
  fn_fail:
    MPL_free(packed);
    MPL_free(cnt);
    ct_sched_free(&own);
    return mpi_errno;
}

int MPIDI_AMLAPI_torus_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                                void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                                MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno = MPI_SUCCESS, mpi_errno2, P = comm->local_size;
    MPI_Aint size;
    const ct_sched *s;
    view_t vs = { NULL, NULL }, vr;

    MPIR_Datatype_get_size_macro(recvtype, size);
    if (!(s = schedule(CT_COLL_ALLTOALL, comm, 0, recvcount * size, 1, 1)))
        return MPI_SUCCESS;
    *done = 1;
    mpi_errno = view(recvbuf, recvcount * P, recvtype, sendbuf == MPI_IN_PLACE, &vr);
    MPIR_ERR_CHECK(mpi_errno);
    if (sendbuf == MPI_IN_PLACE) {
        /* the schedule reads every send block while it writes receive blocks */
        vs.tmp = MPL_malloc(recvcount * size * P, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!vs.tmp, mpi_errno, MPI_ERR_OTHER, "**nomem");
        vs.p = vs.tmp;
        memcpy(vs.p, vr.p, recvcount * size * P);
    } else {
        mpi_errno = view(sendbuf, sendcount * P, sendtype, 1, &vs);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = run(s, comm, vs.p, vr.p, MPI_BYTE, MPI_OP_NULL, errflag);
    mpi_errno2 = view_done(&vr, recvbuf, recvcount * P, recvtype, 1);
    if (mpi_errno == MPI_SUCCESS)
        mpi_errno = mpi_errno2;
  fn_fail:
    MPL_free(vs.tmp);
    return mpi_errno;
}

int MPIDI_AMLAPI_torus_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    const ct_sched *s = schedule(CT_COLL_BARRIER, comm, 0, 1, 1, 1);
    if (!s)
        return MPI_SUCCESS;
    *done = 1;
    return run(s, comm, NULL, NULL, MPI_BYTE, MPI_OP_NULL, errflag);
}
