/*
 * aml -- the amlapi message layer.
 *
 * A LAPI / Blue Gene/L message-layer style API over UCX UCP: active messages whose header
 * handler, run on the first packet, chooses where the data lands; completion handlers run in
 * the dispatcher's context; origin/target/completion counters; put/get/rmw on registered
 * memory; fences. No MPI here: the MPI glue (../amlapi_*.[ch]) maps MPICH onto this API and
 * the unit tests in test/aml drive it directly.
 *
 * Threading: one aml_t is used by one thread at a time (the MPI glue holds MPICH's lock).
 */
#ifndef AML_H_INCLUDED
#define AML_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* by its path from here, which the MPICH tree keeps (maint/graft): a program that includes
 * aml.h needs no include path for vnode */
#include "../../../shm/vnode/vnode_bits.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aml aml_t;
/* An incoming message whose landing is deferred: an opaque value, never 0, never reused in the
 * life of an aml_t (a generation count), so a stale handle is rejected, not mistaken for a
 * newer message. */
typedef uint64_t aml_handle_t;
#define AML_HANDLE_NONE ((aml_handle_t) 0)

typedef enum {
    AML_OK = 0,
    AML_ERR_INVAL,              /* invalid argument */
    AML_ERR_NOMEM,              /* out of memory */
    AML_ERR_TRANSPORT,          /* UCX reported an error */
    AML_ERR_NOT_SUPPORTED,      /* valid request this build/mode cannot do */
    AML_ERR_RANGE,              /* address range outside registered memory */
    AML_ERR_STATE,              /* called in the wrong state (e.g. before aml_connect) */
    AML_ERR_CONFIG,             /* ranks disagree on a setting (aml_connect_mismatch) */
    AML_ERR_SETUP,              /* setup failed for a reason given in words: cfg->errbuf from
                                 * aml_init, aml_error() after aml_connect (e.g. too
                                 * little memory for the on-node segment) */
    AML_ERR_TIMEOUT             /* aml_add_peer: the other process did not answer in time */
} aml_status_t;

const char *aml_strerror(int status);

/* Point-to-point protocols (Almási et al. 2005, Table 1). */
typedef enum {
    AML_PROTO_AUTO = 0,         /* choose per message */
    AML_PROTO_ONEPACKET,        /* header + data in one packet */
    AML_PROTO_EAGER,            /* ordered multi-packet */
    AML_PROTO_RNDV,             /* scout, receiver pulls, done */
    AML_PROTO_ADAPTIVE,         /* unordered data over several lanes, credit flow control */
    AML_PROTO_COUNT
} aml_proto_t;

const char *aml_proto_name(int proto);

typedef enum {
    AML_PROGRESS_POLLING = 0,   /* the embedder polls aml_progress */
    AML_PROGRESS_INTERRUPT      /* it may also sleep on aml_event_fd after aml_arm (Banikazemi et al. 1999
                                 * §6.1: arrival wakes the sleeper) */
} aml_progress_mode_t;

/* Called on a fatal error (malformed packet, transport failure in a handler). Must not
 * return; if it does, aml aborts. */
typedef void (*aml_fatal_fn_t) (void *arg, const char *msg);

