/* coll_torus: topology-aware collectives as schedule generators.
 *
 * The core (this header and every ct_*.c but ct_mpi.c) includes no MPI or MPICH header. An
 * algorithm is a pure function from (topology, my rank, root, count, element size, chunk size)
 * to a per-rank *schedule*: a list of send / receive / reduce / copy steps on element ranges
 * of three buffers, each step listing the earlier steps it depends on. An executor (the
 * plain-MPI one in ct_mpi.c, or a netmod) walks the schedule with its own point-to-point. */
#ifndef COLL_TORUS_H
#define COLL_TORUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CT_MAXDIMS 4            /* x, y, z and t (the rank's index on its node) */

/* ---- errors ------------------------------------------------------------------------------ */
enum {
    CT_OK = 0,
    CT_ERR_INVALID = 1,         /* bad input: the message says what */
    CT_ERR_NOT_APPLICABLE = 2,  /* the algorithm does not apply here: the caller falls back */
    CT_ERR_NOMEM = 3,
};
/* the message of the last error in this thread (file:line for parsed files) */
const char *ct_strerror(void);

/* ---- topology (ct_topo.c) ---------------------------------------------------------------- */
typedef struct ct_topo {
    int dims[CT_MAXDIMS];       /* extents of x, y, z, t; an unused dimension has extent 1 */
    int wrap[CT_MAXDIMS];       /* 1: torus (ring) in that dimension, 0: mesh; t never wraps */
    int nranks;                 /* = dims[0]*dims[1]*dims[2]*dims[3] (a bijection) */
    int (*coords)[CT_MAXDIMS];  /* coords[rank] */
    int *rank_at;               /* rank_at[linear index, x fastest, t slowest] */
    int xyzt_order;             /* rank r sits at linear index r (the default XYZT order) */
    int lex_order[CT_MAXDIMS];  /* when ranks are in lexicographic order of the coordinates
                                 * taken in some dimension order (XYZT, or TXYZ for ranks
                                 * placed node by node): that order, fastest first; else
                                 * lex_order[0] = -1 */
} ct_topo;

/* Shape strings: 1 to 3 extents joined by 'x', each followed by 'm' for a mesh dimension
 * (torus otherwise), and optionally a last "xNt" for N ranks per node: "8x8x8" (torus),
 * "4mx4x4" (x a mesh), "8x8", "4x4x4x2t". */
int ct_shape_parse(const char *s, int dims[CT_MAXDIMS], int wrap[CT_MAXDIMS]);
/* "8x8x8", "4mx4x4x2t": the inverse of ct_shape_parse (buf of at least 64 bytes) */
void ct_shape_format(const int dims[CT_MAXDIMS], const int wrap[CT_MAXDIMS], char *buf, size_t len);

/* The default: XYZT order over dims like MPI_Dims_create (as cubic as possible, largest
 * first) of the node count. node_of_rank (may be NULL: one rank per node) gives each rank's
 * node id 0..nnodes-1; t is the rank's index among its node's ranks, and every node must hold
 * the same number of ranks. shape (may be NULL) fixes the dims instead; its node count must
 * match. */
int ct_topo_default(ct_topo *t, int nranks, const int *node_of_rank, const char *shape);
/* A mapping file: one line per rank, in rank order, "x y z [t]"; '#' starts a comment, blank
 * lines are skipped. Without shape, the extents are the largest coordinates + 1 (torus in
 * every dimension). The file must be a bijection onto the shape: errors name file:line. */
int ct_topo_from_file(ct_topo *t, const char *path, int nranks, const char *shape);
/* The same from an open stream, path naming it in errors (the caller closes it). */
int ct_topo_from_stream(ct_topo *t, FILE *f, const char *path, int nranks, const char *shape);
/* The topology induced on a sub-communicator: members[i] is the parent rank of member i.
 * CT_OK when the members' nodes form a sub-box (a full torus dimension keeps its wrap, a
 * partial one becomes a mesh) holding the same number of members each; else
 * CT_ERR_NOT_APPLICABLE. */
int ct_topo_sub(ct_topo *sub, const ct_topo *parent, const int *members, int nmembers);
void ct_topo_free(ct_topo *t);
int ct_topo_rank(const ct_topo *t, const int c[CT_MAXDIMS]);
int ct_topo_nnodes(const ct_topo *t);

