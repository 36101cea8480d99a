/*
 * amlapi netmod: barrier, bcast, allreduce and alltoall through shared memory,
 * for an intracommunicator whose ranks all share this node (MPICH's node map, so
 * MPIR_CVAR_NOLOCAL and MPIR_CVAR_NUM_CLIQUES split it as they split vnode).
 *
 * Why: a barrier by messages needs every rank to run once per round to pass the next message
 * on; with more ranks than cores each round costs context switches (the barrier rows of
 * docs/benchmarks/2026-11-26-collectives.md, and
 * docs/benchmarks/2026-11-28-figures-from-the-code.md). Here a rank arrives
 * with one atomic add on a counter in a segment the communicator's ranks share; the last to
 * arrive releases all by bumping a generation word. A rank that arrived never has to run
 * again for the others to get through, so a core switches once per rank per barrier.
 * Allreduce is the same arrival: each rank copies its contribution into its row, the last
 * to arrive reduces the rows in rank order (row 0 op (row 1 op (...)), the order MPI asks
 * for, so a non-commutative op is right and every rank gets the same bits) into the result
 * row and releases; each rank copies the result out. Rows and result are reused safely: no
 * rank writes its row for call k+1 before the release of call k, and nobody can release call
 * k+1 before every rank left call k.
 *
 * Bcast needs no arrival. The segment has a ring that every bcast appends one record to
 * (a header line, then the data in whole lines): the root of call k writes it and publishes
 * it (the header's seq = k + 1); every other rank waits for that, copies the data out and
 * says how far it has read (its read position, its own line). Every rank knows where record
 * k lies (all know every bcast's byte count), so the root changes from call to call at no
 * cost. A root waits only for room: the ring holds CS_RING_RECORDS of the largest
 * records, many more small ones, so a root runs that far ahead of its slowest reader, as a
 * root sending messages does; on an oversubscribed node a reader that is not running must
 * not stop the root at every few calls. Larger bcasts than MPIDI_AMLAPI_COLLSHM_BCAST_BYTES
 * run MPICH's algorithms, whose pipelined copies spread over the ranks beat one root's copy
 * plus every reader's, except on communicators of MPIDI_AMLAPI_COLLSHM_LARGE ranks or more,
 * where they go through a larger ring (MPIDI_AMLAPI_COLLSHM_BCAST_RING) in chunks.
 *
 * Alltoall of small blocks goes through rows in a second segment (a2a_by_rows: two copies of
 * every block, one arrival); of large ones on communicators of MPIDI_AMLAPI_COLLSHM_LARGE
 * ranks by single copy from the senders' buffers (a2a_by_reads: each rank publishes its send
 * buffer, reads from those that published, and waits until all read its own), where
 * MPICH's pairwise exchange needs both partners of every step to run.
 *
 * The segment (MPIDU_shm_alloc over the communicator: unlinked once all mapped) is made at
 * the communicator's MPIR_CVAR_AMLAPI_COLL_SHM-th eligible call, so a communicator used for a
 * collective or two costs none; the calls before run MPICH's algorithms. Every rank counts
 * the same calls (a barrier; an allreduce whose count, datatype and op -- equal at all ranks,
 * as MPI requires -- fit; a bcast whose byte count, the same at all ranks, fits), so all
 * make the segment at the same call. It is freed with the
 * communicator.
 *
 * Waiting: a waiting rank keeps the whole progress engine going (it may owe a peer a lock
 * grant or a rendezvous), and idles as a blocked MPI_Wait does (MPIDI_AMLAPI_idle_plan: spin
 * when polling, yield then sleep on an oversubscribed node, sleep in interrupt mode). No
 * message wakes a sleeper when a shared word changes, so a rank about to sleep says so in
 * the segment, and whoever changes a word others wait on (a releaser, a bcast root, a bcast
 * reader done with a record) sends each such rank a 1-byte aml message (MPIDI_AMLAPI_H_WAKE)
 * that rings its doorbell.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"
#include "uthash.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_AMLAPI_COLL_SHM
      category    : CH4_AMLAPI
      type        : int
      default     : 8
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Barrier, small allreduce and bcast of an intracommunicator within one node use a shared
        segment of it from its Nth such call on (before, MPICH's algorithms: a communicator used
        rarely costs no segment). Default 8, >= 0; 0: never. Every rank must use the same value.

    - name        : MPIR_CVAR_AMLAPI_COLL_SHM_BYTES
      category    : CH4_AMLAPI
      type        : int
      default     : 4096
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest MPI_Allreduce (bytes) done in the MPIR_CVAR_AMLAPI_COLL_SHM segment, which holds a
        row of this size per rank and one more; larger ones run MPICH's algorithms. Default 4096, 0
        to 1048576.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* The segment: three control lines, one sleeping flag per rank, a bcast read position line
 * per rank, then the result row, a row per rank (row bytes = MPIR_CVAR_AMLAPI_COLL_SHM_BYTES
 * rounded up to a line) and the bcast ring. */
typedef struct {
    _Alignas(64) uint32_t arrived;      /* ranks in the current call (fetch_add; the last
                                         * resets it before the release) */
    _Alignas(64) uint32_t gen;  /* calls released: the last arriver's release store */
    uint32_t err;               /* the last arriver's reduction failed: every rank reports it */
    _Alignas(64) uint32_t sleeping[];   /* a rank about to sleep (it sets; the releaser takes) */
} cs_hdr_t;

#define CS_RING_RECORDS 16
#define CS_RING_MIN (64 * 1024)