typedef struct aml_config {
    int rank;                   /* this process, 0 <= rank < size */
    int size;
    size_t packet_size;         /* bytes per packet incl. headers: the one-packet limit and the
                                 * packets through vnode's FIFOs; 0 = default (8248) */
    size_t net_packet_size;     /* the eager and adaptive packets to peers reached by UCX
                                 * (other hosts, NOLOCAL, self); 0 = packet_size. Default
                                 * 65592: a 64 KiB MPI message in one UCX send */
    size_t eager_limit;         /* data bytes above which rendezvous is used (default 65536) */
    int protocol;               /* aml_proto_t: AML_PROTO_AUTO, _EAGER, _RNDV or _ADAPTIVE */
    int adaptive_credits;       /* unconfirmed adaptive messages per peer (0..1024); 0 turns
                                 * adaptive eager off (AUTO then uses ordered eager) */
    int lanes;                  /* UCX endpoints per peer that adaptive data spreads over
                                 * (1..8) */
    int debug_reorder;          /* tests: every other sequenced packet to a peer is held back
                                 * and sent after the next one (stash and replay run), and
                                 * adaptive data packets go last to first, ahead of
                                 * their first packet; AML_TEST_HOOKS builds only */
    int rndv_ucx;               /* default 1: rendezvous by UCX's own active-message
                                 * rendezvous (the scout is a UCP AM sent with
                                 * UCP_AM_SEND_FLAG_RNDV, the landing is filled by
                                 * ucp_am_recv_data_nbx); 0: aml moves the data itself */
    int rndv_put;               /* with rndv_ucx 0: by put (the receiver sends its landing's
                                 * address and rkey, the sender writes) instead of get */
    int progress_mode;          /* aml_progress_mode_t */
    aml_fatal_fn_t fatal;       /* NULL: print to stderr and abort() */
    void *fatal_arg;
    /* vnode, the on-node transport: the ranks of one node reach each other
     * through shared-memory FIFOs and single copy; others (and this rank itself) by UCX */
    const char *vnode_job;      /* NULL: no vnode. Names this node's segment: unique per job
                                 * and node (the embedder's job id and node id) */
    int vnode_nlocal;           /* ranks on this node (sharing vnode_job) */
    int vnode_local;            /* this rank's index among them, 0..vnode_nlocal-1 */
    size_t vnode_ring_bytes;    /* bytes per ordered pair's FIFO (0: vnode's default) */
    size_t vnode_eager_limit;   /* on-node messages above it go by single copy (default 65536;
                                 * 0: eager_limit);
                                 * without single copy on the node all go as packets */
    int vnode_single_copy;      /* default 1: large on-node messages by single copy where the
                                 * node allows it; 0: as packets */
    size_t vnode_shared_copy;   /* single copies of at least this many bytes are shared: the
                                 * sender's progress copies part of them (0: never; default
                                 * 65536) */
    int vnode_fence_always;     /* 1: a fence after every on-node packet, no membarrier before
                                 * a first sleep (default 0) */
    uint64_t vnode_shm_free;    /* tests: pretend the node has this much memory (0: ask) */
    int keepalive_ms;           /* peers on other hosts (another hostname) use UCX's failure
                                 * handling, and a failed one is fatal, naming it; their silent
                                 * TCP connections are probed after this long (aml_ucx.c
                                 * says how); 0: no failure handling. Default 1000 */
    int dyn_peers_max;          /* processes of other jobs that may join after aml_connect
                                 * (aml_add_peer); default 1024. Their records are reserved
                                 * at init (untouched memory costs nothing) so that no peer
                                 * record ever moves */
    int vnode_watch;            /* 1: a rank of this node that ends without finalizing is a
                                 * fatal error naming it, found at once through the segment
                                 * (vnode_watch); default 0 */
    int ucx_onnode;             /* default 1: some peers on this host go through UCX; 0:
                                 * vnode carries all of them, so UCX's shared-memory FIFOs are
                                 * left out (unless UCX_TLS is set) */
    char *errbuf;               /* if set: why aml_init failed, in words (AML_ERR_SETUP) */
    size_t errlen;
} aml_config_t;

void aml_config_default(aml_config_t * cfg);

/* --- setup ---------------------------------------------------------------------------- */

/* Creates the UCX context and worker. Communication needs aml_connect. */
int aml_init(const aml_config_t * cfg, aml_t ** aml);
/* This process's address, to be exchanged by the embedder (PMI, a launcher): the settings
 * every rank must share, then the transport's address. */
int aml_local_address(aml_t * aml, const void **addr, size_t * len);
/* Connects to every rank: table + i * stride is rank i's address. AML_ERR_CONFIG when a rank's
 * settings differ from this one's (nothing is connected then): aml_connect_mismatch names the
 * first such setting. */
