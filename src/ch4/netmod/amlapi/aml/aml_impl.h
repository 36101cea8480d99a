/*
 * aml internals shared by its files. Not part of the API.
 *
 * The files form layers; every call goes to a file listed before the caller's (checked by
 * maint/check-layers, which holds the same list). This header's inline functions call no aml
 * file, so that every file may include it; the inline functions that do call one live in a
 * header of their own, included only above the file they call: aml_rx_fast.h (landing,
 * header handlers: base and protocols), aml_poll.h (one pass over the transports, through
 * their interface: protocols and services), aml_peer_ready.h (a send to a peer of another
 * job waits for its connection: services). The hash table is aml_htab.h, the transports'
 * interface aml_tport.h, and the one list of the transports built in aml_tports.h (its
 * aml_tport_builtin refers to every transport: only the top, aml_context.c, calls it).
 *   base       aml_util.c      names, fatal errors, free lists, counters, registered memory
 *              aml_wire.c      the packet table (aml_wire.h), packet names, malformed-packet
 *                              errors
 *              aml_ucx_keepalive.c  TCP keepalive on the sockets UCX accepted
 *              aml_ucx.c       the UCX transport (aml_tport.h)
 *              aml_vnode.c     the vnode transport: on-node FIFOs, single copy
 *              aml_tx.c        send descriptors and records, header filling, sending packets
 *                              with their sequence numbers, control packets
 *              aml_rx.c        receive records, header handlers, landing data, target
 *                              completion, fence accounting, deferring a landing
 *   protocols  aml_onepacket.c, aml_eager.c, aml_adaptive.c, aml_rndv_put.c,
 *              aml_rndv_tport.c, aml_rndv.c (get variant and the rendezvous receiver)
 *   services   aml_progress.c  aml_progress, interrupt mode, counter waits
 *              aml_dynamic.c   peers of other jobs: upids, CONNECT, aml_add_peer, the wait
 *                              of a first send to one (aml_peer_ready)
 *              aml_xfer.c      protocol choice, aml_amsend_small
 *              aml_rma.c       put/get/rmw as active messages
 *              aml_direct.c    direct put/get: exposed memory, keys, the transports' RMA
 *              aml_sync.c      fences, barrier, address exchange
 *   top        aml_dispatch.c  the dispatcher: decoding and checking by the packet table,
 *                              fast paths, sequence, stash and replay, aml_accept/reject
 *              aml_context.c   configuration, init, connect, quiesce, finalize
 */
#ifndef AML_IMPL_H_INCLUDED
#define AML_IMPL_H_INCLUDED

#include "aml.h"
#include "aml_wire.h"
#include "aml_tport.h"
#include "aml_tports.h"
#include "aml_htab.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AML_LIKELY(x)   __builtin_expect(!!(x), 1)
#define AML_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Internal handler ids follow the user's. */
enum {
    AML_H_PUT = AML_MAX_HANDLERS,
    AML_H_GET_REPLY,
    AML_H_BARRIER,
    AML_H_ADDR,
    AML_H_TOTAL
};

#define AML_MAX_UHDR AML_UHDR_LIMIT   /* also limited by the transport's largest header */

/* vnode's largest header: as large as aml's largest, so that vnode never lowers the limits the
 * ranks of other nodes compute without it (aml_connect compares them). Its FIFO records hold
 * this plus a packet of data (aml_vnode.c; amlapi_info sizes the segment the same way). */
static inline size_t aml_vnode_max_hdr(void)
{
    return sizeof(aml_pkt_t) + AML_MAX_UHDR;
}
#define AML_TPORTS_MAX AML_TPORT_SLOTS  /* transports one aml_t may use: all built in */
#define AML_HOST_MAX 64         /* hostnames in addresses and errors (truncated) */

#define AML_CONTAINER(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

/* aml_smsg_t.put_state of a put-variant rendezvous send */
enum { AML_PUT_NONE = 0, AML_PUT_WAIT_RTR, AML_PUT_PUTTING, AML_PUT_WAIT_DONE };

/* A message being sent that needs bookkeeping beyond its packets (eager: several packets;
 * rendezvous: registration until DONE; completion counter: until CMPL). */
