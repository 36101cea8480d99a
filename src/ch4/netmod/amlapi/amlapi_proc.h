#ifndef AMLAPI_PROC_H_INCLUDED
#define AMLAPI_PROC_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rank_is_local(int rank, MPIR_Comm * comm)
{
    return MPIDIU_rank_is_local(rank, comm);
}

/* A process is named by (AV table, index); only the local group of an intercommunicator
 * is looked up on the local side. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_comm_get_gpid(MPIR_Comm * comm_ptr, int idx,
                                                    uint64_t * gpid_ptr, bool is_remote)
{
    int avtid = 0, lpid = 0;
    bool local_group = comm_ptr->comm_kind == MPIR_COMM_KIND__INTERCOMM && !is_remote;
    if (local_group)
        MPIDIU_comm_rank_to_pid_local(comm_ptr, idx, &lpid, &avtid);
    else
        MPIDIU_comm_rank_to_pid(comm_ptr, idx, &lpid, &avtid);
    *gpid_ptr = MPIDIU_GPID_CREATE(avtid, lpid);
    return MPI_SUCCESS;
}

#endif /* AMLAPI_PROC_H_INCLUDED */
