/*
 * aml wire formats: packet headers and the packet table. Not part of the API.
 *
 * Every packet begins with its type; the type's row in the packet table (AML_PKT_TABLE) says
 * which header format it uses, whether it is sequenced, what it may carry and which function
 * receives it. Decoding, the receive fast paths and replay of early packets all read that
 * one table (aml_wire.c, aml_dispatch.c).
 */
#ifndef AML_WIRE_H_INCLUDED
#define AML_WIRE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Version of the wire format (packet types and headers); ranks must agree (aml_connect). */
#define AML_WIRE_VERSION 5

/* What precedes the transport address in aml_local_address: the settings every rank must
 * share, because receivers check packets against their own (credit counts, header limits,
 * packet sizes). */
typedef struct aml_addr_hdr {
    uint32_t wire_version;
    uint32_t packet_size;
    uint32_t adaptive_credits;
    uint32_t max_uhdr;
    uint32_t net_packet_size;
    uint32_t rsvd;
    uint64_t uuid;              /* this aml_t's id: the start of its upid (aml_add_peer) */
    uint64_t token;             /* UCX packets to this process carry token ^ their source
                                 * (aml_ucx.c); in a CONNECT, the token for that one peer */
} aml_addr_hdr_t;

/* The body of a CONNECT packet (its payload), then the sender's upid (upid_len bytes). */
typedef struct aml_conn_body {
    aml_addr_hdr_t cfg;         /* the sender's settings (the receiver's must be equal), id */
    uint32_t idx;               /* the sender's index for the receiver: the source the
                                 * receiver puts in every packet it sends to the sender */
    uint32_t flags;             /* AML_CONNF_* */
    uint32_t upid_len;
    uint32_t rsvd;
    uint64_t to_uuid;           /* the receiver's id, as its upid gave it to the sender */
} aml_conn_body_t;

#define AML_CONNF_REPLY 0x1     /* answer with your own CONNECT */
#define AML_UPID_MAX 1024       /* no upid is longer (a UCX network address is ~100 bytes) */
#define AML_SRC_NONE 0xffffffffu /* CONNECT: the sender has no index at the receiver yet */

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
    AML_PKT_ADAPT_TOKEN,        /* receiver -> sender: aux0 of its messages no longer hold
                                 * receiver memory (credits back) */
    AML_PKT_RNDV_RTR,           /* put variant, receiver -> sender: landing address, rkey */
    AML_PKT_RNDV_FIN,           /* put variant, sender -> receiver: the data is in place */
    AML_PKT_ONE_SHORT,          /* one-packet message in the compact header: spkt | uhdr, data */
    AML_PKT_EAGER_SFIRST,       /* EAGER_FIRST in the medium compact header: mpkt | uhdr, chunk */
    AML_PKT_EAGER_SCONT,        /* EAGER_CONT in it: mpkt, chunk at mpkt.off */
    AML_PKT_ADAPT_SFIRST,       /* ADAPT_FIRST in it: mpkt | uhdr, first chunk */
    AML_PKT_ADAPT_SDATA,        /* ADAPT_DATA in it: mpkt, chunk at mpkt.off, not sequenced */
    AML_PKT_RNDV_SSCOUT,        /* transport-rendezvous scout in it: mpkt | uhdr, data by the
                                 * transport */
    AML_PKT_QUIESCE,            /* aml_quiesce round aux0 (1 or 2): nothing new follows */
    AML_PKT_CONNECT,            /* a process of another job introduces itself: src is
                                 * AML_SRC_NONE in a request (AML_CONNF_REPLY), the sender's
                                 * index at the receiver in an answer; the payload an
                                 * aml_conn_body_t and its upid */
    AML_PKT_TYPE_MAX
};

/* pkt.flags */
#define AML_PKTF_CMPL 0x1       /* origin wants an AML_PKT_CMPL when the message completes */
#define AML_PKTF_PUT  0x2       /* RNDV_SCOUT: put variant, no rkey follows */
#define AML_PKTF_TRNDV 0x4      /* RNDV_SCOUT: by the transport's rendezvous (UCX's AM
                                 * rendezvous), the data comes with the packet */

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
 * aml_spkt_t | uhdr | data, all in the transport's packet header, up to AML_COMPACT_MAX bytes
 * ("inline": built on the stack); larger ones carry the data as the packet's payload, sent
 * from the caller's buffer (never both). Why the header is so small: UCX's shared-memory FIFO
 * element has a 28-byte header, so the first cache line holds 36 bytes of UCX data, UCP's own
 * AM header takes 8 of them, and a message that spills into the second line costs the
 * receiver a second cache-line transfer (ucx_perftest ucp_am_lat steps up from 28 to 29
 * bytes: docs/benchmarks/2026-11-28-figures-from-the-code.md). With this 8-byte header and
 * MPI's 12-byte envelope, MPI messages up to 8 bytes fit the first line; UCX's inline
 * ("short") send goes up to 92 bytes. The 72-byte full header pushed even an empty MPI
 * message to UCX's slower bcopy path. Compact packets need fewer than 2^24 ranks, user
 * headers under 256 bytes, and a sequence window under 2^15 packets per peer (the receiver
 * extends the 16-bit sequence number from its own count; packets only leave the order of
 * their endpoint briefly, through transport rendezvous and adaptive lanes). */
