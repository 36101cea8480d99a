/*
 * amlapi netmod: inline entry points. Point-to-point, RMA, collectives and partitioned
 * communication go through MPICH's generic active-message layer (MPIDIG) for now; the
 * transport under it is the aml message layer.
 */
#ifndef AMLAPI_NETMOD_INLINE_H_INCLUDED
#define AMLAPI_NETMOD_INLINE_H_INCLUDED

#include "amlapi_impl.h"
#include "netmod_am_fallback.h"
#include "amlapi_am.h"
#include "amlapi_progress.h"
#include "amlapi_proc.h"
#include "amlapi_request.h"
#include "amlapi_noinline.h"

#endif /* AMLAPI_NETMOD_INLINE_H_INCLUDED */
