/*
 * aml's receive path, inline: landing data (aml_deliver) and calling a header handler
 * (aml_handler_run), for the receive side of every protocol. Inline because a small message's
 * receive is the bound of a message-rate run.
 */
#ifndef AML_RX_FAST_H_INCLUDED
#define AML_RX_FAST_H_INCLUDED

#include "aml_impl.h"

/* Lands [data, data+len) at offset of a message: into its buffer, or through its unpack
 * function. */
static inline void aml_deliver(aml_t * aml, const aml_recv_t * recv, size_t offset,
                               const void *data, size_t len)
{
    (void) aml;
    if (!len)
        return;
    if (recv->buf)
        memcpy((char *) recv->buf + offset, data, len);
    else if (recv->unpack)
        recv->unpack(recv->unpack_arg, offset, data, len);
}

/* Runs header handler `handler` (registered: the caller checked) for a message from src,
 * with an 8-byte aligned copy of the user header; recv is cleared first. type names the
 * packet in errors; msg is the record of a message whose landing may be deferred. Inline for
 * the latency path (aml_onepacket_recv_compact); aml_run_handler elsewhere. */
static inline __attribute__ ((always_inline))
void aml_handler_run(aml_t * aml, unsigned handler, int type, uint32_t src, const void *uhdr,
                     size_t uhdr_len, uint64_t msg_len, const void *data, int proto,
                     aml_recv_t * recv, aml_rmsg_t * msg)
{
    const aml_handler_t *h = &aml->handlers[handler];
    uint64_t aligned[AML_MAX_UHDR / 8];
    aml_msg_info_t info;
    if (((uintptr_t) uhdr & 7) && uhdr_len) {
        /* an MPI envelope (12 or 16 bytes) comes at 4 bytes off 8 in vnode's short records:
         * by fixed-size pieces, as memcpy of a variable length became a rep movs, a large
         * share of the receive path in a message-rate profile
         * (docs/benchmarks/2026-11-28-figures-from-the-code.md).
         * 8-byte stores, so a handler's 8-byte loads of the copy are forwarded from them
         * (4-byte stores made each such load wait for both to reach the cache). */
        if (uhdr_len <= 32) {
            char *a = (char *) aligned;
            const char *u = (const char *) uhdr;
            size_t i = 0;
            for (; i + 8 <= uhdr_len; i += 8)
                memcpy(a + i, u + i, 8);
            if (i + 4 <= uhdr_len) {
                memcpy(a + i, u + i, 4);
                i += 4;
            }
            for (; i < uhdr_len; i++)
                a[i] = u[i];
        } else {
            memcpy(aligned, uhdr, uhdr_len);
        }
        uhdr = aligned;
    }
    info.src = (int) src;
    info.uhdr = uhdr_len ? uhdr : NULL;
    info.uhdr_len = uhdr_len;
    info.msg_len = msg_len;
    info.data = data;
    info.protocol = proto;
    info.msg = AML_HANDLE_NONE;
    if (msg)
        info.msg = msg->handle = ++aml->next_handle;
    memset(recv, 0, sizeof(*recv));
    if (AML_UNLIKELY(h->fn(aml, h->ctx, &info, recv) != 0))
        aml_fatal(aml, "header handler %u refused a %s message of %llu bytes from rank %u",
                  handler, aml_pkt_name(type), (unsigned long long) msg_len, src);
    if (AML_UNLIKELY(recv->defer && !msg))
        aml_fatal(aml, "header handler %u deferred a %s message from rank %u: only rendezvous "
                  "and adaptive messages can be deferred", handler, aml_pkt_name(type), src);
    if (AML_UNLIKELY(!recv->defer && !data && msg_len && !recv->buf && !recv->unpack))
        aml_fatal(aml, "header handler %u gave no buffer for a %llu-byte message from rank %u",
                  handler, (unsigned long long) msg_len, src);
}

#endif /* AML_RX_FAST_H_INCLUDED */