typedef struct {
    _Alignas(64) uint64_t pos;  /* the rank: ring bytes it is done with (cumulative) */
    /* single-copy alltoall (a2a_by_reads): */
    uint64_t a2a_src;           /* where its send blocks are ... */
    uint64_t a2a_stride;        /* ... and how far apart, valid while ... */
    uint64_t a2a_seq;           /* ... this is the call's number + 1 (stored last) */
    uint64_t a2a_done;          /* blocks others read from it (each reader adds 1) */
} cs_rpos_t;

typedef struct {
    uint64_t seq;               /* the root: 1 + the bcast number, stored last (release) */
    uint64_t len;               /* data bytes */
} cs_rec_t;

_Static_assert(sizeof(cs_rpos_t) == 64, "a read position is one line");

typedef struct {
    MPIR_Comm *comm;            /* the key */
    int calls;                  /* eligible calls so far (before the segment exists) */
    int state;                  /* CS_COUNTING, CS_READY, CS_NEVER */
    cs_hdr_t *hdr;
    char *result, *rows, *ring;
    cs_rpos_t *rpos;
    size_t row, ring_bytes;
    uint64_t bpos;              /* where the next bcast record goes (cumulative ring bytes) */
    uint32_t gen;               /* calls this rank has seen released */
    uint64_t bcasts;            /* bcasts in the segment so far */
    char *a2a;                  /* alltoall rows: 2 sets x n rows of a2a_row bytes */
    size_t a2a_row, a2a_blk;    /* row bytes; the largest block that fits */
    int a2a_state;              /* CS_COUNTING (not made yet), CS_READY, CS_NEVER */
    char *red;                  /* large allreduce: 2 sets x (n rows + a result) of red_chunk */
    size_t red_chunk;
    int red_state;              /* like a2a_state */
    int a2a_copy;               /* aml reads every rank's memory: 1 yes, -1 no, 0 not probed */
    uint64_t a2a_calls;         /* single-copy alltoalls so far */
    char *scratch;              /* single-copy alltoall: packed send blocks, a packed block,
                                 * the read flags */
    size_t scratch_len;
    UT_hash_handle hh;
} cs_comm_t;

enum { CS_COUNTING, CS_READY, CS_NEVER };

static cs_comm_t *cs_comms;
static unsigned long long pv_barriers, pv_allreduces, pv_bcasts, pv_chunks, pv_rchunks,
    pv_alltoalls, pv_a2a_reads, pv_wakes, pv_segments;

static size_t row_bytes(void)
{
    return ((size_t) MPIR_CVAR_AMLAPI_COLL_SHM_BYTES + 63) & ~(size_t) 63;
}

static size_t hdr_bytes(int n)
{
    return ((sizeof(cs_hdr_t) + (size_t) n * sizeof(uint32_t) + 63) & ~(size_t) 63) +
        (size_t) n * sizeof(cs_rpos_t);
}

/* whether comm's large bcasts and allreduces go through its shared memory */
static int large(MPIR_Comm * comm)
{
    return comm->local_size >= MPIDI_AMLAPI_COLLSHM_LARGE;
}

/* CS_RING_RECORDS records of the largest unchunked bcast, at least CS_RING_MIN; on a large
 * communicator MPIDI_AMLAPI_COLLSHM_BCAST_RING, a multiple of 256 so that its quarter, a large
 * bcast's chunk with its header line, is whole lines */
#define CS_RING_SMALL (CS_RING_RECORDS * (((MPIDI_AMLAPI_COLLSHM_BCAST_BYTES + 63) & ~63) + 64))
_Static_assert(MPIDI_AMLAPI_COLLSHM_BCAST_RING % 256 == 0 &&
               MPIDI_AMLAPI_COLLSHM_BCAST_RING >= CS_RING_SMALL &&
               MPIDI_AMLAPI_COLLSHM_BCAST_RING >= CS_RING_MIN, "the large bcast ring");

static size_t ring_bytes(MPIR_Comm * comm)
{
    if (large(comm))
        return MPIDI_AMLAPI_COLLSHM_BCAST_RING;
    return CS_RING_SMALL < CS_RING_MIN ? CS_RING_MIN : CS_RING_SMALL;
}

/* MPIDU_shm_alloc over comm, or *fail (at every rank alike) when some rank's node lacks the
 * memory: shared memory is granted page by page as it is touched, so a segment beyond what
 * the node has would end in the OOM killer at the first collective that reaches the missing
 * pages, not in an error. */
static int shm_alloc_checked(MPIR_Comm * comm, size_t len, void **base, bool * fail)
{
    int mpi_errno, room = 1, all;
    MPIR_Errflag_t ef = MPIR_ERR_NONE;

    if (aml_node_memory() < len)
        room = 0;
    mpi_errno = MPIR_Allreduce_impl(&room, &all, 1, MPI_INT, MPI_MIN, comm, &ef);
    if (mpi_errno)
        return mpi_errno;
    if (!all) {
        *fail = true;
        return MPI_SUCCESS;
    }
    return MPIDU_shm_alloc(comm, len, base, fail);
}

/* every rank of comm is a process of this job on this rank's node */
static int all_local(MPIR_Comm * comm)
{
    int node = MPIR_Process.node_map[MPIR_Process.rank];
    for (int r = 0; r < comm->local_size; r++) {
        int lpid = -1, avtid = 0;
        MPIDIU_comm_rank_to_pid(comm, r, &lpid, &avtid);
        if (avtid != 0 || lpid < 0 || lpid >= MPIR_Process.size ||
            MPIR_Process.node_map[lpid] != node)
            return 0;
    }
    return 1;
}

/* A second segment of len bytes over comm (alltoall or large-allreduce rows), made at the
 * first call that needs it: *state becomes CS_READY with *at, or CS_NEVER (len 0, no room). */
