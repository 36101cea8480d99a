/* MPS internals: library state, channels, pools, and the back-end operations table. */
#ifndef MPS_IMPL_H_INCLUDED
#define MPS_IMPL_H_INCLUDED

#include "mps.h"
#include "topo.h"

#include <stddef.h>

/* who owns a pool buffer (the poster: "at any given time, buffer must belong to application
 * OR I/O") */
enum mps_buf_state {
    MPS_BUF_FREE,       /* I/O, send pool: available to MPS_Buf_get */
    MPS_BUF_INFLIGHT,   /* I/O: a send (MPS_Buf_send) or a pre-posted receive in progress */
    MPS_BUF_READY,      /* I/O, receive pool: data arrived, not yet handed out */
    MPS_BUF_APP,        /* the application */
};

struct mps_buf {
    enum mps_buf_state state;
    MPI_Request req;
    long seq;           /* receive pool: posting order = message order (MPI non-overtaking) */
    int bytes, tag;     /* receive pool: of the message that filled it */
};

struct mps_nat_chan;

typedef struct mps_channel {
    int link;           /* index in the topology */
    int lrank, rrank;
    MPS_pool_t rcv_pool;    /* the receive pool that takes this channel's messages, if any */
    struct mps_nat_chan *nat;   /* native back end: the channel's shared arena (NULL: EMPS) */
} mps_channel;

/* native receive pool: a buffer of the other end's send pool lent to this pool (zero copy) */
struct mps_loan {
    int held;           /* the application holds it */
    unsigned long long off;     /* in the other end's arena */
    unsigned len;               /* its stride */
    int bytes, tag;
    int lost;           /* RMA path: bytes of a message larger than the buffer, not read */
};

#define MPS_POOL_MAGIC 0x4d50534cu

struct MPS_pool {
    unsigned magic;
    struct MPS_pool *next;      /* registry of live pools: handles are checked against it */
    MPI_Comm comm;
    mps_channel *chan;
    int way, peer;
    int bufsize, bufcount;
    size_t stride;
    char *mem;
    struct mps_buf *bufs;
    long next_seq;
    /* native back end (NULL/0 under EMPS) */
    struct mps_nat_chan *nat;   /* the channel's arena, kept when the communicator is freed */
    int in_arena;               /* send pool: buffers in the arena (hand-off possible) */
    struct mps_loan *loans;     /* receive pool: bufcount slots for lent buffers */
    char *dep;                  /* receive pool, RMA path: the buffers it reads hand-offs into */
    long long handoffs, copied; /* MPS_Pool_counters */
};

/* What a back end provides. EMPS (emps.c) implements it with standard MPI calls only; a
 * native back end would put pool memory where its transports reach it without copies and
 * move data by its own means. Functions return MPS_* codes and set the detail on failure. */
typedef struct mps_backend {
    const char *name;
    /* before the communicator exists: can the link's medium be provided between its ends? */
    int (*medium_check)(const mps_topo *t, const mps_topo_link *l);
    /* after it exists (collective over the two ends): check what only the ends can see */
    int (*channel_check)(const mps_topo *t, const mps_topo_link *l, MPI_Comm comm);
    int (*mem_alloc)(MPS_pool_t p, size_t bytes, void **mem);
    void (*mem_free)(MPS_pool_t p, void *mem);
    int (*post_recv)(MPS_pool_t p, int i);
    int (*start_send)(MPS_pool_t p, int i, int bytes, int tag);
    /* *done = 1 when buffer i's transfer completed (then bytes/tag are set for receives) */
    int (*test)(MPS_pool_t p, int i, int *done);
    /* stop buffer i's pre-posted receive; *cancelled = 0 if a message had already landed */
    int (*cancel_recv)(MPS_pool_t p, int i, int *cancelled);
} mps_backend;

extern const mps_backend mps_emps_backend;
extern const mps_backend mps_native_backend;