typedef struct aml_spkt {
    uint8_t type;               /* AML_PKT_ONE_SHORT */
    uint8_t handler;
    uint8_t uhdr_len;
    uint8_t src_hi;             /* source rank = src_hi << 16 | src_lo */
    uint16_t src_lo;
    uint16_t seq;               /* low 16 bits of the per-peer sequence number */
} aml_spkt_t;

/* Medium compact packet: an eager or adaptive eager packet, or a transport-rendezvous scout,
 * of a message naming no counter, shorter than 4 GiB. 24 bytes of header instead of 72, so
 * that a 16 KiB eager MPI message is two packets, not three; the data is always the packet's
 * payload. */
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
                                 * (the transports keep order; debug_reorder holds one) */
#define AML_COMPACT_MAX_RANKS (1 << 24)
#define AML_SPKT_SRC(s) ((uint32_t) (s)->src_hi << 16 | (s)->src_lo)

/* The full sequence number nearest to rx_seq with these low 16 bits. */
static inline uint32_t aml_seq_extend(uint32_t rx_seq, uint16_t low)
{
    return rx_seq + (uint32_t) (int32_t) (int16_t) (uint16_t) (low - (uint16_t) rx_seq);
}

/* The source rank a header claims (any format), or -1 when it is too short to say: a
 * transport that knows the sender (vnode's per-pair FIFOs) checks it. */
static inline int64_t aml_pkt_claimed_src(const void *hdr, size_t hlen)
{
    const uint8_t *b = (const uint8_t *) hdr;
    unsigned t = hlen ? b[0] : 0;
    if (t == AML_PKT_ONE_SHORT || (t >= AML_PKT_EAGER_SFIRST && t <= AML_PKT_RNDV_SSCOUT)) {
        aml_spkt_t s;
        if (hlen < sizeof(s))
            return -1;
        memcpy(&s, hdr, sizeof(s));
        return AML_SPKT_SRC(&s);
    } else {
        uint32_t src;
        if (hlen < sizeof(aml_pkt_t))
            return -1;
        memcpy(&src, b + offsetof(aml_pkt_t, src), sizeof(src));
        return src;
    }
}

/* ---- the packet table ---------------------------------------------------------------- */

/* Header formats */
enum {
    AML_FMT_FULL,               /* aml_pkt_t */
    AML_FMT_SHORT,              /* aml_spkt_t: data after the user header, or as payload */
    AML_FMT_MEDIUM              /* aml_mpkt_t: data as payload */
};
#define AML_FMT_FULL_SIZE   sizeof(aml_pkt_t)
#define AML_FMT_SHORT_SIZE  sizeof(aml_spkt_t)
#define AML_FMT_MEDIUM_SIZE sizeof(aml_mpkt_t)

/* What a packet type may carry (checked for every packet before it is handled or stashed;
 * protocol files check what depends on their state) */
#define PK_SEQ     0x1          /* sequenced: handled in the sender's order */
#define PK_HANDLER 0x2          /* first packet of a message: names a registered header handler */
#define PK_UHDR    0x4          /* may carry a user header */
#define PK_DATA    0x8          /* may carry data (or an rkey) */
#define PK_TRNDV   0x10         /* may come by the transport's rendezvous (with AML_PKTF_TRNDV;
                                 * a compact one always does) */
#define PK_MSG     (PK_SEQ | PK_HANDLER | PK_UHDR | PK_DATA)

/* The table, one row per type: X(type, header format, PK_* flags, protocol a compact header
 * implies (full headers carry it), receive function). The receive functions are named here
 * and called only by the dispatcher (aml_dispatch.c), which sits above the protocols;
 * aml_wire.c keeps the rest of each row. */