static int extra_segment(MPIR_Comm * comm, size_t len, char **at, int *state)
{
    int mpi_errno = MPI_SUCCESS;
    bool fail = false;
    void *base;

    *state = CS_NEVER;
    if (len == 0)
        return MPI_SUCCESS;
    mpi_errno = shm_alloc_checked(comm, len, &base, &fail);
    if (mpi_errno == MPI_SUCCESS && !fail) {
        *at = base;
        *state = CS_READY;
    }
    return mpi_errno;
}

/* comm's state if this call is its eligible call that uses the segment, else NULL (the caller
 * runs MPICH's algorithm). Makes the segment at the Nth call. */
static int segment_of(MPIR_Comm * comm, cs_comm_t ** out)
{
    int mpi_errno = MPI_SUCCESS;
    cs_comm_t *c;
    bool fail = false;
    void *base;
    int n = comm->local_size;

    *out = NULL;
    HASH_FIND_PTR(cs_comms, &comm, c);
    if (!c) {
        c = MPL_calloc(1, sizeof(*c), MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(!c, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
        c->comm = comm;
        c->state = comm->comm_kind == MPIR_COMM_KIND__INTRACOMM && n >= 2 && all_local(comm) ?
            CS_COUNTING : CS_NEVER;
        HASH_ADD_PTR(cs_comms, comm, c, MPL_MEM_COLL);
    }
    if (c->state == CS_READY) {
        *out = c;
        goto fn_exit;
    }
    if (c->state == CS_NEVER || ++c->calls < MPIR_CVAR_AMLAPI_COLL_SHM)
        goto fn_exit;
    /* collective: every rank of comm is in this same call */
    c->row = row_bytes();
    c->ring_bytes = ring_bytes(comm);
    mpi_errno = shm_alloc_checked(comm, hdr_bytes(n) + (size_t) (n + 1) * c->row +
                                  c->ring_bytes, &base, &fail);
    MPIR_ERR_CHECK(mpi_errno);
    if (fail) {
        c->state = CS_NEVER;    /* the same at every rank: MPIDU_shm_alloc agreed on it */
        goto fn_exit;
    }
    /* fresh shared memory is zero: arrived = gen = 0, nobody sleeping */
    c->hdr = base;
    c->rpos = (cs_rpos_t *) ((char *) base + hdr_bytes(n)) - n;
    c->result = (char *) base + hdr_bytes(n);
    c->rows = c->result + c->row;
    c->ring = c->rows + (size_t) n * c->row;
    c->state = CS_READY;
    pv_segments++;
    *out = c;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int wake_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    if (info->uhdr_len != 1 || info->msg_len != 0)
        MPIDI_AMLAPI_fatal("malformed collective wake-up message from rank %d: %zu-byte "
                           "header, %zu data bytes", info->src, info->uhdr_len, info->msg_len);
    return 0;
}

/* This rank changed a word others may wait on: wakes those that went to sleep. */
static void wake(MPIR_Comm * comm, cs_comm_t * c)
{
    cs_hdr_t *h = c->hdr;
    /* against a waiter's "sleeping, then look again": one of the two sees the other */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int r = 0; r < comm->local_size; r++) {
        if (r == comm->rank || !__atomic_load_n(&h->sleeping[r], __ATOMIC_RELAXED) ||
            !__atomic_exchange_n(&h->sleeping[r], 0, __ATOMIC_ACQ_REL))
            continue;
        char b = 0;
        int rc = MPIDI_AMLAPI_ctl_send(MPIDI_AMLAPI_peer(comm, r), MPIDI_AMLAPI_H_WAKE, &b, 1);
        if (rc != AML_OK)
            MPIDI_AMLAPI_fatal("cannot wake rank %d of a collective: %s", r, aml_strerror(rc));
        pv_wakes++;
    }
}

/* The last arriver of a call: releases it and wakes the ranks that went to sleep on it. */
static void release(MPIR_Comm * comm, cs_comm_t * c, int err)
{
    cs_hdr_t *h = c->hdr;
    __atomic_store_n(&h->err, (uint32_t) err, __ATOMIC_RELAXED);
    __atomic_store_n(&h->arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->gen, c->gen + 1, __ATOMIC_RELEASE);
    wake(comm, c);
}

/* what a rank waits for (acquire loads) */
static int released(cs_comm_t * c, uint64_t unused)
{
    return __atomic_load_n(&c->hdr->gen, __ATOMIC_ACQUIRE) != c->gen;
}

/* bcast k's record is at c->bpos */
static int published(cs_comm_t * c, uint64_t k)
{
    cs_rec_t *r = (cs_rec_t *) (c->ring + c->bpos % c->ring_bytes);
    return __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) == k + 1;
}

/* every other rank is done with the ring bytes a record of end - c->bpos bytes at c->bpos
 * would overwrite */
static int ring_room(cs_comm_t * c, uint64_t end)
{
    for (int r = 0; r < c->comm->local_size; r++)
        if (r != c->comm->rank &&
            end - __atomic_load_n(&c->rpos[r].pos, __ATOMIC_ACQUIRE) > c->ring_bytes)
            return 0;
    return 1;
}