/* ---- schedules (ct_sched.c) -------------------------------------------------------------- */
enum { CT_SEND = 1, CT_RECV, CT_REDUCE_LEFT, CT_REDUCE_RIGHT, CT_COPY };
/* buffers a schedule names: the user's send and receive buffers, and scratch */
enum { CT_BUF_SEND = 0, CT_BUF_RECV = 1, CT_BUF_TMP = 2, CT_NBUFS = 3 };

typedef struct ct_step {
    uint8_t op;
    uint8_t buf;                /* SEND/RECV: the buffer sent from / received into;
                                 * REDUCE/COPY: the destination */
    uint8_t sbuf;               /* REDUCE/COPY: the source buffer */
    int32_t peer;               /* SEND/RECV: the peer's rank */
    int64_t off, len;           /* range of buf, in elements */
    int64_t soff;               /* REDUCE/COPY: source offset (len elements) */
    int32_t dep0, ndeps;        /* deps[dep0 .. dep0+ndeps) of the schedule: steps that must
                                 * complete before this one starts */
    int32_t prev_same_peer;     /* SEND (RECV): the previous send to (receive from) the same
                                 * peer on the same channel, or -1. Messages between two ranks
                                 * on one channel match in order: an executor posts a send or
                                 * receive only after that one was posted, and tags messages
                                 * with the channel */
    int32_t chan;               /* SEND/RECV: 0 .. CT_MAXCHAN-1; independent streams of one
                                 * collective (bcast colours, allreduce parts) use their own
                                 * channels so one cannot hold back another's posting */
} ct_step;
#define CT_MAXCHAN 8
/* REDUCE_LEFT:  dst = src (op) dst   (MPI_Reduce_local(src, dst))
 * REDUCE_RIGHT: dst = dst (op) src   (src is scratch and may be overwritten: an executor can
 *               do MPI_Reduce_local(dst, src) then copy src to dst)
 * COPY:         dst = src            (a no-op when source and destination are the same memory,
 *               as with MPI_IN_PLACE) */

typedef struct ct_sched {
    int rank, nranks;
    size_t elem_size;
    int64_t tmp_elems;          /* scratch the executor must provide, in elements */
    int nsteps, cap;
    ct_step *steps;
    int ndeps, depcap;
    int32_t *deps;
    /* builder state: hazard tracking per buffer, last send/recv per peer */
    void *priv;
} ct_sched;

void ct_sched_free(ct_sched *s);
/* one line per step, for debugging */
void ct_sched_print(const ct_sched *s, void *FILE_ptr);

/* ---- walking a schedule (ct_walk.c) ----------------------------------------------------- */
/* Which steps of a schedule may start now. Every executor (ct_mpi.c over MPI point-to-point,
 * the amlapi netmod's over MPICH's) drives one, so the dependency rules live in one place:
 * a step starts once the steps it depends on are done and, for a message, once the previous
 * message with the same peer and channel was posted (so messages match in order). */
typedef struct ct_walk {
    const ct_sched *s;
    int *waiting;               /* per step: what it still waits for */
    int *dstart, *dlist;        /* the steps depending on step i: dlist[dstart[i] .. dstart[i+1]) */
    int *next_same;             /* the next message with the same peer and channel, or -1 */
    int *ready, nready;         /* steps that may start, not yet handed out */
    int ndone;
} ct_walk;
int ct_walk_init(ct_walk *w, const ct_sched *s);        /* CT_OK or CT_ERR_NOMEM */
/* a step that may start now, or -1 (then wait for a posted message to complete) */
static inline int ct_walk_next(ct_walk *w)
{
    return w->nready ? w->ready[--w->nready] : -1;
}
/* message step i was posted: the next one with its peer and channel may start */
void ct_walk_posted(ct_walk *w, int i);
/* step i completed: the steps depending on it may start */
void ct_walk_done(ct_walk *w, int i);
static inline int ct_walk_finished(const ct_walk *w)
{
    return w->ndone == w->s->nsteps;
}
void ct_walk_free(ct_walk *w);

