/* Alltoall with a link-load-spreading injection order (Almási et al. 2005, Fig. 6).
 *
 * The messages are grouped by node shift: in round k every rank sends to the node at its
 * coordinates + delta_k and receives from the one at - delta_k. On a torus a shift loads every
 * link of a dimension equally (it is a translation), so a round is as fast as its longest
 * dimension allows. The shifts are ordered so that consecutive ones lean on different
 * dimensions (round-robin over the dimension each shift needs most hops in), and `window`
 * rounds are in flight at once: together they keep every link direction busy instead of
 * queueing on one dimension while the others idle. */
#include "ct_algo_int.h"

#include <stdlib.h>

static int hops1(int delta, int n, int wrap)
{
    if (!wrap)
        return delta;
    return delta < n - delta ? delta : n - delta;
}

int ct_alltoall_shift(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                      const ct_params *p)
{
    if (count < 0 || me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "alltoall: bad count or rank");
    int window = p && p->window > 0 ? p->window : 2;
    int nn = ct_topo_nnodes(t), T = t->dims[3];
    /* shifts 1..nn-1 (as linear node offsets, x fastest) bucketed by dominant dimension */
    int *order = malloc(sizeof(int) * (size_t) (nn > 1 ? nn : 1));
    int *bucket = malloc(sizeof(int) * (size_t) (nn > 1 ? nn : 1));
    if (!order || !bucket) {
        free(order);
        free(bucket);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    int nb[3] = { 0, 0, 0 };
    for (int sh = 1; sh < nn; sh++) {
        int dl[3] = { sh % t->dims[0], sh / t->dims[0] % t->dims[1], sh / t->dims[0] / t->dims[1] };
        int best = 0, bh = -1;
        for (int d = 0; d < 3; d++) {
            int h = hops1(dl[d], t->dims[d], t->wrap[d]);
            if (h > bh)
                bh = h, best = d;
        }
        bucket[sh] = best;
        nb[best]++;
    }
    /* round-robin over the buckets, each in increasing shift order */
    int cur[3] = { 1, 1, 1 }, no = 0;
    while (no < nn - 1) {
        for (int d = 0; d < 3; d++) {
            while (cur[d] < nn && bucket[cur[d]] != d)
                cur[d]++;
            if (cur[d] < nn)
                order[no++] = cur[d]++;
        }
    }
    free(bucket);
    int rc = ct_sched_init(s, me, t->nranks, elem_size);
    if (rc) {
        free(order);
        return rc;
    }
    const int *mc = t->coords[me];
    /* shifts per round: two per active dimension */
    int a[3], k = ct_active_dims(t, a);
    int per = 2 * (k ? k : 1);
    int nround = (nn - 1 + per - 1) / per + 1;      /* round 0: my own node */
    int *first = malloc(sizeof(int) * (size_t) (nround + 1));
    if (!first) {
        free(order);
        ct_sched_free(s);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int rd = 0; rd < nround; rd++) {
        first[rd] = s->nsteps;
        int w = rd - window;
        /* the steps of round rd wait for those of round rd - window */
        int lo = w >= 0 ? first[w] : 0, hi = w >= 0 ? first[w + 1] : 0;
        int sh0 = rd == 0 ? 0 : 1 + (rd - 1) * per, sh1 = rd == 0 ? 1 : sh0 + per;
        if (sh1 > nn)
            sh1 = nn;
        for (int si = sh0; si < sh1; si++) {
            int sh = rd == 0 ? 0 : order[si - 1];
            int dl[3] = { sh % t->dims[0], sh / t->dims[0] % t->dims[1], sh / t->dims[0] / t->dims[1] };
            int to[CT_MAXDIMS], from[CT_MAXDIMS];
            for (int d = 0; d < 3; d++) {
                to[d] = (mc[d] + dl[d]) % t->dims[d];
                from[d] = (mc[d] - dl[d] + t->dims[d]) % t->dims[d];
            }
            /* a shift of half a ring in some dimension: SimGrid routes it up from every
             * position but the middle one, so those links would carry 25 % (ring of 8) to
             * 50 % (ring of 4) more than the others. Half of such a message goes the other
             * way round instead, through a relay: to me + d' (d' = d with n/2 + 1 in each
             * tied dimension: down), which forwards it one hop down in each tied dimension. */
            int tie = 0, via[3], back[3];
            for (int d = 0; d < 3; d++) {
                via[d] = dl[d];
                if (T == 1 && t->wrap[d] && t->dims[d] > 2 && t->dims[d] % 2 == 0 &&
                    dl[d] == t->dims[d] / 2) {
                    tie = 1;
                    via[d] = t->dims[d] / 2 + 1;
                }
                back[d] = (dl[d] - via[d] + t->dims[d]) % t->dims[d];
            }
            for (int tt = 0; tt < T; tt++) {
                to[3] = from[3] = (mc[3] + tt) % T;
                int dst = ct_topo_rank(t, to), src = ct_topo_rank(t, from);
                if (dst == me) {
                    ct_copy(s, CT_BUF_RECV, (int64_t) me * count, CT_BUF_SEND, (int64_t) me * count, count);
                    continue;
                }
                int64_t h = tie ? count / 2 : count;
                ct_set_chan(s, 0);
                for (int x = lo; x < hi; x++)
                    ct_next_dep(s, x);
                ct_send(s, CT_BUF_SEND, (int64_t) dst * count, h, dst);
                for (int x = lo; x < hi; x++)
                    ct_next_dep(s, x);
                ct_recv(s, CT_BUF_RECV, (int64_t) src * count, h, src);
                if (!tie || h == count)
                    continue;
                /* rel: my relay; rs: whom I relay for, rd: to whom; rr: my source's relay */
                int c1[CT_MAXDIMS], c2[CT_MAXDIMS], c3[CT_MAXDIMS], c4[CT_MAXDIMS];
                for (int d = 0; d < 3; d++) {
                    int n = t->dims[d];
                    c1[d] = (mc[d] + via[d]) % n;
                    c2[d] = (mc[d] - via[d] + n) % n;
                    c3[d] = (mc[d] + back[d]) % n;
                    c4[d] = (mc[d] - back[d] + n) % n;
                }
                c1[3] = c2[3] = c3[3] = c4[3] = 0;
                int rel = ct_topo_rank(t, c1), rs = ct_topo_rank(t, c2);
                int rd = ct_topo_rank(t, c3), rr = ct_topo_rank(t, c4);
                int64_t slot = (int64_t) si * (count - h);      /* relay scratch per shift */
                ct_set_chan(s, 2);
                for (int x = lo; x < hi; x++)
                    ct_next_dep(s, x);
                ct_send(s, CT_BUF_SEND, (int64_t) dst * count + h, count - h, rel);
                ct_recv(s, CT_BUF_TMP, slot, count - h, rs);
                ct_set_chan(s, 1);
                ct_send(s, CT_BUF_TMP, slot, count - h, rd);
                ct_recv(s, CT_BUF_RECV, (int64_t) src * count + h, count - h, rr);
            }
        }
    }
    first[nround] = s->nsteps;
    free(first);
    free(order);
    return ct_sched_finish(s);
}
