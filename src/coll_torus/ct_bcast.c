/* Broadcast.
 *
 * ct_bcast_trees: the data is split over edge-disjoint spanning trees of the node grid, one
 * colour per dimension and direction (Blue Gene/P's "rectangle"; Almási et al. 2005, Fig. 3), each
 * pipelined in chunks. Colour (d0, s) routes in dimension order d0, d1, d2 (cyclic) over rings
 * walked in direction s:
 *   1. the d0 line through the root;
 *   2. the d1 lines through those nodes, 3. the d2 lines through those: every node whose d0
 *      coordinate differs from the root's;
 *   4. the plane through the root across d0 receives from its neighbours one step behind in
 *      d0 (over the links entering that plane, which steps 1-3 of every colour leave unused).
 * Steps 2-3 never run a line through the root's d0 position, so colour (d0, s) uses d0 lines
 * only on the root's line and into the root's plane, d1 lines only off the root's d0 plane
 * and on the root's d2 position... and the three colours of one direction use disjoint links
 * (ct_tests checks it with the link model: every link carries at most one colour). Mesh
 * dimensions and rings of 2 have one colour, walked both ways from the line's start.
 * Each node's rank with the root's t receives the node's data and passes it to the others of
 * its node.
 *
 * ct_bcast_dimtree: for small messages, a binomial tree along each dimension in turn (x lines
 * through the root, then y lines through those, ...): log2(P) steps, each a short hop. */
/* (the root of a line has q = 0: its "lowest bit" is the first power of two >= n) */
#include "ct_algo_int.h"

#include <math.h>
#include <stdlib.h>

typedef struct colour {
    int ord[3], k;              /* spatial dimension order */
    int dir[3];                 /* per dimension: +1, -1, or 0 (both ways from the start) */
} colour;

static int make_colours(const ct_topo *t, colour *cols)
{
    int a[3], k = ct_active_dims(t, a), nc = 0;
    for (int i = 0; i < k; i++) {
        int d0 = a[i];
        int ring = t->wrap[d0] && t->dims[d0] > 2;
        for (int s = ring ? 1 : 0; s >= (ring ? -1 : 0); s -= 2) {
            colour *c = &cols[nc++];
            c->k = k;
            for (int j = 0; j < k; j++) {
                int d = a[(i + j) % k];
                c->ord[j] = d;
                c->dir[j] = (t->wrap[d] && t->dims[d] > 2) ? (s ? s : 1) : 0;
            }
            if (!ring)
                break;
        }
    }
    return nc;
}

/* previous position on a line walked from p0 in direction dir (p != p0) */
static int line_prev(int p, int p0, int n, int dir, int wrap)
{
    if (dir > 0)
        return (p - 1 + n) % n;
    if (dir < 0)
        return (p + 1) % n;
    if (wrap && n == 2)
        return p0;
    return p > p0 ? p - 1 : p + 1;
}

/* the parent node (as coordinates) of node v in colour c; v is not the root's node */
static void tree_parent(const ct_topo *t, const colour *c, const int *r, const int *v, int *par)
{
    memcpy(par, v, sizeof(int) * CT_MAXDIMS);
    int d0 = c->ord[0];
    if (v[d0] == r[d0]) {
        /* step 4: from one step behind in d0 */
        int n = t->dims[d0];
        int p;
        if (c->dir[0] > 0)
            p = (r[d0] - 1 + n) % n;
        else if (c->dir[0] < 0)
            p = (r[d0] + 1) % n;
        else if (t->wrap[d0])
            p = (r[d0] - 1 + n) % n;
        else
            p = r[d0] > 0 ? r[d0] - 1 : r[d0] + 1;
        par[d0] = p;
        return;
    }
    int j = c->k - 1;
    while (j > 0 && v[c->ord[j]] == r[c->ord[j]])
        j--;
    int d = c->ord[j];
    par[d] = line_prev(v[d], r[d], t->dims[d], c->dir[j], t->wrap[d]);
}

