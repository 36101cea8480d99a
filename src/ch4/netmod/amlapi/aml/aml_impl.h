/*
 * aml internals shared by the protocol files. Not part of the API.
 */
#ifndef AML_IMPL_H_INCLUDED
#define AML_IMPL_H_INCLUDED

#include "aml.h"
#include <ucp/api/ucp.h>
#include <stdbool.h>
#include <stdio.h>

#define AML_LIKELY(x)   __builtin_expect(!!(x), 1)
#define AML_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* One UCP active-message id carries every aml packet; the aml packet type is in the header. */
#define AML_UCP_AM_ID 7

/* Version of the wire format (packet types and headers); ranks must agree (aml_connect). */
#define AML_WIRE_VERSION 2

/* What precedes the transport address in aml_local_address: the settings every rank must
 * share, because receivers check packets against their own (credit counts, header limits,
 * packet sizes). */
typedef struct aml_addr_hdr {
    uint32_t wire_version;
    uint32_t packet_size;
    uint32_t adaptive_credits;
    uint32_t max_uhdr;
} aml_addr_hdr_t;

/* Packet types on the wire. */
enum {
    AML_PKT_ONE = 1,            /* one-packet message: pkt | uhdr, data */
    AML_PKT_EAGER_FIRST,        /* first packet of an eager message: pkt | uhdr, chunk */
    AML_PKT_EAGER_CONT,         /* later packet: pkt, chunk at pkt.addr (offset) */
    AML_PKT_RNDV_SCOUT,         /* rendezvous request: pkt | uhdr, packed rkey */
    AML_PKT_RNDV_DONE,          /* receiver -> sender: data pulled */
    AML_PKT_CMPL,               /* target -> origin: message completed (completion counter) */
    AML_PKT_GET_REQ,            /* origin -> target: send me [addr, addr+msg_len) */
    AML_PKT_RMW_REQ,            /* origin -> target: atomic op on *addr */
    AML_PKT_RMW_REPLY,          /* target -> origin: previous value */
    AML_PKT_FENCE_REQ,          /* origin -> target: ack when all before this completed */
    AML_PKT_FENCE_ACK,
    AML_PKT_ADAPT_FIRST,        /* adaptive eager, sequenced: pkt | uhdr, first chunk */
    AML_PKT_ADAPT_DATA,         /* adaptive eager, not sequenced, any lane: chunk at pkt.addr */
    AML_PKT_ADAPT_TOKEN,        /* receiver -> sender: msg_id no longer holds receiver memory */
    AML_PKT_RNDV_RTR,           /* put variant, receiver -> sender: landing address, rkey */
    AML_PKT_RNDV_FIN,           /* put variant, sender -> receiver: the data is in place */
    AML_PKT_ONE_SHORT,          /* one-packet message in the compact header: spkt | uhdr, data */
    AML_PKT_EAGER_SFIRST,       /* EAGER_FIRST in the medium compact header: mpkt | uhdr, chunk */
    AML_PKT_EAGER_SCONT,        /* EAGER_CONT in it: mpkt, chunk at mpkt.off */
    AML_PKT_ADAPT_SFIRST,       /* ADAPT_FIRST in it: mpkt | uhdr, first chunk */
    AML_PKT_ADAPT_SDATA,        /* ADAPT_DATA in it: mpkt, chunk at mpkt.off, not sequenced */
    AML_PKT_RNDV_SSCOUT,        /* UCX-rendezvous scout in it: mpkt | uhdr, data by UCX */
    AML_PKT_QUIESCE,            /* aml_quiesce round aux0 (1 or 2): nothing new follows */
    AML_PKT_TYPE_MAX
};

/* pkt.flags */
#define AML_PKTF_CMPL 0x1       /* origin wants an AML_PKT_CMPL when the message completes */
#define AML_PKTF_PUT  0x2       /* RNDV_SCOUT: put variant, no rkey follows */
#define AML_PKTF_UCX  0x4       /* RNDV_SCOUT: UCX rendezvous, the data comes with the AM */