int aml_connect(aml_t * aml, const void *table, size_t stride);
/* After AML_ERR_CONFIG: the aml_config_t field (or derived limit) that differs, the peer,
 * and both values. */
/* After AML_ERR_SETUP from aml_connect: what failed, in words. */
const char *aml_error(aml_t * aml);
int aml_connect_mismatch(aml_t * aml, const char **setting, int *peer, int64_t * mine,
                         int64_t * theirs);
/* Finalize handshake with every rank (collective): waits until every message anybody sent
 * has reached its handler, drops deferred messages nobody accepted (their senders complete as
 * if delivered), waits until everything this process started has completed, and closes the
 * endpoints once no packet can arrive any more (UCX's are disconnected when aml_finalize
 * destroys its worker). Call before the embedder's final barrier. */
int aml_quiesce(aml_t * aml);
/* Releases everything. After the embedder's barrier: no traffic is exchanged any more. */
int aml_finalize(aml_t * aml);

/* --- peers of other jobs (MPI dynamic processes) -------------------------------------- */
/* A process of another job (spawned, or met through connect/accept) becomes a peer with an
 * index at or above the job's size, reached by UCX (never vnode: it is outside this job's
 * segment). It is named by its "upid": a 64-bit id unique to its aml_t, then an address every
 * host can reach (UCX's network-only worker address), short enough for an MPI port name.
 * aml_quiesce leaves such peers out of its rounds (they are not part of this job's finalize)
 * but flushes what was sent to them. */
/* The upid of peer (this process's own for peer == rank or -1); valid for the life of aml. */
int aml_upid(aml_t * aml, int peer, const void **upid, size_t * len);
/* The index of the process named upid: this process, a rank of the job, a peer that joined
 * before, or a new one. A new one is connected: both processes exchange a CONNECT packet
 * (settings, id, the index each gives the other: a packet's source is the receiver's index
 * for its sender, and the token each must put on its packets to the other), which the other
 * process answers from its progress if it expects it: it is adding this process too, or it
 * listens (aml_listen). Blocks, progressing and repeating the request, until it answered, at
 * most timeout_ms (0: no limit): AML_ERR_TIMEOUT; the transport's failure:
 * AML_ERR_TRANSPORT; the peer table full (dyn_peers_max): AML_ERR_NOMEM. The reason, in
 * words: aml_error(). */
int aml_add_peer(aml_t * aml, const void *upid, size_t len, int timeout_ms, int *peer);
/* The same without waiting: the index at once, the connection completing from progress. A
 * send to the peer (or aml_add_peer) waits for it, and fails with AML_ERR_TIMEOUT once
 * timeout_ms passed since this call. For a group of processes that connect to each other while
 * their own groups still wait for them (MPI's intercommunicator map exchange). */
int aml_add_peer_async(aml_t * aml, const void *upid, size_t len, int timeout_ms, int *peer);
/* on = 1: from now on a process of another job that names this one's upid may connect
 * (an MPI accept is waiting), at most 64 new ones a second; on = 0 ends one such call. Else
 * only processes this one adds itself are answered, and everything else from outside the
 * job is refused (AML_Q_REFUSED counts it). */
int aml_listen(aml_t * aml, int on);

/* --- environment (LAPI_Qenv / LAPI_Senv) ------------------------------------------------ */

