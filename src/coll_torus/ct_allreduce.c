/* Allreduce and reduce.
 *
 * ct_allreduce_rsag (large data, commutative operations): the vector is cut into parts, one
 * per (dimension rotation, ring direction) (ct_part_order). Each part is reduce-scattered
 * dimension by dimension over rings (after x, a rank holds 1/X of its part reduced over its x
 * line; after y, 1/(XY) reduced over its xy plane, ...), then allgathered back in reverse
 * order. The parts start on different dimensions and walk rings both ways, so every link
 * direction carries about the same share: about 2 * (count / (links per node)) per link.
 *
 * ct_reduce_rsg: the same reduce-scatter, then each dimension (in reverse) gathers its line's
 * blocks at the root's position, so the root ends with the whole vector. Every rank needs a
 * RECV of count elements (a non-root's executor passes scratch: MPI leaves it undefined).
 *
 * ct_allreduce_lines (small data, any operation): dimension by dimension (x, y, z, t), every
 * rank sends its vector to the other ranks of its line and combines what it receives in line
 * order (a line whose length is a power of two does recursive doubling instead). With ranks in lexicographic order of the coordinates (XYZT: x fastest; or TXYZ when
 * ranks are placed node by node) and the dimensions taken fastest first, each line's ranks
 * are consecutive blocks of ranks, so the result is combined in rank order, as MPI demands
 * of a non-commutative operation. */
#include "ct_algo_int.h"

#include <stdlib.h>


/* Reduce-scatter of [lo, hi) over a ring of dimension d in direction dir; data in RECV,
 * scratch in TMP at the same offsets. Leaves my block in [*nlo, *nhi). */
/* the sends wait for steps [sync0, sync1) too (the previous level of every part) */
static void sync_deps(ct_sched *s, int sync0, int sync1)
{
    for (int x = sync0; x < sync1; x++)
        ct_next_dep(s, x);
}

static void ring_rs(ct_sched *s, const ct_topo *t, int me, int d, int dir, int64_t lo, int64_t hi,
                    int64_t *nlo, int64_t *nhi, int sync0, int sync1)
{
    int n = t->dims[d], p = t->coords[me][d];
    int v = ct_ring_v(p, n, dir);
    int next = ct_rank_with(t, me, d, ct_ring_pos(v + 1, n, dir));
    int prev = ct_rank_with(t, me, d, ct_ring_pos(v - 1, n, dir));
    int64_t len = hi - lo;
    int rid[CT_RECV_WINDOW];
    for (int w = 0; w < CT_RECV_WINDOW; w++)
        rid[w] = -1;
    for (int st = 0; st < n - 1; st++) {
        int sb = ((v - st) % n + n) % n, rb = ((v - st - 1) % n + n) % n;
        int64_t slo = lo + ct_part_lo(len, n, sb), shi = lo + ct_part_lo(len, n, sb + 1);
        int64_t rlo = lo + ct_part_lo(len, n, rb), rhi = lo + ct_part_lo(len, n, rb + 1);
        if (shi > slo) {
            sync_deps(s, sync0, sync1);
            ct_send(s, CT_BUF_RECV, slo, shi - slo, next);
        }
        if (rhi > rlo) {
            if (st >= CT_RECV_WINDOW)
                ct_next_dep(s, rid[st % CT_RECV_WINDOW]);
            rid[st % CT_RECV_WINDOW] = ct_recv(s, CT_BUF_TMP, rlo, rhi - rlo, prev);
            ct_reduce(s, 0, CT_BUF_RECV, rlo, CT_BUF_TMP, rlo, rhi - rlo);
        } else
            rid[st % CT_RECV_WINDOW] = -1;
    }
    int b = (v + 1) % n;
    *nlo = lo + ct_part_lo(len, n, b);
    *nhi = lo + ct_part_lo(len, n, b + 1);
}