/* aml_smsg_t.put_state of a put-variant rendezvous send */
enum { AML_PUT_NONE = 0, AML_PUT_WAIT_RTR, AML_PUT_PUTTING, AML_PUT_WAIT_DONE };

/* Wire header, 72 bytes, every field validated before use. */
typedef struct aml_pkt {
    uint8_t type;
    uint8_t proto;
    uint8_t flags;
    uint8_t rsvd0;
    uint16_t handler;           /* handler id; RMW_REQ: aml_rmw_op_t */
    uint16_t rsvd1;
    uint32_t src;               /* sender rank */
    uint32_t seq;               /* per (sender, receiver) packet sequence number */
    uint32_t uhdr_len;
    uint32_t rsvd2;
    uint64_t msg_len;           /* data bytes of the whole message */
    uint64_t msg_id;            /* sender's message id */
    uint64_t addr;              /* CONT: offset; SCOUT: source address; GET/RMW: target addr */
    uint64_t cntr;              /* target counter, in the target's address space, or 0 */
    uint64_t aux0;              /* SCOUT: rkey length; RMW: operand 0 / previous value */
    uint64_t aux1;              /* RMW: operand 1 */
} aml_pkt_t;

/* Compact packet: a one-packet message that names no counter and wants no CMPL. Wire format:
 * aml_spkt_t | uhdr | data, all in UCX's AM header, up to AML_COMPACT_MAX bytes ("inline":
 * built on the stack); larger ones carry the data as UCX's payload, sent from the caller's
 * buffer (never both). Why the header is so small: UCX's shared-memory FIFO element has a 28-byte
 * header, so the first cache line holds 36 bytes of UCX data, UCP's own AM header takes 8 of
 * them, and a message that spills into the second line costs the receiver a second
 * cache-line transfer (ucx_perftest ucp_am_lat: 0.28 us at 28 bytes, 0.35 at 29). With this
 * 8-byte header and MPI's 12-byte envelope, MPI messages up to 8 bytes fit the first line;
 * UCX's inline ("short") send goes up to 92 bytes. The 72-byte full header pushed even an empty
 * MPI message to UCX's bcopy path (0.42 us). Compact packets need fewer than 2^24 ranks, user
 * headers under 256 bytes, and a sequence window under 2^15 packets per peer (the receiver
 * extends the 16-bit sequence number from its own count; packets only leave the order of
 * their endpoint briefly, through UCX rendezvous and adaptive lanes). */
typedef struct aml_spkt {
    uint8_t type;               /* AML_PKT_ONE_SHORT */
    uint8_t handler;
    uint8_t uhdr_len;
    uint8_t src_hi;             /* source rank = src_hi << 16 | src_lo */
    uint16_t src_lo;
    uint16_t seq;               /* low 16 bits of the per-peer sequence number */
} aml_spkt_t;

/* Medium compact packet: an eager or adaptive eager packet, or a UCX-rendezvous scout, of a
 * message naming no counter, shorter than 4 GiB. 24 bytes of header instead of 72, so that a
 * 16 KiB eager MPI message is two packets, not three; the data is always UCX's payload. */
typedef struct aml_mpkt {
    aml_spkt_t s;               /* EAGER_SFIRST/SCONT, ADAPT_SFIRST/SDATA, RNDV_SSCOUT; handler,
                                 * uhdr_len: first packets only; seq: 0 in ADAPT_SDATA (not
                                 * sequenced) */
    uint32_t msg_len;           /* data bytes of the whole message */
    uint32_t off;               /* offset of this packet's chunk */
    uint64_t msg_id;            /* sender's message id */
} aml_mpkt_t;

#define AML_COMPACT_MAX 256     /* built on the stack, sent inline or copied: the "inline" size */
#define AML_SEQ_WINDOW (1 << 15) /* a packet this far ahead of its sequence is malformed (compact
                                  * headers carry 16 bits of sequence number) */
