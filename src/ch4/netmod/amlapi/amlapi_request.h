#ifndef AMLAPI_REQUEST_H_INCLUDED
#define AMLAPI_REQUEST_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_init(MPIR_Request * req)
{
    MPIDI_AMLAPI_AMREQ(req).pack_buffer = NULL;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_finalize(MPIR_Request * req)
{
    MPL_free(MPIDI_AMLAPI_AMREQ(req).pack_buffer);
    MPIDI_AMLAPI_AMREQ(req).pack_buffer = NULL;
}

#endif /* AMLAPI_REQUEST_H_INCLUDED */
