/*
 * The transport the fuzz targets put where UCX would be (test/fuzz/Makefile leaves
 * aml_ucx*.c out): aml_ucx_tport, a sink that accepts every operation and moves nothing, so
 * that only what a target feeds aml_rx, or vnode's rings, arrives.
 */
#include "aml_impl.h"
#include <sys/eventfd.h>

static char sink_addr[16] = "fuzz-sink";

static int sink_init(aml_t * a, aml_tport_rx_fn_t rx, size_t * max_hdr)
{
    *max_hdr = 4096;
    return AML_OK;
}

static int sink_address(aml_t * a, const void **addr, size_t * len)
{
    *addr = sink_addr;
    *len = sizeof(sink_addr);
    return AML_OK;
}

static int sink_connect(aml_t * a, int peer, const void *addr, aml_tport_ep_t * eps, int neps,
                        unsigned flags)
{
    for (int l = 0; l < neps; l++)
        eps[l] = (aml_tport_ep_t) sink_addr;
    return AML_OK;
}

static void sink_fini(aml_t * a)
{
}

static int sink_send_inline(aml_t * a, aml_peer_t * p, const void *pkt, size_t len)
{
    return AML_TPORT_DONE;
}

static int sink_send(aml_tport_ep_t ep, aml_tport_op_t * op, size_t hdr_len, const void *data,
                     size_t len, unsigned flags)
{
    return AML_TPORT_DONE;
}

static int sink_rndv_recv(aml_t * a, void *desc, void *dst, aml_tport_op_t * op)
{
    return AML_TPORT_DONE;
}

static void sink_rndv_release(aml_t * a, void *desc)
{
}

static int sink_mem_map(aml_t * a, void *addr, size_t len, aml_tport_memh_t * memh)
{
    *memh = (aml_tport_memh_t) sink_addr;
    return AML_OK;
}

static void sink_mem_unmap(aml_t * a, aml_tport_memh_t memh)
{
}

static int sink_rkey_pack(aml_t * a, aml_tport_memh_t memh, void **buf, size_t * len)
{
    *buf = sink_addr;
    *len = sizeof(sink_addr);
    return AML_OK;
}

static void sink_rkey_buf_release(aml_t * a, void *buf)
{
}

static int sink_rkey_unpack(aml_tport_ep_t ep, const void *buf, size_t len,
                            aml_tport_rkey_t * rkey)
{
    *rkey = (aml_tport_rkey_t) sink_addr;
    return AML_OK;
}

static void sink_rkey_destroy(aml_t * a, aml_tport_rkey_t rkey)
{
}

static int sink_get(aml_tport_ep_t ep, void *dst, uint64_t raddr, aml_tport_rkey_t rkey,
                    aml_tport_op_t * op)
{
    return AML_TPORT_DONE;
}

static int sink_put(aml_tport_ep_t ep, const void *src, uint64_t raddr, aml_tport_rkey_t rkey,
                    aml_tport_op_t * op)
{
    return AML_TPORT_DONE;
}

static int sink_progress(aml_t * a)
{
    return 0;
}

static int sink_arm(aml_t * a)
{
    return AML_OK;
}

/* interrupt mode: an eventfd nothing rings, beside vnode's doorbell in aml's epoll set */
static int sink_efd = -1;

static int sink_event_fd(aml_t * a, int *fd)
{
    if (sink_efd < 0 && (sink_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return AML_ERR_STATE;
    *fd = sink_efd;
    return AML_OK;
}

const aml_tport_t aml_ucx_tport = {
    .name = "sink",
    .slot = AML_TPORT_UCX,
    .caps = AML_TPORT_CAP_RNDV | AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT,
    .init = sink_init,
    .address = sink_address,
    .net_address = sink_address,
    .connect = sink_connect,
    .fini = sink_fini,
    .send_inline = sink_send_inline,
    .send = sink_send,
    .rndv_recv = sink_rndv_recv,
    .rndv_release = sink_rndv_release,
    .mem_map = sink_mem_map,
    .mem_unmap = sink_mem_unmap,
    .rkey_pack = sink_rkey_pack,
    .rkey_buf_release = sink_rkey_buf_release,
    .rkey_unpack = sink_rkey_unpack,
    .rkey_destroy = sink_rkey_destroy,
    .get = sink_get,
    .put = sink_put,
    .progress = sink_progress,
    .arm = sink_arm,
    .event_fd = sink_event_fd,
};
