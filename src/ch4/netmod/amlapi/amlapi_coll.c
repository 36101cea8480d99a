/*
 * amlapi netmod: torus collectives. MPIDI_NM_mpi_{bcast, allreduce, reduce,
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
        Torus-aware collectives of coll_torus (bcast, allreduce, reduce, allgather(v), alltoall,
        barrier) for communicators on a torus.
        auto - only when MPIR_CVAR_AMLAPI_TORUS_MAP_FILE or MPIR_CVAR_AMLAPI_TORUS_SHAPE is set
        on   - wherever a schedule applies, on the described or a default shape (testing)
        off  - never

    - name        : MPIR_CVAR_AMLAPI_TORUS_SHAPE
      category    : CH4_AMLAPI
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        The nodes' torus: extents joined by 'x', 'm' after a mesh dimension, an optional last "xNt"
        for N ranks per node ("8x8x8", "4mx4x4", "4x4x4x2t"); its node count must be MPICH's.
        Ranks in XYZT order unless MPIR_CVAR_AMLAPI_TORUS_MAP_FILE places them. Default: none.

    - name        : MPIR_CVAR_AMLAPI_TORUS_MAP_FILE
      category    : CH4_AMLAPI
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        File of torus coordinates "x y z [t]", one line per COMM_WORLD rank in rank order ('#'
        starts a comment); extents from MPIR_CVAR_AMLAPI_TORUS_SHAPE or the largest coordinates + 1.
        It must be a bijection onto the shape; errors name the file and line. Default: none.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* Eight tags of hcoll's reserved range, one per coll_torus channel: an amlapi build has no
 * hcoll, and MPICH's blocking algorithms use the tags below it. */
#define CT_TAG(chan) (MPIR_FIRST_HCOLL_TAG + (chan))

static ct_topo world;
static int world_ok;            /* world holds COMM_WORLD's topology */
int MPIDI_AMLAPI_coll_torus_active;

static unsigned long long pv_runs, pv_bytes;

/* A schedule depends only on its arguments, and making one takes time, most for large ones
 * (a 1 MiB bcast of 516 steps at 8 ranks; docs/benchmarks/2026-11-28-figures-from-the-code.md):
 * the last few made for a communicator are kept for its repeated calls. A schedule a
 * nonblocking collective still runs is busy and stays. */
#define SCHED_CACHE 8
typedef struct {
    int coll, root, commutative;
    int64_t count;
    size_t elem_size;
    int busy;                   /* nonblocking collectives running it */
    ct_sched s;                 /* valid when s.steps */
} cached_sched;

/* Nonblocking collectives in flight on one communicator each take a block of CT_MAXCHAN tags
 * of hcoll's range (block 0 is the blocking collectives'), in call order, which every rank
 * shares; a call that finds its block still in use waits for it. */
#define NBC_BLOCKS (256 / CT_MAXCHAN - 1)

/* communicators' induced topologies (state 1) or "does not apply" (state -1) */
typedef struct comm_topo {
    MPIR_Comm *comm;
    int state;
    ct_topo t;
    cached_sched cache[SCHED_CACHE];
    int next;                   /* the slot to reuse next (round robin) */
    int nbc_next;               /* the tag block the next nonblocking collective takes */
    char nbc_busy[NBC_BLOCKS];
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

    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_torus_runs", &pv_runs,
                              "collectives run by coll_torus's torus schedules");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_torus_bytes", &pv_bytes,
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
         * algorithms are faster (docs/benchmarks/2026-11-27-defaults.md,
         * MPIR_CVAR_AMLAPI_COLL_TORUS) */
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

/* One collective's run of a schedule, blocking or not: the walk, the messages in flight, and
 * what to do at the end (unpack a packed receive buffer, free scratch). */
typedef struct exec {
    const ct_sched *s;
    ct_sched own;               /* a schedule made for this run only (not cached) */
    cached_sched *cached;       /* the cache entry s is, marked busy (nonblocking) */
    comm_topo *ct;
    MPIR_Comm *comm;
    int tag0;                   /* channel c's messages carry tag0 + c */
    int block;                  /* nonblocking: the tag block taken, else -1 */
    char *bufs[CT_NBUFS];
    MPI_Datatype dtype;         /* reductions: the user's element type; else MPI_BYTE */
    MPI_Op op;
    ct_walk w;
    int walking;
    MPIR_Request **reqs;
    int *req_step, nreq;
    MPIR_Errflag_t errflag;
    int err;                    /* nonblocking: failed at its start, not walked */
    /* at the end: out_p unpacked into (ubuf, ucount, udt) when out_tmp is set */
    char *out_p;
    void *out_tmp;
    MPI_Aint out_bytes;
    int udt_ref;                /* nonblocking: a reference on udt is held */
    void *ubuf;
    MPI_Aint ucount;
    MPI_Datatype udt;
    void *tmp[2];               /* more scratch freed at the end */
    MPIR_Request *req;          /* nonblocking: the user's request */
    struct exec *next;
} exec_t;

