/*
 * What the senders (aml_xfer.c, aml_rma.c, aml_sync.c) check of a peer before they send to
 * it: a process of another job may still be connecting (aml_dynamic.c). Inline: it is on
 * every send's path.
 */
#ifndef AML_PEER_READY_H_INCLUDED
#define AML_PEER_READY_H_INCLUDED

#include "aml_impl.h"

/* AML_OK when peer may be sent to: every peer but a process of another job not connected yet,
 * which is waited for */
static inline int aml_peer_ready(aml_t * aml, int peer)
{
    return __builtin_expect(aml->peers[peer].dyn != AML_DYN_CONNECTING, 1) ? AML_OK :
        aml_dynamic_wait(aml, peer);
}

#endif /* AML_PEER_READY_H_INCLUDED */