/* Until ready(c, k): progresses everything and idles as MPI_Wait does. */
static int wait_for(MPIR_Comm * comm, cs_comm_t * c, int (*ready) (cs_comm_t *, uint64_t),
                    uint64_t k)
{
    int mpi_errno = MPI_SUCCESS;
    uint32_t *sleeping = &c->hdr->sleeping[comm->rank];
    MPID_Progress_state st;

    if (ready(c, k))
        return MPI_SUCCESS;
    /* a new wait: its idle time starts now (no packet comes to end the last one) */
    (void) MPIDI_AMLAPI_idle_plan(1);
    MPID_Progress_start(&st);
    while (!ready(c, k)) {
        int plan;
        st.progress_made = 0;
        mpi_errno = MPID_Progress_test(&st);
        if (mpi_errno || ready(c, k))
            break;
        plan = MPIDI_AMLAPI_idle_plan(st.progress_made);
        if (plan == MPIDI_AMLAPI_IDLE_SLEEP) {
            __atomic_store_n(sleeping, 1, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (ready(c, k))
                break;
        }
        MPIDI_AMLAPI_idle(plan);
    }
    MPID_Progress_end(&st);
    /* a wake-up still on its way finds the flag clear or is a no-op */
    __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
    return mpi_errno;
}

/* Arrives at the current call; the last arriver runs last() then releases. */
static int arrive(MPIR_Comm * comm, cs_comm_t * c, int (*last) (cs_comm_t *, void *), void *arg)
{
    int mpi_errno = MPI_SUCCESS;
    uint32_t before = __atomic_fetch_add(&c->hdr->arrived, 1, __ATOMIC_ACQ_REL);
    if (before == (uint32_t) comm->local_size - 1) {
        int err = last ? last(c, arg) : MPI_SUCCESS;
        release(comm, c, err != MPI_SUCCESS);
        c->gen++;
    } else {
        mpi_errno = wait_for(comm, c, released, 0);
        MPIR_ERR_CHECK(mpi_errno);
        c->gen++;
    }
    MPIR_ERR_CHKANDJUMP(__atomic_load_n(&c->hdr->err, __ATOMIC_RELAXED), mpi_errno,
                        MPI_ERR_OTHER, "**coll_fail");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_shm_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno;
    cs_comm_t *c;

    mpi_errno = segment_of(comm, &c);
    if (mpi_errno || !c)
        return mpi_errno;
    *done = 1;
    pv_barriers++;
    return arrive(comm, c, NULL, NULL);
}

typedef struct {
    MPI_Aint count;
    MPI_Datatype dtype;
    MPI_Op op;
    size_t bytes;
    int n;
} red_t;

/* res = row 0 op (row 1 op (... row n-1)) for count elements at each row (stride apart): MPI's
 * order, so a non-commutative op is right and every rank gets the same bits */
static int reduce_in_order(const char *rows, size_t stride, int n, char *res, MPI_Aint count,
                           MPI_Aint size, MPI_Datatype dtype, MPI_Op op)
{
    memcpy(res, rows + (size_t) (n - 1) * stride, (size_t) (count * size));
    for (int i = n - 2; i >= 0; i--) {
        int mpi_errno = MPIR_Reduce_local(rows + (size_t) i * stride, res, count, dtype, op);
        if (mpi_errno)
            return mpi_errno;
    }
    return MPI_SUCCESS;
}

static int reduce_rows(cs_comm_t * c, void *arg)
{
    red_t *r = arg;
    return reduce_in_order(c->rows, c->row, r->n, c->result, r->count,
                           (MPI_Aint) r->bytes / r->count, r->dtype, r->op);
}

_Static_assert(MPIDI_AMLAPI_COLLSHM_REDUCE_CHUNK % 64 == 0, "allreduce rows of whole lines");

/* Large allreduce, in chunks of red_chunk bytes with one arrival per chunk. Before arrival k
 * (of this call) a rank copies its chunk k into its row of set k & 1 and reduces its slice
 * (1/n of the elements) of chunk k-1 -- rows of set (k-1) & 1, in rank order -- into that
 * set's result; after arrival k it copies chunk k-1 of the result out. Two sets suffice: the
 * rows of chunk k are next written for chunk k+2 by a rank past arrival k+1, which every rank
 * reached only after reducing chunk k; the result of chunk k is next written when chunk k+2 is
 * reduced, after arrival k+2, which every rank reached only after copying chunk k out. The
 * set parity follows the communicator's arrival count, so calls in a row continue the
 * alternation. The reduction is spread over all ranks, not left to the last to arrive, and
 * every element is still combined in rank order, so every rank gets the same bits. */
static int red_rows(MPIR_Comm * comm, cs_comm_t * c)
{
    c->red_chunk = MPIDI_AMLAPI_COLLSHM_REDUCE_CHUNK;
    return extra_segment(comm, 2 * ((size_t) comm->local_size + 1) * c->red_chunk, &c->red,
                         &c->red_state);
}

static int large_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                           MPI_Datatype datatype, MPI_Aint size, MPI_Op op, MPIR_Comm * comm,
                           int *done)
{
    int mpi_errno, red_errno = MPI_SUCCESS, n = comm->local_size, me = comm->rank;
    MPI_Aint per, nchunks;
    cs_comm_t *c;
    const char *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;

    if (!large(comm) || count < MPIDI_AMLAPI_COLLSHM_REDUCE_MIN / size)
        return MPI_SUCCESS;
    mpi_errno = segment_of(comm, &c);
    if (mpi_errno || !c)
        return mpi_errno;
    if (c->red_state == CS_COUNTING) {
        mpi_errno = red_rows(comm, c);
        if (mpi_errno)
            return mpi_errno;
    }
    if (c->red_state != CS_READY)
        return MPI_SUCCESS;
    *done = 1;
    pv_allreduces++;
    per = (MPI_Aint) c->red_chunk / size;       /* elements per chunk */
    nchunks = (count + per - 1) / per;
    for (MPI_Aint k = 0; k <= nchunks; k++) {
        uint32_t g = c->gen;
        if (k < nchunks) {
            pv_rchunks++;
            char *set = c->red + (size_t) (g & 1) * (size_t) (n + 1) * c->red_chunk;
            MPI_Aint cnt = MPL_MIN(per, count - k * per);
            memcpy(set + (size_t) me * c->red_chunk, src + (size_t) (k * per * size),
                   (size_t) (cnt * size));
        }
        if (k > 0 && red_errno == MPI_SUCCESS) {
            /* my slice of chunk k-1 */
            char *set = c->red + (size_t) ((g - 1) & 1) * (size_t) (n + 1) * c->red_chunk;
            char *res = set + (size_t) n * c->red_chunk;
            MPI_Aint cnt = MPL_MIN(per, count - (k - 1) * per);
            /* slices of whole lines where the element size allows: no line has two writers */
            MPI_Aint line = size < 64 && 64 % size == 0 ? 64 / size : 1;
            MPI_Aint slice = ((cnt + n - 1) / n + line - 1) / line * line;
            MPI_Aint lo = MPL_MIN(cnt, (MPI_Aint) me * slice), m = MPL_MIN(slice, cnt - lo);
            size_t at = (size_t) (lo * size);
            if (m > 0)
                red_errno = reduce_in_order(set + at, c->red_chunk, n, res + at, m, size,
                                            datatype, op);
        }
        mpi_errno = arrive(comm, c, NULL, NULL);
        if (mpi_errno)
            return mpi_errno;
        if (k > 0) {
            char *res = c->red + (size_t) ((g - 1) & 1) * (size_t) (n + 1) * c->red_chunk +
                (size_t) n * c->red_chunk;
            MPI_Aint cnt = MPL_MIN(per, count - (k - 1) * per);
            memcpy((char *) recvbuf + (size_t) ((k - 1) * per * size), res,
                   (size_t) (cnt * size));
        }
    }
    /* the op and datatype are the same at every rank, so every rank failed alike */
    return red_errno;
}