static int node_rank(const ct_topo *t, const int *nc, int tt)
{
    int c[CT_MAXDIMS] = { nc[0], nc[1], nc[2], tt };
    return ct_topo_rank(t, c);
}

int ct_bcast_trees(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                   size_t elem_size, const ct_params *p)
{
    if (count < 0 || root < 0 || root >= t->nranks || me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "bcast: bad count, root or rank");
    colour cols[6];
    int nc = make_colours(t, cols);
    int rc = ct_sched_init(s, me, t->nranks, elem_size);
    if (rc)
        return rc;
    const int *r = t->coords[root], *mc = t->coords[me];
    int rt = r[3];
    int rep = mc[3] == rt;          /* I receive for my node */
    int ncol = nc ? nc : 1;
    /* depth of the deepest tree, for the chunk size */
    int depth = 1;
    for (int d = 0; d < 3; d++)
        depth += t->dims[d] - 1;
    int64_t chunk = p && p->chunk_elems > 0 ? p->chunk_elems : 0;
    if (!chunk) {
        ct_model m;
        ct_model_default(&m);
        m.msg_overhead = 1e-6;  /* a real executor's per-message cost keeps chunks sane */
        double per = (double) count / ncol * (double) elem_size;
        /* (chunks + depth - 1) * (chunk time + overhead), minimised */
        double cb = sqrt(per * (m.msg_overhead + m.hop_lat) * m.link_bw / depth);
        /* at least 1 KiB: each message costs an executor a wait. The pipeline fills as deep
         * as the trees (22 hops on 8x8x8, 46 on 16x16x16), so large chunks waste the links:
         * in SMPI a 1 MiB bcast on 8x8x8 came nearer the six-tree bound with each halving of
         * the chunk down to 1 KiB (docs/benchmarks/2026-11-25-simulation.md,
         * docs/benchmarks/2026-11-28-figures-from-the-code.md) */
        if (cb < 1024)
            cb = 1024;
        chunk = (int64_t) (cb / (double) elem_size) + 1;
    }
    /* per colour: my parent and children ranks (node representatives) */
    int parent[6], child[6][6], nchild[6];
    for (int ci = 0; ci < ncol; ci++) {
        parent[ci] = -1;
        nchild[ci] = 0;
        if (!rep || !nc)
            continue;
        int v[CT_MAXDIMS], par[CT_MAXDIMS];
        memcpy(v, mc, sizeof v);
        if (!(v[0] == r[0] && v[1] == r[1] && v[2] == r[2])) {
            tree_parent(t, &cols[ci], r, v, par);
            parent[ci] = node_rank(t, par, rt);
        }
        /* children: the neighbours whose parent I am */
        for (int d = 0; d < 3; d++) {
            if (t->dims[d] == 1)
                continue;
            for (int s2 = -1; s2 <= 1; s2 += 2) {
                int u[CT_MAXDIMS];
                memcpy(u, mc, sizeof u);
                int n = t->dims[d];
                u[d] = mc[d] + s2;
                if (u[d] < 0 || u[d] >= n) {
                    if (!t->wrap[d])
                        continue;
                    u[d] = (u[d] + n) % n;
                }
                if (u[0] == r[0] && u[1] == r[1] && u[2] == r[2])
                    continue;
                tree_parent(t, &cols[ci], r, u, par);
                if (par[0] == mc[0] && par[1] == mc[1] && par[2] == mc[2]) {
                    int cr = node_rank(t, u, rt), dup = 0;
                    for (int x = 0; x < nchild[ci]; x++)
                        dup |= child[ci][x] == cr;
                    if (!dup)
                        child[ci][nchild[ci]++] = cr;
                }
            }
        }
    }
    int64_t maxchunks = 0;
    for (int ci = 0; ci < ncol; ci++) {
        int64_t len = ct_part_lo(count, ncol, ci + 1) - ct_part_lo(count, ncol, ci);
        int64_t nch = (len + chunk - 1) / chunk;
        if (nch > maxchunks)
            maxchunks = nch;
    }
    int myrep = node_rank(t, mc, rt);
    int lastsend[6][6], rid[6][CT_RECV_WINDOW];
    for (int ci = 0; ci < 6; ci++)
        for (int x = 0; x < 6; x++)
            lastsend[ci][x] = -1;
    for (int ci = 0; ci < 6; ci++)
        for (int w = 0; w < CT_RECV_WINDOW; w++)
            rid[ci][w] = -1;
    /* chunk-major, colour-minor on every rank, so messages between two ranks come in the same
     * order on both sides */
    for (int64_t q = 0; q < maxchunks; q++) {
        for (int ci = 0; ci < ncol; ci++) {
            int64_t lo = ct_part_lo(count, ncol, ci), hi = ct_part_lo(count, ncol, ci + 1);
            int64_t clo = lo + q * chunk, chi = clo + chunk < hi ? clo + chunk : hi;
            if (clo >= hi)
                continue;
            ct_set_chan(s, ci);
            /* a chunk's receive is posted once the one CT_RECV_WINDOW before it arrived */
            int from = rep ? parent[ci] : myrep;
            if (from >= 0) {
                if (q >= CT_RECV_WINDOW)
                    ct_next_dep(s, rid[ci][q % CT_RECV_WINDOW]);
                rid[ci][q % CT_RECV_WINDOW] = ct_recv(s, CT_BUF_RECV, clo, chi - clo, from);
            }
            if (!rep)
                continue;
            /* one chunk in flight per child: the next waits for this one's completion, so
             * a link carries chunks one after the other and each hop forwards as soon as a
             * chunk is whole (all at once, they would share the link and arrive together,
             * and the tree would store and forward the whole message hop by hop) */
            for (int x = 0; x < nchild[ci]; x++) {
                ct_next_dep(s, lastsend[ci][x]);
                lastsend[ci][x] = ct_send(s, CT_BUF_RECV, clo, chi - clo, child[ci][x]);
            }
            for (int tt = 0; tt < t->dims[3]; tt++)
                if (tt != rt)
                    ct_send(s, CT_BUF_RECV, clo, chi - clo, node_rank(t, mc, tt));
        }
    }
    return ct_sched_finish(s);
}

