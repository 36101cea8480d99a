/*
 * Native MPI point-to-point on aml (Banikazemi et al. 1999, §4-§5): what its files share.
 *
 * An MPI message is one aml message to handler MPIDI_AMLAPI_H_P2P; its user header is the MPI
 * envelope (MPIDI_AMLAPI_p2p_hdr_t). aml picks the protocol per message (one-packet, eager,
 * rendezvous). Matching happens in the header handler, which runs on the first packet in the
 * dispatcher's context, in per-sender order:
 *   - matched: the handler returns the user's buffer (contiguous) so the data lands once, or a
 *     staging buffer unpacked once with typerep (non-contiguous); of a truncated message only
 *     what fits is kept, as it arrives;
 *   - unmatched one-packet/eager: the data goes to an early-arrival buffer (an "ue" entry);
 *   - unmatched rendezvous: the handler defers; only the envelope is kept, and the receive that
 *     matches it later calls aml_accept, which pulls straight into the user's buffer.
 * Posted receives and early arrivals are FIFO lists searched in order, which with aml's
 * per-sender ordering gives MPI's non-overtaking rule, including for MPI_ANY_SOURCE.
 *
 * A receive that does not fit its message is the user's error, not the job's: the message is
 * consumed as any other (a truncated one keeps what fits), the sender completes, and the
 * receive completes with MPI_ERR_TRUNCATE or, for data whose basic types do not fit the
 * receive type, MPI_ERR_TYPE in its status, for the communicator's error handler to decide.
 *
 * Synchronous sends carry MPIDI_AMLAPI_P2P_SYNC; the receiver sends a SYNC_ACK control message
 * when it matches them. A send that has not matched can be cancelled: CANCEL_REQ asks the
 * receiver to drop the early arrival, CANCEL_ACK says whether it did.
 *
 * The files:
 *   amlapi_p2p_init.c     state, setup (handlers, MPI_T pvars), finalize
 *   amlapi_p2p_send.c    sends (standard, synchronous; the small inline path)
 *   amlapi_p2p_match.c   the posted and early-arrival queues; the header handler (matching on
 *                    arrival)
 *   amlapi_p2p_recv.c    a matched message's landing and completion; irecv, imrecv, cancel_recv
 *   amlapi_p2p_probe.c   iprobe, improbe
 *   amlapi_p2p_ctrl.c    control messages: sync acks, send cancellation (and the sends they wait on)
 */
#ifndef AMLAPI_P2P_IMPL_H_INCLUDED
#define AMLAPI_P2P_IMPL_H_INCLUDED

#include "amlapi_impl.h"

/* the MPI envelope: aml user header of every MPI message. A one-packet message carries the
 * first 12 bytes only (no id: nothing waits for it), so with aml's 8-byte compact header an
 * MPI message of up to 8 bytes fits the first cache line of UCX's shared-memory FIFO element
 * (see aml_spkt_t). */
typedef struct {
    int32_t tag;
    int32_t src;                /* sender's rank in the communicator */
    uint16_t context_id;        /* MPIR_Context_id_t is 16 bits */
    uint16_t flags;             /* MPIDI_AMLAPI_P2P_* */
    uint32_t msg_id;            /* sender's id of the message: sync ack, cancel; never 0 */
} MPIDI_AMLAPI_p2p_hdr_t;

#define MPIDI_AMLAPI_P2P_HDR_NOID offsetof(MPIDI_AMLAPI_p2p_hdr_t, msg_id)

_Static_assert(sizeof(MPIR_Context_id_t) == sizeof(uint16_t), "context ids are 16 bits");

#define MPIDI_AMLAPI_P2P_SYNC 0x1

/* control messages (handler MPIDI_AMLAPI_H_CTRL), header only */
enum {
    MPIDI_AMLAPI_CTRL_SYNC_ACK = 1,
    MPIDI_AMLAPI_CTRL_CANCEL_REQ,
    MPIDI_AMLAPI_CTRL_CANCEL_ACK
};

typedef struct {
    uint32_t type;
    uint32_t result;            /* CANCEL_ACK: 1 = cancelled */
    uint64_t msg_id;
} MPIDI_AMLAPI_ctrl_hdr_t;

