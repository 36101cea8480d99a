/* Which algorithm serves a collective, by size: the ranges where each beats the alternatives
 * in simulation (maint/simulate) and the link model. Outside them: CT_ERR_NOT_APPLICABLE, and
 * the executor runs its MPI's own algorithm.
 *   bcast      < 8 KiB dimtree (binomial per dimension), else trees (multi-colour, pipelined)
 *   allreduce  non-commutative, or < 2 KiB or fewer elements than 2 per rank: lines
 *              (order-preserving; needs XYZT order when non-commutative), else rsag
 *   reduce     commutative: rsg; non-commutative: not applicable
 *   allgather  dimension-wise rings, any size
 *   alltoall   dimension by dimension (ct_alltoall_dims), any size: the direct shifts of
 *              ct_alltoall_shift load links alike but cost P-1 messages per rank, which at
 *              512 ranks took SimGrid over 300 s of host time against 16 s for MPICH's pair
 *   barrier    lines
 * A single rank is not applicable (nothing to gain). */
#include "ct_algo_int.h"

int ct_select(ct_sched *s, int coll, const ct_topo *t, int me, int root, int64_t count,
              size_t elem_size, const ct_params *p)
{
    if (t->nranks < 2)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "one rank");
    double bytes = (double) count * (double) elem_size;
    int commut = !p || p->commutative;
    switch (coll) {
    case CT_COLL_BCAST:
        if (bytes < 8192)
            return ct_bcast_dimtree(s, t, me, root, count, elem_size, p);
        return ct_bcast_trees(s, t, me, root, count, elem_size, p);
    case CT_COLL_ALLREDUCE:
        if (!commut || bytes < 2048 || count < 2 * t->nranks)
            return ct_allreduce_lines(s, t, me, count, elem_size, p);
        return ct_allreduce_rsag(s, t, me, count, elem_size, p);
    case CT_COLL_REDUCE:
        return ct_reduce_rsg(s, t, me, root, count, elem_size, p);
    case CT_COLL_ALLGATHER:
        return ct_allgather(s, t, me, count, elem_size, p);
    case CT_COLL_ALLTOALL:
        return ct_alltoall_dims(s, t, me, count, elem_size, p);
    case CT_COLL_BARRIER:
        return ct_barrier_lines(s, t, me, p);
    }
    return ct_set_error(CT_ERR_INVALID, "unknown collective %d", coll);
}
