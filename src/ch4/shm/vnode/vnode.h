/*
 * vnode -- the virtual-node shared-memory packet layer (Almási et al. 2005: "virtual node
 * mode"): the on-node half of aml's transports. No MPICH and no aml header: it moves opaque
 * packets between the ranks of one node and copies bytes between their address spaces.
 *
 * - One segment per node and job, an anonymous memfd that local rank 0 creates and hands to
 *   every local rank over a unix socket whose name is a random key the embedder passes on
 *   and whose ends check each other's uid: nothing in /dev/shm, nothing anyone outside the
 *   job can open, nothing a crash at any moment leaves behind.
 * - One single-producer/single-consumer ring per ordered pair of local ranks, in 16-byte
 *   units; a packet takes vnode_rec_units(hlen + len) consecutive units (a 4-byte header up
 *   to 252 bytes, else 16), so two small MPI messages share the cache line handed from
 *   sender to receiver. The receiver never scans all
 *   N-1 rings: it polls a few recently active peers directly and the rest through a
 *   per-receiver summary bitmap that senders set (vnode_ring.c says how the two meet).
 * - Doorbells: a receiver about to sleep says so in the segment; a sender that sees it adds
 *   1 to the receiver's eventfd (handed out with the segment), which the receiver sleeps on
 *   (with UCX's, in one epoll set).
 * - Single copy: process_vm_readv / process_vm_writev between local ranks, allowed or not
 *   for the whole node (probed at attach); without it large messages go as packets.
 *
 * Threading: one thread at a time per vnode_t (aml's rule).
 */
#ifndef VNODE_H_INCLUDED
#define VNODE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

typedef struct vnode vnode_t;

/* return codes */
#define VNODE_OK            0
#define VNODE_AGAIN         1   /* vnode_send: no room in the ring now, nothing written;
                                 * vnode_arm: packets are pending, do not sleep */
#define VNODE_ERR_INVAL    -1   /* bad argument or configuration */
#define VNODE_ERR_NOSPACE  -2   /* the node has no memory for the segment */
#define VNODE_ERR_SYS      -3   /* a system call failed */
#define VNODE_ERR_MALFORMED -4  /* a bad record arrived: fatal, the message names the peer */
#define VNODE_ERR_NOTSUP   -5   /* single copy is not allowed on this node */
#define VNODE_ERR_TIMEOUT  -6   /* local ranks did not attach in time */
/* Every error leaves a message (what failed, the numbers, the peer) in vnode_error(). */

typedef struct vnode_config {
    int nlocal;                 /* ranks on this node (in this segment), 1..VNODE_MAX_LOCAL */
    int local;                  /* this rank's index among them, 0..nlocal-1 */
    size_t ring_bytes;          /* bytes of units per ordered pair: rounded up to a power of
                                 * two, at least 4 * the largest packet; 0 (the default):
                                 * vnode_auto_ring(nlocal) */
    size_t max_pkt;             /* largest hlen + len of a packet */
    int direct;                 /* peers a receiver polls directly, 0..VNODE_MAX_DIRECT; the
                                 * others reach it through its summary bitmap */
    uint64_t shm_free;          /* 0: the memory the node has available (MemAvailable); else
                                 * this many bytes (tests force too little with it) */
    int attach_timeout_ms;      /* vnode_attach waits this long for the other local ranks
                                 * (0: 60000) */
    size_t share_min;           /* vnode_copy_shared shares copies of at least this many
                                 * bytes with the exporter (0: never); default 65536 */
    int fence_always;           /* 1: a full fence after every packet, as if no peer could
                                 * use membarrier (vnode_bell.c); default 0 */
} vnode_config_t;

#define VNODE_MAX_LOCAL  1024
#define VNODE_MAX_DIRECT 16
#define VNODE_CELL       64     /* a cache line: the segment's blocks are aligned to it */
#define VNODE_UNIT       16     /* ring granularity: a packet's record takes whole units */
#define VNODE_SHORT_HDR  4      /* header of a short record: hlen + len <= VNODE_SHORT_MAX */
#define VNODE_SHORT_MAX  252
#define VNODE_LONG_HDR   16     /* header of a long record: the data stays 16-byte aligned */

/* Units of the ring a packet of hlen + len = body bytes takes (vnode_ring.c): two packets of
 * up to 28 bytes (an 8-byte MPI message) share a cache line. */
static inline uint64_t vnode_rec_units(size_t body)
{
    size_t hdr = body <= VNODE_SHORT_MAX ? VNODE_SHORT_HDR : VNODE_LONG_HDR;
    return (hdr + body + VNODE_UNIT - 1) / VNODE_UNIT;
}

void vnode_config_default(vnode_config_t * cfg);
/* The segment's size for cfg (the memory it takes). */
size_t vnode_segment_bytes(const vnode_config_t * cfg);
/* The memory the node can give a shared segment: MemAvailable, within this process's cgroup
 * v2 memory limit (UINT64_MAX when neither is known). */
uint64_t vnode_mem_available(void);
/* The default ring size for nlocal ranks (ring_bytes = 0) */
size_t vnode_auto_ring(int nlocal);

