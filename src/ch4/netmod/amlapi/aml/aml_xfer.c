/*
 * Protocol choice: the transfer entry point picks, per message, the protocol (one-packet,
 * eager, adaptive eager, rendezvous) and the rendezvous variant, from the message, the
 * configuration, the peer's state (adaptive credits) and what the peer's transport offers.
 */
#include "aml_impl.h"
#include "aml_peer_ready.h"

/* The rendezvous variant: the transport's own rendezvous (rndv_ucx) where the peer's
 * transport has one, else put (rndv_put, or a transport without get), else get. A transport
 * that moves no data but packets (vnode where single copy is refused) gets eager: the data
 * is pipelined through its FIFOs. */
static int rndv_send(aml_t * aml, const aml_xfer_t * x)
{
    unsigned caps = aml->peers[x->peer].caps;
    if (AML_UNLIKELY(!(caps & (AML_TPORT_CAP_RNDV | AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT)))) {
        aml->rndv_as_eager++;
        return aml_eager_send(aml, x);
    }
    if (aml->cfg.rndv_ucx && (caps & AML_TPORT_CAP_RNDV))
        return aml_rndv_tport_send(aml, x);
    if ((aml->cfg.rndv_put && (caps & AML_TPORT_CAP_PUT)) || !(caps & AML_TPORT_CAP_GET))
        return aml_rndv_put_send(aml, x);
    return aml_rndv_get_send(aml, x);
}

int aml_xfer(aml_t * aml, const aml_xfer_t * x)
{
    if (AML_UNLIKELY(!aml || !x || x->handler >= AML_MAX_HANDLERS))
        return AML_ERR_INVAL;
    return aml_xfer_internal(aml, x);
}

int aml_amsend_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                     size_t uhdr_len, const void *data, size_t len)
{
    int rc;
    if (AML_UNLIKELY(!aml || !aml->connected || !aml_peer_ok(aml, peer) ||
                     handler >= AML_MAX_HANDLERS || uhdr_len > aml->max_uhdr ||
                     (uhdr_len && !uhdr) || (len && !data) || !aml->compact ||
                     uhdr_len > UINT8_MAX || aml->protocol != AML_PROTO_AUTO ||
                     sizeof(aml_spkt_t) + uhdr_len + len > aml->compact_max))
        return AML_ERR_INVAL;
    if (AML_UNLIKELY((rc = aml_peer_ready(aml, peer)) != AML_OK))
        return rc;
    return aml_onepacket_send_small(aml, peer, handler, uhdr, uhdr_len, data, len);
}

int aml_xfer_internal(aml_t * aml, const aml_xfer_t * x)
{
    int proto, rc;
    if (AML_UNLIKELY(!aml->connected))
        return AML_ERR_STATE;
    if (AML_UNLIKELY(!aml_peer_ok(aml, x->peer) || x->handler >= AML_H_TOTAL ||
                     x->uhdr_len > aml->max_uhdr || (x->uhdr_len && !x->uhdr) ||
                     (x->len && !x->data)))
        return AML_ERR_INVAL;
    if ((rc = aml_peer_ready(aml, x->peer)) != AML_OK)
        return rc;

    proto = x->protocol != AML_PROTO_AUTO ? x->protocol : aml->protocol;
    switch (proto) {
        case AML_PROTO_AUTO:
            if (aml_fits_onepacket(aml, x))
                return aml_onepacket_send(aml, x);
            if (x->len > aml->peers[x->peer].eager_limit)
                return rndv_send(aml, x);
            if (aml->adaptive_credits == 0)
                return aml_eager_send(aml, x);
            /* peer state: without a credit only the scout may wait at the receiver */
            return aml_adaptive_credit(aml, x->peer) ? aml_adaptive_send(aml, x) :
                rndv_send(aml, x);
        case AML_PROTO_ADAPTIVE:
            if (aml_adaptive_credit(aml, x->peer))
                return aml_adaptive_send(aml, x);
            return x->len ? rndv_send(aml, x) : aml_onepacket_send(aml, x);
        case AML_PROTO_ONEPACKET:
            if (!aml_fits_onepacket(aml, x))
                return AML_ERR_INVAL;
            return aml_onepacket_send(aml, x);
        case AML_PROTO_EAGER:
            return aml_eager_send(aml, x);
        case AML_PROTO_RNDV:
            /* nothing to pull for an empty message */
            return x->len ? rndv_send(aml, x) : aml_onepacket_send(aml, x);
        default:
            return AML_ERR_INVAL;
    }
}