typedef enum {
    AML_Q_RANK,                 /* get */
    AML_Q_SIZE,                 /* get: ranks in the job (peers of other jobs not counted) */
    AML_Q_PEERS,                /* get: peers, those of other jobs that joined included */
    AML_Q_PACKET_SIZE,          /* get */
    AML_Q_NET_PACKET_SIZE,      /* get: packets to peers reached by UCX */
    AML_Q_MAX_UHDR,             /* get: largest user header */
    AML_Q_ONEPACKET_LIMIT,      /* get: largest data of a one-packet message naming no
                                 * counter (0 B user header) */
    AML_Q_INLINE_LIMIT,         /* get: largest user header + data of aml_amsend_small */
    AML_Q_EAGER_LIMIT,          /* get/set */
    AML_Q_PROTOCOL,             /* get/set: aml_proto_t forced protocol or AUTO */
    AML_Q_PROGRESS_MODE,        /* get */
    AML_Q_MAX_HANDLERS,         /* get: user handler ids are 0 .. value-1 */
    AML_Q_ADAPTIVE_CREDITS,     /* get */
    AML_Q_LANES,                /* get */
    AML_Q_MSGS_SENT,            /* get: messages sent with protocol (val in: aml_proto_t) */
    AML_Q_BYTES_SENT,           /* get: data bytes sent with protocol */
    AML_Q_STASHED,              /* get: packets that arrived ahead of their sequence number
                                 * and were held until the gap filled */
    AML_Q_VNODE_PEERS,          /* get: peers reached through vnode (on this node) */
    AML_Q_VNODE_PKTS,           /* get: packets sent through vnode's FIFOs */
    AML_Q_VNODE_RING_FULL,      /* get: vnode sends that found their FIFO full and waited */
    AML_Q_VNODE_DOORBELLS,      /* get: sleeping on-node peers woken */
    AML_Q_VNODE_COPY_BYTES,     /* get: bytes moved by single copy */
    AML_Q_VNODE_SINGLE_COPY,    /* get: 1 when single copy works on this node */
    AML_Q_VNODE_FALLBACK,       /* get: on-node messages above the single-copy threshold sent
                                 * as packets because single copy is not allowed */
    AML_Q_VNODE_SHARED_COPIES,  /* get: single copies this rank shared with their exporter */
    AML_Q_VNODE_HELPED_BYTES,   /* get: bytes this rank copied for peers' single copies */
    AML_Q_REFUSED,              /* get: UCX packets refused as not from a peer (no token of
                                 * this process, or a CONNECT nobody expected) */
    AML_Q_VNODE_PTRACER_ANY     /* get: 1 when Yama made this rank let any process of its uid
                                 * read it (no common ancestor of the node's ranks) */
} aml_query_t;

/* For AML_Q_MSGS_SENT/AML_Q_BYTES_SENT, *val holds the protocol on entry. */
int aml_qenv(aml_t * aml, aml_query_t q, int64_t * val);
int aml_senv(aml_t * aml, aml_query_t q, int64_t val);

/* --- counters --------------------------------------------------------------------------- */

typedef struct aml_cntr {
    volatile int64_t value;
} aml_cntr_t;

/* A counter must be initialized before a remote message names it as target counter (aml
 * keeps the initialized counters' addresses, and refuses any other). */
int aml_cntr_init(aml_t * aml, aml_cntr_t * c, int64_t value);
int aml_cntr_destroy(aml_t * aml, aml_cntr_t * c);
int64_t aml_cntr_get(const aml_cntr_t * c);
void aml_cntr_set(aml_cntr_t * c, int64_t value);
/* Progresses until value >= val, then subtracts val (LAPI_Waitcntr). */
int aml_cntr_wait(aml_t * aml, aml_cntr_t * c, int64_t val);

/* --- active messages -------------------------------------------------------------------- */

typedef void (*aml_compl_fn_t) (aml_t * aml, void *arg);
/* Receives the message's bytes [offset, offset+len) when the handler asked for unpacking. */
typedef void (*aml_unpack_fn_t) (void *arg, size_t offset, const void *data, size_t len);

typedef struct aml_msg_info {
    int src;                    /* sender rank */
    const void *uhdr;           /* user header (8-byte aligned), valid during the handler */
    size_t uhdr_len;
    size_t msg_len;             /* total data bytes */
    const void *data;           /* non-NULL iff all data is in hand (one-packet): the handler
                                 * may consume it directly, valid during the handler */
    int protocol;               /* aml_proto_t used by the sender */
    aml_handle_t msg;           /* rendezvous and adaptive eager: handle for a deferred
                                 * landing (recv->defer); else AML_HANDLE_NONE */
} aml_msg_info_t;

