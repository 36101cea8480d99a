/*
 * amlapi netmod: the control channel. Window locks (amlapi_rma_lock.c), post/start/
 * complete/wait (amlapi_rma_active.c) and the shared-memory collectives' wake-ups
 * (amlapi_coll_shm.c) send small notices: a header and no data, inline when aml allows (aml
 * copies the header before returning on both paths); aml's general send otherwise.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"

static int64_t ctl_inline_max = -1;

int MPIDI_AMLAPI_ctl_register(unsigned handler, aml_hdr_handler_t fn)
{
    int mpi_errno = MPI_SUCCESS, rc;
    rc = aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_INLINE_LIMIT, &ctl_inline_max);
    MPIDI_AMLAPI_CHK(rc, "aml_qenv");
    rc = aml_register_handler(MPIDI_AMLAPI_global.aml, handler, fn, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_ctl_send(int peer, unsigned handler, const void *hdr, size_t len)
{
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    if ((int64_t) len <= ctl_inline_max)
        return aml_amsend_small(aml, peer, handler, hdr, len, NULL, 0);
    return aml_amsend(aml, peer, handler, hdr, len, NULL, 0, NULL, NULL, NULL);
}
