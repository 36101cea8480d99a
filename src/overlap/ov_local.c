/* Which peers share this node (MPI_COMM_TYPE_SHARED at MPI_Init).
 *
 * Used for one performance decision only: a receive within one page from a rank on this
 * node arrives in about the time two mprotect calls take, so deferring it does not pay
 * (MPIOVERLAP_RECV_MIN), while a network's latency from another node, on the test cluster
 * and more so on a real 1 Gbit/s link, is worth hiding (MPIOVERLAP_RECV_MIN_NET;
 * docs/benchmarks/2026-11-25-overlap.md). A wrong answer (a stale cache entry after a
 * communicator the library did not see freed) changes that decision, never a result. */
#define _GNU_SOURCE
#include "ov.h"

#include <stdlib.h>
#include <string.h>

static unsigned char *wlocal;   /* by MPI_COMM_WORLD rank: 1 = on this node */
static int wsize;

#define OV_NCOMM 8
static struct ccache {
    MPI_Comm comm;
    int n;
    unsigned char *loc;     /* by rank in comm (its remote group for an inter-communicator) */
} cache[OV_NCOMM];
static int cnext;

void ov_local_init(void)
{
    MPI_Comm node;
    MPI_Group wg, ng;
    int nn;
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    wlocal = calloc((size_t)wsize, 1);
    if (!wlocal || PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;     /* unknown: every peer counts as remote (receives deferred) */
    PMPI_Comm_size(node, &nn);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Comm_group(node, &ng);
    int *r = malloc(2 * (size_t)nn * sizeof *r);
    if (r) {
        for (int i = 0; i < nn; i++)
            r[i] = i;
        PMPI_Group_translate_ranks(ng, nn, r, wg, r + nn);
        for (int i = 0; i < nn; i++)
            if (r[nn + i] >= 0 && r[nn + i] < wsize)
                wlocal[r[nn + i]] = 1;
        free(r);
    }
    PMPI_Group_free(&ng);
    PMPI_Group_free(&wg);
    PMPI_Comm_free(&node);
}

static struct ccache *lookup(MPI_Comm comm)
{
    for (int i = 0; i < OV_NCOMM; i++)
        if (cache[i].loc && cache[i].comm == comm)
            return &cache[i];
    int inter = 0, n = 0;
    MPI_Group g, wg;
    PMPI_Comm_test_inter(comm, &inter);
    if ((inter ? PMPI_Comm_remote_group(comm, &g) : PMPI_Comm_group(comm, &g)) != MPI_SUCCESS)
        return NULL;
    PMPI_Group_size(g, &n);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *r = malloc(2 * (size_t)n * sizeof *r);
    unsigned char *loc = calloc((size_t)n + 1, 1);
    struct ccache *c = NULL;
    if (r && loc) {
        for (int i = 0; i < n; i++)
            r[i] = i;
        PMPI_Group_translate_ranks(g, n, r, wg, r + n);
        for (int i = 0; i < n; i++)
            loc[i] = r[n + i] >= 0 && r[n + i] < wsize && wlocal[r[n + i]];
        c = &cache[cnext];
        cnext = (cnext + 1) % OV_NCOMM;
        free(c->loc);
        c->comm = comm;
        c->n = n;
        c->loc = loc;
        loc = NULL;
    }
    free(r);
    free(loc);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    return c;
}

int ov_peer_local(MPI_Comm comm, int rank)
{
    if (!wlocal || rank < 0)
        return 0;
    if (comm == MPI_COMM_WORLD)
        return rank < wsize && wlocal[rank];
    struct ccache *c = lookup(comm);
    return c && rank < c->n && c->loc[rank];
}

void ov_local_forget(MPI_Comm comm)
{
    for (int i = 0; i < OV_NCOMM; i++)
        if (cache[i].loc && cache[i].comm == comm) {
            free(cache[i].loc);
            cache[i].loc = NULL;
        }
}
