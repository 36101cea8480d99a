/*
 * The transports built in: the one list that names them. Not part of the API.
 *
 * A transport's slot indexes this list, its state in struct aml (aml->tport_state: only the
 * transport reads it) and its part of the address every rank publishes and of every
 * direct-access key (aml_context.c, aml_direct.c: a part per slot, in slot order, empty for a
 * transport not in use). aml_init sets up, in slot order, those the configuration asks for
 * (aml_tport_t.wanted), so the most local comes last: aml_poll progresses it first and
 * aml_connect gives each peer the last one that reaches it. A further transport adds its slot
 * before AML_TPORT_SLOTS and its line in aml_tport_builtin. That changes the layout of
 * addresses and keys, which only processes of the same build read (a job's ranks, and
 * processes of other jobs that connect to it): with it goes a new AML_WIRE_VERSION
 * (aml_wire.h), which both compare.
 */
#ifndef AML_TPORTS_H_INCLUDED
#define AML_TPORTS_H_INCLUDED

#include "aml_tport.h"

enum {
    AML_TPORT_UCX,              /* aml_ucx.c: any peer (other hosts, other jobs, this rank) */
    AML_TPORT_VNODE,            /* aml_vnode.c: the other ranks of this node */
    AML_TPORT_SLOTS
};

extern const aml_tport_t aml_ucx_tport;
extern const aml_tport_t aml_vnode_tport;

/* The transport of slot s. A function, so that only its callers refer to every transport:
 * aml_init and aml_qenv (aml_context.c, the top layer). */
static inline const aml_tport_t *aml_tport_builtin(int s)
{
    static const aml_tport_t *const all[AML_TPORT_SLOTS] = {
        [AML_TPORT_UCX] = &aml_ucx_tport,
        [AML_TPORT_VNODE] = &aml_vnode_tport,
    };
    return all[s];
}

#endif /* AML_TPORTS_H_INCLUDED */