/* Setup, in two steps with the embedder's exchange (a barrier) between them:
 * vnode_init: local rank 0 checks the node's available memory (VNODE_ERR_NOSPACE names the
 * bytes needed and available), creates the segment, reserves its memory (fallocate, so too
 * little is an error here and never a SIGBUS later), initializes it, makes every rank's
 * doorbell and listens for the other local ranks under a random key (vnode_key). On failure
 * *out is NULL and err (if given) holds the message. */
int vnode_init(const vnode_config_t * cfg, vnode_t ** out, char *err, size_t errlen);
/* Local rank 0's key, which the embedder's exchange carries to the other local ranks (never
 * 0 there when nlocal > 1; 0 on the other ranks). Only ranks of the job should learn it. */
uint64_t vnode_key(const vnode_t * v);
/* vnode_attach: after every local rank's vnode_init returned, with local rank 0's key (rank 0
 * itself ignores it). Local rank 0 hands the segment and the doorbells to each other local
 * rank, which maps it; then each publishes its pid, waits (attach_timeout_ms) until every
 * local rank attached, probes single copy from a peer (Yama ptrace_scope, PR_SET_PTRACER,
 * seccomp and user namespaces can forbid it) and waits until every local rank probed: single
 * copy is on for the node only if it works for all. */
int vnode_attach(vnode_t * v, uint64_t key);
/* Unmaps, closes the doorbells. Safe after any failure. */
void vnode_finalize(vnode_t * v);
const char *vnode_error(const vnode_t * v);
/* The local index of the peer the last error concerns (a malformed record's sender, a single
 * copy's peer), or -1. */
int vnode_error_peer(const vnode_t * v);
int vnode_local(const vnode_t * v);
int vnode_nlocal(const vnode_t * v);

/* -- packets -- */
/* Copies one packet (hdr then data; hlen + len <= max_pkt, hlen >= 1) into the ring to local
 * rank dst: VNODE_OK, or VNODE_AGAIN when the ring has no room now (nothing written; the
 * caller keeps the packet and its order, and progresses vnode_poll meanwhile). Rings dst's
 * doorbell if dst sleeps. */
int vnode_send(vnode_t * v, int dst, const void *hdr, size_t hlen, const void *data,
               size_t len);
/* The same for a packet of len bytes (1..VNODE_SHORT_MAX, all header) written in place:
 * vnode_reserve sets *at to where in the ring to write it and returns VNODE_OK, then
 * vnode_commit(v, dst) sends what was written there (VNODE_ERR_INVAL with no reservation);
 * or it returns VNODE_AGAIN (no room now, nothing changed) or an error. Nothing but writing the packet comes between the two: no
 * other vnode call. Spares the sender a copy of a small packet. */
int vnode_reserve(vnode_t * v, int dst, size_t len, void **at);
int vnode_commit(vnode_t * v, int dst);
/* Called for each arriving packet, in each sender's order; hdr and data point into the ring
 * and are valid during the call only. It may call vnode_send, never vnode_poll. */
typedef void (*vnode_rx_fn_t) (void *arg, int src, const void *hdr, size_t hlen,
                               const void *data, size_t len);
/* Delivers arrived packets (at most a bounded batch per call): their number, or
 * VNODE_ERR_MALFORMED (a record whose mark, source or lengths are wrong; nothing is
 * delivered from it). */
int vnode_poll(vnode_t * v, vnode_rx_fn_t fn, void *arg);

/* -- sleeping -- */
/* VNODE_OK: nothing is pending and the doorbell fd becomes readable when a packet arrives or
 * a full ring this rank waits on gets room; VNODE_AGAIN: something is pending (poll). The next
 * vnode_poll ends the sleep (and drains the doorbell). */
int vnode_arm(vnode_t * v);
int vnode_doorbell_fd(const vnode_t * v);

/* -- single copy -- */
/* 1 when process_vm_readv/writev work between every pair of local ranks (after attach). */
int vnode_single_copy(const vnode_t * v);
/* 1 when Yama's ptrace_scope is 1 and no common ancestor of the node's ranks was found, so
 * this rank let any process of its uid read it (PR_SET_PTRACER_ANY); else it let only the
 * ranks' nearest common ancestor (the launcher's proxy) and its descendants. */
int vnode_ptracer_any(const vnode_t * v);
/* Copies len bytes at peer's address raddr into dst (read) / from src to peer's raddr
 * (write), looping over partial transfers: VNODE_OK, VNODE_ERR_NOTSUP, or VNODE_ERR_SYS
 * (vnode_error names the peer, address and errno; e.g. the range is not mapped there). The
 * caller validates raddr/len against what the peer advertised. */
int vnode_read(vnode_t * v, int peer, void *dst, uint64_t raddr, size_t len);
int vnode_write(vnode_t * v, int peer, const void *src, uint64_t raddr, size_t len);
/* Scatter/gather: local iov against one remote range. */
int vnode_readv(vnode_t * v, int peer, const struct iovec *iov, int iovcnt, uint64_t raddr,
                size_t len);