typedef struct aml_smsg {
    aml_hent_t h;               /* in aml->waits while awaiting DONE/CMPL, key = msg_id */
    int peer;
    int proto;
    int pending;                /* all events still to come; 0 = release */
    int org_pending;            /* events before the data may be reused (packets, DONE) */
    aml_cntr_t *org_cntr;
    aml_compl_fn_t org_fn;
    void *org_arg;
    aml_cntr_t *cmpl_cntr;
    bool org_done;
    aml_tport_memh_t memh;      /* rendezvous (get variant) */
    void *rkey_buf;
    int put_state;              /* put variant: */
    const void *data;
    size_t len;
    aml_tport_rkey_t put_rkey;  /* the receiver's landing */
    aml_tport_op_t op;          /* the put */
    bool tport_rndv;            /* sent by transport rendezvous: completes with the send */
} aml_smsg_t;

/* A packet handed to the transport: lives until the transport completes the send. */
typedef struct aml_sdesc {
    aml_tport_op_t op;          /* aml, done and hdr (= &u.pkt) are set once, at allocation;
                                 * op.peer: the destination */
    struct aml_sdesc *next;     /* free list */
    aml_smsg_t *msg;            /* owner, or NULL */
    aml_cntr_t *org_cntr;       /* compact packet sent from the caller's buffer: origin */
    aml_compl_fn_t org_fn;      /* completion when the transport is done with it */
    void *org_arg;
    size_t hdr_len;
    size_t held_len;            /* debug_reorder: data bytes copied after the header */
    size_t room;                /* bytes from u.pkt on: aml->sdesc_small or a packet */
    uint64_t headroom;          /* the transport's (AML_TPORT_HEADROOM), right before u */
    union {
        aml_pkt_t pkt;
        uint64_t align;
    } u;
    /* followed by the user header and, for one-packet messages, the data */
} aml_sdesc_t;

_Static_assert(offsetof(aml_sdesc_t, u) == offsetof(aml_sdesc_t, headroom) + AML_TPORT_HEADROOM,
               "a descriptor's header has the transport's headroom before it");

#define AML_SDESC_SMALL_UHDR 128
#define AML_SDESC_PAYLOAD(d) ((char *) &(d)->u.pkt + sizeof(aml_pkt_t))

/* A byte range [start, end) of a message. */
typedef struct aml_range {
    size_t start, end;
} aml_range_t;

/* An incoming message that is not complete when its first packet is handled. */
typedef struct aml_rmsg {
    aml_hent_t h;               /* in aml->adapt_rx or put_rx: key msg_id, owner src */
    aml_t *aml;
    int src;
    int type;                   /* packet type of its first packet */
    uint64_t msg_id;
    size_t len;
    size_t received;
    aml_recv_t recv;
    aml_cntr_t *tgt_cntr;
    bool want_cmpl;
    aml_tport_rkey_t rkey;      /* rendezvous (get) */
    aml_tport_memh_t memh;      /* rendezvous (put): the exposed landing */
    bool put;                   /* rendezvous by put */
    void *tport_desc;           /* transport rendezvous: the transport's data descriptor */
    aml_tport_op_t op;          /* the pull or transport-rendezvous receive */
    void *bounce;               /* rendezvous into an unpack handler */
    void *pieces;               /* adaptive: data staged until its landing is final
                                 * (aml_adaptive.c) */
    size_t moved;               /* rendezvous: bytes its landing takes (aml_rmsg_landing) */
    uint64_t src_addr;          /* rendezvous: the sender's buffer */
    aml_hent_t dh;              /* in aml->deferred while the landing is deferred, key =
                                 * handle */
    aml_handle_t handle;        /* what the header handler saw (rendezvous, adaptive) */
    bool deferred;
    bool have_first;            /* adaptive: the first packet was handled */
    bool data_done;             /* adaptive: every byte arrived */
    bool dropped;               /* adaptive: rejected while still arriving */
    aml_range_t got_inline[2];  /* adaptive: the byte ranges received, merged and sorted */
    aml_range_t *got;           /* got_inline, or a larger array */
    int ngot, capgot;
} aml_rmsg_t;

/* A packet that arrived ahead of its sequence number. */
typedef struct aml_ooo {
    struct aml_ooo *next;
    uint32_t seq;
    size_t hdr_len, len;
    char *hdr, *data;           /* data: a copy, or the transport's rendezvous descriptor */
    bool tport_desc;            /* data is that descriptor: released if never replayed */
} aml_ooo_t;

