/*
 * Native point-to-point: setup and teardown (its state is amlapi_global.c's). Init registers
 * the two aml handlers (MPIDI_AMLAPI_H_P2P, matching, amlapi_p2p_match.c;
 * MPIDI_AMLAPI_H_CTRL, amlapi_p2p_ctrl.c) and, once per process, the MPI_T performance
 * variables of category AMLAPI. The design is described in amlapi_p2p_impl.h; sends are in
 * amlapi_p2p_send.c, receives in amlapi_p2p_recv.c, probes in amlapi_p2p_probe.c.
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

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

/* a counter aml keeps: addr holds its aml_query_t */
static void pv_qenv_value(void *addr, void *obj, int count, void *buf)
{
    int64_t v = 0;
    (void) obj;
    (void) count;
    if (aml_qenv(MPIDI_AMLAPI_global.aml, (aml_query_t) * (int *) addr, &v) != AML_OK)
        v = 0;
    *(unsigned long long *) buf = (unsigned long long) v;
}

static int pv_vnode_keys[9] = {
    AML_Q_VNODE_PKTS, AML_Q_VNODE_RING_FULL, AML_Q_VNODE_DOORBELLS, AML_Q_VNODE_COPY_BYTES,
    AML_Q_VNODE_FALLBACK, AML_Q_VNODE_PEERS, AML_Q_VNODE_SINGLE_COPY, AML_Q_VNODE_SHARED_COPIES,
    AML_Q_VNODE_HELPED_BYTES
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
    MPIDI_AMLAPI_p2p_pvars_t *pv = &MPIDI_AMLAPI_pv;

    int64_t inl;
    memset(&MPIDI_AMLAPI_p2p, 0, sizeof(MPIDI_AMLAPI_p2p));
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_INLINE_LIMIT, &inl);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    /* 0 when a protocol is forced or compact packets are off: then every send has a request */
    MPIDI_AMLAPI_p2p.inline_max =
        inl > 0 ? (MPI_Aint) inl - (MPI_Aint) MPIDI_AMLAPI_P2P_HDR_NOID : -1;
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_P2P,
                              MPIDI_AMLAPI_p2p_handler, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");
    rc = aml_register_small_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_P2P,
                                    MPIDI_AMLAPI_p2p_small);
    MPIDI_AMLAPI_CHK(rc, "aml_register_small_handler");
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_CTRL,
                              MPIDI_AMLAPI_ctrl_handler, NULL);
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
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_msgs", &pv->ue_msgs, NULL,
           "MPI messages in the unexpected (early-arrival) queue");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_bytes", &pv->ue_bytes, NULL,
           "data bytes this receiver holds for the MPI messages in the unexpected queue "
           "(rendezvous data stays at the sender and is not counted)");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_msgs_max", &pv->ue_msgs_max, NULL,
           "high-water mark of the unexpected-queue length since MPI_Init");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_unexpected_bytes_max", &pv->ue_bytes_max, NULL,
           "high-water mark of amlapi_unexpected_bytes since MPI_Init");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_posted_recvs", &pv->posted, NULL,
           "receives in the posted queue");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_rndv_recvd", &pv->rndv_recvd, NULL,
           "MPI messages received by rendezvous (pulled into the matched buffer)");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_sync_acks", &pv->sync_acks, NULL,
           "synchronous-send acknowledgements received");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_send_cancels_ok", &pv->cancel_ok, NULL,
           "send cancels that removed the message at the receiver");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_send_cancels_failed", &pv->cancel_fail, NULL,
           "send cancels that came too late (the message was matched)");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_pkts", &pv_vnode_keys[0], pv_qenv_value,
           "packets sent to ranks on this node through vnode's shared-memory FIFOs");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_ring_full", &pv_vnode_keys[1],
           pv_qenv_value, "vnode sends that found their FIFO full and waited their turn");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_doorbells", &pv_vnode_keys[2],
           pv_qenv_value, "sleeping ranks on this node woken by a vnode doorbell");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_single_copy_bytes", &pv_vnode_keys[3],
           pv_qenv_value, "bytes moved between ranks of this node by single copy "
           "(process_vm_readv/writev)");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_fallback_msgs", &pv_vnode_keys[4],
           pv_qenv_value, "on-node messages above the single-copy threshold sent through the "
           "FIFOs because single copy is off or not allowed on this node");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_vnode_peers", &pv_vnode_keys[5], pv_qenv_value,
           "ranks this rank reaches through vnode (the others of its node)");
    PV_REG(MPI_T_PVAR_CLASS_LEVEL, "amlapi_vnode_single_copy", &pv_vnode_keys[6],
           pv_qenv_value, "1 when large on-node messages move by single copy, 0 when they go "
           "through the FIFOs");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_shared_copies", &pv_vnode_keys[7],
           pv_qenv_value, "on-node single copies this rank made together with the peer whose "
           "buffer it copied");
    PV_REG(MPI_T_PVAR_CLASS_COUNTER, "amlapi_vnode_helped_bytes", &pv_vnode_keys[8],
           pv_qenv_value, "bytes this rank copied, from its progress, of single copies its "
           "on-node peers made of its buffers");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* At finalize: early arrivals nobody received (an erroneous program, or cancelled-too-late
 * leftovers) are freed; deferred rendezvous handles go with aml. */
void MPIDI_AMLAPI_p2p_finalize(void)
{
    while (MPIDI_AMLAPI_p2p.ue_head) {
        MPIDI_AMLAPI_ue_t *ue = MPIDI_AMLAPI_p2p.ue_head;
        MPIDI_AMLAPI_ue_dequeue(ue);
        MPL_free(ue);
    }
}