int MPIDI_AMLAPI_shm_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                               MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm,
                               MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno;
    MPI_Aint size, lb;
    cs_comm_t *c;
    red_t r;

    /* a predefined datatype (so every rank has the same one, whatever it builds) laid out
     * without gaps, and a predefined op */
    if (!HANDLE_IS_BUILTIN(op) || !MPIR_DATATYPE_IS_PREDEFINED(datatype) || count <= 0 ||
        !MPIDI_AMLAPI_coll_reducible(datatype, &size, &lb) || lb != 0)
        return MPI_SUCCESS;
    if (count > (MPI_Aint) MPIR_CVAR_AMLAPI_COLL_SHM_BYTES / size)
        return large_allreduce(sendbuf, recvbuf, count, datatype, size, op, comm, done);

    mpi_errno = segment_of(comm, &c);
    if (mpi_errno || !c)
        return mpi_errno;
    *done = 1;
    pv_allreduces++;
    r.count = count;
    r.dtype = datatype;
    r.op = op;
    r.bytes = (size_t) (count * size);
    r.n = comm->local_size;
    memcpy(c->rows + (size_t) comm->rank * c->row, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
           r.bytes);
    mpi_errno = arrive(comm, c, reduce_rows, &r);
    if (mpi_errno == MPI_SUCCESS)
        memcpy(recvbuf, c->result, r.bytes);
    return mpi_errno;
}

/* Bytes [off, off + bytes) of buf's data (count x dtype) to or from a ring record: contiguous
 * data directly, else packed/unpacked from that offset. */
static int bcast_copy(void *buf, MPI_Aint count, MPI_Datatype dtype, size_t off, char *slot,
                      size_t bytes, int to_slot)
{
    int contig;
    MPI_Aint lb, true_extent, done = 0;
    MPIR_Datatype_is_contig(dtype, &contig);
    if (contig) {
        MPIR_Type_get_true_extent_impl(dtype, &lb, &true_extent);
        if (to_slot)
            memcpy(slot, (char *) buf + lb + off, bytes);
        else
            memcpy((char *) buf + lb + off, slot, bytes);
        return MPI_SUCCESS;
    }
    if (to_slot)
        return MPIR_Typerep_pack(buf, count, dtype, (MPI_Aint) off, slot, (MPI_Aint) bytes,
                                 &done);
    return MPIR_Typerep_unpack(slot, (MPI_Aint) bytes, buf, count, dtype, (MPI_Aint) off, &done);
}

/* One ring record of a bcast: bytes [off, off + bytes) of the data, which the root writes and
 * every other rank copies out. */