/* aml_peer_t.dyn: a peer of another job (aml_dynamic.c) */
enum { AML_DYN_NONE = 0, AML_DYN_CONNECTING, AML_DYN_UP, AML_DYN_FAILED };

typedef struct aml_peer {
    const aml_tport_t *tport;   /* the transport that reaches this peer */
    uint32_t me;                /* the source in every packet to this peer: our rank, or the
                                 * index a peer of another job gave us */
    unsigned caps;              /* what it offers this peer (AML_TPORT_CAP_*) */
    size_t eager_limit;         /* messages above it go by rendezvous (transport's choice) */
    size_t pkt_size;            /* its eager and adaptive packets: the transport's packet size */
    aml_tport_ep_t ep;          /* its first endpoint (lane 0: every sequenced packet) */
    uint8_t rma_soft;           /* aml_xkey_soft's answer + 1; 0: not asked yet */
    uint32_t tx_seq;            /* next sequence number to send */
    uint32_t rx_seq;            /* next sequence number expected */
    aml_ooo_t *ooo;             /* sorted by seq */
    int nstashed;               /* packets in ooo */
    aml_rmsg_t *eager_rx;       /* eager message under assembly from this peer */
    int64_t rx_incomplete;      /* messages from peer accepted but not complete */
    int64_t fence_reqs;         /* fence requests waiting for rx_incomplete == 0 */
    int64_t fence_sent;         /* fence requests sent to peer */
    int64_t fence_acks;         /* acks received from peer */
    int64_t replies_pending;    /* our gets/rmws to this peer awaiting replies */
    int64_t direct_pending;     /* our direct puts/gets to this peer not yet complete */
    bool dirty;                 /* sent something since the last fence */
    int adapt_out;              /* our adaptive messages to peer awaiting its token */
    int adapt_in;               /* peer's adaptive messages here not yet confirmed */
    int tok_owed;               /* of those, released but not yet confirmed (a batched TOKEN) */
    int tok_next;               /* next peer in aml->tok_head's list, -1: none */
    bool tok_listed;            /* in that list (it may stay there with nothing owed) */
    unsigned next_lane;         /* round robin over the lanes */
    struct aml_sdesc *held;     /* debug_reorder: a packet held back to overtake */
    int quiesce_round;          /* last QUIESCE round received from peer */
    int dyn;                    /* AML_DYN_*: NONE for the job's ranks */
    uint64_t tx_token;          /* UCX: what every packet to this peer carries (its token ^
                                 * our rank, or what a process of another job gave us) */
    aml_hent_t th;              /* another job's process: in aml->tokens, key = the token it
                                 * must put on every packet to us */
    int64_t conn_sent;          /* CLOCK_MONOTONIC ms of the last CONNECT request to it
                                 * (aml_dynamic_wait repeats it) */
    int64_t conn_deadline;      /* CLOCK_MONOTONIC ms by which it must have answered */
    aml_hent_t uh;              /* in aml->uuids, key = its aml_t's id */
    char *upid;                 /* its upid (aml_upid), malloc'd */
    size_t upid_len;
} aml_peer_t;

typedef struct aml_handler {
    aml_hdr_handler_t fn;
    void *ctx;
    aml_small_handler_t small;  /* or NULL */
} aml_handler_t;

typedef struct aml_region {
    uintptr_t base;
    size_t len;
} aml_region_t;

/* A get or rmw awaiting its reply. */
typedef struct aml_reply_wait {
    aml_hent_t h;
    int peer;
    int kind;                   /* AML_PKT_GET_REQ or AML_PKT_RMW_REQ */
    void *org_addr;             /* get: destination; rmw: int64_t *prev */
    size_t len;
    aml_cntr_t *org_cntr;
} aml_reply_wait_t;

