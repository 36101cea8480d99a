/* Barrier over the dimensions: in each dimension (x, y, z, then the ranks of a node) a
 * dissemination barrier along the rank's line, and the next dimension's messages go only
 * once all of this one's have arrived. After dimension d a rank has heard, directly or
 * through its line, from every rank that differs from it only in dimensions up to d: after
 * the last, from everyone. log2(P) rounds, as a global dissemination, but of short hops.
 * (Sending to every rank of the line at once, 3 rounds on a 3-D torus, was much slower than
 * MPICH's dissemination on a simulated 8x8x8:
 * docs/benchmarks/2026-11-28-figures-from-the-code.md.) */
#include "ct_algo_int.h"

#include <stdlib.h>

int ct_barrier_lines(ct_sched *s, const ct_topo *t, int me, const ct_params *p)
{
    (void) p;
    if (me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "barrier: bad rank");
    int rc = ct_sched_init(s, me, t->nranks, 1);
    if (rc)
        return rc;
    /* every send waits for every receive before it: a receive of this dimension alone does
     * not imply the earlier ones completed */
    int nrecv = 0, *recvs = malloc(sizeof(int) * (size_t) (t->dims[0] + t->dims[1] + t->dims[2] + t->dims[3]));
    if (!recvs) {
        ct_sched_free(s);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int d = 0; d < CT_MAXDIMS; d++) {
        int n = t->dims[d], pos = t->coords[me][d];
        if (n == 1)
            continue;
        /* dissemination along the line: round k sends to k positions up and hears from k
         * down; after ceil(log2 n) rounds every rank of the line has heard from all */
        for (int k = 1; k < n; k <<= 1) {
            for (int x = 0; x < nrecv; x++)
                ct_next_dep(s, recvs[x]);
            ct_send(s, CT_BUF_TMP, 0, 0, ct_rank_with(t, me, d, (pos + k) % n));
            int id = ct_recv(s, CT_BUF_TMP, 0, 0, ct_rank_with(t, me, d, (pos - k + n) % n));
            if (id >= 0)
                recvs[nrecv++] = id;
        }
    }
    free(recvs);
    return ct_sched_finish(s);
}
