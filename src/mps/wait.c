/* What the poster lists as MPI's gaps: waiting with a deadline, and select over channels. */
#include "mps_impl.h"

#include <stdlib.h>

int MPS_Wait_timeout(MPI_Request *req, MPI_Status *status, double seconds)
{
    if (!req)
        return mps_error(MPS_ERR_ARG, "MPS_Wait_timeout: req is NULL");
    if (!(seconds >= 0))
        return mps_error(MPS_ERR_ARG, "MPS_Wait_timeout: timeout %g s is negative", seconds);
    double deadline = MPI_Wtime() + seconds;
    for (;;) {
        int done = 0;
        /* MPI_Test leaves an incomplete request as it was: on timeout it is still active */
        int rc = MPI_Test(req, &done, status);
        if (rc != MPI_SUCCESS)
            return mps_mpi_error("MPS_Wait_timeout: MPI_Test", rc);
        if (done)
            return MPS_SUCCESS;
        if (MPI_Wtime() >= deadline)
            return mps_error(MPS_ERR_TIMEOUT, "MPS_Wait_timeout: not complete within %g s (the request is still "
                             "active: wait again or cancel it)", seconds);
        mps_relax();
    }
}

int MPS_Select(int count, const MPI_Comm comms[], double seconds, int *index)
{
    /* where the last select started: a busy channel cannot starve the others */
    static int start;
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if (count <= 0 || !comms || !index)
        return mps_error(MPS_ERR_ARG, "MPS_Select: needs count > 0 channels and an index");
    for (int i = 0; i < count; i++)
        if (comms[i] == MPI_COMM_NULL)
            return mps_error(MPS_ERR_ARG, "MPS_Select: channel %d is MPI_COMM_NULL", i);
    double deadline = seconds > 0 ? MPI_Wtime() + seconds : 0;
    for (;;) {
        for (int k = 0; k < count; k++) {
            int i = (start + k) % count;
            mps_channel *ch = mps_channel_of(s, comms[i]);
            int ready = 0;
            if (ch && ch->rcv_pool) {
                /* its receive pool takes every message: data waits in its buffers */
                if ((rc = mps_pool_progress(ch->rcv_pool)) != MPS_SUCCESS)
                    return rc;
                ready = mps_pool_has_data(ch->rcv_pool);
            } else {
                rc = MPI_Iprobe(ch ? ch->rrank : MPI_ANY_SOURCE, MPI_ANY_TAG, comms[i], &ready, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS)
                    return mps_mpi_error("MPS_Select: MPI_Iprobe", rc);
            }
            if (ready) {
                *index = i;
                start = (i + 1) % count;
                return MPS_SUCCESS;
            }
        }
        if (seconds == 0 || (seconds > 0 && MPI_Wtime() >= deadline))
            return mps_error(MPS_ERR_TIMEOUT, "MPS_Select: no data on any of %d channel(s) within %g s", count,
                             seconds < 0 ? 0 : seconds);
        mps_relax();
    }
}
