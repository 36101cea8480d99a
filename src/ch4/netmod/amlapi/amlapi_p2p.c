/*
 * Native MPI point-to-point on aml (seed 000 §4-§5).
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
 */

#include "mpidimpl.h"
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
    int world_src;
    MPI_Aint len;
    MPI_Aint held;              /* data bytes held at this receiver (0 for rendezvous) */
    int protocol;               /* aml_proto_t it came by */
    void *buf;                  /* one-packet/eager data; NULL when deferred */
    aml_handle_t deferred;      /* rendezvous or adaptive eager, landing deferred in aml */
    int complete;               /* all eager data arrived */
    int queued;                 /* in the unexpected queue */
    MPIR_Request *rreq;         /* receive that matched it while its data still arrives */
} MPIDI_AMLAPI_ue_t;

#define REQ(r) MPIDI_AMLAPI_REQ(r)

static struct {
    MPIR_Request *posted_head, *posted_tail;
    MPIDI_AMLAPI_ue_t *ue_head, *ue_tail;
    uint32_t next_msg_id;       /* wraps; an id is only compared among one sender's
                                 * sends still waiting for an answer */
    /* largest data of a send aml copies before returning (aml_amsend_small: completes at
     * injection, no request); -1 when a protocol is forced */
    MPI_Aint inline_max;
    /* sends waiting for a SYNC_ACK or CANCEL_ACK, by msg_id */
    struct wait_ent {
        struct wait_ent *next;
        uint64_t msg_id;
        MPIR_Request *sreq;
    } *waits[256];
} p2p;

/* MPI_T performance variables (registered in MPIDI_AMLAPI_p2p_init) */
static unsigned long long pv_ue_msgs, pv_ue_bytes, pv_posted, pv_rndv_recvd, pv_sync_acks;
static unsigned long long pv_cancel_ok, pv_cancel_fail, pv_ue_msgs_max, pv_ue_bytes_max;

/* ---- small helpers ---------------------------------------------------------------------- */

static void wait_put(MPIR_Request * sreq, uint64_t msg_id)
{
    struct wait_ent *e = MPL_malloc(sizeof(*e), MPL_MEM_OTHER);
    if (!e)
        MPIDI_AMLAPI_fatal("out of memory tracking a send");
    e->msg_id = msg_id;
    e->sreq = sreq;
    e->next = p2p.waits[msg_id & 255];
    p2p.waits[msg_id & 255] = e;
}

/* Removes and returns the send waiting under msg_id, or NULL. */
static MPIR_Request *wait_take(uint64_t msg_id)
{
    for (struct wait_ent ** p = &p2p.waits[msg_id & 255]; *p; p = &(*p)->next) {
        if ((*p)->msg_id == msg_id) {
            struct wait_ent *e = *p;
            MPIR_Request *r = e->sreq;
            *p = e->next;
            MPL_free(e);
            return r;
        }
    }
    return NULL;
}

static void send_ctrl(int world, uint32_t type, uint32_t result, uint64_t msg_id)
{
    MPIDI_AMLAPI_ctrl_hdr_t h = { type, result, msg_id };
    int rc = aml_amsend(MPIDI_AMLAPI_global.aml, world, MPIDI_AMLAPI_H_CTRL, &h, sizeof(h),
                        NULL, 0, NULL, NULL, NULL);
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("cannot send a control message to rank %d: %s", world,
                           aml_strerror(rc));
}

static inline int envelope_match(int rank, int tag, int context_id,
                                 const MPIDI_AMLAPI_p2p_hdr_t * h)
{
    return context_id == h->context_id && (rank == MPI_ANY_SOURCE || rank == h->src) &&
        (tag == MPI_ANY_TAG || tag == MPIR_TAG_MASK_ERROR_BITS(h->tag));
}

static void ue_enqueue(MPIDI_AMLAPI_ue_t * ue)
{
    ue->next = NULL;
    ue->prev = p2p.ue_tail;
    if (p2p.ue_tail)
        p2p.ue_tail->next = ue;
    else
        p2p.ue_head = ue;
    p2p.ue_tail = ue;
    ue->queued = 1;
    pv_ue_msgs++;
    pv_ue_bytes += ue->held;
    if (pv_ue_msgs > pv_ue_msgs_max)
        pv_ue_msgs_max = pv_ue_msgs;
    if (pv_ue_bytes > pv_ue_bytes_max)
        pv_ue_bytes_max = pv_ue_bytes;
}

