/*
 * MPIDIG messages over aml: sending, and the aml header handler that delivers them.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_am_hdr.h"

/* aml origin completion of an am_isend: the send buffer may be reused */
static void am_isend_done(aml_t * aml, void *arg)
{
    MPIR_Request *sreq = arg;
    (void) aml;
    MPL_free(MPIDI_AMLAPI_AMREQ(sreq).pack_buffer);
    MPIDI_AMLAPI_AMREQ(sreq).pack_buffer = NULL;
    MPIDIG_global.origin_cbs[MPIDI_AMLAPI_AMREQ(sreq).handler_id] (sreq);
}

int MPIDI_AMLAPI_am_send(int peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                         const void *data, MPI_Aint data_sz, int src_vci, int dst_vci,
                         MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t uhdr[(AML_UHDR_LIMIT) / 8];
    MPIDI_AMLAPI_am_hdr_t *h = (MPIDI_AMLAPI_am_hdr_t *) uhdr;
    aml_xfer_t x;
    int rc;

    MPIR_Assert(am_hdr_sz <= MPIDI_AMLAPI_global.am_hdr_max);
    h->handler_id = (uint16_t) handler_id;
    h->src_vci = (uint8_t) src_vci;
    h->dst_vci = (uint8_t) dst_vci;
    h->rsvd = 0;
    if (am_hdr_sz)
        MPIR_Memcpy(h + 1, am_hdr, am_hdr_sz);

    memset(&x, 0, sizeof(x));
    x.peer = peer;
    x.handler = MPIDI_AMLAPI_H_MPIDIG;
    x.uhdr = uhdr;
    x.uhdr_len = sizeof(*h) + am_hdr_sz;
    x.data = data;
    x.len = data_sz;
    if (sreq) {
        x.org_fn = am_isend_done;
        x.org_arg = sreq;
    }
    rc = aml_xfer(MPIDI_AMLAPI_global.aml, &x);
    MPIDI_AMLAPI_CHK(rc, "aml_xfer");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- receiving ------------------------------------------------------------------------ */

static void recv_done(aml_t * aml, void *arg)
{
    MPIR_Request *rreq = arg;
    (void) aml;
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
}

/* A receive that is not one contiguous buffer: aml's packets end at arbitrary bytes, which
 * can split a basic element, and typerep cannot unpack half a double. So the message is
 * assembled first and unpacked in one piece. */
typedef struct {
    MPIR_Request *rreq;
    char data[];
} staged_recv_t;

static void staged_done(aml_t * aml, void *arg)
{
    staged_recv_t *st = arg;
    MPIDIG_recv_copy_seg(st->data, MPIDIG_recv_in_data_sz(st->rreq), st->rreq);
    recv_done(aml, st->rreq);
    MPL_free(st);
}

/* A multi-packet eager MPIDIG_SEND, assembled here and handed to MPIDIG whole. */
typedef struct {
    int handler_id;
    uint32_t attr;
    MPI_Aint len;
    char *data;
    uint64_t hdr[];             /* MPIDIG's header, then the data */
} whole_msg_t;

static void whole_msg_done(aml_t * aml, void *arg)
{
    whole_msg_t *w = arg;
    (void) aml;
    MPIDIG_global.target_msg_cbs[w->handler_id] (w->hdr, w->data, w->len, w->attr, NULL);
    MPL_free(w);
}

/* What each MPIDIG handler reads of its header (amlapi_am_hdr.h). MPIDIG trusts these
 * lengths; a peer's packet that is shorter than they say would be read past its end, so it is
 * refused here as malformed. */
typedef MPIDI_AMLAPI_am_hdr_desc_t mpidig_hdr_desc_t;
_Static_assert(sizeof(int) == 4 && sizeof(MPI_Aint) == 8, "length fields are 4 or 8 bytes");

#define HDR(id, type) [id] = { #id, sizeof(type), 0, 0 }
#define HDR_VAR(id, type, field) \
    [id] = { #id, sizeof(type), offsetof(type, field), sizeof(((type *) 0)->field) }

static const mpidig_hdr_desc_t mpidig_hdr_desc[MPIDIG_HANDLER_STATIC_MAX] = {
    /* the rendezvous header some transports append; our sends append none */
    HDR_VAR(MPIDIG_SEND, MPIDIG_hdr_t, rndv_hdr_sz),
    HDR(MPIDIG_SEND_CTS, MPIDIG_send_cts_msg_t),
    HDR(MPIDIG_SEND_DATA, MPIDIG_send_data_msg_t),
    HDR(MPIDIG_SSEND_ACK, MPIDIG_ssend_ack_msg_t),
    HDR(MPIDIG_PART_SEND_INIT, MPIDIG_part_send_init_msg_t),
    HDR(MPIDIG_PART_CTS, MPIDIG_part_cts_msg_t),
    HDR(MPIDIG_PART_SEND_DATA, MPIDIG_part_send_data_msg_t),
    /* the flattened target datatype follows when it fits the header (else _DT_REQ) */
    HDR_VAR(MPIDIG_PUT_REQ, MPIDIG_put_msg_t, flattened_sz),
    HDR(MPIDIG_PUT_ACK, MPIDIG_put_ack_msg_t),
    HDR(MPIDIG_PUT_DT_REQ, MPIDIG_put_msg_t),
    HDR(MPIDIG_PUT_DAT_REQ, MPIDIG_put_dat_msg_t),
    HDR(MPIDIG_PUT_DT_ACK, MPIDIG_put_dt_ack_msg_t),
    HDR(MPIDIG_GET_REQ, MPIDIG_get_msg_t),
    HDR(MPIDIG_GET_ACK, MPIDIG_get_ack_msg_t),
    HDR_VAR(MPIDIG_ACC_REQ, MPIDIG_acc_req_msg_t, flattened_sz),
    HDR(MPIDIG_ACC_ACK, MPIDIG_acc_ack_msg_t),
    HDR(MPIDIG_ACC_DT_REQ, MPIDIG_acc_req_msg_t),
    HDR(MPIDIG_ACC_DAT_REQ, MPIDIG_acc_dat_msg_t),
    HDR(MPIDIG_ACC_DT_ACK, MPIDIG_acc_dt_ack_msg_t),
    HDR_VAR(MPIDIG_GET_ACC_REQ, MPIDIG_get_acc_req_msg_t, flattened_sz),
    HDR(MPIDIG_GET_ACC_ACK, MPIDIG_get_acc_ack_msg_t),
    HDR(MPIDIG_GET_ACC_DT_REQ, MPIDIG_get_acc_req_msg_t),
    HDR(MPIDIG_GET_ACC_DAT_REQ, MPIDIG_get_acc_dat_msg_t),
    HDR(MPIDIG_GET_ACC_DT_ACK, MPIDIG_get_acc_dt_ack_msg_t),
    HDR(MPIDIG_CSWAP_REQ, MPIDIG_cswap_req_msg_t),
    HDR(MPIDIG_CSWAP_ACK, MPIDIG_cswap_ack_msg_t),
    HDR(MPIDIG_WIN_COMPLETE, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_POST, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_LOCK, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_LOCK_ACK, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_UNLOCK, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_UNLOCK_ACK, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_LOCKALL, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_LOCKALL_ACK, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_UNLOCKALL, MPIDIG_win_cntrl_msg_t),
    HDR(MPIDIG_WIN_UNLOCKALL_ACK, MPIDIG_win_cntrl_msg_t),
    /* its header struct is private to mpidig_comm_abort.c: one int, the exit code */
    [MPIDIG_COMM_ABORT] = {"MPIDIG_COMM_ABORT", sizeof(int), 0, 0},
};

#undef HDR
#undef HDR_VAR

/* Ends the job when the MPIDIG header hdr of len bytes from rank src is shorter than its
 * handler reads. Handlers registered at run time (ids past the static ones) declare no
 * header size: only the handler id is checked for them. */
static void mpidig_hdr_check(int src, int id, const char *hdr, size_t len)
{
    const mpidig_hdr_desc_t *d;
    size_t need;
    int64_t extra;
    int rc;
    if (id >= MPIDIG_HANDLER_STATIC_MAX || !mpidig_hdr_desc[id].name)
        return;
    d = &mpidig_hdr_desc[id];
    rc = MPIDI_AMLAPI_am_hdr_need(d, hdr, len, AML_UHDR_LIMIT, &need, &extra);
    if (rc < 0)
        MPIDI_AMLAPI_fatal("malformed MPIDIG message from rank %d: %s header says %lld "
                           "bytes follow it", src, d->name, (long long) extra);
    if (rc > 0)
        MPIDI_AMLAPI_fatal("malformed MPIDIG message from rank %d: %zu-byte %s header, its "
                           "handler reads %zu", src, len, d->name, need);
}

/* Bytes for a header of hlen bytes and msg_len data bytes after a record of rec bytes; ends
 * the job when a peer's length makes that overflow. */
static size_t mpidig_alloc_size(int src, int id, size_t rec, size_t hlen, size_t msg_len)
{
    size_t n;
    if (MPIDI_AMLAPI_am_alloc_size(rec, hlen, msg_len, &n))
        MPIDI_AMLAPI_fatal("malformed MPIDIG message from rank %d: handler %d announces %zu "
                           "data bytes", src, id, msg_len);
    return n;
}

static int mpidig_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    /* The header may still sit in memory the sender can write (vnode's ring): it is copied
     * once, and only the copy is checked and read. */
    union {
        MPIDI_AMLAPI_am_hdr_t h;
        char b[AML_UHDR_LIMIT];
    } copy;
    const MPIDI_AMLAPI_am_hdr_t *h = &copy.h;
    void *am_hdr;
    uint32_t attr = 0;
    MPIR_Request *rreq = NULL;
    size_t hlen;
    int id;
    (void) ctx;

    if (info->uhdr_len < sizeof(*h) || info->uhdr_len > sizeof(copy))
        MPIDI_AMLAPI_fatal("malformed MPIDIG message from rank %d: %zu-byte header",
                           info->src, info->uhdr_len);
    memcpy(copy.b, info->uhdr, info->uhdr_len);
    id = h->handler_id;
    if (id >= MPIDI_AM_HANDLERS_MAX || !MPIDIG_global.target_msg_cbs[id])
        MPIDI_AMLAPI_fatal("malformed MPIDIG message from rank %d: %zu-byte header, handler %d",
                           info->src, info->uhdr_len, id);
    am_hdr = (void *) (h + 1);
    hlen = info->uhdr_len - sizeof(*h);
    mpidig_hdr_check(info->src, id, am_hdr, hlen);
    MPIDIG_AM_ATTR_SET_VCIS(attr, h->src_vci, h->dst_vci);

    if (info->data || info->msg_len == 0) {
        /* one packet: MPIDIG copies straight from the network buffer */
        MPIDIG_global.target_msg_cbs[id] (am_hdr, (void *) info->data, info->msg_len, attr,
                                          NULL);
        return 0;
    }

    if (id == MPIDIG_SEND) {
        /* An eager message may be unexpected, and MPICH 4.0.2 loses the status of a receive
         * that matches an unexpected message still arriving asynchronously
         * (handle_unexp_cmpl completes match_req without its status). So eager sends
         * reach MPIDIG whole, as on ch4:ucx; data that MPIDIG asks for only after a match
         * (rendezvous data, RMA) still lands directly in the user's buffer below. */
        whole_msg_t *w = MPL_malloc(mpidig_alloc_size(info->src, id, sizeof(*w), hlen,
                                                      info->msg_len), MPL_MEM_BUFFER);
        if (!w)
            MPIDI_AMLAPI_fatal("out of memory for a %zu-byte message from rank %d",
                               info->msg_len, info->src);
        w->handler_id = id;
        w->attr = attr;
        w->len = (MPI_Aint) info->msg_len;
        memcpy(w->hdr, am_hdr, hlen);
        w->data = (char *) w->hdr + MPL_ROUND_UP_ALIGN(hlen, 8);
        recv->buf = w->data;
        recv->compl_fn = whole_msg_done;
        recv->compl_arg = w;
        return 0;
    }

    int rc = MPIDIG_global.target_msg_cbs[id] (am_hdr, NULL, info->msg_len,
                                               attr | MPIDIG_AM_ATTR__IS_ASYNC, &rreq);
    /* MPIDIG's handlers fail only when they cannot allocate a request; the data would have
     * nowhere to go and MPIDIG's protocol would hang */
    if (!rreq)
        MPIDI_AMLAPI_fatal("MPIDIG handler %d took no request for %zu data bytes from rank %d "
                           "(error code %d)", id, info->msg_len, info->src, rc);
    MPIDIG_recv_setup(rreq);
    MPIDIG_rreq_async_t *async = &MPIDIG_REQUEST(rreq, req->recv_async);
    if (async->recv_type == MPIDIG_RECV_CONTIG && !rreq->status.MPI_ERROR &&
        async->iov_one.iov_len >= (size_t) info->msg_len && !async->is_device_buffer) {
        /* a contiguous buffer that holds it all (usually the user's): land the data there */
        recv->buf = async->iov_one.iov_base;
        recv->compl_fn = recv_done;
        recv->compl_arg = rreq;
    } else {
        staged_recv_t *st = MPL_malloc(mpidig_alloc_size(info->src, id, sizeof(*st), 0,
                                                         info->msg_len), MPL_MEM_BUFFER);
        if (!st)
            MPIDI_AMLAPI_fatal("out of memory for a %zu-byte message from rank %d",
                               info->msg_len, info->src);
        st->rreq = rreq;
        recv->buf = st->data;
        recv->compl_fn = staged_done;
        recv->compl_arg = st;
    }
    return 0;
}

int MPIDI_AMLAPI_am_init(void)
{
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    int64_t uhdr, onepacket, packet, eager;
    if (aml_qenv(aml, AML_Q_MAX_UHDR, &uhdr) || aml_qenv(aml, AML_Q_ONEPACKET_LIMIT, &onepacket)
        || aml_qenv(aml, AML_Q_PACKET_SIZE, &packet) || aml_qenv(aml, AML_Q_EAGER_LIMIT, &eager))
        return MPI_ERR_OTHER;
    MPIDI_AMLAPI_global.am_hdr_max = (MPI_Aint) (uhdr - sizeof(MPIDI_AMLAPI_am_hdr_t));
    MPIDI_AMLAPI_global.am_onepacket_max = (MPI_Aint) (onepacket - sizeof(MPIDI_AMLAPI_am_hdr_t));
    MPIDI_AMLAPI_global.packet_size = (MPI_Aint) packet;
    MPIDI_AMLAPI_global.eager_limit = (MPI_Aint) eager;
    int rc = aml_register_handler(aml, MPIDI_AMLAPI_H_MPIDIG, mpidig_handler, NULL);
    return rc == AML_OK ? MPI_SUCCESS : MPI_ERR_OTHER;
}
