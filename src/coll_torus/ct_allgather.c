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
    int np = ct_nparts(t);
    int *rk = malloc(sizeof(int) * (size_t) P * (size_t) np);
    int64_t *pre = malloc(sizeof(int64_t) * (size_t) (P + 1) * (size_t) np);
    if (!rk || !pre) {
        free(rk);
        free(pre);
        ct_sched_free(s);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    const int *mc = t->coords[me];
    int ord[2 * CT_MAXDIMS][CT_MAXDIMS], dir[2 * CT_MAXDIMS], L = 0;
    int stride[2 * CT_MAXDIMS][CT_MAXDIMS + 1];
    int64_t base[2 * CT_MAXDIMS + 1];
    base[0] = 0;
    for (int j = 0; j < np; j++) {
        int *rkj = rk + (size_t) j * P;
        int64_t *prej = pre + (size_t) j * (P + 1);
        L = ct_part_order(t, j, ord[j], &dir[j]);
        stride[j][0] = 1;
        for (int i = 0; i < L; i++)
            stride[j][i + 1] = stride[j][i] * t->dims[ord[j][i]];
        /* part order index -> rank, and prefix sums of part j's lengths */
        int myidx = 0;
        for (int r = 0; r < P; r++) {
            int idx = 0;
            for (int i = 0; i < L; i++)
                idx += t->coords[r][ord[j][i]] * stride[j][i];
            rkj[idx] = r;
            if (r == me)
                myidx = idx;
        }
        prej[0] = 0;
        for (int idx = 0; idx < P; idx++) {
            int r = rkj[idx];
            prej[idx + 1] = prej[idx] + ct_part_lo(counts[r], np, j + 1) - ct_part_lo(counts[r], np, j);
        }
        base[j + 1] = base[j] + prej[P];
        int64_t mylen = prej[myidx + 1] - prej[myidx];
        if (mylen)
            ct_copy(s, CT_BUF_TMP, base[j] + prej[myidx], CT_BUF_SEND,
                    ct_part_lo(counts[me], np, j), mylen);
    }
    /* level by level, every part at once (their level-i rings use distinct link
     * directions); a level's sends wait for all of the previous level here, so a part
     * running late does not share links with another part's next, larger level */
    int sync0 = 0, sync1 = 0;
    for (int i = 0; i < L; i++) {
        int first = s->nsteps;
        for (int j = 0; j < np; j++) {
            int64_t *prej = pre + (size_t) j * (P + 1);
            ct_set_chan(s, j);
            int d = ord[j][i], n = t->dims[d], pos = mc[d], sti = stride[j][i];
            int gbase = 0;
            for (int l = i + 1; l < L; l++)
                gbase += mc[ord[j][l]] * stride[j][l];
            int v = ct_ring_v(pos, n, dir[j]);
            int next = ct_rank_with(t, me, d, ct_ring_pos(v + 1, n, dir[j]));
            int prev = ct_rank_with(t, me, d, ct_ring_pos(v - 1, n, dir[j]));
            int rid[CT_RECV_WINDOW];
            for (int w = 0; w < CT_RECV_WINDOW; w++)
                rid[w] = -1;
            for (int st = 0; st < n - 1; st++) {
                int sq = ct_ring_pos(v - st, n, dir[j]), rq = ct_ring_pos(v - st - 1, n, dir[j]);
                int s0 = gbase + sq * sti, r0 = gbase + rq * sti;
                int64_t slo = prej[s0], shi = prej[s0 + sti];
                int64_t rlo = prej[r0], rhi = prej[r0 + sti];
                if (shi > slo) {
                    for (int x = sync0; x < sync1; x++)
                        ct_next_dep(s, x);
                    ct_send(s, CT_BUF_TMP, base[j] + slo, shi - slo, next);
                }
                if (st >= CT_RECV_WINDOW)
                    ct_next_dep(s, rid[st % CT_RECV_WINDOW]);
                rid[st % CT_RECV_WINDOW] =
                    rhi > rlo ? ct_recv(s, CT_BUF_TMP, base[j] + rlo, rhi - rlo, prev) : -1;
            }
        }
        sync0 = first, sync1 = s->nsteps;
    }
    for (int j = 0; j < np; j++) {
        int *rkj = rk + (size_t) j * P;
        int64_t *prej = pre + (size_t) j * (P + 1);
        for (int idx = 0; idx < P; idx++) {
            int r = rkj[idx];
            if (prej[idx + 1] > prej[idx])
                ct_copy(s, CT_BUF_RECV, displs[r] + ct_part_lo(counts[r], np, j), CT_BUF_TMP,
                        base[j] + prej[idx], prej[idx + 1] - prej[idx]);
        }
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