static void ue_dequeue(MPIDI_AMLAPI_ue_t * ue)
{
    if (ue->prev)
        ue->prev->next = ue->next;
    else
        p2p.ue_head = ue->next;
    if (ue->next)
        ue->next->prev = ue->prev;
    else
        p2p.ue_tail = ue->prev;
    ue->queued = 0;
    pv_ue_msgs--;
    pv_ue_bytes -= ue->held;
}

static MPIDI_AMLAPI_ue_t *ue_find(int rank, int tag, int context_id)
{
    for (MPIDI_AMLAPI_ue_t * ue = p2p.ue_head; ue; ue = ue->next)
        if (envelope_match(rank, tag, context_id, &ue->hdr))
            return ue;
    return NULL;
}

static void posted_remove(MPIR_Request * rreq)
{
    MPIR_Request *prev = REQ(rreq).prev, *next = REQ(rreq).next;
    if (prev)
        REQ(prev).next = next;
    else
        p2p.posted_head = next;
    if (next)
        REQ(next).prev = prev;
    else
        p2p.posted_tail = prev;
    REQ(rreq).flags &= ~MPIDI_AMLAPI_RF_POSTED;
    pv_posted--;
}

static MPIR_Request *posted_find(const MPIDI_AMLAPI_p2p_hdr_t * h)
{
    for (MPIR_Request * r = p2p.posted_head; r; r = REQ(r).next)
        if (envelope_match(REQ(r).rank, REQ(r).tag, REQ(r).context_id, h))
            return r;
    return NULL;
}

/* ---- receive completion --------------------------------------------------------------- */

static MPI_Aint recv_capacity(MPIR_Request * rreq)
{
    MPI_Aint sz;
    MPIR_Datatype_get_size_macro(REQ(rreq).datatype, sz);
    return sz * REQ(rreq).count;
}

/* The envelope is known: fill the status. A message longer than the buffer is the user's
 * error, returned in the request (MPI_ERR_TRUNCATE) once the message has been consumed; the
 * count is what fits. */
static void recv_set_status(MPIR_Request * rreq, const MPIDI_AMLAPI_p2p_hdr_t * h, MPI_Aint len)
{
    MPI_Aint cap = recv_capacity(rreq);
    rreq->status.MPI_SOURCE = h->src;
    rreq->status.MPI_TAG = h->tag;
    if (len > cap) {
        rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE,
                                                      __func__, __LINE__, MPI_ERR_TRUNCATE,
                                                      "**truncate", "**truncate %d %d %d %d",
                                                      h->src, MPIR_TAG_MASK_ERROR_BITS(h->tag),
                                                      (int) len, (int) cap);
        MPIR_STATUS_SET_COUNT(rreq->status, cap);
    } else {
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(rreq->status, len);
    }
}

static void recv_complete(MPIR_Request * rreq)
{
    if (REQ(rreq).flags & MPIDI_AMLAPI_RF_DT_REF)
        MPIR_Datatype_release_if_not_builtin(REQ(rreq).datatype);
    REQ(rreq).flags = 0;
    MPIDIU_request_complete(rreq);
}

/* Copies len bytes of message data (contiguous, from offset 0) into the user's buffer,
 * dropping what does not fit (the status is set, and its count says what fits). Data whose
 * basic types do not fit the receive type (3 chars into ints) is the user's error: the
 * request carries MPI_ERR_TYPE, as in MPICH's generic layer, and completes normally. */
static void recv_copy_out(MPIR_Request * rreq, const void *data, MPI_Aint len)
{
    MPI_Aint cnt = MPIR_STATUS_GET_COUNT(rreq->status), n = len < cnt ? len : cnt, actual;
    int contig, rc;
    MPI_Aint true_lb;
    if (n == 0)
        return;
    MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
    if (contig) {
        MPIR_Memcpy(MPIR_get_contig_ptr(REQ(rreq).buf, true_lb), data, n);
        return;
    }
    rc = MPIR_Typerep_unpack(data, n, REQ(rreq).buf, REQ(rreq).count, REQ(rreq).datatype, 0,
                             &actual);
    if (rc == MPI_SUCCESS && actual == n)
        return;
    if (rreq->status.MPI_ERROR == MPI_SUCCESS)  /* a truncation stays the error reported */
        rreq->status.MPI_ERROR = rc != MPI_SUCCESS ? rc :
            MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                 MPI_ERR_TYPE, "**dtypemismatch", 0);
    MPIR_STATUS_SET_COUNT(rreq->status, rc == MPI_SUCCESS ? actual : 0);
}