static int bcast_record(MPIR_Comm * comm, cs_comm_t * c, int root, void *buffer,
                        MPI_Aint count, MPI_Datatype datatype, size_t off, size_t bytes)
{
    int mpi_errno;
    size_t rec = 64 + ((bytes + 63) & ~(size_t) 63);
    uint64_t k = c->bcasts++, at = c->bpos % c->ring_bytes;
    cs_rec_t *r;

    /* a record never wraps: one that does not fit before the ring's end goes to its start
     * (every rank skips alike) */
    if (at + rec > c->ring_bytes)
        c->bpos += c->ring_bytes - at;
    r = (cs_rec_t *) (c->ring + c->bpos % c->ring_bytes);
    if (comm->rank == root) {
        mpi_errno = wait_for(comm, c, ring_room, c->bpos + rec);
        MPIR_ERR_CHECK(mpi_errno);
        mpi_errno = bcast_copy(buffer, count, datatype, off, (char *) r + 64, bytes, 1);
        MPIR_ERR_CHECK(mpi_errno);
        r->len = bytes;
        __atomic_store_n(&r->seq, k + 1, __ATOMIC_RELEASE);
    } else {
        mpi_errno = wait_for(comm, c, published, k);
        MPIR_ERR_CHECK(mpi_errno);
        if (r->len != bytes)
            MPIDI_AMLAPI_fatal("MPI_Bcast record of %zu bytes from rank %d: the root's has "
                               "%llu (the type signatures differ)", bytes, root,
                               (unsigned long long) r->len);
        mpi_errno = bcast_copy(buffer, count, datatype, off, (char *) r + 64, bytes, 0);
        MPIR_ERR_CHECK(mpi_errno);
    }
    c->bpos += rec;
    __atomic_store_n(&c->rpos[comm->rank].pos, c->bpos, __ATOMIC_RELEASE);
    wake(comm, c);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_shm_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                           MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno;
    MPI_Aint size;
    size_t bytes, chunk;
    cs_comm_t *c;

    /* the byte count is the same at every rank (MPI: matching type signatures), whatever
     * datatype each passes */
    MPIR_Datatype_get_size_macro(datatype, size);
    if (count <= 0 || size <= 0)
        return MPI_SUCCESS;
    bytes = (size_t) count *(size_t) size;
    if (bytes > MPIDI_AMLAPI_COLLSHM_BCAST_BYTES && !large(comm))
        return MPI_SUCCESS;
    mpi_errno = segment_of(comm, &c);
    if (mpi_errno || !c)
        return mpi_errno;
    *done = 1;
    pv_bcasts++;
    /* a large one in chunks of a quarter of the ring: readers copy chunk i out while the root
     * writes chunk i + 1 */
    chunk = bytes <= MPIDI_AMLAPI_COLLSHM_BCAST_BYTES ? bytes : c->ring_bytes / 4 - 64;
    for (size_t off = 0; off < bytes && mpi_errno == MPI_SUCCESS; off += chunk) {
        if (chunk < bytes)
            pv_chunks++;
        mpi_errno = bcast_record(comm, c, root, buffer, count, datatype, off,
                                 MPL_MIN(chunk, bytes - off));
    }
    return mpi_errno;
}

/* The alltoall rows, at most CS_A2A_MAX bytes: a rank copies its whole send buffer into its
 * row of set (gen & 1), arrives, and copies block "its rank" of every row out. Two sets
 * because a rank copies out after the release, while a faster rank may already be in the
 * next alltoall: the one after that, which would reuse this set, cannot begin before every
 * rank arrived at a call in between, so every rank is done reading this one. */
#define CS_A2A_MAX ((size_t) 16 << 20)

/* Sized at the first alltoall that finds the segment ready (all ranks at the same call). */
static int a2a_rows(MPIR_Comm * comm, cs_comm_t * c)
{
    size_t n = (size_t) comm->local_size;
    size_t blk = MPIDI_AMLAPI_COLLSHM_ALLTOALL_BYTES;

    if (2 * n * n * blk > CS_A2A_MAX)
        blk = CS_A2A_MAX / (2 * n * n);
    c->a2a_blk = blk;
    c->a2a_row = (n * blk + 63) & ~(size_t) 63;
    return extra_segment(comm, blk ? 2 * n * c->a2a_row : 0, &c->a2a, &c->a2a_state);
}

/* The receive buffer's layout of the senders' blocks: straight (memcpy or read into
 * recvbuf + lb + j * stride) when the receive type holds exactly bytes contiguous bytes a
 * block, else through a packed block and MPIR_Localcopy (which also gives MPI_ERR_TRUNCATE
 * for a count that does not match the senders', as a message would). */
typedef struct {
    char *base;                 /* recvbuf + lb */
    MPI_Aint stride;            /* recvcount * extent */
    int straight;
} a2a_recv_t;

static void a2a_recv_layout(void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                            size_t bytes, a2a_recv_t * r)
{
    MPI_Aint rsize, extent, lb, true_extent;
    int contig;

    MPIR_Datatype_get_size_macro(recvtype, rsize);
    MPIR_Datatype_get_extent_macro(recvtype, extent);
    MPIR_Datatype_is_contig(recvtype, &contig);
    MPIR_Type_get_true_extent_impl(recvtype, &lb, &true_extent);
    r->base = (char *) recvbuf + lb;
    r->stride = recvcount * extent;
    r->straight = contig && (size_t) (recvcount * rsize) == bytes;
}

/* a packed block of bytes into block j of the receive buffer */
static int a2a_unpack(const char *from, size_t bytes, void *recvbuf, MPI_Aint recvcount,
                      MPI_Datatype recvtype, const a2a_recv_t * r, int j)
{
    MPI_Aint extent;
    if (r->straight) {
        memcpy(r->base + j * r->stride, from, bytes);
        return MPI_SUCCESS;
    }
    MPIR_Datatype_get_extent_macro(recvtype, extent);
    return MPIR_Localcopy(from, (MPI_Aint) bytes, MPI_BYTE,
                          (char *) recvbuf + j * recvcount * extent, recvcount, recvtype);
}

/* n blocks of bytes from sendbuf (sendtype's layout) packed into to */
static void a2a_pack(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype, int n,
                     size_t bytes, char *to)
{
    int mpi_errno = MPIR_Localcopy(sendbuf, sendcount * n, sendtype, to,
                                   (MPI_Aint) ((size_t) n * bytes), MPI_BYTE);
    MPIR_Assert(mpi_errno == MPI_SUCCESS);      /* packing into bytes that fit cannot fail */
}