struct aml {
    aml_config_t cfg;
    bool compact;               /* compact packets usable (fewer than 2^24 ranks) */
    int rank, size;
    size_t packet_size;
    size_t max_uhdr;
    size_t compact_max;         /* largest compact packet: AML_COMPACT_MAX or the transport's
                                 * largest header */
    size_t eager_limit;
    int protocol;
    const aml_tport_t *tports[AML_TPORTS_MAX];  /* the transports in use, each set up once,
                                                 * in slot order (aml_tports.h) */
    int ntports;
    void *tport_state[AML_TPORT_SLOTS]; /* each transport's own state, by slot: its init sets
                                         * it and its fini clears it; NULL while not in use.
                                         * Only the transport reads it */
    int64_t rndv_as_eager;      /* rendezvous-size messages sent eagerly: the peer's transport
                                 * moves no data but packets (offers no RNDV, GET or PUT) */
    unsigned tport_every[AML_TPORTS_MAX];       /* aml_poll progresses tports[i] every this
                                                 * many passes (1 once it reaches another
                                                 * process: aml_tport_used) */
    unsigned tport_skip[AML_TPORTS_MAX];        /* passes since tports[i] was progressed */
    void (*idle) (aml_t * aml);                 /* what a pass that found nothing does while
                                                 * tok_head >= 0 (aml_adaptive_flush_tokens) */
    char errmsg[512];           /* aml_error */
    int efd;                    /* interrupt mode: the transport's event fd, else -1 */
    char *addr;                 /* aml_addr_hdr_t, then the transports' addresses
                                 * (aml_context.c) */
    size_t addr_len;
    struct {                    /* the first setting a peer disagreed on (aml_connect) */
        const char *setting;
        int peer;
        int64_t mine, theirs;
    } mismatch;
    aml_peer_t *peers;          /* [peers_cap]: the job's ranks, then peers of other jobs; never
                                 * moves (pointers to records are kept) */
    int npeers;                 /* records in use: size + peers of other jobs */
    int peers_cap;              /* size + cfg.dyn_peers_max */
    uint64_t uuid;              /* this aml_t's id (aml_upid) */
    char *upid;                 /* ours */
    size_t upid_len;
    aml_htab_t uuids;           /* every peer's aml_peer_t.uh, by id */
    uint64_t token;             /* UCX packets from rank r of the job carry token ^ r */
    aml_htab_t tokens;          /* processes of other jobs: aml_peer_t.th */
    int listening;              /* aml_listen: a new process of another job may connect */
    int64_t refused;            /* packets from outside the job refused (AML_Q_REFUSED) */
    int64_t strangers_t0;       /* aml_dynamic.c's rate limit: start of the second (ms) */
    int strangers;              /* processes that connected in that second */
    int64_t dyn_inflight;       /* CONNECT packets not yet sent */
    char (*hosts)[AML_HOST_MAX];        /* each rank's hostname (from its address) */
    char host[AML_HOST_MAX];    /* this process's */
    void (*fatal_hook) (aml_t * aml);   /* aml_fatal calls it first (vnode_ending) */
    aml_tport_op_t *qflush;     /* aml_quiesce's endpoint flushes (aml_context.c) */
    int qflush_pending[2];      /* of the job's ranks, of other jobs' processes */
    bool connected;
    int in_dispatch;            /* >0 while a transport callback runs our handlers */
    void *rx_desc;              /* the rendezvous descriptor rx is handling, or NULL */
    bool rx_desc_dropped;       /* ... and it was dropped unmoved (aml_rndv_tport.c) */
    aml_handler_t handlers[AML_H_TOTAL];
    aml_sdesc_t *free_sdesc;
    void *free_smsg, *free_rmsg;        /* message records for reuse, linked through their
                                         * first word (calloc/free per message showed in a
                                         * 16 KiB rendezvous ping-pong; see
                                         * docs/benchmarks/2026-11-28-figures-from-the-code.md) */
    aml_sdesc_t *free_sdesc_big;
    size_t sdesc_small;         /* room of the descriptors most packets take: a full header and
                                 * a user header of up to AML_SDESC_SMALL_UHDR bytes (an MPI
                                 * envelope), or an inline packet as long; a longer user
                                 * header or copied data (full-header one-packet messages, the
                                 * put rendezvous's rkey) takes one with a packet's room, so a
                                 * flood that UCX keeps pending holds small descriptors */
    size_t sdesc_big;           /* room of the others: a header and a one-packet message */
    size_t net_packet_size;
    uint64_t next_msg_id;
    int64_t tx_inflight;        /* packets handed to the transport, not yet completed */
    int64_t rx_busy;            /* incoming messages not complete */
    aml_htab_t deferred;        /* messages waiting for aml_accept/aml_reject, key = handle
                                 * (looked up, never dereferenced) */
    aml_handle_t next_handle;   /* handles are never reused: a stale one matches nothing */
    aml_htab_t waits;           /* aml_smsg_t awaiting DONE/CMPL */
    aml_htab_t replies;         /* aml_reply_wait_t */
    aml_htab_t cntrs;           /* registered counters, key = address */
    int adaptive_credits;
    int tok_head;               /* first peer owed tokens, -1: none */
    int lanes;
    aml_tport_ep_t *lane_eps;   /* lanes 1.. of peer i at [i * (lanes - 1)]; lane 0 is ep */
    aml_htab_t adapt_rx;        /* adaptive messages arriving (aml_rmsg_t) */
    aml_htab_t put_rx;          /* put-variant rendezvous landings awaiting RNDV_FIN */
    aml_region_t *regions;
    int nregions, cap_regions;
    /* collectives of the layer itself (barrier, address_init), indexed by epoch parity */
    uint64_t bar_epoch;
    int bar_recv[2][32];
    uint64_t addr_epoch;
    int addr_count[2];
    uintptr_t *addr_tab[2];
    int nheld;                  /* debug_reorder: peers with a held packet */
    int quiesce_got[3];         /* QUIESCE packets received per round (1, 2) */
    int64_t stashed;            /* packets that arrived ahead of their sequence number */
#ifdef AML_TEST_HOOKS
    int debug_fail_sends;       /* >0: the send that brings it to 0 fails */
#endif
    /* statistics per protocol */
    int64_t msgs[AML_PROTO_COUNT];
    int64_t bytes[AML_PROTO_COUNT];
};

