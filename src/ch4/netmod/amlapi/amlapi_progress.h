#ifndef AMLAPI_PROGRESS_H_INCLUDED
#define AMLAPI_PROGRESS_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    (void) vci;
    (void) blocking;
    aml_progress(MPIDI_AMLAPI_global.aml);
    return MPI_SUCCESS;
}

#endif /* AMLAPI_PROGRESS_H_INCLUDED */
