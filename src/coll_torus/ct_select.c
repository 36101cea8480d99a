/* Which algorithm serves a collective, by size and topology: the ranges where each beats the
 * alternatives in simulation (maint/simulate: SMPI, MPICH 4.0.2's choice for the same size and
 * rank count on the other side) and the link model. Where MPICH's own choice is faster:
 * CT_ERR_NOT_APPLICABLE, and the executor falls back to it.
 *   bcast      < 8 KiB dimtree (binomial per dimension), unless its rounds outnumber those of
 *              one binomial tree over all ranks and the message is 32 B or more: fallback;
 *              else trees (multi-colour, pipelined)
 *   allreduce  commutative, at least 2 elements per rank and 128 B: rsag; else lines
 *              (order-preserving; needs XYZT order when non-commutative), unless a line of
 *              more than 8 ranks is not a power of two, or MPICH would reduce-scatter
 *              (commutative, over 8 B, at least as many elements as the largest power of two
 *              <= ranks) and a line holds more than 3 ranks: fallback
 *   reduce     commutative: rsg; non-commutative: not applicable
 *   allgather  dimension-wise rings, any size
 *   alltoall   dimension by dimension (ct_alltoall_dims), except where MPICH posts every
 *              message at once (up to 32 ranks, up to 32 KiB; above 256 B from 9 ranks):
 *              fallback. The direct shifts of ct_alltoall_shift load links alike but cost
 *              P-1 messages per rank, too many for SimGrid's host time at 512 ranks
 *   barrier    lines
 * A single rank is not applicable (nothing to gain). */
#include "ct_algo_int.h"

/* ceil(log2(n)) */
static int clog2(int64_t n)
{
    int k = 0;
    while (((int64_t) 1 << k) < n)
        k++;
    return k;
}

/* A binomial tree per dimension (dimtree) takes the sum of ceil(log2(extent)) rounds; one
 * over all ranks takes ceil(log2(P)): the same when the extents are powers of two, up to one
 * more per dimension otherwise. */
static int dimtree_extra_rounds(const ct_topo *t)
{
    int r = 0;
    for (int d = 0; d < CT_MAXDIMS; d++)
        r += clog2(t->dims[d]);
    return r - clog2(t->nranks);
}

/* lines sends the whole vector in every step: log2(n) steps along a line of a power of two,
 * but along any other line one message to each of its n-1 ranks, whose load on a link grows
 * with n^2 */
static int lines_too_long(const ct_topo *t)
{
    for (int d = 0; d < CT_MAXDIMS; d++)
        if (t->dims[d] > 8 && (t->dims[d] & (t->dims[d] - 1)))
            return 1;
    return 0;
}

static int max_extent(const ct_topo *t)
{
    int m = 1;
    for (int d = 0; d < CT_MAXDIMS; d++)
        if (t->dims[d] > m)
            m = t->dims[d];
    return m;
}

int ct_select(ct_sched *s, int coll, const ct_topo *t, int me, int root, int64_t count,
              size_t elem_size, const ct_params *p)
{
    if (t->nranks < 2)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "one rank");
    double bytes = (double) count * (double) elem_size;
    int commut = !p || p->commutative;
    int64_t P = t->nranks, pof2 = (int64_t) 1 << (clog2(P + 1) - 1);
    switch (coll) {
    case CT_COLL_BCAST:
        if (bytes < 8192) {
            /* dimtree's rounds are neighbour to neighbour and shorter than those of a
             * binomial tree over rank numbers, but a round more costs more than the hops
             * saved once a message takes longer than a few hops' latency */
            if (bytes >= 32 && dimtree_extra_rounds(t) > 0)
                return ct_set_error(CT_ERR_NOT_APPLICABLE, "bcast of %.0f B: binomial trees "
                                    "per dimension take more rounds than one over all ranks",
                                    bytes);
            return ct_bcast_dimtree(s, t, me, root, count, elem_size, p);
        }
        return ct_bcast_trees(s, t, me, root, count, elem_size, p);
    case CT_COLL_ALLREDUCE:
        if (commut && count >= 2 * P && bytes >= 128)
            return ct_allreduce_rsag(s, t, me, count, elem_size, p);
        if (lines_too_long(t))
            return ct_set_error(CT_ERR_NOT_APPLICABLE, "allreduce lines: a line of more "
                                "than 8 ranks that is not a power of two");
        /* MPICH's reduce-scatter + allgather moves about twice the vector whatever the
         * rank count; lines move it once per step, fewer only with lines of 2 or 3 */
        if (commut && bytes > 8 && count >= pof2 && max_extent(t) > 3)
            return ct_set_error(CT_ERR_NOT_APPLICABLE, "allreduce of %.0f B: lines move the "
                                "vector more often than a reduce-scatter and allgather", bytes);
        return ct_allreduce_lines(s, t, me, count, elem_size, p);
    case CT_COLL_REDUCE:
        return ct_reduce_rsg(s, t, me, root, count, elem_size, p);
    case CT_COLL_ALLGATHER:
        return ct_allgather(s, t, me, count, elem_size, p);
    case CT_COLL_ALLTOALL:
        /* all messages at once load the links of a small torus as evenly as the dimension
         * by dimension exchange, in one phase instead of one per dimension */
        if (P <= 32 && bytes <= 32768 && (P <= 8 || bytes > 256))
            return ct_set_error(CT_ERR_NOT_APPLICABLE, "alltoall of %.0f B on %d ranks: "
                                "every message at once is as fast", bytes, t->nranks);
        return ct_alltoall_dims(s, t, me, count, elem_size, p);
    case CT_COLL_BARRIER:
        return ct_barrier_lines(s, t, me, p);
    }
    return ct_set_error(CT_ERR_INVALID, "unknown collective %d", coll);
}
