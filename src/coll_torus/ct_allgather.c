/* Allgather(v), dimension by dimension.
 *
 * Each rank's block is cut into parts (ct_part_order: one per dimension rotation and ring
 * direction). Part j lives in scratch in its own order, the ranks sorted by coordinates with
 * part j's first dimension fastest: then what a rank holds after each dimension (its line,
 * then its plane, ...) is one contiguous range, and each ring step moves one range. The parts
 * start on different dimensions and walk rings both ways, so the large final steps spread
 * over every link. At the end every block is copied to its place in the receive buffer. */
#include "ct_algo_int.h"

#include <stdlib.h>

int ct_allgatherv(ct_sched *s, const ct_topo *t, int me, const int64_t *counts,
                  const int64_t *displs, size_t elem_size, const ct_params *p)
{
    (void) p;
    int P = t->nranks;
    if (me < 0 || me >= P)
        return ct_set_error(CT_ERR_INVALID, "allgatherv: bad rank");
    for (int r = 0; r < P; r++)
        if (counts[r] < 0 || displs[r] < 0)
            return ct_set_error(CT_ERR_INVALID, "allgatherv: rank %d's count or displacement "
                                "is negative", r);
    int rc = ct_sched_init(s, me, P, elem_size);
    if (rc)
        return rc;
    int *rk = malloc(sizeof(int) * (size_t) P);
    int64_t *pre = malloc(sizeof(int64_t) * (size_t) (P + 1));
    if (!rk || !pre) {
        free(rk);
        free(pre);
        ct_sched_free(s);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    int np = ct_nparts(t);
    int64_t base = 0;
    const int *mc = t->coords[me];
    for (int j = 0; j < np; j++) {
        int ord[CT_MAXDIMS], dir, L = ct_part_order(t, j, ord, &dir);
        ct_set_chan(s, j);
        int stride[CT_MAXDIMS + 1];
        stride[0] = 1;
        for (int i = 0; i < L; i++)
            stride[i + 1] = stride[i] * t->dims[ord[i]];
        /* part order index -> rank, and prefix sums of part j's lengths */
        int myidx = 0;
        for (int r = 0; r < P; r++) {
            int idx = 0;
            for (int i = 0; i < L; i++)
                idx += t->coords[r][ord[i]] * stride[i];
            rk[idx] = r;
            if (r == me)
                myidx = idx;
        }
        pre[0] = 0;
        for (int idx = 0; idx < P; idx++) {
            int r = rk[idx];
            pre[idx + 1] = pre[idx] + ct_part_lo(counts[r], np, j + 1) - ct_part_lo(counts[r], np, j);
        }
        int64_t mylen = pre[myidx + 1] - pre[myidx];
        if (mylen)
            ct_copy(s, CT_BUF_TMP, base + pre[myidx], CT_BUF_SEND, ct_part_lo(counts[me], np, j), mylen);
        for (int i = 0; i < L; i++) {
            int d = ord[i], n = t->dims[d], pos = mc[d];
            int gbase = 0;
            for (int l = i + 1; l < L; l++)
                gbase += mc[ord[l]] * stride[l];
            int v = ct_ring_v(pos, n, dir);
            int next = ct_rank_with(t, me, d, ct_ring_pos(v + 1, n, dir));
            int prev = ct_rank_with(t, me, d, ct_ring_pos(v - 1, n, dir));
            for (int st = 0; st < n - 1; st++) {
                int sq = ct_ring_pos(v - st, n, dir), rq = ct_ring_pos(v - st - 1, n, dir);
                int s0 = gbase + sq * stride[i], r0 = gbase + rq * stride[i];
                int64_t slo = pre[s0], shi = pre[s0 + stride[i]];
                int64_t rlo = pre[r0], rhi = pre[r0 + stride[i]];
                if (shi > slo)
                    ct_send(s, CT_BUF_TMP, base + slo, shi - slo, next);
                if (rhi > rlo)
                    ct_recv(s, CT_BUF_TMP, base + rlo, rhi - rlo, prev);
            }
        }
        for (int idx = 0; idx < P; idx++) {
            int r = rk[idx];
            if (pre[idx + 1] > pre[idx])
                ct_copy(s, CT_BUF_RECV, displs[r] + ct_part_lo(counts[r], np, j), CT_BUF_TMP,
                        base + pre[idx], pre[idx + 1] - pre[idx]);
        }
        base += pre[P];
    }
    free(rk);
    free(pre);
    return ct_sched_finish(s);
}

int ct_allgather(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                 const ct_params *p)
{
    if (count < 0)
        return ct_set_error(CT_ERR_INVALID, "allgather: count %lld", (long long) count);
    int P = t->nranks;
    int64_t *c = malloc(sizeof(int64_t) * 2 * (size_t) P);
    if (!c)
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < P; r++)
        c[r] = count, c[P + r] = (int64_t) r * count;
    int rc = ct_allgatherv(s, t, me, c, c + P, elem_size, p);
    free(c);
    return rc;
}