#define AML_PKT_TABLE(X) \
    X(ONE,          FULL,   PK_MSG,             0,                  aml_onepacket_recv) \
    X(EAGER_FIRST,  FULL,   PK_MSG,             0,                  aml_eager_recv_first) \
    X(EAGER_CONT,   FULL,   PK_SEQ | PK_DATA,   0,                  aml_eager_recv_cont) \
    X(RNDV_SCOUT,   FULL,   PK_MSG | PK_TRNDV,  0,                  aml_rndv_recv_scout) \
    X(RNDV_DONE,    FULL,   PK_SEQ,             0,                  aml_rndv_recv_done) \
    X(CMPL,         FULL,   PK_SEQ,             0,                  aml_sync_recv_cmpl) \
    X(GET_REQ,      FULL,   PK_SEQ,             0,                  aml_rma_recv_get_req) \
    X(RMW_REQ,      FULL,   PK_SEQ,             0,                  aml_rma_recv_rmw_req) \
    X(RMW_REPLY,    FULL,   PK_SEQ,             0,                  aml_rma_recv_rmw_reply) \
    X(FENCE_REQ,    FULL,   PK_SEQ,             0,                  aml_rx_fence_req) \
    X(FENCE_ACK,    FULL,   PK_SEQ,             0,                  aml_sync_recv_fence_ack) \
    X(ADAPT_FIRST,  FULL,   PK_MSG,             0,                  aml_adaptive_recv_first) \
    X(ADAPT_DATA,   FULL,   PK_DATA,            0,                  aml_adaptive_recv_data) \
    X(ADAPT_TOKEN,  FULL,   PK_SEQ,             0,                  aml_adaptive_recv_token) \
    X(RNDV_RTR,     FULL,   PK_SEQ | PK_DATA,   0,                  aml_rndv_put_recv_rtr) \
    X(RNDV_FIN,     FULL,   PK_SEQ,             0,                  aml_rndv_put_recv_fin) \
    X(ONE_SHORT,    SHORT,  PK_MSG,             AML_PROTO_ONEPACKET, aml_onepacket_recv) \
    X(EAGER_SFIRST, MEDIUM, PK_MSG,             AML_PROTO_EAGER,    aml_eager_recv_first) \
    X(EAGER_SCONT,  MEDIUM, PK_SEQ | PK_DATA,   AML_PROTO_EAGER,    aml_eager_recv_cont) \
    X(ADAPT_SFIRST, MEDIUM, PK_MSG,             AML_PROTO_ADAPTIVE, aml_adaptive_recv_first) \
    X(ADAPT_SDATA,  MEDIUM, PK_DATA,            AML_PROTO_ADAPTIVE, aml_adaptive_recv_data) \
    X(RNDV_SSCOUT,  MEDIUM, PK_MSG | PK_TRNDV,  AML_PROTO_RNDV,     aml_rndv_recv_scout) \
    X(QUIESCE,      FULL,   PK_SEQ,             0,                  aml_sync_recv_quiesce) \
    X(CONNECT,      FULL,   PK_DATA,            0,                  aml_dynamic_recv_connect)

/* Each type's PK_* flags as a constant, AML_PKF_<type>, for code that names its type (the
 * receive fast paths): the compiler folds their checks. */
#define AML_PKT_FLAGS_ENUM(t, fmt, flags, proto, fn) AML_PKF_##t = (flags),
enum { AML_PKT_TABLE(AML_PKT_FLAGS_ENUM) };

typedef struct aml_pkt_type {
    const char *name;
    uint8_t format;             /* AML_FMT_* */
    uint8_t proto;              /* compact formats: the protocol (aml_proto_t) of the message */
    uint8_t hmin;               /* header bytes before the user header: the format's size */
    uint8_t flags;              /* PK_* */
} aml_pkt_type_t;

/* Indexed by type; [0] describes every unknown type (decoded as a full header, then refused). */
extern const aml_pkt_type_t aml_pkt_types[AML_PKT_TYPE_MAX];

static inline const aml_pkt_type_t *aml_pkt_type(unsigned type)
{
    return &aml_pkt_types[type < AML_PKT_TYPE_MAX ? type : 0];
}

static inline bool aml_pkt_sequenced(unsigned type)
{
    return aml_pkt_type(type)->flags & PK_SEQ;
}

/* ---- checks of a header alone (one definition each: decode and the fast paths) -------- */

/* A compact one-packet header: its user header fits in the header, and the data is either
 * the rest of the header or the payload, never both. */
static inline bool aml_spkt_split_ok(size_t hlen, unsigned uhdr_len, size_t payload)
{
    return uhdr_len <= hlen - sizeof(aml_spkt_t) &&
        (!payload || hlen == sizeof(aml_spkt_t) + uhdr_len);
}

/* The header holds exactly the user header it announces. */
static inline bool aml_uhdr_avail_ok(size_t avail, unsigned uhdr_len)
{
    return avail == uhdr_len;
}

/* Whether the way the transport delivered a packet (by its rendezvous, or eagerly) is the way
 * the packet says it was sent. */
static inline bool aml_delivery_ok(unsigned pk_flags, unsigned pkt_flags, bool by_rndv)
{
    return by_rndv == ((pk_flags & PK_TRNDV) && (pkt_flags & AML_PKTF_TRNDV));
}

/* A rendezvous scout announces data (an empty message has nothing to move). */
static inline bool aml_scout_len_ok(uint64_t msg_len)
{
    return msg_len != 0;
}

/* A compact scout's offset: its data starts at 0. */
static inline bool aml_scout_off_ok(uint32_t off)
{
    return off == 0;
}

/* A transport-rendezvous scout: the transport offers exactly the message, and no rkey. */
static inline bool aml_trndv_len_ok(size_t offered, uint64_t msg_len, uint64_t rkey_len)
{
    return offered == msg_len && rkey_len == 0;
}

#endif /* AML_WIRE_H_INCLUDED */