/* request flags */
#define MPIDI_AMLAPI_RF_POSTED      0x1 /* in the posted queue */
#define MPIDI_AMLAPI_RF_SYNC_WAIT   0x2 /* send: waiting for SYNC_ACK */
#define MPIDI_AMLAPI_RF_CANCEL_WAIT 0x4 /* send: waiting for CANCEL_ACK */
#define MPIDI_AMLAPI_RF_DT_REF      0x8 /* receive: holds a datatype reference */

/* an early arrival (unexpected message) */
typedef struct MPIDI_AMLAPI_ue {
    struct MPIDI_AMLAPI_ue *next, *prev;
    MPIDI_AMLAPI_p2p_hdr_t hdr;
    int peer_src;
    MPI_Aint len;
    MPI_Aint held;              /* data bytes held at this receiver (0 for rendezvous) */
    int protocol;               /* aml_proto_t it came by */
    void *buf;                  /* one-packet/eager data; NULL when deferred */
    aml_handle_t deferred;      /* rendezvous or adaptive eager, landing deferred in aml */
    int complete;               /* all eager data arrived */
    int queued;                 /* in the unexpected queue */
    MPIR_Request *rreq;         /* receive that matched it while its data still arrives */
} MPIDI_AMLAPI_ue_t;

/* the per-request state (MPIDI_AMLAPI_request_t), short: these files use it on every line */
#define REQ(r) MPIDI_AMLAPI_REQ(r)

/* the state, reset at each MPIDI_AMLAPI_p2p_init */
typedef struct {
    MPIR_Request *posted_head, *posted_tail;
    MPIDI_AMLAPI_ue_t *ue_head, *ue_tail;
    uint32_t next_msg_id;       /* wraps; an id is only compared among one sender's
                                 * sends still waiting for an answer */
    /* largest data of a send aml copies before returning (aml_amsend_small: completes at
     * injection, no request); -1 when a protocol is forced */
    MPI_Aint inline_max;
    /* sends waiting for a SYNC_ACK or CANCEL_ACK, by msg_id, chained through their requests'
     * posted-queue link (amlapi_p2p_ctrl.c) */
    MPIR_Request *waits[256];
} MPIDI_AMLAPI_p2p_t;

extern MPIDI_AMLAPI_p2p_t MPIDI_AMLAPI_p2p;

/* MPI_T performance variables (registered in MPIDI_AMLAPI_p2p_init, not reset by it) */
typedef struct {
    unsigned long long ue_msgs, ue_bytes, posted, rndv_recvd, sync_acks;
    unsigned long long cancel_ok, cancel_fail, ue_msgs_max, ue_bytes_max;
} MPIDI_AMLAPI_p2p_pvars_t;

extern MPIDI_AMLAPI_p2p_pvars_t MPIDI_AMLAPI_pv;

/* the two queues, inline: their lookups on the receive call's path and their updates (the
 * posted queue's lookup on arrival is amlapi_p2p_match.c's) */
static inline int MPIDI_AMLAPI_envelope_match(int rank, int tag, int context_id,
                                              const MPIDI_AMLAPI_p2p_hdr_t * h)
{
    return context_id == h->context_id && (rank == MPI_ANY_SOURCE || rank == h->src) &&
        (tag == MPI_ANY_TAG || tag == MPIR_TAG_MASK_ERROR_BITS(h->tag));
}

static inline MPIDI_AMLAPI_ue_t *MPIDI_AMLAPI_ue_find(int rank, int tag, int context_id)
{
    for (MPIDI_AMLAPI_ue_t * ue = MPIDI_AMLAPI_p2p.ue_head; ue; ue = ue->next)
        if (MPIDI_AMLAPI_envelope_match(rank, tag, context_id, &ue->hdr))
            return ue;
    return NULL;
}