/* What the header handler returns: where the data lands and what runs afterwards. */
typedef struct aml_recv {
    void *buf;                  /* contiguous landing area of msg_len bytes, or NULL */
    aml_unpack_fn_t unpack;     /* used when buf == NULL: called per piece, in order */
    void *unpack_arg;
    int partial;                /* with unpack: only the first `want` bytes matter (a receive
                                 * shorter than the message). A rendezvous by get or put moves
                                 * only those; other protocols hand unpack everything. */
    size_t want;
    aml_compl_fn_t compl_fn;    /* runs in the dispatcher after all data landed; may send */
    void *compl_arg;
    int defer;                  /* when info->msg is a handle: no landing yet; the embedder decides
                                 * later with aml_accept or aml_reject. Rendezvous: nothing
                                 * has moved but the header, so an unmatched large message
                                 * costs no buffer at the receiver. Adaptive eager: aml keeps
                                 * the data meanwhile, and the sender's credit with it. */
} aml_recv_t;

/* Header handler: runs in the dispatcher on the first packet, must not block. When
 * info->data is non-NULL the handler may consume the data and leave buf/unpack NULL.
 * Otherwise, when msg_len > 0, it must set buf or unpack. Returns 0; non-zero is fatal. */
typedef int (*aml_hdr_handler_t) (aml_t * aml, void *ctx, const aml_msg_info_t * info,
                                  aml_recv_t * recv);

#define AML_MAX_HANDLERS 64
#define AML_UHDR_LIMIT 1024     /* no user header is ever longer (see AML_Q_MAX_UHDR) */
int aml_register_handler(aml_t * aml, unsigned id, aml_hdr_handler_t fn, void *ctx);

/* A spin-wait hint to the CPU (x86 pause, Arm yield) for a caller that polls in a loop and
 * found nothing. */
static inline void aml_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield":::"memory");
#endif
}

/* Copies n bytes, up to 64 by fixed-size moves: what aml uses for small messages, for handlers
 * that consume data in place too (vnode_bits.h). */
static inline void aml_copy_small(void *dst, const void *src, size_t n)
{
    vnode_copy_small(dst, src, n);
}

/* Small-message handler (optional, per handler id): a one-packet message without counters
 * comes to it first, with everything in hand. uhdr is the user header as it travelled (any
 * alignment: read it with memcpy), data its len bytes; both valid during the call. It
 * returns 1 when it consumed the message (the header handler is not called, nothing else
 * runs for it), 0 to have the header handler called as usual, so it may take only its common
 * case. It must not block. It spares the common small message the aligned header copy and
 * the info and landing structures of the general call (a message-rate receiver's time). */
typedef int (*aml_small_handler_t) (aml_t * aml, void *ctx, int src, const void *uhdr,
                                    size_t uhdr_len, const void *data, size_t len);
/* Sets id's small-message handler (NULL: none); id's header handler must be registered. */
int aml_register_small_handler(aml_t * aml, unsigned id, aml_small_handler_t fn);

/* One active-message transfer (LAPI_Xfer). uhdr is copied before return; data must stay
 * untouched until the origin counter/handler fires. */
typedef struct aml_xfer {
    int peer;
    unsigned handler;
    const void *uhdr;
    size_t uhdr_len;
    const void *data;
    size_t len;
    aml_cntr_t *tgt_cntr;       /* counter in the TARGET's address space, or NULL */
    aml_cntr_t *org_cntr;       /* incremented when data may be reused */
    aml_cntr_t *cmpl_cntr;      /* incremented when the target completed the message */
    aml_compl_fn_t org_fn;      /* called when data may be reused (after org_cntr) */
    void *org_arg;
    int protocol;               /* AML_PROTO_AUTO, or force one */
} aml_xfer_t;

