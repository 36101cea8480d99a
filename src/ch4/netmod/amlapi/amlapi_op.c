/*
 * amlapi netmod: MPI's predefined reduction operations as the netmod applies them itself: an
 * accumulate-family operation applied to a target's memory (shared-memory windows,
 * amlapi_rma_shm.c; the target of native RMA messages, amlapi_rma_am.c), through
 * amlapi_rma_op.h's loops where the types allow, and which datatypes the collectives reduce
 * themselves (amlapi_coll.c, amlapi_coll_shm.c).
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_rma_op.h"

/* Applies origin (op) to the target's memory; the caller holds the target's mutex. The
 * origin datatype is a predefined one or built of one predefined type (MPI's rule for
 * accumulates); a derived one is packed first, as MPIR_Typerep_op wants. */
int MPIDI_AMLAPI_rma_apply(const void *origin_addr, int origin_count,
                           MPI_Datatype origin_datatype, char *addr, int target_count,
                           MPI_Datatype target_datatype, MPI_Op op)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Datatype *dtp;
    MPI_Aint size, basic_size, n;
    void *packed = NULL;

    if (op == MPI_NO_OP)
        return MPI_SUCCESS;
    if (MPIDI_AMLAPI_same_basic(origin_datatype, origin_count, target_datatype, target_count) &&
        MPIDI_AMLAPI_acc_fast(origin_datatype, op, origin_addr, addr, origin_count))
        return MPI_SUCCESS;
    if (HANDLE_IS_BUILTIN(origin_datatype))
        return MPIR_Typerep_op((void *) origin_addr, origin_count, origin_datatype, addr,
                               target_count, target_datatype, op, false, -1);
    MPIR_Datatype_get_ptr(origin_datatype, dtp);
    MPIR_ERR_CHKANDJUMP(dtp->basic_type == MPI_DATATYPE_NULL, mpi_errno, MPI_ERR_TYPE,
                        "**dtype");
    MPIR_Datatype_get_size_macro(origin_datatype, size);
    size *= origin_count;
    MPIR_Datatype_get_size_macro(dtp->basic_type, basic_size);
    packed = MPL_malloc(size, MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!packed, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIR_Typerep_pack(origin_addr, origin_count, origin_datatype, 0, packed, size,
                                  &n);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIR_Typerep_op(packed, size / basic_size, dtp->basic_type, addr, target_count,
                                target_datatype, op, true, -1);
  fn_exit:
    MPL_free(packed);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Collective reductions work on elements of the user's datatype, which every rank passes
 * alike: it must be contiguous with no gaps (coll_torus's reductions, amlapi_coll.c; the
 * shared-memory allreduce, amlapi_coll_shm.c). */
int MPIDI_AMLAPI_coll_reducible(MPI_Datatype datatype, MPI_Aint * extent, MPI_Aint * lb)
{
    int contig;
    MPI_Aint size, true_extent;
    MPIR_Datatype_is_contig(datatype, &contig);
    MPIR_Datatype_get_size_macro(datatype, size);
    MPIR_Datatype_get_extent_macro(datatype, *extent);
    MPIR_Type_get_true_extent_impl(datatype, lb, &true_extent);
    return contig && size > 0 && *extent == size && true_extent == size;
}
