/*
 * aml wire layer: the packet table (aml_wire.h), packet names, and the fatal errors that
 * name a packet: a bad packet names its peer and its type. Decoding is the dispatcher's
 * (aml_dispatch.c).
 */
#include "aml_impl.h"
#include <stdarg.h>
#include <string.h>

#define AML_PKT_ROW(t, fmt, flags, proto, fn) \
    [AML_PKT_##t] = {#t, AML_FMT_##fmt, (proto), (uint8_t) AML_FMT_##fmt##_SIZE, (flags)},

const aml_pkt_type_t aml_pkt_types[AML_PKT_TYPE_MAX] = {
    [0] = {"UNKNOWN", AML_FMT_FULL, 0, (uint8_t) AML_FMT_FULL_SIZE, 0},
    AML_PKT_TABLE(AML_PKT_ROW)
};

const char *aml_pkt_name(int type)
{
    return aml_pkt_type((unsigned) type)->name;
}

void aml_fatal_pkt(aml_t * aml, const aml_pkt_t * pkt, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (pkt->src == AML_SRC_NONE)
        aml_fatal(aml, "malformed packet from a process of another job: type %s (%u): %s",
                  aml_pkt_name(pkt->type), pkt->type, what);
    aml_fatal(aml, "malformed packet from rank %u: type %s (%u): %s", pkt->src,
              aml_pkt_name(pkt->type), pkt->type, what);
}

/* A transport error on a send is fatal, naming the peer. Why not roll the sequence back: UCX
 * fails a send only when the endpoint has failed (peer gone, connection reset), so no later
 * packet to that peer would arrive either; and a multi-packet message cannot be taken back
 * once its first packets left. Without this, the receiver would stash every later packet
 * from us behind the hole, and quiesce would hang with no error. */
void aml_send_failed(aml_t * aml, int peer, const void *hdr, const char *status)
{
    uint8_t t = *(const uint8_t *) hdr;
    aml_fatal(aml, "sending a %s packet to rank %d failed: %s", aml_pkt_name(t), peer, status);
}

aml_cntr_t *aml_check_cntr(aml_t * aml, const aml_pkt_t * pkt)
{
    if (!pkt->cntr)
        return NULL;
    if (!aml_htab_get(&aml->cntrs, pkt->cntr))
        aml_fatal_pkt(aml, pkt, "target counter 0x%llx is not a counter of this process",
                      (unsigned long long) pkt->cntr);
    return (aml_cntr_t *) (uintptr_t) pkt->cntr;
}
