/*
 * amlapi netmod: the range of every integer CVAR, in one table. MPI_Init refuses a value
 * outside it, naming the variable (amlapi_cvar.c), and amlapi_info says so before a job
 * starts (src/info). maint/gen-tuning --check fails when an integer CVAR has no row here.
 * No MPICH header: amlapi_info includes this file too.
 *
 * X(name without MPIR_CVAR_, lowest, highest, 0 is allowed too)
 */
#ifndef AMLAPI_CVAR_RANGE_H_INCLUDED
#define AMLAPI_CVAR_RANGE_H_INCLUDED

#include <limits.h>

#define MPIDI_AMLAPI_CVAR_RANGES(X)                             \
    X(AMLAPI_PACKET_SIZE, 512, 1048576, 0)                      \
    X(AMLAPI_NET_PACKET_SIZE, 512, 1048576, 1)                  \
    X(AMLAPI_EAGER_LIMIT, 0, INT_MAX, 0)                        \
    X(AMLAPI_ADAPTIVE_CREDITS, 0, 1024, 0)                      \
    X(AMLAPI_KEEPALIVE, 0, 3600000, 0)                          \
    X(AMLAPI_OVERSUBSCRIBED, -1, 1, 0)                          \
    X(AMLAPI_DYNAMIC_PEERS, 0, 1048576, 0)                      \
    X(AMLAPI_RMA_DIRECT_SOFT_MAX, -1, INT_MAX, 0)               \
    X(AMLAPI_VNODE_RING_SIZE, 4096, 1 << 30, 1)                 \
    X(AMLAPI_VNODE_SINGLE_COPY_THRESHOLD, 0, INT_MAX, 0)        \
    X(AMLAPI_COLL_SHM, 0, INT_MAX, 0)                           \
    X(AMLAPI_COLL_SHM_BYTES, 0, 1 << 20, 0)

#endif /* AMLAPI_CVAR_RANGE_H_INCLUDED */