#define AML_STASH_MAX 4096      /* early packets held per peer: beyond, the peer is misbehaving
                                 * (debug_reorder holds one; UCX reorders only rendezvous) */
#define AML_COMPACT_MAX_RANKS (1 << 24)
#define AML_SPKT_SRC(s) ((uint32_t) (s)->src_hi << 16 | (s)->src_lo)

/* The full sequence number nearest to rx_seq with these low 16 bits. */
static inline uint32_t aml_seq_extend(uint32_t rx_seq, uint16_t low)
{
    return rx_seq + (uint32_t) (int32_t) (int16_t) (uint16_t) (low - (uint16_t) rx_seq);
}

/* Internal handler ids follow the user's. */
enum {
    AML_H_PUT = AML_MAX_HANDLERS,
    AML_H_GET_REPLY,
    AML_H_BARRIER,
    AML_H_ADDR,
    AML_H_TOTAL
};

#define AML_MAX_UHDR AML_UHDR_LIMIT   /* also limited by UCX's max AM header */

/* Intrusive hash table keyed by a 64-bit value (ids, addresses). */
typedef struct aml_hent {
    struct aml_hent *next;
    uint64_t key;
} aml_hent_t;

typedef struct aml_htab {
    aml_hent_t **b;
    size_t nb;                  /* power of two */
    size_t count;
} aml_htab_t;

int aml_htab_init(aml_htab_t * t, size_t nb);
void aml_htab_free(aml_htab_t * t);
void aml_htab_put(aml_htab_t * t, aml_hent_t * e, uint64_t key);
aml_hent_t *aml_htab_get(aml_htab_t * t, uint64_t key);
aml_hent_t *aml_htab_del(aml_htab_t * t, uint64_t key);
aml_hent_t *aml_htab_pop(aml_htab_t * t);

#define AML_CONTAINER(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

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
    ucp_mem_h memh;             /* rendezvous */
    void *rkey_buf;
    aml_t *aml;                 /* put variant: */
    int put_state;
    const void *data;
    size_t len;
    ucp_rkey_h put_rkey;        /* the receiver's landing */
    bool ucx_rndv;              /* sent by UCX rendezvous: completes with the AM send */
} aml_smsg_t;

/* A packet handed to UCX: lives until UCX completes the send. */
typedef struct aml_sdesc {
    struct aml_sdesc *next;     /* free list */
    aml_t *aml;
    aml_smsg_t *msg;            /* owner, or NULL */
    aml_cntr_t *org_cntr;       /* compact packet sent from the caller's buffer: origin */
    aml_compl_fn_t org_fn;      /* completion when UCX is done with it */
    void *org_arg;
    int peer;
    size_t hdr_len;
    size_t held_len;            /* debug_reorder: data bytes copied after the header */
    union {
        aml_pkt_t pkt;
        uint64_t align;
    } u;
    /* followed by the user header and, for one-packet messages, the data */
} aml_sdesc_t;

#define AML_SDESC_PAYLOAD(d) ((char *) &(d)->u.pkt + sizeof(aml_pkt_t))

/* A byte range [start, end) of a message. */
typedef struct aml_range {
    size_t start, end;
} aml_range_t;

/* An incoming message that is not complete when its first packet is handled. */
typedef struct aml_rmsg {
    aml_hent_t h;               /* adaptive: in aml->adapt_rx, key = msg_id * size + src */
    aml_t *aml;
    int src;
    int type;                   /* packet type of its first packet */
    uint64_t msg_id;
    size_t len;
    size_t received;
    aml_recv_t recv;
    aml_cntr_t *tgt_cntr;
    bool want_cmpl;
    ucp_rkey_h rkey;            /* rendezvous (get) */
    ucp_mem_h memh;             /* rendezvous (put): the exposed landing */
    bool put;                   /* rendezvous by put */
    void *ucx_desc;             /* UCX rendezvous: UCP's data descriptor */
    void *bounce;               /* rendezvous into an unpack handler; adaptive: staging */
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
    char *hdr, *data;           /* data: a copy, or UCP's descriptor of a UCX rendezvous */
    bool ucx_desc;              /* data is UCP's descriptor: released if never replayed */
} aml_ooo_t;

