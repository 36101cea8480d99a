/*
 * amlapi netmod: inline entry points. Point-to-point is native (amlapi_p2p.h: matching in
 * aml header handlers). RMA (amlapi_rma.h): each operation takes the first path of its row
 * in amlapi_rma_win.c's table that takes it -- shared-memory window, direct transfer, native
 * message, MPICH's generic MPIDIG; collectives likewise from amlapi_coll.h's table --
 * coll_torus's torus schedules, the node's shared memory, MPICH's algorithms over our
 * point-to-point; partitioned communication is MPIDIG's.
 */
#ifndef AMLAPI_NETMOD_INLINE_H_INCLUDED
#define AMLAPI_NETMOD_INLINE_H_INCLUDED

#include "amlapi_impl.h"
#include "amlapi_rma.h"
#include "amlapi_coll.h"
#include "netmod_am_fallback_part.h"
#include "amlapi_p2p.h"
#include "amlapi_am.h"
#include "amlapi_progress.h"
#include "amlapi_proc.h"
#include "amlapi_request.h"
#include "amlapi_noinline.h"

#endif /* AMLAPI_NETMOD_INLINE_H_INCLUDED */
