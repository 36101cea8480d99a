/*
 * aml_poll: one pass over the transports, through their interface (aml_tport.h), as ch4:ucx
 * does: draining until an empty pass would cost a second progress of every transport after
 * each arrival, and callers that wait loop anyway. Inline: it is the polling loop of every
 * wait (aml_progress) and of a sender out of adaptive credits (aml_adaptive_credit).
 */
#ifndef AML_POLL_H_INCLUDED
#define AML_POLL_H_INCLUDED

#include "aml_impl.h"

/* With several transports, one that reaches no other process yet carries only messages to
 * this one, and its progress (UCX's: tens of ns even when idle) would dominate the polling loop
 * of the others: it runs every AML_POLL_EVERY_SELF passes until aml_tport_used. */
#define AML_POLL_EVERY_SELF 16

/* First the packets debug_reorder held back; then the transports, the last set up (the most
 * local: vnode after UCX) first; when nothing arrived, the idle work (adaptive tokens go back:
 * aml_adaptive.c says why). Never from inside a handler or a transport callback (UCX forbids
 * progressing the worker there). */
static inline int aml_poll(aml_t * aml)
{
    int n = 0;
    if (AML_UNLIKELY(aml->in_dispatch))
        return 0;
    if (aml_reorder(aml) && aml->nheld)
        aml_release_held(aml);
    for (int i = aml->ntports - 1; i >= 0; i--) {
        if (AML_UNLIKELY(aml->tport_every[i] > 1) && ++aml->tport_skip[i] < aml->tport_every[i])
            continue;
        aml->tport_skip[i] = 0;
        n += aml->tports[i]->progress(aml);
    }
    if (AML_UNLIKELY(aml->tok_head >= 0) && n == 0)
        aml->idle(aml);
    return n;
}

#endif /* AML_POLL_H_INCLUDED */