static exec_t *nbc_active;      /* nonblocking collectives in flight */
static int nbc_hook = -1;       /* their progress hook */

/* comm's schedule for a collective into e->s (kept in comm's cache), or 0: not applicable,
 * the caller falls back */
static int schedule(exec_t * e, int coll, MPIR_Comm * comm, int root, int64_t count,
                    size_t elem_size, int commutative)
{
    comm_topo *c = topo_of(comm);
    ct_params p = { 0 };
    if (!c || count <= 0)
        return 0;
    e->ct = c;
    for (int i = 0; i < SCHED_CACHE; i++) {
        cached_sched *x = &c->cache[i];
        if (x->s.steps && x->coll == coll && x->root == root && x->count == count &&
            x->elem_size == elem_size && x->commutative == commutative) {
            e->s = &x->s;
            e->cached = x;
            return 1;
        }
    }
    p.commutative = commutative;
    /* bcast's pipeline chunks: MPIDI_AMLAPI_TORUS_BCAST_CHUNK (the model's are for links
     * without per-message cost) */
    if (coll == CT_COLL_BCAST)
        p.chunk_elems = (MPIDI_AMLAPI_TORUS_BCAST_CHUNK + elem_size - 1) / elem_size;
    cached_sched *x = NULL;
    for (int i = 0; i < SCHED_CACHE && !x; i++, c->next = (c->next + 1) % SCHED_CACHE)
        if (!c->cache[c->next].busy)
            x = &c->cache[c->next];
    if (!x) {
        /* every entry runs a nonblocking collective: this run makes its own */
        if (ct_select(&e->own, coll, &c->t, comm->rank, root, count, elem_size, &p) != CT_OK) {
            ct_sched_free(&e->own);
            return 0;
        }
        e->s = &e->own;
        return 1;
    }
    if (x->s.steps)
        ct_sched_free(&x->s);
    memset(&x->s, 0, sizeof(x->s));
    if (ct_select(&x->s, coll, &c->t, comm->rank, root, count, elem_size, &p) != CT_OK) {
        ct_sched_free(&x->s);
        return 0;
    }
    x->coll = coll;
    x->root = root;
    x->count = count;
    x->elem_size = elem_size;
    x->commutative = commutative;
    e->s = &x->s;
    e->cached = x;
    return 1;
}

static void exec_init(exec_t * e)
{
    memset(e, 0, sizeof(*e));
    e->block = -1;
    e->dtype = MPI_BYTE;
    e->op = MPI_OP_NULL;
}