/* Allgather over the same ring: I hold block (v + 1) of [lo, hi) */
static void ring_ag(ct_sched *s, const ct_topo *t, int me, int d, int dir, int64_t lo, int64_t hi,
                    int sync0, int sync1)
{
    int n = t->dims[d], p = t->coords[me][d];
    int v = ct_ring_v(p, n, dir);
    int next = ct_rank_with(t, me, d, ct_ring_pos(v + 1, n, dir));
    int prev = ct_rank_with(t, me, d, ct_ring_pos(v - 1, n, dir));
    int64_t len = hi - lo;
    int rid[CT_RECV_WINDOW];
    for (int w = 0; w < CT_RECV_WINDOW; w++)
        rid[w] = -1;
    for (int st = 0; st < n - 1; st++) {
        int sb = ((v + 1 - st) % n + n) % n, rb = ((v - st) % n + n) % n;
        int64_t slo = lo + ct_part_lo(len, n, sb), shi = lo + ct_part_lo(len, n, sb + 1);
        int64_t rlo = lo + ct_part_lo(len, n, rb), rhi = lo + ct_part_lo(len, n, rb + 1);
        if (shi > slo) {
            sync_deps(s, sync0, sync1);
            ct_send(s, CT_BUF_RECV, slo, shi - slo, next);
        }
        if (st >= CT_RECV_WINDOW)
            ct_next_dep(s, rid[st % CT_RECV_WINDOW]);
        rid[st % CT_RECV_WINDOW] = rhi > rlo ? ct_recv(s, CT_BUF_RECV, rlo, rhi - rlo, prev) : -1;
    }
}

static int check_args(const ct_topo *t, int me, int64_t count)
{
    if (count < 0 || me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "reduction: bad count or rank");
    return CT_OK;
}

int ct_allreduce_rsag(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                      const ct_params *p)
{
    int rc = check_args(t, me, count);
    if (rc)
        return rc;
    if (p && !p->commutative)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "allreduce rsag: rings combine out of rank "
                            "order, so only commutative operations");
    if ((rc = ct_sched_init(s, me, t->nranks, elem_size)))
        return rc;
    ct_copy(s, CT_BUF_RECV, 0, CT_BUF_SEND, 0, count);
    /* Level by level, every part at once: at each level the parts use disjoint link
     * directions (part j's level-i dimension and direction differ from every other part's),
     * and a level's sends wait for all of the previous level here, so a part running late
     * does not share its links with another part's next level. */
    int np = ct_nparts(t), L = 0;
    int ord[2 * CT_MAXDIMS][CT_MAXDIMS], dir[2 * CT_MAXDIMS];
    int64_t lo[2 * CT_MAXDIMS][CT_MAXDIMS + 1], hi[2 * CT_MAXDIMS][CT_MAXDIMS + 1];
    for (int j = 0; j < np; j++) {
        L = ct_part_order(t, j, ord[j], &dir[j]);
        lo[j][0] = ct_part_lo(count, np, j);
        hi[j][0] = ct_part_lo(count, np, j + 1);
    }
    int sync0 = 0, sync1 = 0;
    for (int i = 0; i < L; i++) {
        int first = s->nsteps;
        for (int j = 0; j < np; j++) {
            ct_set_chan(s, j);
            ring_rs(s, t, me, ord[j][i], dir[j], lo[j][i], hi[j][i], &lo[j][i + 1], &hi[j][i + 1],
                    sync0, sync1);
        }
        sync0 = first, sync1 = s->nsteps;
    }
    for (int i = L - 1; i >= 0; i--) {
        int first = s->nsteps;
        for (int j = 0; j < np; j++) {
            ct_set_chan(s, j);
            ring_ag(s, t, me, ord[j][i], dir[j], lo[j][i], hi[j][i], sync0, sync1);
        }
        sync0 = first, sync1 = s->nsteps;
    }
    return ct_sched_finish(s);
}