int aml_xfer(aml_t * aml, const aml_xfer_t * x);

static inline int aml_amsend(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                             size_t uhdr_len, const void *data, size_t len,
                             aml_cntr_t * tgt_cntr, aml_cntr_t * org_cntr,
                             aml_cntr_t * cmpl_cntr)
{
    aml_xfer_t x = { peer, handler, uhdr, uhdr_len, data, len, tgt_cntr, org_cntr, cmpl_cntr,
        NULL, NULL, AML_PROTO_AUTO
    };
    return aml_xfer(aml, &x);
}

/* aml_amsend with no counters for a small message (user header + data up to
 * AML_Q_INLINE_LIMIT, under 256 bytes): the lean path. uhdr and data are copied before it
 * returns, so the caller's buffers are free at once (LAPI's "completes at injection").
 * AML_ERR_INVAL when the message is larger, or when a protocol is forced. */
int aml_amsend_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                     size_t uhdr_len, const void *data, size_t len);

/* Lands a deferred message: rendezvous data is pulled into recv->buf (or handed to
 * recv->unpack), adaptive data is copied there from aml's staging buffer; then
 * recv->compl_fn runs and the sender's buffer (rendezvous) or credit (adaptive) is released.
 * An adaptive message still arriving lands when its last packet does. */
int aml_accept(aml_t * aml, aml_handle_t msg, const aml_recv_t * recv);
/* Drops a deferred message without landing its data; the sender's buffer or credit is
 * released as if delivered (the embedder tells its sender why, e.g. a cancelled send). */
int aml_reject(aml_t * aml, aml_handle_t msg);

/* --- one-sided ------------------------------------------------------------------------- */

/* Exposes [addr, addr+len) to remote put/get/rmw. Remote operations outside registered
 * memory are fatal errors at the target naming the origin. */
int aml_mem_register(aml_t * aml, void *addr, size_t len);
int aml_mem_deregister(aml_t * aml, void *addr);

int aml_put(aml_t * aml, int peer, void *tgt_addr, const void *org_addr, size_t len,
            aml_cntr_t * tgt_cntr, aml_cntr_t * org_cntr, aml_cntr_t * cmpl_cntr);
int aml_get(aml_t * aml, int peer, const void *tgt_addr, void *org_addr, size_t len,
            aml_cntr_t * tgt_cntr, aml_cntr_t * org_cntr);

/* Direct access (aml_direct.c): no message at the target. A process exposes memory once and
 * hands its key to peers (the embedder exchanges it); a peer opens the key and then puts
 * and gets within that memory through the transport that reaches the process (single copy
 * on the node, UCX RMA to other hosts). The range is checked at the origin against the
 * exposed memory (AML_ERR_RANGE). aml_fence(peer) also waits for direct operations. */
typedef struct aml_xmem aml_xmem_t;
typedef struct aml_xkey aml_xkey_t;
int aml_xmem_expose(aml_t * aml, void *addr, size_t len, aml_xmem_t ** m);
/* The key's bytes (valid until aml_xmem_withdraw). */
int aml_xmem_key(aml_t * aml, const aml_xmem_t * m, const void **key, size_t * key_len);
/* After every peer is done with it (the embedder synchronizes). */
int aml_xmem_withdraw(aml_t * aml, aml_xmem_t * m);
/* AML_ERR_NOT_SUPPORTED when the transport to peer cannot access its memory directly (on a
 * node where single copy is not allowed): use aml_put/aml_get then. */
int aml_xkey_open(aml_t * aml, int peer, const void *key, size_t key_len, aml_xkey_t ** k);
void aml_xkey_close(aml_t * aml, aml_xkey_t * k);
/* Transfers below this many bytes are faster as active messages (aml_put/aml_get, or the
 * embedder's own) than direct: the peer's eager limit, where the transport's single copy or
 * RMA starts to beat its packets (on the node a process_vm_writev costs more than a FIFO
 * packet below VNODE_SINGLE_COPY_THRESHOLD; docs/benchmarks/2026-11-27-defaults.md,
 * MPIR_CVAR_AMLAPI_RMA_DIRECT). */