/* The receive function of a packet type (the packet table's last column): the packet,
 * decoded and checked against its row; uhdr and data as it carried them. The table declares
 * every one of them. */
typedef void (*aml_rx_fn_t) (aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                             const void *data, size_t len);
#define AML_RX_DECL(t, fmt, flags, proto, fn) \
    void fn(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data, size_t len);
AML_PKT_TABLE(AML_RX_DECL)

/* ---- aml_util.c ------------------------------------------------------------------------ */
void aml_fatal(aml_t * aml, const char *fmt, ...) __attribute__ ((format(printf, 2, 3), noreturn));
void aml_rec_drain(void **head);

/* Zeroed records of one size, recycled through a free list (*head) linked through their
 * first word: a zeroed record from the list, else from malloc. */
static inline void *aml_rec_get(void **head, size_t size)
{
    void *p = *head;
    if (p)
        *head = *(void **) p;
    else if (!(p = malloc(size)))
        return NULL;
    memset(p, 0, size);
    return p;
}

static inline void aml_rec_put(void **head, void *p)
{
    *(void **) p = *head;
    *head = p;
}
bool aml_range_registered(aml_t * aml, uintptr_t addr, size_t len);

static inline void aml_cntr_incr(aml_cntr_t * c)
{
    if (c)
        c->value++;
}

/* The key of message msg_id from src in a table of incoming messages. */
/* The host of peer, for errors: a rank's hostname, or "another job". */
static inline const char *aml_peer_host(const aml_t * aml, int peer)
{
    return peer >= 0 && peer < aml->size && aml->hosts ? aml->hosts[peer] : "another job";
}

/* ---- aml_wire.c ------------------------------------------------------------------------ */
const char *aml_pkt_name(int type);
void aml_fatal_pkt(aml_t * aml, const aml_pkt_t * pkt, const char *fmt, ...)
    __attribute__ ((format(printf, 3, 4), noreturn));
void aml_send_failed(aml_t * aml, int peer, const void *hdr, const char *status)
    __attribute__ ((noreturn));
aml_cntr_t *aml_check_cntr(aml_t * aml, const aml_pkt_t * pkt);

/* Checks that need this process's state (one definition each: decoding and the fast paths,
 * aml_dispatch.c). */
static inline bool aml_src_ok(const aml_t * aml, uint32_t src)
{
    return src < (uint32_t) aml->npeers;
}

/* A peer index an API call may name. */
static inline bool aml_peer_ok(const aml_t * aml, int peer)
{
    return peer >= 0 && peer < aml->npeers;
}

static inline bool aml_handler_ok(const aml_t * aml, unsigned handler)
{
    return handler < AML_H_TOTAL && aml->handlers[handler].fn;
}