/* ---- algorithms (ct_bcast.c, ct_allreduce.c, ct_allgather.c, ct_alltoall.c, ct_barrier.c) - */
typedef struct ct_params {
    int64_t chunk_elems;        /* bcast pipelining chunk; 0: chosen by the model */
    int commutative;            /* reductions: 0 keeps MPI's rank order (needs XYZT order) */
    int window;                 /* alltoall: rounds of shifts in flight; 0: default */
} ct_params;

/* Each returns CT_OK with *s filled, CT_ERR_NOT_APPLICABLE where the algorithm does not apply
 * (the caller falls back), or CT_ERR_INVALID. Buffers: bcast uses RECV (the user's buffer on
 * every rank); the others read SEND and write RECV. */
int ct_bcast_trees(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                   size_t elem_size, const ct_params *p);
int ct_bcast_dimtree(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                     size_t elem_size, const ct_params *p);
int ct_allreduce_rsag(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                      const ct_params *p);
int ct_allreduce_lines(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                       const ct_params *p);
int ct_reduce_rsg(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                  size_t elem_size, const ct_params *p);
int ct_allgatherv(ct_sched *s, const ct_topo *t, int me, const int64_t *counts,
                  const int64_t *displs, size_t elem_size, const ct_params *p);
int ct_allgather(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                 const ct_params *p);
int ct_alltoall_shift(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                      const ct_params *p);
int ct_alltoall_dims(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                     const ct_params *p);
int ct_barrier_lines(ct_sched *s, const ct_topo *t, int me, const ct_params *p);

/* The choice an executor makes: the best applicable schedule for a collective, or
 * CT_ERR_NOT_APPLICABLE (fall back). Ranges are documented in ct_select.c. */
enum { CT_COLL_BCAST, CT_COLL_ALLREDUCE, CT_COLL_REDUCE, CT_COLL_ALLGATHER, CT_COLL_ALLTOALL,
       CT_COLL_BARRIER };
int ct_select(ct_sched *s, int coll, const ct_topo *t, int me, int root, int64_t count,
              size_t elem_size, const ct_params *p);

/* ---- link-load model (ct_model.c) -------------------------------------------------------- */
typedef struct ct_model {
    double link_bw;             /* bytes/s per link direction; 175e6 */
    double hop_lat;             /* s per hop; 100e-9 */
    double msg_overhead;        /* s per message at each end; 0 in the plain SimGrid model */
} ct_model;
void ct_model_default(ct_model *m);
/* The directed links of a route under dimension-order routing (x, then y, then z; shortest way
 * round a ring; a tie at half the ring goes up, except from the middle position, as SimGrid's
 * torus does). Link id = (node * 3 + dim) * 2 + (dir < 0). Returns the hop count; ids may be
 * NULL. Ranks on one node: 0 hops. */
int ct_route(const ct_topo *t, int src_rank, int dst_rank, int *ids);
typedef struct ct_load {
    int nlinks;
    double *bytes;              /* bytes[link id] */
    double max_bytes;
    double link_bound;          /* max_bytes / link_bw */
    double critical_path;       /* contention-free time along the dependencies */
    double estimate;            /* max(link_bound, critical_path) */
    int64_t messages;
} ct_load;
/* scheds[r] is rank r's schedule */
int ct_model_load(const ct_model *m, const ct_topo *t, ct_sched *const *scheds, ct_load *out);
void ct_load_free(ct_load *l);

/* Runs every rank's schedule together, as an executor would: a step starts once its
 * dependencies are complete and (messages) the previous message to or from the same peer was
 * posted; a reduce or copy completes at once; a send completes only when the matching
 * receive is posted too (no buffering is assumed, the strictest case). The k-th send from a
 * to b on a channel matches the k-th receive at b from a on that channel. exec (may be NULL) is called as each step
 * completes, once per matched pair (with both); times use the model m (may be NULL).
 * CT_ERR_INVALID names a message without a match or of a different length, or a deadlock
 * (steps that can never start). finish (may be NULL) gets the time each rank ends. */
typedef void ct_exec_fn(void *ctx, int rank, const ct_step *st, int prank, const ct_step *pst);
int ct_engine_run(const ct_topo *t, ct_sched *const *scheds, const ct_model *m, ct_exec_fn *exec,
                  void *ctx, double *finish);

#endif