typedef struct aml_peer {
    ucp_ep_h ep;
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
    bool dirty;                 /* sent something since the last fence */
    int adapt_out;              /* our adaptive messages to peer awaiting its token */
    int adapt_in;               /* peer's adaptive messages here not yet confirmed */
    unsigned next_lane;         /* round robin over the lanes */
    struct aml_sdesc *held;     /* debug_reorder: a packet held back to overtake */
    int quiesce_round;          /* last QUIESCE round received from peer */
} aml_peer_t;

typedef struct aml_handler {
    aml_hdr_handler_t fn;
    void *ctx;
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
    size_t compact_max;         /* largest compact packet: AML_COMPACT_MAX or UCX's AM header */
    size_t eager_limit;
    int protocol;
    ucp_context_h ctx;
    ucp_worker_h worker;
    int efd;                    /* interrupt mode: the worker's event fd, else -1 */
    ucp_address_t *ucx_addr;
    size_t ucx_addr_len;
    char *addr;                 /* aml_addr_hdr_t, then the UCX worker's address */
    size_t addr_len;
    struct {                    /* the first setting a peer disagreed on (aml_connect) */
        const char *setting;
        int peer;
        int64_t mine, theirs;
    } mismatch;
    aml_peer_t *peers;
    bool connected;
    int in_dispatch;            /* >0 while a UCX callback runs our handlers */
    aml_handler_t handlers[AML_H_TOTAL];
    aml_sdesc_t *free_sdesc;
    void *free_smsg, *free_rmsg;        /* message records for reuse, linked through their
                                         * first word (calloc/free per message cost 0.1 us
                                         * of a 16 KiB rendezvous ping-pong) */
    size_t sdesc_size;
    uint64_t next_msg_id;
    int64_t tx_inflight;        /* packets handed to UCX, not yet completed */
    int64_t rx_busy;            /* incoming messages not complete */
    aml_htab_t deferred;        /* messages waiting for aml_accept/aml_reject, key = handle
                                 * (looked up, never dereferenced) */
    aml_handle_t next_handle;   /* handles are never reused: a stale one matches nothing */
    aml_htab_t waits;           /* aml_smsg_t awaiting DONE/CMPL */
    aml_htab_t replies;         /* aml_reply_wait_t */
    aml_htab_t cntrs;           /* registered counters, key = address */
    int adaptive_credits;
    int lanes;
    ucp_ep_h *lane_eps;         /* lanes 1.. of peer i at [i * (lanes - 1)]; lane 0 is ep */
    uint64_t *adapt_ids;        /* ids of peer i's unconfirmed messages at [i * credits] */
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

/* core */
void aml_fatal(aml_t * aml, const char *fmt, ...) __attribute__ ((format(printf, 2, 3), noreturn));
void aml_fatal_pkt(aml_t * aml, const aml_pkt_t * pkt, const char *fmt, ...)
    __attribute__ ((format(printf, 3, 4), noreturn));
const char *aml_pkt_name(int type);
bool aml_pkt_sequenced(int type);
aml_sdesc_t *aml_sdesc_get(aml_t * aml);
void aml_sdesc_put(aml_t * aml, aml_sdesc_t * d);
void aml_pkt_init(aml_t * aml, aml_pkt_t * pkt, int type, int peer);
void aml_pkt_set_first(aml_sdesc_t * d, const aml_xfer_t * x, bool want_cmpl);
void *aml_rndv_landing(aml_t * aml, aml_rmsg_t * r);
aml_smsg_t *aml_rndv_scout_new(aml_t * aml, const aml_xfer_t * x, uint8_t flags, bool want_cmpl,
                               aml_sdesc_t ** dp);
int aml_send_desc(aml_t * aml, aml_sdesc_t * d, const void *data, size_t len);
void aml_send_failed(aml_t * aml, int peer, const void *hdr, const char *status)
    __attribute__ ((noreturn));
int aml_send_desc_lane(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len);
int aml_send_desc_flags(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len,
                        uint32_t am_flags);

/* Fills a compact header's common part and assigns the packet the next sequence number to
 * peer p (none when p is NULL: an unsequenced packet). */
static inline void aml_spkt_fill(const aml_t * aml, aml_spkt_t * s, aml_peer_t * p, int type,
                                 unsigned handler, size_t uhdr_len)
{
    s->type = (uint8_t) type;
    s->handler = (uint8_t) handler;
    s->uhdr_len = (uint8_t) uhdr_len;
    s->src_hi = (uint8_t) (aml->rank >> 16);
    s->src_lo = (uint16_t) aml->rank;
    s->seq = p ? (uint16_t) p->tx_seq++ : 0;
}

/* d's header for a medium compact packet of x, chunk at off (see aml_mpkt_t); sequenced
 * unless ADAPT_SDATA. The chunk goes as UCX's payload. */
void aml_mpkt_set(aml_t * aml, aml_sdesc_t * d, const aml_xfer_t * x, int type, uint64_t id,
                  size_t off);

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

static inline ucp_ep_h aml_lane(aml_t * aml, int peer, unsigned lane)
{
    lane %= (unsigned) aml->lanes;
    return lane ? aml->lane_eps[(size_t) peer * (aml->lanes - 1) + lane - 1] :
        aml->peers[peer].ep;
}

int aml_xfer_internal(aml_t * aml, const aml_xfer_t * x);
int aml_send_ctrl(aml_t * aml, int peer, int type, uint64_t msg_id, uint64_t aux0);
void aml_smsg_release(aml_t * aml, aml_smsg_t * m);
aml_rmsg_t *aml_rmsg_new(aml_t * aml);
void aml_rmsg_free(aml_t * aml, aml_rmsg_t * r);
void aml_smsg_org_complete(aml_t * aml, aml_smsg_t * m);
void aml_smsg_event_done(aml_t * aml, aml_smsg_t * m, bool org_event);
aml_smsg_t *aml_smsg_new(aml_t * aml, const aml_xfer_t * x, int proto);
bool aml_range_registered(aml_t * aml, uintptr_t addr, size_t len);
aml_cntr_t *aml_check_cntr(aml_t * aml, const aml_pkt_t * pkt);
void aml_check_handler(aml_t * aml, const aml_pkt_t * pkt);
void aml_run_handler(aml_t * aml, unsigned handler, int type, uint32_t src, const void *uhdr,
                     size_t uhdr_len, uint64_t msg_len, const void *data, int proto,
                     aml_recv_t * recv, aml_rmsg_t * msg);
void aml_call_handler(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                      aml_recv_t * recv, aml_rmsg_t * msg);
void aml_deliver(aml_t * aml, const aml_recv_t * recv, size_t offset, const void *data,
                 size_t len);
void aml_rx_complete(aml_t * aml, int src, aml_cntr_t * tgt_cntr, const aml_recv_t * recv,
                     bool want_cmpl, uint64_t msg_id, bool counted);
void aml_cntr_incr(aml_cntr_t * c);

/* The origin may reuse its buffer: origin counter, then origin handler. */
static inline void aml_org_done(aml_t * aml, aml_cntr_t * c, aml_compl_fn_t fn, void *arg)
{
    aml_cntr_incr(c);
    if (fn)
        fn(aml, arg);
}
void aml_stat(aml_t * aml, int proto, size_t len);

/* protocols: one file each */
int aml_onepacket_send(aml_t * aml, const aml_xfer_t * x);
void aml_onepacket_recv(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                        size_t len);
void aml_onepacket_recv_compact(aml_t * aml, const aml_spkt_t * s, const char *uhdr,
                                const char *data, size_t len);
int aml_eager_send(aml_t * aml, const aml_xfer_t * x);
void aml_eager_recv_first(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                          const void *data, size_t len);
void aml_eager_recv_cont(aml_t * aml, const aml_pkt_t * pkt, const void *data, size_t len);
int aml_rndv_send(aml_t * aml, const aml_xfer_t * x);
void aml_rndv_recv_scout(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                         const void *data, size_t len);
void aml_rndv_recv_sscout(aml_t * aml, const aml_mpkt_t * m, const char *uhdr, void *desc);
void aml_rndv_recv_done(aml_t * aml, const aml_pkt_t * pkt);
void aml_rndv_free_deferred(aml_t * aml);
aml_rmsg_t *aml_undefer(aml_t * aml, aml_handle_t h);
void aml_rmsg_reject(aml_t * aml, aml_rmsg_t * r);
void aml_rx_counted_done(aml_t * aml, int src);
void aml_defer_add(aml_t * aml, aml_rmsg_t * r);
bool aml_adaptive_credit(aml_t * aml, int peer);
int aml_adaptive_send(aml_t * aml, const aml_xfer_t * x);
void aml_adaptive_recv_first(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                             const void *data, size_t len);
void aml_adaptive_recv_data(aml_t * aml, const aml_pkt_t * pkt, const void *data, size_t len);
void aml_adaptive_recv_token(aml_t * aml, const aml_pkt_t * pkt);
int aml_adaptive_accept(aml_t * aml, aml_rmsg_t * r, const aml_recv_t * recv);
int aml_adaptive_reject(aml_t * aml, aml_rmsg_t * r);
void aml_adaptive_free_all(aml_t * aml);
int aml_rndv_put_send(aml_t * aml, const aml_xfer_t * x);
void aml_rndv_put_flushed(aml_t * aml, aml_smsg_t * m);
void aml_rndv_put_recv_rtr(aml_t * aml, const aml_pkt_t * pkt, const void *data, size_t len);
void aml_rndv_put_recv_done(aml_t * aml, const aml_pkt_t * pkt, aml_smsg_t * m);
void aml_rndv_put_ready(aml_t * aml, aml_rmsg_t * r);
void aml_rndv_put_recv_fin(aml_t * aml, const aml_pkt_t * pkt);
void aml_rndv_put_free_all(aml_t * aml);

/* rma and sync */
int aml_rma_init(aml_t * aml);
void aml_rma_recv_get_req(aml_t * aml, const aml_pkt_t * pkt);
void aml_rma_recv_rmw_req(aml_t * aml, const aml_pkt_t * pkt);
void aml_rma_recv_rmw_reply(aml_t * aml, const aml_pkt_t * pkt);
int aml_sync_init(aml_t * aml);
void aml_sync_recv_fence_req(aml_t * aml, const aml_pkt_t * pkt);
void aml_sync_recv_fence_ack(aml_t * aml, const aml_pkt_t * pkt);
void aml_sync_recv_cmpl(aml_t * aml, const aml_pkt_t * pkt);
void aml_sync_rx_idle(aml_t * aml, int src);
void aml_sync_recv_quiesce(aml_t * aml, const aml_pkt_t * pkt);
void aml_quiesce_rounds(aml_t * aml, int round);
int aml_barrier(aml_t * aml);

#ifdef AML_TEST_HOOKS
/* test hooks, in the unit-test build only (never in libmpi): send bytes as an aml packet
 * without any checking (malformed-packet tests); make the n-th next send fail */
int aml_debug_send_raw(aml_t * aml, int peer, const void *hdr, size_t hdr_len,
                       const void *data, size_t len);
uint32_t aml_debug_next_seq(aml_t * aml, int peer);
void aml_debug_fail_send(aml_t * aml, int n);
#endif

#endif /* AML_IMPL_H_INCLUDED */