/* -- shared single copy: two cores on one large message --
 * A rank exports a range it sends from (or lands into); the key goes to the peer that copies
 * it (in a rendezvous scout or RTR), or to every peer (an RMA window). A peer's
 * vnode_copy_shared splits the copy in chunks and takes them one by one; the exporter, from
 * its own progress (vnode_help), takes chunks of the same copy from the other end, so both
 * ranks' cores copy at once. One copy of a range at a time shares; a copy that finds another
 * under way is plain, and once a copy is over the range serves the next. Neither waits for
 * the other: a claimer whose exporter makes no call copies every chunk itself. The exporter
 * keeps the range unchanged until vnode_unexport, after the claimers said (by a packet, or
 * by the window's end) that their copies are complete. */
/* *key = a key for the range (0 when every slot is taken: copies are then plain). */
int vnode_export(vnode_t * v, void *addr, size_t len, uint64_t * key);
void vnode_unexport(vnode_t * v, uint64_t key);
typedef struct vnode_share {
    void *slot;                 /* the exporter's slot while its chunks are in flight */
    uint64_t len;
    uint64_t busy;              /* the slot's state while this copy owns it */
} vnode_share_t;
/* Copies len bytes between local and peer's raddr (write: to it, else from it), within the
 * range peer exported as key (0: a plain copy). VNODE_OK when done, VNODE_AGAIN when the
 * exporter still copies a chunk (call vnode_share_test until VNODE_OK), or an error: a key
 * that does not describe [raddr, raddr + len) is VNODE_ERR_MALFORMED naming the peer. */
int vnode_copy_shared(vnode_t * v, int peer, uint64_t key, int write, void *local,
                      uint64_t raddr, size_t len, vnode_share_t * s);
int vnode_share_test(vnode_t * v, vnode_share_t * s);
/* The exporter's part: copies chunks of this rank's exports that peers are copying. Returns
 * the chunks copied, or an error naming the peer. Cheap when nothing is exported. */
int vnode_help(vnode_t * v);

/* -- watching the node's ranks --
 * Every rank holds a robust process-shared mutex in the segment from vnode_attach to
 * vnode_finalize. vnode_watch starts a thread that waits, in the kernel, on the next local
 * rank's (ring order, so every rank is watched by one other). When that rank ends without
 * vnode_finalize -- killed, crashed, exited early -- the kernel wakes the thread at once
 * (before the dead process's files are closed, so before its launcher sees it end), and
 * died(arg, n, local[], pid[]) runs in that thread with every rank of the node found dead
 * (the launcher may kill others meanwhile, and the watcher of the first may be among them:
 * then the first is still in the list); it may end the process. Nothing runs for a rank that
 * called vnode_finalize, or after this one did. The thread uses no CPU while it waits. */
typedef void (*vnode_died_fn_t) (void *arg, int n, const int *local, const int *pid);
int vnode_watch(vnode_t * v, vnode_died_fn_t died, void *arg);
/* This rank is about to end on an error it reported itself: its watcher says nothing. */
void vnode_ending(vnode_t * v);

/* -- counters (MPI_T pvars upstairs) -- */
typedef struct vnode_stats {
    uint64_t pkts_sent, pkts_recv;
    uint64_t ring_full;         /* vnode_send calls that returned VNODE_AGAIN */
    uint64_t doorbells;         /* doorbells rung */
    uint64_t copy_bytes;        /* bytes moved by single copy (shared copies included) */
    uint64_t shared_copies;     /* vnode_copy_shared calls that shared with the exporter */
    uint64_t helped_bytes;      /* bytes this rank copied for peers' copies (vnode_help) */
    uint64_t unfenced;          /* packets published without a fence (the receiver polls) */
    uint64_t membarriers;       /* vnode_arm's membarrier calls (a first sleep) */
} vnode_stats_t;
void vnode_get_stats(const vnode_t * v, vnode_stats_t * s);

#ifdef VNODE_TEST_HOOKS
/* Tests only (test/vnode): the first unit of the next record this rank would write to dst,
 * its index (*seq) and the ring's size in units; a test writes a bad record there by hand. */
void *vnode_test_cell(vnode_t * v, int dst, uint64_t * seq, uint64_t * nunits);
/* Tests only: how many peers this rank polls directly now. */
int vnode_test_ndirect(const vnode_t * v);
/* Tests only: vnode_help sleeps this long between reading a copy's fields and taking its
 * chunk, so that a test makes the copy end and another begin in between. */
extern unsigned vnode_test_help_delay_us;
/* Tests only: the watcher sleeps this long after it decided to report a death, so that a
 * test finalizes the rank meanwhile. */
extern unsigned vnode_test_watch_delay_us;
/* Tests only: forget that this rank sleeps (its sleepy word back to 0), so that its next
 * vnode_arm goes through the membarrier again; 0 when it cannot (no membarrier). */
int vnode_test_unsleepy(vnode_t * v);
#endif

#endif /* VNODE_H_INCLUDED */