static int exec_start(exec_t * e)
{
    int mpi_errno = MPI_SUCCESS, n = e->s->nsteps;
    if (e->s->tmp_elems) {
        e->bufs[CT_BUF_TMP] = MPL_malloc((size_t) e->s->tmp_elems * e->s->elem_size,
                                         MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!e->bufs[CT_BUF_TMP], mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    }
    e->reqs = MPL_malloc(sizeof(*e->reqs) * (n ? n : 1), MPL_MEM_COLL);
    e->req_step = MPL_malloc(sizeof(int) * (n ? n : 1), MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(!e->reqs || !e->req_step || ct_walk_init(&e->w, e->s) != CT_OK,
                        mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    e->walking = 1;
    pv_runs++;
  fn_fail:
    return mpi_errno;
}

/* Posts every step that may start and takes every message completed, until neither happens;
 * *done when the schedule is finished. Never blocks. */
static int exec_poke(exec_t * e, int *done, int *progress)
{
    int mpi_errno = MPI_SUCCESS, changed = 1;
    const ct_sched *s = e->s;
    size_t es = s->elem_size;
    while (changed) {
        int i;
        changed = 0;
        while ((i = ct_walk_next(&e->w)) >= 0) {
            const ct_step *st = &s->steps[i];
            char *dst = e->bufs[st->buf] + (size_t) st->off * es;
            MPI_Aint bytes = (MPI_Aint) ((size_t) st->len * es);
            changed = 1;
            if (st->op == CT_SEND) {
                mpi_errno = MPIC_Isend(dst, bytes, MPI_BYTE, st->peer, e->tag0 + st->chan,
                                       e->comm, &e->reqs[e->nreq], &e->errflag);
                MPIR_ERR_CHECK(mpi_errno);
                pv_bytes += bytes;
            } else if (st->op == CT_RECV) {
                mpi_errno = MPIC_Irecv(dst, bytes, MPI_BYTE, st->peer, e->tag0 + st->chan,
                                       e->comm, &e->reqs[e->nreq]);
                MPIR_ERR_CHECK(mpi_errno);
            }
            if (st->op == CT_SEND || st->op == CT_RECV) {
                e->req_step[e->nreq++] = i;
                ct_walk_posted(&e->w, i);
                continue;
            }
            char *src = e->bufs[st->sbuf] + (size_t) st->soff * es;
            if (st->op == CT_COPY) {
                if (src != dst)
                    memmove(dst, src, (size_t) st->len * es);
            } else if (st->op == CT_REDUCE_LEFT) {
                mpi_errno = MPIR_Reduce_local(src, dst, st->len, e->dtype, e->op);
            } else {
                /* dst = dst op src, src being scratch: src = dst op src, then copy */
                mpi_errno = MPIR_Reduce_local(dst, src, st->len, e->dtype, e->op);
                memcpy(dst, src, (size_t) st->len * es);
            }
            MPIR_ERR_CHECK(mpi_errno);
            ct_walk_done(&e->w, i);
        }
        for (int k = 0; k < e->nreq;) {
            MPIR_Request *req = e->reqs[k];
            if (!MPIR_Request_is_complete(req)) {
                k++;
                continue;
            }
            if (req->kind == MPIR_REQUEST_KIND__RECV)
                MPIR_Process_status(&req->status, &e->errflag);     /* a peer failed */
            MPIR_Request_free(req);
            ct_walk_done(&e->w, e->req_step[k]);
            e->nreq--;
            e->reqs[k] = e->reqs[e->nreq];
            e->req_step[k] = e->req_step[e->nreq];
            changed = 1;
        }
        if (changed && progress)
            *progress = 1;
    }
    *done = ct_walk_finished(&e->w);
  fn_fail:
    return mpi_errno;
}

/* The end of a run (after an error too): the messages still posted complete before their
 * buffers go, the packed receive buffer is unpacked, scratch is freed, and a nonblocking
 * run's references and tag block are given back. */
static int exec_finish(exec_t * e, int mpi_errno)
{
    for (int k = 0; k < e->nreq; k++) {
        MPIR_Errflag_t ef = MPIR_ERR_NONE;
        MPIC_Wait(e->reqs[k], &ef);
        MPIR_Request_free(e->reqs[k]);
    }
    e->nreq = 0;
    if (mpi_errno == MPI_SUCCESS && e->out_tmp)
        mpi_errno = MPIR_Localcopy(e->out_p, e->out_bytes, MPI_BYTE, e->ubuf, e->ucount, e->udt);
    if (e->walking)
        ct_walk_free(&e->w);
    MPL_free(e->bufs[CT_BUF_TMP]);
    MPL_free(e->reqs);
    MPL_free(e->req_step);
    MPL_free(e->out_tmp);
    MPL_free(e->tmp[0]);
    MPL_free(e->tmp[1]);
    ct_sched_free(&e->own);
    if (e->cached)
        e->cached->busy -= e->req != NULL;
    if (e->block >= 0)
        e->ct->nbc_busy[e->block] = 0;
    return mpi_errno;
}

/* A buffer of count elements of dtype as contiguous bytes: the user's memory when dtype is
 * contiguous, else packed scratch (in: filled from the buffer now; out: unpacked into it when
 * the run ends) */
static int view(exec_t * e, int buf, const void *ubuf, MPI_Aint count, MPI_Datatype dtype,
                int in, int out)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, lb, extent;
    MPIR_Datatype_is_contig(dtype, &contig);
    MPIR_Datatype_get_size_macro(dtype, size);
    if (contig) {
        MPIR_Type_get_true_extent_impl(dtype, &lb, &extent);
        e->bufs[buf] = (char *) ubuf + lb;
        return MPI_SUCCESS;
    }
    char *p = MPL_malloc(count * size > 0 ? count * size : 1, MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(!p, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    e->bufs[buf] = p;
    if (out) {
        e->out_p = e->out_tmp = p;
        e->out_bytes = count * size;
        e->ubuf = (void *) ubuf;
        e->ucount = count;
        e->udt = dtype;
    } else {
        e->tmp[e->tmp[0] ? 1 : 0] = p;
    }
    if (in)
        mpi_errno = MPIR_Localcopy(ubuf, count, dtype, p, count * size, MPI_BYTE);
  fn_fail:
    return mpi_errno;
}

/* the progress hook: every nonblocking collective in flight moves on; a finished one
 * completes its request */
static int nbc_progress(int *made_progress)
{
    exec_t **pp = &nbc_active;
    while (*pp) {
        exec_t *e = *pp;
        int done = 0, mpi_errno = e->err;
        if (!mpi_errno)
            mpi_errno = exec_poke(e, &done, made_progress);
        if (!done && mpi_errno == MPI_SUCCESS) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        mpi_errno = exec_finish(e, mpi_errno);
        if (mpi_errno == MPI_SUCCESS && e->errflag != MPIR_ERR_NONE)
            MPIR_ERR_SET(mpi_errno, MPI_ERR_OTHER, "**coll_fail");
        e->req->status.MPI_ERROR = mpi_errno;
        if (e->op != MPI_OP_NULL)
            MPIR_Op_release_if_not_builtin(e->op);
        if (e->dtype != MPI_BYTE)
            MPIR_Datatype_release_if_not_builtin(e->dtype);
        if (e->udt_ref)
            MPIR_Datatype_release_if_not_builtin(e->udt);
        MPIR_Comm_release(e->comm);
        MPID_Request_complete(e->req);
        MPL_free(e);
        *made_progress = 1;
    }
    if (!nbc_active)
        MPIR_Progress_hook_deactivate(nbc_hook);
    return MPI_SUCCESS;
}

/* Runs e to its end: blocking (req NULL; failures of peers in *errflag) or as a nonblocking
 * collective whose request goes to *req. e is on the caller's stack; a nonblocking run
 * continues in a copy. */
static int go(exec_t * e, MPIR_Comm * comm, MPIR_Request ** req, MPIR_Errflag_t * errflag)
{
    int mpi_errno = MPI_SUCCESS, done = 0;
    e->comm = comm;
    if (!req) {
        e->tag0 = CT_TAG(0);
        e->errflag = *errflag;
        mpi_errno = exec_start(e);
        if (mpi_errno == MPI_SUCCESS) {
            MPID_Progress_state state;
            MPID_Progress_start(&state);
            while ((mpi_errno = exec_poke(e, &done, NULL)) == MPI_SUCCESS && !done)
                mpi_errno = MPID_Progress_wait(&state);
            MPID_Progress_end(&state);
        }
        mpi_errno = exec_finish(e, mpi_errno);
        *errflag = e->errflag;
        return mpi_errno;
    }

    /* nonblocking: the next tag block of the communicator, once it is free */
    comm_topo *c = e->ct;
    int b = c->nbc_next;
    c->nbc_next = (b + 1) % NBC_BLOCKS;
    if (c->nbc_busy[b]) {
        MPID_Progress_state state;
        MPID_Progress_start(&state);
        while (c->nbc_busy[b] && mpi_errno == MPI_SUCCESS)
            mpi_errno = MPID_Progress_wait(&state);
        MPID_Progress_end(&state);
        if (mpi_errno) {
            exec_finish(e, mpi_errno);
            return mpi_errno;
        }
    }
    exec_t *x = MPL_malloc(sizeof(*x), MPL_MEM_COLL);
    MPIR_Request *r = MPIR_Request_create(MPIR_REQUEST_KIND__COLL);
    if (!x || !r) {
        MPL_free(x);
        if (r)
            MPIR_Request_free(r);
        exec_finish(e, MPI_ERR_OTHER);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    }
    *x = *e;
    if (x->s == &e->own)
        x->s = &x->own;
    c->nbc_busy[b] = 1;
    x->block = b;
    x->tag0 = CT_TAG((b + 1) * CT_MAXCHAN);
    if (x->cached)
        x->cached->busy++;
    x->req = r;
    /* the user may free these before the collective ends */
    MPIR_Comm_add_ref(comm);
    if (x->dtype != MPI_BYTE)
        MPIR_Datatype_add_ref_if_not_builtin(x->dtype);
    if (x->op != MPI_OP_NULL)
        MPIR_Op_add_ref_if_not_builtin(x->op);
    if (x->out_tmp) {
        MPIR_Datatype_add_ref_if_not_builtin(x->udt);
        x->udt_ref = 1;
    }
    MPIR_Request_add_ref(r);    /* the user's reference; completion drops the other */
    *req = r;
    x->err = exec_start(x);
    if (!x->err)
        x->err = exec_poke(x, &done, NULL);
    x->next = nbc_active;
    nbc_active = x;
    if (nbc_hook < 0)
        MPIR_Progress_hook_register(nbc_progress, &nbc_hook);
    MPIR_Progress_hook_activate(nbc_hook);
    if (done || x->err) {
        int ignored = 0;
        nbc_progress(&ignored);  /* ends it now, with its error in the request */
    }
    mpi_errno = MPI_SUCCESS;
  fn_fail:
    return mpi_errno;
}

int MPIDI_AMLAPI_torus_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                             MPIR_Comm * comm, MPIR_Errflag_t * errflag, MPIR_Request ** req,
                             int *done)
{
    int mpi_errno;
    MPI_Aint size;
    exec_t e;

    exec_init(&e);
    MPIR_Datatype_get_size_macro(datatype, size);
    if (!schedule(&e, CT_COLL_BCAST, comm, root, count * size, 1, 1))
        return MPI_SUCCESS;
    *done = 1;
    mpi_errno = view(&e, CT_BUF_RECV, buffer, count, datatype, comm->rank == root,
                     comm->rank != root);
    if (mpi_errno)
        return exec_finish(&e, mpi_errno);
    return go(&e, comm, req, errflag);
}

int MPIDI_AMLAPI_torus_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                              MPI_Datatype datatype, MPI_Op op, int root, MPIR_Comm * comm,
                              MPIR_Errflag_t * errflag, MPIR_Request ** req, int *done)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint extent, lb;
    int all = root < 0;         /* allreduce */
    exec_t e;

    exec_init(&e);
    if (!MPIDI_AMLAPI_coll_reducible(datatype, &extent, &lb) ||
        !schedule(&e, all ? CT_COLL_ALLREDUCE : CT_COLL_REDUCE, comm, all ? 0 : root, count,
                  extent, MPIR_Op_is_commutative(op)))
        return MPI_SUCCESS;
    *done = 1;
    e.dtype = datatype;
    e.op = op;
    if (!all && comm->rank != root) {
        /* a non-root's recvbuf is insignificant: the schedule works in scratch */
        e.tmp[0] = MPL_malloc(count * extent, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!e.tmp[0], mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        e.bufs[CT_BUF_RECV] = e.tmp[0];
    } else {
        e.bufs[CT_BUF_RECV] = (char *) recvbuf + lb;
    }
    e.bufs[CT_BUF_SEND] = sendbuf == MPI_IN_PLACE ? e.bufs[CT_BUF_RECV] :
        (char *) sendbuf + lb;
    return go(&e, comm, req, errflag);
  fn_fail:
    return exec_finish(&e, mpi_errno);
}

/* allgather (recvcounts NULL: recvcount each) and allgatherv, on bytes */
int MPIDI_AMLAPI_torus_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                  MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                                  const MPI_Aint * recvcounts, const MPI_Aint * displs,
                                  MPI_Datatype recvtype, MPIR_Comm * comm,
                                  MPIR_Errflag_t * errflag, MPIR_Request ** req, int *done)
{
    int mpi_errno = MPI_SUCCESS, contig, P = comm->local_size, me = comm->rank;
    MPI_Aint size, extent, lb, true_extent;
    comm_topo *c = topo_of(comm);
    int64_t *cnt, *dsp, total = 0;
    char *base;
    ct_params p = { 0 };
    exec_t e;

    exec_init(&e);
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
        MPI_Aint n = recvcounts ? recvcounts[r] : recvcount;
        cnt[r] = n * size;
        dsp[r] = contig ? (recvcounts ? displs[r] : r * recvcount) * extent : total;
        total += cnt[r];
    }
    p.commutative = 1;
    e.ct = c;
    if (total == 0 ||
        (recvcounts ? (e.s = &e.own, ct_allgatherv(&e.own, &c->t, me, cnt, dsp, 1, &p) != CT_OK) :
         /* allgather: blocks of cnt[0] bytes at r * cnt[0], contiguous or packed alike */
         !schedule(&e, CT_COLL_ALLGATHER, comm, 0, cnt[0], 1, 1))) {
        exec_finish(&e, MPI_SUCCESS);
        MPL_free(cnt);
        return MPI_SUCCESS;
    }
    *done = 1;
    if (contig) {
        base = (char *) recvbuf + lb;
    } else {
        base = e.out_tmp = MPL_malloc(total, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!base, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        /* allgather's blocks unpack as one; allgatherv's one by one (below, blocking only) */
        e.out_p = base;
        e.out_bytes = total;
        e.ubuf = recvbuf;
        e.ucount = recvcount * P;
        e.udt = recvtype;
    }
    char *mine = base + dsp[me];
    if (sendbuf == MPI_IN_PLACE) {
        if (!contig) {
            MPI_Aint n = recvcounts ? recvcounts[me] : recvcount;
            MPI_Aint d = recvcounts ? displs[me] : me * recvcount;
            mpi_errno = MPIR_Localcopy((char *) recvbuf + d * extent, n, recvtype, mine,
                                       cnt[me], MPI_BYTE);
            MPIR_ERR_CHECK(mpi_errno);
        }
    } else {
        mpi_errno = MPIR_Localcopy(sendbuf, sendcount, sendtype, mine, cnt[me], MPI_BYTE);
        MPIR_ERR_CHECK(mpi_errno);
    }
    /* the schedule reads the own block (SEND) before it writes that block of RECV, so in
     * place they may be the same memory */
    e.bufs[CT_BUF_SEND] = mine;
    e.bufs[CT_BUF_RECV] = base;
    if (recvcounts && !contig) {
        /* allgatherv unpacks block by block after the run (a blocking call only) */
        char *packed = e.out_tmp;
        e.out_tmp = NULL;
        mpi_errno = go(&e, comm, NULL, errflag);
        for (int r = 0; r < P && mpi_errno == MPI_SUCCESS; r++)
            mpi_errno = MPIR_Localcopy(packed + dsp[r], cnt[r], MPI_BYTE,
                                       (char *) recvbuf + displs[r] * extent, recvcounts[r],
                                       recvtype);
        MPL_free(packed);
        MPL_free(cnt);
        return mpi_errno;
    }
    MPL_free(cnt);
    return go(&e, comm, req, errflag);
  fn_fail:
    MPL_free(cnt);
    return exec_finish(&e, mpi_errno);
}

int MPIDI_AMLAPI_torus_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                                void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                                MPIR_Comm * comm, MPIR_Errflag_t * errflag,
                                MPIR_Request ** req, int *done)
{
    int mpi_errno = MPI_SUCCESS, P = comm->local_size;
    MPI_Aint size;
    exec_t e;

    exec_init(&e);
    MPIR_Datatype_get_size_macro(recvtype, size);
    if (!schedule(&e, CT_COLL_ALLTOALL, comm, 0, recvcount * size, 1, 1))
        return MPI_SUCCESS;
    *done = 1;
    mpi_errno = view(&e, CT_BUF_RECV, recvbuf, recvcount * P, recvtype,
                     sendbuf == MPI_IN_PLACE, 1);
    MPIR_ERR_CHECK(mpi_errno);
    if (sendbuf == MPI_IN_PLACE) {
        /* the schedule reads every send block while it writes receive blocks */
        e.tmp[0] = e.bufs[CT_BUF_SEND] = MPL_malloc(recvcount * size * P, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!e.tmp[0], mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        memcpy(e.bufs[CT_BUF_SEND], e.bufs[CT_BUF_RECV], recvcount * size * P);
    } else {
        mpi_errno = view(&e, CT_BUF_SEND, sendbuf, sendcount * P, sendtype, 1, 0);
        MPIR_ERR_CHECK(mpi_errno);
    }
    return go(&e, comm, req, errflag);
  fn_fail:
    return exec_finish(&e, mpi_errno);
}

int MPIDI_AMLAPI_torus_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag, MPIR_Request ** req,
                               int *done)
{
    exec_t e;
    exec_init(&e);
    if (!schedule(&e, CT_COLL_BARRIER, comm, 0, 1, 1, 1))
        return MPI_SUCCESS;
    *done = 1;
    return go(&e, comm, req, errflag);
}