static int a2a_by_rows(cs_comm_t * c, const void *sendbuf, MPI_Aint sendcount,
                       MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                       MPI_Datatype recvtype, size_t bytes)
{
    MPIR_Comm *comm = c->comm;
    int mpi_errno, n = comm->local_size, scontig;
    MPI_Aint lb, true_extent;
    char *set, *row;
    a2a_recv_t r;

    pv_alltoalls++;
    set = c->a2a + (size_t) (c->gen & 1) * (size_t) n * c->a2a_row;
    row = set + (size_t) comm->rank * c->a2a_row;
    MPIR_Datatype_is_contig(sendtype, &scontig);
    if (scontig) {
        MPIR_Type_get_true_extent_impl(sendtype, &lb, &true_extent);
        memcpy(row, (const char *) sendbuf + lb, (size_t) n * bytes);
    } else {
        a2a_pack(sendbuf, sendcount, sendtype, n, bytes, row);
    }
    mpi_errno = arrive(comm, c, NULL, NULL);
    if (mpi_errno)
        return mpi_errno;
    /* block j of the receive buffer: block "this rank" of rank j's row */
    a2a_recv_layout(recvbuf, recvcount, recvtype, bytes, &r);
    for (int j = 0; j < n; j++) {
        mpi_errno = a2a_unpack(set + (size_t) j * c->a2a_row + (size_t) comm->rank * bytes,
                               bytes, recvbuf, recvcount, recvtype, &r, j);
        if (mpi_errno)
            return mpi_errno;
    }
    return MPI_SUCCESS;
}