static inline bool aml_uhdr_len_ok(const aml_t * aml, size_t uhdr_len)
{
    return uhdr_len <= aml->max_uhdr;
}

/* ---- aml_tx.c -------------------------------------------------------------------------- */
aml_sdesc_t *aml_sdesc_get(aml_t * aml);
aml_sdesc_t *aml_sdesc_get_big(aml_t * aml);
aml_sdesc_t *aml_sdesc_get_uhdr(aml_t * aml, size_t uhdr_len);
void aml_sdesc_put(aml_t * aml, aml_sdesc_t * d);
void aml_sdesc_free_all(aml_t * aml);
aml_smsg_t *aml_smsg_new(aml_t * aml, const aml_xfer_t * x, int proto);
void aml_smsg_org_complete(aml_t * aml, aml_smsg_t * m);
void aml_smsg_event_done(aml_t * aml, aml_smsg_t * m, bool org_event);
void aml_smsg_release(aml_t * aml, aml_smsg_t * m);
void aml_pkt_init(aml_t * aml, aml_pkt_t * pkt, int type, int peer);
void aml_pkt_set_first(aml_sdesc_t * d, const aml_xfer_t * x, bool want_cmpl);
/* d's header for a medium compact packet of x, chunk at off (see aml_mpkt_t); sequenced
 * unless ADAPT_SDATA. The chunk goes as the packet's payload. */
void aml_mpkt_set(aml_t * aml, aml_sdesc_t * d, const aml_xfer_t * x, int type, uint64_t id,
                  size_t off);
aml_smsg_t *aml_rndv_scout_new(aml_t * aml, const aml_xfer_t * x, uint8_t flags, bool want_cmpl,
                               aml_sdesc_t ** dp);
int aml_send_desc(aml_t * aml, aml_sdesc_t * d, const void *data, size_t len);
int aml_send_desc_lane(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                       size_t len);
int aml_send_desc_flags(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                        size_t len, unsigned flags);
int aml_send_ctrl(aml_t * aml, int peer, int type, uint64_t msg_id, uint64_t aux0);
void aml_release_held(aml_t * aml);
void aml_adaptive_flush_tokens(aml_t * aml);

/* debug_reorder is a test hook: aml's unit-test build (AML_TEST_HOOKS) has it; elsewhere
 * aml_init refuses it and its branches compile away. */
#ifdef AML_TEST_HOOKS
#define aml_reorder(aml) AML_UNLIKELY((aml)->cfg.debug_reorder)
#else
#define aml_reorder(aml) 0
#endif

/* Transport t reaches a process other than this one: aml_poll progresses it at every pass. */
static inline void aml_tport_used(aml_t * aml, const aml_tport_t * t)
{
    for (int i = 0; i < aml->ntports; i++)
        if (aml->tports[i] == t)
            aml->tport_every[i] = 1;
}

/* The transport that reaches processes anywhere, other hosts and jobs (the first in use with a
 * network address: UCX), or NULL. */
static inline const aml_tport_t *aml_net_tport(const aml_t * aml)
{
    for (int i = 0; i < aml->ntports; i++)
        if (aml->tports[i]->net_address)
            return aml->tports[i];
    return NULL;
}

/* Peer p is reached by t (aml_connect, aml_add_peer): what t offers it, its eager limit (t's
 * own, or aml's) and the size of its eager and adaptive packets. */
static inline void aml_peer_set_tport(aml_t * aml, aml_peer_t * p, const aml_tport_t * t)
{
    p->tport = t;
    p->caps = t->offers ? t->offers(aml) : t->caps;
    if (!t->eager_limit || !t->eager_limit(aml, &p->eager_limit))
        p->eager_limit = aml->eager_limit;
    p->pkt_size = (t->caps & AML_TPORT_CAP_LOCAL) ? aml->packet_size : aml->net_packet_size;
}

/* Fills a compact header's common part for peer p and, when seq, assigns the packet the next
 * sequence number to p (else 0: an unsequenced packet). */
static inline void aml_spkt_fill(aml_spkt_t * s, aml_peer_t * p, bool seq, int type,
                                 unsigned handler, size_t uhdr_len)
{
    s->type = (uint8_t) type;
    s->handler = (uint8_t) handler;
    s->uhdr_len = (uint8_t) uhdr_len;
    s->src_hi = (uint8_t) (p->me >> 16);
    s->src_lo = (uint16_t) p->me;
    s->seq = seq ? (uint16_t) p->tx_seq++ : 0;
}

