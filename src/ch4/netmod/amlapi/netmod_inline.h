/*
 * amlapi netmod: inline entry points. Point-to-point is native (amlapi_p2p.h: matching in
 * aml header handlers). RMA: direct put/get where aml reaches the target (amlapi_rma.h), the
 * rest MPICH's generic MPIDIG; collectives and partitioned communication use MPICH's generic
 * layers (MPIDIG active messages, MPIR collective algorithms over our point-to-point).
 */
#ifndef AMLAPI_NETMOD_INLINE_H_INCLUDED
#define AMLAPI_NETMOD_INLINE_H_INCLUDED

#include "amlapi_impl.h"
#include "amlapi_rma.h"
#include "netmod_am_fallback_coll.h"
#include "netmod_am_fallback_part.h"
#include "amlapi_p2p.h"
#include "amlapi_am.h"
#include "amlapi_progress.h"
#include "amlapi_proc.h"
#include "amlapi_request.h"
#include "amlapi_noinline.h"

#endif /* AMLAPI_NETMOD_INLINE_H_INCLUDED */