/* completion handler of a message landed in a staging buffer (non-contiguous receive) or,
 * truncated, cut to what fits (truncated_piece) */
static void staged_done(aml_t * aml, void *arg)
{
    MPIR_Request *rreq = arg;
    (void) aml;
    if (REQ(rreq).pack_buf) {
        recv_copy_out(rreq, REQ(rreq).pack_buf, MPIR_STATUS_GET_COUNT(rreq->status));
        MPL_free(REQ(rreq).pack_buf);
        REQ(rreq).pack_buf = NULL;
    }
    recv_complete(rreq);
}

/* completion handler of a message landed in place */
static void direct_done(aml_t * aml, void *arg)
{
    (void) aml;
    recv_complete((MPIR_Request *) arg);
}

/* aml unpack function of a truncated message: keeps the bytes that fit (the status count),
 * in the staging buffer when there is one, else in the user's contiguous buffer, and drops
 * the rest as it arrives, so a truncated message costs no buffer of its own size here. */
static void truncated_piece(void *arg, size_t offset, const void *data, size_t len)
{
    MPIR_Request *rreq = arg;
    size_t keep = (size_t) MPIR_STATUS_GET_COUNT(rreq->status);
    char *dst = REQ(rreq).pack_buf;
    if (offset >= keep)
        return;
    if (len > keep - offset)
        len = keep - offset;
    if (!dst) {
        int contig;
        MPI_Aint true_lb;
        MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
        MPIR_Assert(contig);
        dst = MPIR_get_contig_ptr(REQ(rreq).buf, true_lb);
    }
    memcpy(dst + offset, data, len);
}

/* The landing for a matched message (status already set): the user's buffer when contiguous
 * and large enough; else a staging buffer unpacked once at completion (typerep cannot unpack
 * a basic element split across packets); a truncated message keeps only what fits. */
static void recv_landing(MPIR_Request * rreq, MPI_Aint len, aml_recv_t * recv)
{
    int contig;
    MPI_Aint true_lb, keep = MPIR_STATUS_GET_COUNT(rreq->status);
    MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
    memset(recv, 0, sizeof(*recv));
    recv->compl_arg = rreq;
    if (contig && keep == len) {
        recv->buf = MPIR_get_contig_ptr(REQ(rreq).buf, true_lb);
        recv->compl_fn = direct_done;
        return;
    }
    if (!contig && keep > 0) {
        REQ(rreq).pack_buf = MPL_malloc(keep, MPL_MEM_BUFFER);
        if (!REQ(rreq).pack_buf)
            MPIDI_AMLAPI_fatal("out of memory staging a %ld-byte message", (long) keep);
    }
    if (keep == len) {
        recv->buf = REQ(rreq).pack_buf;
    } else {
        recv->unpack = truncated_piece;
        recv->unpack_arg = rreq;
    }
    recv->compl_fn = staged_done;
}

/* ---- the header handler: matching on arrival ------------------------------------------ */

static void ue_data_done(aml_t * aml, void *arg)
{
    MPIDI_AMLAPI_ue_t *ue = arg;
    (void) aml;
    ue->complete = 1;
    if (ue->rreq) {
        /* matched while arriving: hand over now */
        recv_copy_out(ue->rreq, ue->buf, ue->len);
        recv_complete(ue->rreq);
        MPL_free(ue);
    }
}