/* Layers, lowest first (a file calls only those below it): topo.c, error.c, relax.c; emps.c;
 * native.c; state.c; pool.c; channel.c, wait.c. */

/* ---- error.c: sets this thread's detail and returns code ---- */
int mps_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mps_mpi_error(const char *call, int mpi_rc);
/* ---- relax.c: let other processes on the same cores run while polling ---- */
void mps_relax(void);

/* ---- state.c: library state, loaded on the first call after MPI_Init ---- */
typedef struct mps_state {
    mps_topo topo;
    int rank, size;
    const mps_backend *be;
    int comm_keyval;
    MPS_pool_t pools;
    /* at MPI_Finalize, before the arenas: frees the pools the application left (pool.c sets
     * it with its first pool; the state is below the pools and calls them only so) */
    void (*free_pools)(struct mps_state *s);
} mps_state;

/* NULL on failure (then the code is in *rc and the detail set) */
mps_state *mps_get_state(int *rc);
mps_channel *mps_channel_of(mps_state *s, MPI_Comm comm);

/* ---- pool.c ---- */
/* one step of every pool's progress (back end's test) for this pool */
int mps_pool_progress(MPS_pool_t p);
/* the receive pool has a message ready for MPS_Buf_get */
int mps_pool_has_data(MPS_pool_t p);

/* ---- native back end (native.c): channels between processes of one node share an arena
 * (an MPI-3 shared-memory window: on amlapi, memory in the node's shared segment) ---- */
/* is the MPI library amlapi (and is the native back end wanted: MPS_BACKEND) */
int mps_native_wanted(void);
/* collective over the channel's two ends: makes ch->nat, or leaves it NULL (messages) */
int mps_nat_chan_open(mps_state *s, mps_channel *ch, const mps_topo_link *l, MPI_Comm comm);
/* why the last mps_nat_chan_open made no arena on this end ("" if it did, or the other end
 * refused) */
const char *mps_nat_refusal(void);
/* arena buffers start on pages of their own (the guard protects pages) */
size_t mps_nat_page(void);
/* at MPI_Finalize: every arena, in an order both ends agree on */
void mps_nat_free_all(void);
int mps_nat_arena_alloc(struct mps_nat_chan *nc, size_t bytes, int nbufs, void **mem);
void mps_nat_arena_free(struct mps_nat_chan *nc, void *mem);
/* send pool, buffer i: lend it to the other end's receive pool; *done = 0 when that end has
 * no receive pool taking hand-offs (the caller sends by message then) */
int mps_nat_handoff(MPS_pool_t p, int i, int bytes, int tag, int *done);
/* the channel uses the RMA path (ends on different nodes, or MPS_RMA=1) */
int mps_nat_remote(const struct mps_nat_chan *nc);
/* a pool send of this channel went by message / a receive pool handed one out (order, see
 * native.c) */
void mps_nat_msg_sent(struct mps_nat_chan *nc);
void mps_nat_msg_taken(struct mps_nat_chan *nc);
/* send pools: buffers the other end gave back become free */
void mps_nat_progress_returns(mps_state *s, struct mps_nat_chan *nc);
/* receive pool: attach (hand-offs come to it) / detach (MPS_ERR_BUSY if some are not taken) */
int mps_nat_attach(MPS_pool_t p);
int mps_nat_detach(MPS_pool_t p);
/* receive pool: hand-offs waiting */
int mps_nat_pending(MPS_pool_t p);
/* receive pool: take the next hand-off; returns its loan slot */
int mps_nat_take(MPS_pool_t p);
/* receive pool: give loan slot k back to its send pool */
void mps_nat_giveback(MPS_pool_t p, int k);
void *mps_nat_loan_ptr(MPS_pool_t p, int k);
/* receive pool: is `a` inside the other end's arena (a lent buffer of this pool's channel) */
int mps_nat_in_peer(MPS_pool_t p, const void *a);

#endif