/* c->scratch of at least len bytes (kept: a large alltoall is usually one of many) */
static int scratch(cs_comm_t * c, size_t len)
{
    if (c->scratch_len >= len)
        return MPI_SUCCESS;
    MPL_free(c->scratch);
    c->scratch = MPL_malloc(len, MPL_MEM_COLL);
    c->scratch_len = c->scratch ? len : 0;
    return c->scratch ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* a2a_by_reads' waits: for some rank not read yet to publish call k, or for every other rank
 * to have read this rank's blocks */
typedef struct {
    cs_comm_t *c;
    uint64_t k;
    const char *read;           /* by rank: its block was read */
} a2a_wait_t;

static int a2a_someone(cs_comm_t * c, uint64_t arg)
{
    const a2a_wait_t *w = (const a2a_wait_t *) (uintptr_t) arg;
    for (int j = 0; j < c->comm->local_size; j++)
        if (!w->read[j] && __atomic_load_n(&c->rpos[j].a2a_seq, __ATOMIC_ACQUIRE) == w->k + 1)
            return 1;
    return 0;
}

static int a2a_all_read(cs_comm_t * c, uint64_t target)
{
    return __atomic_load_n(&c->rpos[c->comm->rank].a2a_done, __ATOMIC_ACQUIRE) == target;
}

/* Single copy, no arrival: every rank publishes where its send blocks are (its own buffer
 * when the send type is contiguous, else a packed copy; a packed copy in place too, since the
 * receive buffer is then overwritten while others read) with the call's number, reads block
 * "this rank" of every rank that has published this call straight into its receive buffer
 * (aml_peer_read: process_vm_readv), in whatever order they come, adding 1 to the done
 * count of each, and returns once its own count says every other rank read its blocks, so
 * no rank reuses a send buffer another may still read; published addresses change only
 * after that. A rank waits only for the ranks it needs, not for all at two arrivals: on an
 * oversubscribed node a rank that runs reads from those that ran before it. An error (a
 * receive count that does not fit) is kept until the end, which every rank must reach. */
static int a2a_by_reads(cs_comm_t * c, const void *sendbuf, MPI_Aint sendcount,
                        MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                        MPI_Datatype recvtype, int in_place, size_t bytes)
{
    MPIR_Comm *comm = c->comm;
    int mpi_errno = MPI_SUCCESS, err = MPI_SUCCESS, n = comm->local_size, me = comm->rank;
    int scontig, left = n - 1;
    MPI_Aint lb, true_extent, extent;
    const char *src;
    size_t stride;
    char *block, *read;
    a2a_recv_t r;
    a2a_wait_t w;
    cs_rpos_t *mine = &c->rpos[me];

    pv_a2a_reads++;
    a2a_recv_layout(recvbuf, recvcount, recvtype, bytes, &r);
    MPIR_Datatype_is_contig(sendtype, &scontig);
    /* room for the packed send blocks, a packed block being received and the read flags;
     * without it this rank cannot take part, and the others would wait for it forever */
    if (scratch(c, ((!scontig || in_place) ? (size_t) n * bytes : 0) +
                (r.straight ? 0 : bytes) + (size_t) n) != MPI_SUCCESS)
        MPIDI_AMLAPI_fatal("out of memory for an MPI_Alltoall of %zu-byte blocks", bytes);
    if (scontig && !in_place) {
        MPIR_Type_get_true_extent_impl(sendtype, &lb, &true_extent);
        MPIR_Datatype_get_extent_macro(sendtype, extent);
        src = (const char *) sendbuf + lb;
        stride = (size_t) (sendcount * extent);
        block = c->scratch;
    } else {
        a2a_pack(sendbuf, sendcount, sendtype, n, bytes, c->scratch);
        src = c->scratch;
        stride = bytes;
        block = c->scratch + (size_t) n * bytes;
    }
    read = block + (r.straight ? 0 : bytes);
    memset(read, 0, (size_t) n);
    read[me] = 1;
    err = a2a_unpack(src + (size_t) me * stride, bytes, recvbuf, recvcount, recvtype, &r, me);
    w.c = c;
    w.k = c->a2a_calls++;
    w.read = read;
    mine->a2a_src = (uint64_t) (uintptr_t) src;
    mine->a2a_stride = stride;
    __atomic_store_n(&mine->a2a_seq, w.k + 1, __ATOMIC_RELEASE);
    wake(comm, c);
    while (left) {
        int got = 0;
        for (int i = 1; i < n; i++) {
            int j = (me + i) % n;       /* each rank starts with a different sender */
            cs_rpos_t *from = &c->rpos[j];
            if (read[j] || __atomic_load_n(&from->a2a_seq, __ATOMIC_ACQUIRE) != w.k + 1)
                continue;
            char *to = r.straight ? r.base + j * r.stride : block;
            int rc = aml_peer_read(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_peer(comm, j), to,
                                   from->a2a_src + (uint64_t) me * from->a2a_stride, bytes);
            /* probed at the communicator's first such call: nothing else refuses it */
            MPIR_Assert(rc == AML_OK);
            if (!r.straight && err == MPI_SUCCESS)
                err = a2a_unpack(block, bytes, recvbuf, recvcount, recvtype, &r, j);
            __atomic_fetch_add(&from->a2a_done, 1, __ATOMIC_ACQ_REL);
            read[j] = 1;
            left--;
            got++;
        }
        if (got)
            wake(comm, c);      /* a sender may sleep on its done count */
        else if ((mpi_errno = wait_for(comm, c, a2a_someone, (uint64_t) (uintptr_t) & w)))
            goto fn_fail;
    }
    mpi_errno = wait_for(comm, c, a2a_all_read, (uint64_t) (n - 1) * c->a2a_calls);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = err;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* whether aml reads every other rank's memory by single copy: the node allows it for all
 * its pairs or none, and every rank here is on this node, so every rank finds the same */
static int a2a_copy_ok(MPIR_Comm * comm)
{
    int other = comm->rank == 0 ? 1 : 0;
    return aml_peer_read(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_peer(comm, other), NULL, 0,
                         0) == AML_OK;
}

int MPIDI_AMLAPI_shm_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done)
{
    int mpi_errno, in_place = sendbuf == MPI_IN_PLACE, rows;
    MPI_Aint size;
    size_t bytes;
    cs_comm_t *c;

    if (in_place) {
        sendbuf = recvbuf;
        sendcount = recvcount;
        sendtype = recvtype;
    }
    /* a block's byte count is the same at every rank (matching type signatures), and so is
     * every choice below */
    MPIR_Datatype_get_size_macro(sendtype, size);
    if (sendcount <= 0 || size <= 0)
        return MPI_SUCCESS;
    rows = sendcount <= MPIDI_AMLAPI_COLLSHM_ALLTOALL_BYTES / size;
    if (!rows && (!large(comm) ||
                  sendcount < (MPIDI_AMLAPI_COLLSHM_ALLTOALL_COPY + size - 1) / size))
        return MPI_SUCCESS;
    bytes = (size_t) (sendcount * size);
    mpi_errno = segment_of(comm, &c);
    if (mpi_errno || !c)
        return mpi_errno;
    if (!rows) {
        if (c->a2a_copy == 0)
            c->a2a_copy = a2a_copy_ok(comm) ? 1 : -1;
        if (c->a2a_copy < 0)
            return MPI_SUCCESS;
        *done = 1;
        return a2a_by_reads(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                            in_place, bytes);
    }
    if (c->a2a_state == CS_COUNTING) {
        mpi_errno = a2a_rows(comm, c);
        if (mpi_errno)
            return mpi_errno;
    }
    if (c->a2a_state != CS_READY || bytes > c->a2a_blk)
        return MPI_SUCCESS;
    *done = 1;
    return a2a_by_rows(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, bytes);
}

int MPIDI_AMLAPI_coll_shm_init(void)
{
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_barriers", &pv_barriers,
                              "MPI_Barrier calls done in a communicator's shared-memory segment");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_allreduces", &pv_allreduces,
                              "MPI_Allreduce calls done in a communicator's shared-memory "
                              "segment");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_bcasts", &pv_bcasts,
                              "MPI_Bcast calls done in a communicator's shared-memory segment");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_bcast_chunks", &pv_chunks,
                              "chunks of large MPI_Bcast calls pipelined through a "
                              "communicator's shared-memory ring");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_reduce_chunks", &pv_rchunks,
                              "chunks of large MPI_Allreduce calls reduced in a "
                              "communicator's shared memory");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_alltoalls", &pv_alltoalls,
                              "MPI_Alltoall calls done in a communicator's shared-memory "
                              "segment");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_alltoall_reads", &pv_a2a_reads,
                              "MPI_Alltoall calls done by single copy from the other ranks' "
                              "send buffers");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_wakes", &pv_wakes,
                              "wake-up messages this rank sent to ranks asleep in a "
                              "shared-memory barrier or allreduce");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coll_shm_segments", &pv_segments,
                              "communicators that got a shared-memory collective segment");
    return MPIDI_AMLAPI_ctl_register(MPIDI_AMLAPI_H_WAKE, wake_handler);
}

static void cs_free(cs_comm_t * c)
{
    if (c->a2a)
        MPIDU_shm_free(c->a2a);
    if (c->red)
        MPIDU_shm_free(c->red);
    if (c->hdr)
        MPIDU_shm_free(c->hdr);
    MPL_free(c->scratch);
    MPL_free(c);
}

void MPIDI_AMLAPI_coll_shm_comm_free(MPIR_Comm * comm)
{
    cs_comm_t *c;
    HASH_FIND_PTR(cs_comms, &comm, c);
    if (!c)
        return;
    HASH_DEL(cs_comms, c);
    cs_free(c);
}

void MPIDI_AMLAPI_coll_shm_finalize(void)
{
    cs_comm_t *c, *tmp;
    HASH_ITER(hh, cs_comms, c, tmp) {
        HASH_DEL(cs_comms, c);
        cs_free(c);
    }
}