/* Statistics per protocol (AML_Q_MSGS_SENT, AML_Q_BYTES_SENT). */
static inline void aml_stat(aml_t * aml, int proto, size_t len)
{
    aml->msgs[proto]++;
    aml->bytes[proto] += (int64_t) len;
}

/* Whether x goes as a compact packet when it fits a packet (no counter, small ids). */
static inline bool aml_compact_ok(const aml_t * aml, const aml_xfer_t * x)
{
    return aml->compact && !x->tgt_cntr && !x->cmpl_cntr && x->handler <= UINT8_MAX &&
        x->uhdr_len <= UINT8_MAX;
}

/* Whether x's eager or adaptive packets take the medium compact header. */
static inline bool aml_mpkt_ok(const aml_t * aml, const aml_xfer_t * x)
{
    return aml_compact_ok(aml, x) && x->len <= UINT32_MAX;
}

/* Whether x fits one packet: compact header, else the full one. */
static inline bool aml_fits_onepacket(const aml_t * aml, const aml_xfer_t * x)
{
    size_t h = aml_compact_ok(aml, x) ? sizeof(aml_spkt_t) : sizeof(aml_pkt_t);
    return h + x->uhdr_len + x->len <= aml->packet_size;
}

static inline aml_tport_ep_t aml_lane(aml_t * aml, int peer, unsigned lane)
{
    lane %= (unsigned) aml->lanes;
    return lane ? aml->lane_eps[(size_t) peer * (aml->lanes - 1) + lane - 1] :
        aml->peers[peer].ep;
}

/* The origin may reuse its buffer: origin counter, then origin handler. */
static inline void aml_org_done(aml_t * aml, aml_cntr_t * c, aml_compl_fn_t fn, void *arg)
{
    aml_cntr_incr(c);
    if (fn)
        fn(aml, arg);
}

/* ---- aml_rx.c -------------------------------------------------------------------------- */
aml_rmsg_t *aml_rmsg_start(aml_t * aml, int src, int type, uint64_t msg_id, size_t len);
void aml_rmsg_free(aml_t * aml, aml_rmsg_t * r);
void aml_run_handler(aml_t * aml, unsigned handler, int type, uint32_t src, const void *uhdr,
                     size_t uhdr_len, uint64_t msg_len, const void *data, int proto,
                     aml_recv_t * recv, aml_rmsg_t * msg);
void aml_call_handler(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                      aml_recv_t * recv, aml_rmsg_t * msg);
void aml_rx_complete(aml_t * aml, int src, aml_cntr_t * tgt_cntr, const aml_recv_t * recv,
                     bool want_cmpl, uint64_t msg_id, bool counted);
void aml_rx_counted_done(aml_t * aml, int src);
void aml_defer_add(aml_t * aml, aml_rmsg_t * r);
void *aml_rmsg_landing(aml_t * aml, aml_rmsg_t * r, bool can_part);
void aml_rmsg_landed(aml_t * aml, aml_rmsg_t * r, bool want_cmpl);

/* A message from src that is not complete when its first packet (or scout) was handled,
 * deferred or not: a fence from src waits for it (aml.h) until aml_rx_counted_done. */
static inline void aml_rx_count(aml_t * aml, int src)
{
    aml->peers[src].rx_incomplete++;
    aml->rx_busy++;
}

/* ---- protocols ------------------------------------------------------------------------- */
/* aml_onepacket.c */
int aml_onepacket_send(aml_t * aml, const aml_xfer_t * x);
int aml_onepacket_send_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                             size_t uhdr_len, const void *data, size_t len);
void aml_onepacket_recv_compact(aml_t * aml, const aml_spkt_t * s, const char *uhdr,
                                const char *data, size_t len);