static inline void MPIDI_AMLAPI_posted_append(MPIR_Request * rreq)
{
    REQ(rreq).next = NULL;
    REQ(rreq).prev = MPIDI_AMLAPI_p2p.posted_tail;
    if (MPIDI_AMLAPI_p2p.posted_tail)
        REQ(MPIDI_AMLAPI_p2p.posted_tail).next = rreq;
    else
        MPIDI_AMLAPI_p2p.posted_head = rreq;
    MPIDI_AMLAPI_p2p.posted_tail = rreq;
    REQ(rreq).flags |= MPIDI_AMLAPI_RF_POSTED;
    MPIDI_AMLAPI_pv.posted++;
}

static inline void MPIDI_AMLAPI_ue_enqueue(MPIDI_AMLAPI_ue_t * ue)
{
    ue->next = NULL;
    ue->prev = MPIDI_AMLAPI_p2p.ue_tail;
    if (MPIDI_AMLAPI_p2p.ue_tail)
        MPIDI_AMLAPI_p2p.ue_tail->next = ue;
    else
        MPIDI_AMLAPI_p2p.ue_head = ue;
    MPIDI_AMLAPI_p2p.ue_tail = ue;
    ue->queued = 1;
    MPIDI_AMLAPI_pv.ue_msgs++;
    MPIDI_AMLAPI_pv.ue_bytes += ue->held;
    if (MPIDI_AMLAPI_pv.ue_msgs > MPIDI_AMLAPI_pv.ue_msgs_max)
        MPIDI_AMLAPI_pv.ue_msgs_max = MPIDI_AMLAPI_pv.ue_msgs;
    if (MPIDI_AMLAPI_pv.ue_bytes > MPIDI_AMLAPI_pv.ue_bytes_max)
        MPIDI_AMLAPI_pv.ue_bytes_max = MPIDI_AMLAPI_pv.ue_bytes;
}

static inline void MPIDI_AMLAPI_ue_dequeue(MPIDI_AMLAPI_ue_t * ue)
{
    if (ue->prev)
        ue->prev->next = ue->next;
    else
        MPIDI_AMLAPI_p2p.ue_head = ue->next;
    if (ue->next)
        ue->next->prev = ue->prev;
    else
        MPIDI_AMLAPI_p2p.ue_tail = ue->prev;
    ue->queued = 0;
    MPIDI_AMLAPI_pv.ue_msgs--;
    MPIDI_AMLAPI_pv.ue_bytes -= ue->held;
}

static inline void MPIDI_AMLAPI_posted_remove(MPIR_Request * rreq)
{
    MPIR_Request *prev = REQ(rreq).prev, *next = REQ(rreq).next;
    if (prev)
        REQ(prev).next = next;
    else
        MPIDI_AMLAPI_p2p.posted_head = next;
    if (next)
        REQ(next).prev = prev;
    else
        MPIDI_AMLAPI_p2p.posted_tail = prev;
    REQ(rreq).flags &= ~MPIDI_AMLAPI_RF_POSTED;
    MPIDI_AMLAPI_pv.posted--;
}

/* amlapi_p2p_match.c */
int MPIDI_AMLAPI_p2p_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                             aml_recv_t * recv);
int MPIDI_AMLAPI_p2p_small(aml_t * aml, void *ctx, int src, const void *uhdr, size_t uhdr_len,
                           const void *data, size_t len);

/* amlapi_p2p_recv.c: a matched receive's status, landing and completion */
void MPIDI_AMLAPI_recv_set_status(MPIR_Request * rreq, const MPIDI_AMLAPI_p2p_hdr_t * h,
                                  MPI_Aint len);
void MPIDI_AMLAPI_recv_copy_out(MPIR_Request * rreq, const void *data, MPI_Aint len);
void MPIDI_AMLAPI_recv_landing(MPIR_Request * rreq, MPI_Aint len, aml_recv_t * recv);
void MPIDI_AMLAPI_recv_complete(MPIR_Request * rreq);

/* amlapi_p2p_ctrl.c */
void MPIDI_AMLAPI_wait_put(MPIR_Request * sreq, uint64_t msg_id);
void MPIDI_AMLAPI_send_ctrl(int peer, uint32_t type, uint32_t result, uint64_t msg_id);
int MPIDI_AMLAPI_ctrl_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                              aml_recv_t * recv);

#endif /* AMLAPI_P2P_IMPL_H_INCLUDED */