static int p2p_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    MPIDI_AMLAPI_p2p_hdr_t h;
    MPIR_Request *rreq;
    (void) ctx;

    if (unlikely(info->uhdr_len != MPIDI_AMLAPI_P2P_HDR_NOID && info->uhdr_len != sizeof(h)))
        MPIDI_AMLAPI_fatal("malformed MPI message from rank %d: %zu-byte envelope, expected %zu "
                           "or %zu", info->src, info->uhdr_len,
                           (size_t) MPIDI_AMLAPI_P2P_HDR_NOID, sizeof(h));
    h.msg_id = 0;
    memcpy(&h, info->uhdr, info->uhdr_len);
    if (info->msg_len > (size_t) MPIR_AINT_MAX)
        MPIDI_AMLAPI_fatal("malformed MPI message from rank %d: %zu bytes", info->src,
                           info->msg_len);

    rreq = posted_find(&h);
    if (rreq) {
        posted_remove(rreq);
        recv_set_status(rreq, &h, info->msg_len);
        if (h.flags & MPIDI_AMLAPI_P2P_SYNC)
            send_ctrl(info->src, MPIDI_AMLAPI_CTRL_SYNC_ACK, 0, h.msg_id);
        if (info->data) {
            /* one-packet: the data is in hand; no landing, no completion handler */
            recv_copy_out(rreq, info->data, info->msg_len);
            recv_complete(rreq);
            return 0;
        }
        recv_landing(rreq, info->msg_len, recv);
        if (info->protocol == AML_PROTO_RNDV)
            pv_rndv_recvd++;
        return 0;
    }

    /* early arrival */
    MPIDI_AMLAPI_ue_t *ue;
    size_t inline_len = info->msg ? 0 : info->msg_len;
    ue = MPL_malloc(sizeof(*ue) + inline_len, MPL_MEM_BUFFER);
    if (!ue)
        MPIDI_AMLAPI_fatal("out of memory holding a %zu-byte early message from rank %d",
                           info->msg_len, info->src);
    ue->hdr = h;
    ue->world_src = info->src;
    ue->len = info->msg_len;
    ue->held = info->protocol == AML_PROTO_RNDV ? 0 : info->msg_len;
    ue->protocol = info->protocol;
    ue->buf = info->msg ? NULL : (void *) (ue + 1);
    ue->deferred = AML_HANDLE_NONE;
    ue->rreq = NULL;
    ue->complete = 0;
    if (info->msg) {
        /* rendezvous: only the envelope waits here; adaptive eager: aml holds the data, and
         * the sender's credit with it, until the receive that matches takes it */
        ue->deferred = info->msg;
        ue->complete = 1;
        recv->defer = 1;
    } else if (info->data) {
        if (info->msg_len)
            memcpy(ue->buf, info->data, info->msg_len);
        ue->complete = 1;
    } else {
        recv->buf = ue->buf;
        recv->compl_fn = ue_data_done;
        recv->compl_arg = ue;
    }
    ue_enqueue(ue);
    return 0;
}

/* ---- control messages ----------------------------------------------------------------- */

static void sync_acked(MPIR_Request * sreq)
{
    REQ(sreq).flags &= ~MPIDI_AMLAPI_RF_SYNC_WAIT;
    pv_sync_acks++;
    MPIDIU_request_complete(sreq);
}

static int ctrl_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    MPIDI_AMLAPI_ctrl_hdr_t h;
    MPIR_Request *sreq;
    (void) aml;
    (void) ctx;
    (void) recv;
    if (info->uhdr_len != sizeof(h) || info->msg_len != 0)
        MPIDI_AMLAPI_fatal("malformed control message from rank %d: %zu-byte header, %zu data "
                           "bytes", info->src, info->uhdr_len, info->msg_len);
    memcpy(&h, info->uhdr, sizeof(h));
    switch (h.type) {
        case MPIDI_AMLAPI_CTRL_SYNC_ACK:
            sreq = wait_take(h.msg_id);
            if (!sreq || !(REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT) ||
                REQ(sreq).peer != info->src)
                MPIDI_AMLAPI_fatal("malformed control message from rank %d: SYNC_ACK for "
                                   "message %llu, which no synchronous send awaits", info->src,
                                   (unsigned long long) h.msg_id);
            if (REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT)
                wait_put(sreq, h.msg_id);       /* still awaits the CANCEL_ACK */
            sync_acked(sreq);
            break;
        case MPIDI_AMLAPI_CTRL_CANCEL_REQ:{
                int done = 0;
                for (MPIDI_AMLAPI_ue_t * ue = p2p.ue_head; ue; ue = ue->next) {
                    if (ue->world_src != info->src || ue->hdr.msg_id != h.msg_id)
                        continue;
                    /* an early arrival nobody matched: drop it (an eager one still
                     * arriving stays: it will be received) */
                    if (ue->complete) {
                        ue_dequeue(ue);
                        if (ue->deferred)
                            aml_reject(MPIDI_AMLAPI_global.aml, ue->deferred);
                        MPL_free(ue);
                        done = 1;
                    }
                    break;
                }
                send_ctrl(info->src, MPIDI_AMLAPI_CTRL_CANCEL_ACK, done, h.msg_id);
                break;
            }
        case MPIDI_AMLAPI_CTRL_CANCEL_ACK:
            sreq = wait_take(h.msg_id);
            if (!sreq || !(REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT) ||
                REQ(sreq).peer != info->src)
                MPIDI_AMLAPI_fatal("malformed control message from rank %d: CANCEL_ACK for "
                                   "message %llu, which no cancel awaits", info->src,
                                   (unsigned long long) h.msg_id);
            REQ(sreq).flags &= ~MPIDI_AMLAPI_RF_CANCEL_WAIT;
            if (h.result) {
                pv_cancel_ok++;
                MPIR_STATUS_SET_CANCEL_BIT(sreq->status, TRUE);
                if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
                    sync_acked(sreq);   /* the message is gone: no SYNC_ACK will come */
            } else {
                pv_cancel_fail++;
                if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
                    wait_put(sreq, h.msg_id);
            }
            MPIDIU_request_complete(sreq);      /* the cancel's own completion */
            break;
        default:
            MPIDI_AMLAPI_fatal("malformed control message from rank %d: unknown type %u",
                               info->src, h.type);
    }
    return 0;
}