/* aml_eager.c */
int aml_eager_send(aml_t * aml, const aml_xfer_t * x);
/* aml_adaptive.c */
bool aml_adaptive_credit(aml_t * aml, int peer);
int aml_adaptive_send(aml_t * aml, const aml_xfer_t * x);
int aml_adaptive_accept(aml_t * aml, aml_rmsg_t * r, const aml_recv_t * recv);
int aml_adaptive_reject(aml_t * aml, aml_rmsg_t * r);
void aml_adaptive_free_all(aml_t * aml);
/* aml_rndv_put.c */
int aml_rndv_put_send(aml_t * aml, const aml_xfer_t * x);
void aml_rndv_put_recv_done(aml_t * aml, const aml_pkt_t * pkt, aml_smsg_t * m);
void aml_rndv_put_ready(aml_t * aml, aml_rmsg_t * r);
void aml_rndv_put_free_all(aml_t * aml);
/* aml_rndv_tport.c */
int aml_rndv_tport_send(aml_t * aml, const aml_xfer_t * x);
void aml_rndv_tport_recv(aml_t * aml, aml_rmsg_t * r);
void aml_rndv_recv_sscout(aml_t * aml, const aml_mpkt_t * m, const char *uhdr, void *desc);
/* aml_rndv.c */
int aml_rndv_get_send(aml_t * aml, const aml_xfer_t * x);
void aml_rndv_accept(aml_t * aml, aml_rmsg_t * r, const aml_recv_t * recv);
void aml_rndv_reject(aml_t * aml, aml_rmsg_t * r);
void aml_rndv_free_deferred(aml_t * aml);

/* ---- services -------------------------------------------------------------------------- */
/* aml_xfer.c: aml_xfer without the restriction to user handler ids */
int aml_xfer_internal(aml_t * aml, const aml_xfer_t * x);
/* aml_rma.c */
int aml_rma_init(aml_t * aml);
/* aml_sync.c */
int aml_sync_init(aml_t * aml);
void aml_quiesce_rounds(aml_t * aml, int round);
int aml_barrier(aml_t * aml);
/* aml_dynamic.c */
int aml_dynamic_init(aml_t * aml);
int aml_dynamic_world(aml_t * aml, int i, const void *net, size_t net_len, uint64_t uuid);
void aml_dynamic_free(aml_t * aml);
/* waits (progressing, repeating the request) until peer i of another job answered, failed or
 * passed its deadline; AML_OK, AML_ERR_TIMEOUT, AML_ERR_TRANSPORT, or AML_ERR_STATE inside a
 * handler */
int aml_dynamic_wait(aml_t * aml, int i);
/* a packet from outside the job (AML_TPORT_SRC_STRANGER): a CONNECT it accepts, or refused */
int aml_dynamic_rx_stranger(aml_t * aml, const void *header, size_t header_length,
                            const void *data, size_t length, bool by_rndv);

/* The sender of a UCX packet that carries stamp: rank stamp ^ token of the job (tokens are
 * drawn so that no process of another job's stamp falls below 2^32), the process of another
 * job given that token, or AML_TPORT_SRC_STRANGER. */
static inline int64_t aml_token_src(aml_t * aml, uint64_t stamp)
{
    uint64_t r = stamp ^ aml->token;
    aml_hent_t *e;
    if (__builtin_expect(r < (uint64_t) aml->size, 1))
        return (int64_t) r;
    e = aml_htab_get(&aml->tokens, stamp);
    return e ? (int64_t) (AML_CONTAINER(e, aml_peer_t, th) - aml->peers) : AML_TPORT_SRC_STRANGER;
}

/* ---- top ------------------------------------------------------------------------------- */
/* aml_dispatch.c: the transports' rx function (aml_tport_rx_fn_t) */
int aml_rx(aml_t * aml, const void *header, size_t header_length, void *data, size_t length,
           unsigned flags, int64_t known_src);
void aml_rmsg_reject(aml_t * aml, aml_rmsg_t * r);
aml_rmsg_t *aml_undefer(aml_t * aml, aml_handle_t h);
void aml_dispatch_free_stash(aml_t * aml);


#ifdef AML_TEST_HOOKS
/* test hooks, in the unit-test build only (never in libmpi): send bytes as an aml packet
 * without any checking (malformed-packet tests); make the n-th next send fail */
int aml_debug_send_raw(aml_t * aml, int peer, const void *hdr, size_t hdr_len,
                       const void *data, size_t len);
uint32_t aml_debug_next_seq(aml_t * aml, int peer);
void aml_debug_fail_send(aml_t * aml, int n);
#endif

#endif /* AML_IMPL_H_INCLUDED */
