/* Helpers shared by the generators: positions on lines and rings of the topology. */
#ifndef CT_ALGO_INT_H
#define CT_ALGO_INT_H

#include "ct_sched_int.h"

#include <string.h>

/* the rank at my coordinates with dimension d set to pos */
static inline int ct_rank_with(const ct_topo *t, int me, int d, int pos)
{
    int c[CT_MAXDIMS];
    memcpy(c, t->coords[me], sizeof c);
    c[d] = pos;
    return ct_topo_rank(t, c);
}

/* the spatial dimensions longer than 1, in order; returns how many */
static inline int ct_active_dims(const ct_topo *t, int a[3])
{
    int k = 0;
    for (int d = 0; d < 3; d++)
        if (t->dims[d] > 1)
            a[k++] = d;
    return k;
}

/* Dimension orders for the parts of the dimension-wise algorithms: part j (of 2 * max(1, k))
 * processes t first (on-node, when there is more than one rank per node), then the spatial
 * dimensions rotated by j / 2, over rings in direction + (j even) or - (j odd), so the parts
 * together load every link direction. Returns the order's length. */
static inline int ct_part_order(const ct_topo *t, int j, int ord[CT_MAXDIMS], int *dir)
{
    int a[3], k = ct_active_dims(t, a), n = 0;
    if (t->dims[3] > 1)
        ord[n++] = 3;
    for (int i = 0; i < k; i++)
        ord[n++] = a[(i + j / 2) % k];
    *dir = (j & 1) ? -1 : 1;
    return n;
}

/* A ring (a bcast colour) posts its receive of step (chunk) st only once that of step
 * st - CT_RECV_WINDOW has completed. Posted earlier it gains nothing (the sender's step waits
 * for the one before it anyway) and it costs: an executor looks at every request it holds at
 * each wait, and in SMPI the flows of a level start out of step and share links. In SMPI on
 * 8x8x8 a window of 1 was the fastest for allreduce and allgather, nearest their bounds, and
 * cut bcast's host time (docs/benchmarks/2026-11-25-simulation.md,
 * docs/benchmarks/2026-11-28-figures-from-the-code.md). */
#define CT_RECV_WINDOW 1

static inline int ct_nparts(const ct_topo *t)
{
    int a[3], k = ct_active_dims(t, a);
    return 2 * (k ? k : 1);
}

/* A ring over dimension d walked in direction dir: my virtual index v (next is v + 1), and the
 * actual position of virtual index w. */
static inline int ct_ring_v(int p, int n, int dir)
{
    return dir > 0 ? p : (n - p) % n;
}
static inline int ct_ring_pos(int w, int n, int dir)
{
    w = ((w % n) + n) % n;
    return dir > 0 ? w : (n - w) % n;
}

#endif