/* ---- sending -------------------------------------------------------------------------- */

static void send_done(aml_t * aml, void *arg)
{
    MPIR_Request *sreq = arg;
    (void) aml;
    MPL_free(REQ(sreq).pack_buf);
    REQ(sreq).pack_buf = NULL;
    MPIDIU_request_complete(sreq);
}

int MPIDI_AMLAPI_send(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                      MPIR_Comm * comm, int context_offset, MPIR_Request ** request, int sync)
{
    int mpi_errno = MPI_SUCCESS, rc, dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *sreq = *request;
    MPIDI_AMLAPI_p2p_hdr_t h;
    aml_xfer_t x;
    void *pack = NULL;

    if (unlikely(rank == MPI_PROC_NULL)) {
        if (sreq)
            MPIR_cc_set(&sreq->cc, 0);
        else
            sreq = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        *request = sreq;
        goto fn_exit;
    }

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    h.tag = tag;
    h.src = comm->rank;
    h.context_id = comm->context_id + context_offset;

    if (likely(!sync && (dt_contig || data_sz == 0) && data_sz <= p2p.inline_max)) {
        /* small one-packet: aml copies envelope and data before returning, so this completes
         * at injection: no request object (MPICH's shared completed request), no allocation
         * on either side, and no message id (nothing can wait for it). Larger one-packet
         * messages go below with a request: aml sends them from the user's buffer. */
        h.flags = 0;
        rc = aml_amsend_small(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_world_rank(comm, rank),
                              MPIDI_AMLAPI_H_P2P, &h, MPIDI_AMLAPI_P2P_HDR_NOID,
                              MPIR_get_contig_ptr(buf, dt_true_lb), data_sz);
        MPIDI_AMLAPI_CHK(rc, "aml_amsend_small");
        if (sreq) {
            MPIR_cc_set(&sreq->cc, 0);
            REQ(sreq).msg_id = 0;
        } else {
            sreq = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        }
        *request = sreq;
        goto fn_exit;
    }

    h.flags = sync ? MPIDI_AMLAPI_P2P_SYNC : 0;
    if (unlikely(++p2p.next_msg_id == 0))
        p2p.next_msg_id = 1;    /* 0 means "no id" in a request */
    h.msg_id = p2p.next_msg_id;

    memset(&x, 0, sizeof(x));
    x.peer = MPIDI_AMLAPI_world_rank(comm, rank);
    x.handler = MPIDI_AMLAPI_H_P2P;
    x.uhdr = &h;
    x.uhdr_len = sizeof(h);
    x.len = data_sz;
    x.protocol = AML_PROTO_AUTO;
    if (dt_contig || data_sz == 0) {
        x.data = MPIR_get_contig_ptr(buf, dt_true_lb);
    } else {
        /* freed at origin completion (send_done) */
        mpi_errno = MPIDI_AMLAPI_pack(buf, count, datatype, data_sz, &pack);
        MPIR_ERR_CHECK(mpi_errno);
        x.data = pack;
    }

    if (sreq == NULL) {
        MPIDI_CH4_REQUEST_CREATE(sreq, MPIR_REQUEST_KIND__SEND, 0, 2);
        MPIR_ERR_CHKANDSTMT(sreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    } else {
        MPIR_Request_add_ref(sreq);
    }
    REQ(sreq).flags = 0;
    REQ(sreq).pack_buf = pack;
    REQ(sreq).msg_id = h.msg_id;
    REQ(sreq).peer = x.peer;
    pack = NULL;
    if (sync) {
        /* complete = data sent (origin) + matched (SYNC_ACK) */
        MPIR_cc_set(&sreq->cc, 2);
        REQ(sreq).flags |= MPIDI_AMLAPI_RF_SYNC_WAIT;
        wait_put(sreq, h.msg_id);
    }
    x.org_fn = send_done;
    x.org_arg = sreq;
    *request = sreq;
    rc = aml_xfer(MPIDI_AMLAPI_global.aml, &x);
    MPIDI_AMLAPI_CHK(rc, "aml_xfer");

  fn_exit:
    return mpi_errno;
  fn_fail:
    MPL_free(pack);
    goto fn_exit;
}

int MPIDI_AMLAPI_cancel_send(MPIR_Request * sreq)
{
    /* Sends that completed at injection (one-packet, MPICH's shared completed request) have
     * no id: they are not cancelled, which MPI allows. A cancel in flight is not repeated. */
    if (HANDLE_IS_BUILTIN(sreq->handle) || REQ(sreq).msg_id == 0 ||
        (REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT) ||
        MPIR_STATUS_GET_CANCEL_BIT(sreq->status))
        return MPI_SUCCESS;
    /* The request stays incomplete until the receiver answers: one more completion event,
     * and the reference that event's completion drops. */
    MPIR_Request_add_ref(sreq);
    MPIR_cc_inc(sreq->cc_ptr);
    REQ(sreq).flags |= MPIDI_AMLAPI_RF_CANCEL_WAIT;
    if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
        wait_take(REQ(sreq).msg_id);    /* one table entry serves both waits */
    wait_put(sreq, REQ(sreq).msg_id);
    send_ctrl(REQ(sreq).peer, MPIDI_AMLAPI_CTRL_CANCEL_REQ, 0, REQ(sreq).msg_id);
    return MPI_SUCCESS;
}

/* ---- receiving ------------------------------------------------------------------------ */

/* Receives the early arrival ue into rreq (status already set). */
static void recv_from_ue(MPIR_Request * rreq, MPIDI_AMLAPI_ue_t * ue)
{
    if (ue->hdr.flags & MPIDI_AMLAPI_P2P_SYNC)
        send_ctrl(ue->world_src, MPIDI_AMLAPI_CTRL_SYNC_ACK, 0, ue->hdr.msg_id);
    if (ue->deferred) {
        aml_recv_t r;
        int rc;
        recv_landing(rreq, ue->len, &r);
        if (ue->protocol == AML_PROTO_RNDV)
            pv_rndv_recvd++;
        rc = aml_accept(MPIDI_AMLAPI_global.aml, ue->deferred, &r);
        /* only a handle aml never gave (or took back) fails: our bug, not the user's */
        if (rc != AML_OK)
            MPIDI_AMLAPI_fatal("aml_accept of a deferred message from rank %d failed: %s",
                               ue->world_src, aml_strerror(rc));
        MPL_free(ue);
    } else if (ue->complete) {
        recv_copy_out(rreq, ue->buf, ue->len);
        MPL_free(ue);
        recv_complete(rreq);
    } else {
        ue->rreq = rreq;        /* ue_data_done finishes */
    }
}

static void recv_init(MPIR_Request * rreq, void *buf, MPI_Aint count, MPI_Datatype datatype,
                      int rank, int tag, int context_id)
{
    REQ(rreq).buf = buf;
    REQ(rreq).count = count;
    REQ(rreq).datatype = datatype;
    REQ(rreq).rank = rank;
    REQ(rreq).tag = tag;
    REQ(rreq).context_id = context_id;
    REQ(rreq).flags = 0;
    REQ(rreq).pack_buf = NULL;
    REQ(rreq).msg_id = 0;
    REQ(rreq).ue = NULL;
    if (!HANDLE_IS_BUILTIN(datatype)) {
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
        REQ(rreq).flags |= MPIDI_AMLAPI_RF_DT_REF;
    }
}

int MPIDI_AMLAPI_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                       MPIR_Comm * comm, int context_offset, MPIR_Request ** request)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *rreq = *request;
    MPIDI_AMLAPI_ue_t *ue;
    int context_id = comm->recvcontext_id + context_offset;

    if (rreq == NULL) {
        MPIDI_CH4_REQUEST_CREATE(rreq, MPIR_REQUEST_KIND__RECV, 0, 2);
        MPIR_ERR_CHKANDSTMT(rreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    } else {
        MPIR_Request_add_ref(rreq);
    }
    *request = rreq;
    if (unlikely(rank == MPI_PROC_NULL)) {
        /* complete at once; the fields cancel_recv and completion read say so (a cancel of
         * it has no effect: it is not posted) */
        REQ(rreq).flags = 0;
        REQ(rreq).pack_buf = NULL;
        REQ(rreq).msg_id = 0;
        REQ(rreq).ue = NULL;
        rreq->status.MPI_SOURCE = MPI_PROC_NULL;
        rreq->status.MPI_TAG = MPI_ANY_TAG;
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
        MPIDIU_request_complete(rreq);
        goto fn_exit;
    }
    recv_init(rreq, buf, count, datatype, rank, tag, context_id);

    ue = ue_find(rank, tag, context_id);
    if (ue) {
        ue_dequeue(ue);
        recv_set_status(rreq, &ue->hdr, ue->len);
        recv_from_ue(rreq, ue);
    } else {
        REQ(rreq).next = NULL;
        REQ(rreq).prev = p2p.posted_tail;
        if (p2p.posted_tail)
            REQ(p2p.posted_tail).next = rreq;
        else
            p2p.posted_head = rreq;
        p2p.posted_tail = rreq;
        REQ(rreq).flags |= MPIDI_AMLAPI_RF_POSTED;
        pv_posted++;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype, MPIR_Request * message)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_AMLAPI_ue_t *ue = REQ(message).ue;
    /* MPICH hands us only message requests our improbe made, each once */
    MPIR_ERR_CHKANDJUMP1(!ue, mpi_errno, MPI_ERR_INTERN, "**intern", "**intern %s",
                         "amlapi: MPI_Imrecv of a message that holds no probed message");
    /* the message request becomes the receive request; its status was set by improbe */
    recv_init(message, buf, count, datatype, ue->hdr.src, ue->hdr.tag, ue->hdr.context_id);
    recv_set_status(message, &ue->hdr, ue->len);
    recv_from_ue(message, ue);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_cancel_recv(MPIR_Request * rreq)
{
    if (REQ(rreq).flags & MPIDI_AMLAPI_RF_POSTED) {
        posted_remove(rreq);
        MPIR_STATUS_SET_CANCEL_BIT(rreq->status, TRUE);
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
        recv_complete(rreq);
    }
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_iprobe(int source, int tag, MPIR_Comm * comm, int context_offset, int *flag,
                        MPIR_Request ** message, MPI_Status * status)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_AMLAPI_ue_t *ue;

    if (unlikely(source == MPI_PROC_NULL)) {
        *flag = 1;
        if (message)
            *message = NULL;
        if (status != MPI_STATUS_IGNORE) {
            status->MPI_SOURCE = MPI_PROC_NULL;
            status->MPI_TAG = MPI_ANY_TAG;
            MPIR_STATUS_SET_COUNT(*status, 0);
        }
        goto fn_exit;
    }
    ue = ue_find(source, tag, comm->recvcontext_id + context_offset);
    if (!ue) {
        *flag = 0;      /* MPID_Iprobe progresses before the caller asks again */
        goto fn_exit;
    }
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) {
        status->MPI_SOURCE = ue->hdr.src;
        status->MPI_TAG = ue->hdr.tag;
        /* MPI_ERROR is left alone: probes do not set it */
        MPIR_STATUS_SET_COUNT(*status, ue->len);
    }
    if (message) {
        MPIR_Request *req;
        MPIDI_CH4_REQUEST_CREATE(req, MPIR_REQUEST_KIND__MPROBE, 0, 2);
        MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
        ue_dequeue(ue);
        REQ(req).ue = ue;
        REQ(req).flags = 0;
        req->status.MPI_SOURCE = ue->hdr.src;
        req->status.MPI_TAG = ue->hdr.tag;
        MPIR_STATUS_SET_COUNT(req->status, ue->len);
        *message = req;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- setup ---------------------------------------------------------------------------- */

static void pv_proto_value(void *addr, void *obj, int count, void *buf)
{
    int64_t v = *(int *) addr & 0xff;
    int what = *(int *) addr >> 8;
    (void) obj;
    (void) count;
    if (aml_qenv(MPIDI_AMLAPI_global.aml, what ? AML_Q_BYTES_SENT : AML_Q_MSGS_SENT, &v) != AML_OK)
        v = 0;
    *(unsigned long long *) buf = (unsigned long long) v;
}

static int pv_proto_keys[8] = {
    AML_PROTO_ONEPACKET, AML_PROTO_EAGER, AML_PROTO_ADAPTIVE, AML_PROTO_RNDV,
    (1 << 8) | AML_PROTO_ONEPACKET, (1 << 8) | AML_PROTO_EAGER, (1 << 8) | AML_PROTO_ADAPTIVE,
    (1 << 8) | AML_PROTO_RNDV
};

#define PV_FLAGS (MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS)
#define PV_REG(cls, name, addr, get, desc) \
    MPIR_T_PVAR_REGISTER_impl(cls, MPI_UNSIGNED_LONG_LONG, name, addr, 1, MPI_T_ENUM_NULL, \
                              MPI_T_VERBOSITY_USER_BASIC, MPI_T_BIND_NO_OBJECT, PV_FLAGS, get, \
                              NULL, "AMLAPI", desc)

int MPIDI_AMLAPI_p2p_init(void)
{
    int mpi_errno = MPI_SUCCESS, rc;
    static const char *const proto[4] = { "onepacket", "eager", "adaptive", "rndv" };
    static char names[8][48];

    int64_t inl;
    memset(&p2p, 0, sizeof(p2p));
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_INLINE_LIMIT, &inl);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    /* 0 when a protocol is forced or compact packets are off: then every send has a request */
    p2p.inline_max = inl > 0 ? (MPI_Aint) inl - (MPI_Aint) MPIDI_AMLAPI_P2P_HDR_NOID : -1;
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_P2P, p2p_handler, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_CTRL, ctrl_handler, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");

    static int registered;
    if (registered)
        goto fn_exit;
    registered = 1;
    MPIR_T_cat_add_desc("AMLAPI", "amlapi netmod: the aml message layer and its MPI matching");
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], sizeof(names[i]), "amlapi_%s_%s", i < 4 ? "msgs" : "bytes",
                 proto[i % 4]);
        PV_REG(MPI_T_PVAR_CLASS_COUNTER, names[i], &pv_proto_keys[i], pv_proto_value,
               i < 4 ? "messages sent with this aml protocol (MPI and MPICH active messages)"
               : "data bytes sent with this aml protocol (MPI and MPICH active messages)");
    }
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_msgs", &pv_ue_msgs, NULL,
           "MPI messages in the unexpected (early-arrival) queue");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_bytes", &pv_ue_bytes, NULL,
           "data bytes this receiver holds for the MPI messages in the unexpected queue "
           "(rendezvous data stays at the sender and is not counted)");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_msgs_max", &pv_ue_msgs_max, NULL,
           "high-water mark of the unexpected-queue length since MPI_Init");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_bytes_max", &pv_ue_bytes_max, NULL,
           "high-water mark of amlapi_unexpected_bytes since MPI_Init");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_posted_recvs", &pv_posted, NULL,
           "receives in the posted queue");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_rndv_recvd", &pv_rndv_recvd, NULL,
           "MPI messages received by rendezvous (pulled into the matched buffer)");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_sync_acks", &pv_sync_acks, NULL,
           "synchronous-send acknowledgements received");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_send_cancels_ok", &pv_cancel_ok, NULL,
           "send cancels that removed the message at the receiver");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_send_cancels_failed", &pv_cancel_fail, NULL,
           "send cancels that came too late (the message was matched)");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* At finalize: early arrivals nobody received (an erroneous program, or cancelled-too-late
 * leftovers) are freed; deferred rendezvous handles go with aml. */
void MPIDI_AMLAPI_p2p_finalize(void)
{
    while (p2p.ue_head) {
        MPIDI_AMLAPI_ue_t *ue = p2p.ue_head;
        ue_dequeue(ue);
        MPL_free(ue);
    }
    for (int i = 0; i < 256; i++) {
        while (p2p.waits[i]) {
            struct wait_ent *e = p2p.waits[i];
            p2p.waits[i] = e->next;
            MPL_free(e);
        }
    }
}