size_t aml_xkey_threshold(aml_t * aml, const aml_xkey_t * k);
/* 1 when direct transfers through k are done in software by the peer's progress (UCX over
 * TCP: the peer must make progress as for a message, and a large transfer moves slower than
 * the transport's message rendezvous), 0 when the hardware or the kernel moves them (RDMA,
 * single copy). */
int aml_xkey_soft(aml_t * aml, const aml_xkey_t * k);
/* Completion (the data in place at the target, or arrived at dst) increments cmpl_cntr and
 * runs fn(aml, arg), either before return or later from progress; src and dst belong to
 * aml until then. */
int aml_put_direct(aml_t * aml, aml_xkey_t * k, uint64_t raddr, const void *src, size_t len,
                   aml_cntr_t * cmpl_cntr, aml_compl_fn_t fn, void *arg);
int aml_get_direct(aml_t * aml, aml_xkey_t * k, uint64_t raddr, void *dst, size_t len,
                   aml_cntr_t * cmpl_cntr, aml_compl_fn_t fn, void *arg);
/* A single copy of len bytes at raddr in peer's memory into dst, done when it returns, for an
 * embedder whose peer published the address itself (in memory both map, e.g. a collective's
 * segment; nothing is checked but by the kernel, and a failed copy is fatal naming the peer).
 * AML_ERR_NOT_SUPPORTED when peer is not reached through vnode or its node forbids single
 * copy; every pair of a node's ranks gets the same answer. */
int aml_peer_read(aml_t * aml, int peer, void *dst, uint64_t raddr, size_t len);
/* The memory this node can give a shared segment (vnode's measure for its own segment:
 * MemAvailable within the cgroup's limit; UINT64_MAX when unknown). */
uint64_t aml_node_memory(void);

typedef enum {
    AML_RMW_FETCH_ADD = 1,      /* *tgt += in[0] */
    AML_RMW_SWAP,               /* *tgt = in[0] */
    AML_RMW_CMP_SWAP            /* if (*tgt == in[0]) *tgt = in[1] */
} aml_rmw_op_t;

/* 64-bit atomic read-modify-write at the target; *prev gets the old value, then org_cntr
 * is incremented. tgt_var must be 8-byte aligned and registered. */
int aml_rmw(aml_t * aml, int peer, aml_rmw_op_t op, int64_t * tgt_var, const int64_t * in,
            int64_t * prev, aml_cntr_t * org_cntr);

/* --- synchronization ------------------------------------------------------------------- */

/* Returns when everything this process sent to peer has completed at peer (data in place,
 * handlers run) and every get/rmw it issued to peer has returned. */
int aml_fence(aml_t * aml, int peer);
/* Collective: fence with every peer, then barrier. */
int aml_gfence(aml_t * aml);
/* Collective all-gather of one pointer-sized value: table[i] = rank i's value. */
int aml_address_init(aml_t * aml, uintptr_t mine, uintptr_t * table);

/* --- progress -------------------------------------------------------------------------- */

/* Polls the transport and runs handlers. Returns the number of events handled. */
int aml_progress(aml_t * aml);

/* Interrupt mode only. aml_arm prepares a sleep: AML_OK means nothing is pending and the
 * event fd will become readable when something arrives or completes; AML_ERR_STATE means
 * events are pending (call aml_progress instead of sleeping). The embedder then waits on
 * the fd with poll/epoll (POLLIN), and need not hold its lock while it sleeps. */
int aml_arm(aml_t * aml);
int aml_event_fd(aml_t * aml, int *fd);

#ifdef __cplusplus
}
#endif
#endif /* AML_H_INCLUDED */