int ct_reduce_rsg(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                  size_t elem_size, const ct_params *p)
{
    int rc = check_args(t, me, count);
    if (rc)
        return rc;
    if (root < 0 || root >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "reduce: root %d of %d ranks", root, t->nranks);
    if (p && !p->commutative)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "reduce rsg: rings combine out of rank "
                            "order, so only commutative operations");
    if ((rc = ct_sched_init(s, me, t->nranks, elem_size)))
        return rc;
    ct_copy(s, CT_BUF_RECV, 0, CT_BUF_SEND, 0, count);
    const int *r = t->coords[root], *mc = t->coords[me];
    int np = ct_nparts(t);
    for (int j = 0; j < np; j++) {
        int ord[CT_MAXDIMS], dir, L = ct_part_order(t, j, ord, &dir);
        ct_set_chan(s, j);
        int64_t lo[CT_MAXDIMS + 1], hi[CT_MAXDIMS + 1];
        lo[0] = ct_part_lo(count, np, j);
        hi[0] = ct_part_lo(count, np, j + 1);
        for (int i = 0; i < L; i++)
            ring_rs(s, t, me, ord[i], dir, lo[i], hi[i], &lo[i + 1], &hi[i + 1], 0, 0);
        /* gather, last dimension first: at level i, the ranks whose coordinates in ord[i+1..]
         * are the root's send their block to the line's root position */
        for (int i = L - 1; i >= 0; i--) {
            int in = 1;
            for (int e = i + 1; e < L; e++)
                in &= mc[ord[e]] == r[ord[e]];
            if (!in)
                break;
            int d = ord[i], n = t->dims[d];
            if (mc[d] != r[d]) {
                if (hi[i + 1] > lo[i + 1])
                    ct_send(s, CT_BUF_RECV, lo[i + 1], hi[i + 1] - lo[i + 1],
                            ct_rank_with(t, me, d, r[d]));
                break;
            }
            int64_t len = hi[i] - lo[i];
            for (int q = 0; q < n; q++) {
                if (q == r[d])
                    continue;
                int v = ct_ring_v(q, n, dir), b = (v + 1) % n;
                int64_t blo = lo[i] + ct_part_lo(len, n, b), bhi = lo[i] + ct_part_lo(len, n, b + 1);
                if (bhi > blo)
                    ct_recv(s, CT_BUF_RECV, blo, bhi - blo, ct_rank_with(t, me, d, q));
            }
        }
    }
    return ct_sched_finish(s);
}

int ct_allreduce_lines(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                       const ct_params *p)
{
    int rc = check_args(t, me, count);
    if (rc)
        return rc;
    if (p && !p->commutative && t->lex_order[0] < 0)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "allreduce lines: a non-commutative "
                            "operation needs ranks in lexicographic order of the coordinates");
    /* dimensions in the rank order's significance, fastest first (XYZT by default) */
    int ord[CT_MAXDIMS] = { 0, 1, 2, 3 };
    if (t->lex_order[0] >= 0)
        memcpy(ord, t->lex_order, sizeof ord);
    if ((rc = ct_sched_init(s, me, t->nranks, elem_size)))
        return rc;
    ct_copy(s, CT_BUF_RECV, 0, CT_BUF_SEND, 0, count);
    if (count == 0)
        return ct_sched_finish(s);
    for (int i = 0; i < CT_MAXDIMS; i++) {
        int d = ord[i], n = t->dims[d], pos = t->coords[me][d];
        if (n == 1)
            continue;
        if (!(n & (n - 1))) {
            /* a power of two: recursive doubling along the line, log2(n) exchanges with
             * partners 1, 2, 4... positions away; the lower half's value goes on the left */
            for (int mask = 1; mask < n; mask <<= 1) {
                int q = pos ^ mask, pr = ct_rank_with(t, me, d, q);
                ct_send(s, CT_BUF_RECV, 0, count, pr);
                ct_recv(s, CT_BUF_TMP, 0, count, pr);
                ct_reduce(s, q > pos, CT_BUF_RECV, 0, CT_BUF_TMP, 0, count);
            }
            continue;
        }
        for (int k = 1; k < n; k++) {
            int q = (pos + k) % n;
            ct_send(s, CT_BUF_RECV, 0, count, ct_rank_with(t, me, d, q));
        }
        for (int k = 1; k < n; k++) {
            int q = (pos - k + n) % n;
            ct_recv(s, CT_BUF_TMP, (int64_t) q * count, count, ct_rank_with(t, me, d, q));
        }
        /* mine = v[pos]; result = v[0] op ... op v[n-1] */
        for (int q = pos + 1; q < n; q++)
            ct_reduce(s, 1, CT_BUF_RECV, 0, CT_BUF_TMP, (int64_t) q * count, count);
        for (int q = pos - 1; q >= 0; q--)
            ct_reduce(s, 0, CT_BUF_RECV, 0, CT_BUF_TMP, (int64_t) q * count, count);
    }
    return ct_sched_finish(s);
}