int ct_bcast_dimtree(ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
                     size_t elem_size, const ct_params *p)
{
    (void) p;
    if (count < 0 || root < 0 || root >= t->nranks || me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "bcast: bad count, root or rank");
    int rc = ct_sched_init(s, me, t->nranks, elem_size);
    if (rc)
        return rc;
    const int *r = t->coords[root], *mc = t->coords[me];
    for (int d = 0; d < CT_MAXDIMS; d++) {
        int n = t->dims[d];
        if (n == 1)
            continue;
        int in = 1;             /* on a line of this phase: later coordinates are the root's */
        for (int e = d + 1; e < CT_MAXDIMS; e++)
            in &= mc[e] == r[e];
        if (!in)
            continue;
        int q = (mc[d] - r[d] + n) % n;
        /* receive from q minus q's lowest bit; then send to q + m for the lower bits m,
         * farthest first and one after the other (all at once they would share the first
         * links of their common route) */
        int mask = 1;
        while (mask < n && !(q & mask))
            mask <<= 1;
        if (q)
            ct_recv(s, CT_BUF_RECV, 0, count, ct_rank_with(t, me, d, (r[d] + q - mask) % n));
        int prev = -1;
        for (int m = mask >> 1; m >= 1; m >>= 1)
            if (q + m < n) {
                ct_next_dep(s, prev);
                prev = ct_send(s, CT_BUF_RECV, 0, count, ct_rank_with(t, me, d, (r[d] + q + m) % n));
            }
    }
    return ct_sched_finish(s);
}
