/*
 * Progress (Banikazemi et al. 1999, §6.1): polling by default; in interrupt mode the embedder may
 * sleep on the transport's event fd after aml_arm. Counter waits progress until the counter reaches
 * its value.
 */
#include "aml_poll.h"

/* One pass over the transports (aml_poll says why not more); nothing from inside a
 * handler. */
int aml_progress(aml_t * aml)
{
    return aml_poll(aml);
}

int aml_arm(aml_t * aml)
{
    if (!aml || aml->efd < 0)
        return AML_ERR_STATE;
    if (aml->in_dispatch || aml->nheld)
        return AML_ERR_STATE;   /* a held packet (debug_reorder) goes at the next progress */
    /* every transport, so that an arrival on any wakes the sleeper (a second transport will
     * need aml->efd to be an epoll set of theirs) */
    for (int i = 0; i < aml->ntports; i++) {
        int rc = aml->tports[i]->arm(aml);
        if (rc != AML_OK)
            return rc;
    }
    return AML_OK;
}

int aml_event_fd(aml_t * aml, int *fd)
{
    if (!aml || !fd || aml->efd < 0)
        return AML_ERR_STATE;
    *fd = aml->efd;
    return AML_OK;
}

int aml_cntr_wait(aml_t * aml, aml_cntr_t * c, int64_t val)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    if (aml->in_dispatch)
        return AML_ERR_STATE;   /* handlers must not block */
    while (c->value < val)
        aml_progress(aml);
    c->value -= val;
    return AML_OK;
}
