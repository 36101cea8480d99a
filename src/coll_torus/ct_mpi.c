/* The plain-MPI executor: walks a schedule, posting each message as soon as its dependencies
 * are complete (and the previous one with the same peer and channel was posted, so messages
 * match in order), running copies and reductions as their inputs complete, and waiting on
 * whatever is in flight. */
#include "ct_mpi.h"

#include <stdlib.h>
#include <string.h>

int ct_mpi_run(const ct_sched *s, MPI_Comm comm, int tag_base, const void *sendbuf,
               void *recvbuf, MPI_Datatype dtype, MPI_Op op)
{
    int n = s->nsteps, rc = MPI_SUCCESS;
    if (n == 0)
        return MPI_SUCCESS;
    size_t es = s->elem_size;
    char *tmp = s->tmp_elems ? malloc((size_t) s->tmp_elems * es) : NULL;
    int *waiting = calloc((size_t) n, sizeof(int));
    int *dstart = calloc((size_t) n + 1, sizeof(int));
    int *dlist = malloc(sizeof(int) * (size_t) (s->ndeps ? s->ndeps : 1));
    int *next_same = malloc(sizeof(int) * (size_t) n);
    int *ready = malloc(sizeof(int) * (size_t) n);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t) n);
    int *req_step = malloc(sizeof(int) * (size_t) n);
    int *idx = malloc(sizeof(int) * (size_t) n);
    int *fill = calloc((size_t) n, sizeof(int));
    MPI_Status *sts = malloc(sizeof(MPI_Status) * (size_t) n);
    if (!sts || (s->tmp_elems && !tmp) || !waiting || !dstart || !dlist || !next_same || !ready ||
        !reqs || !req_step || !idx || !fill) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    char *bufs[CT_NBUFS] = { (char *) sendbuf, recvbuf, tmp };
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        next_same[i] = -1;
        waiting[i] = st->ndeps;
        for (int j = 0; j < st->ndeps; j++)
            dstart[s->deps[st->dep0 + j] + 1]++;
        if ((st->op == CT_SEND || st->op == CT_RECV) && st->prev_same_peer >= 0) {
            next_same[st->prev_same_peer] = i;
            waiting[i]++;
        }
    }
    for (int i = 0; i < n; i++)
        dstart[i + 1] += dstart[i];
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        for (int j = 0; j < st->ndeps; j++) {
            int d = s->deps[st->dep0 + j];
            dlist[dstart[d] + fill[d]++] = i;
        }
    }
    int nready = 0, nreq = 0, ndone = 0;
    for (int i = 0; i < n; i++)
        if (!waiting[i])
            ready[nready++] = i;
#define RELEASE(i_)                                                                            \
    do {                                                                                       \
        for (int k_ = dstart[i_]; k_ < dstart[(i_) + 1]; k_++)                                 \
            if (--waiting[dlist[k_]] == 0)                                                     \
                ready[nready++] = dlist[k_];                                                   \
    } while (0)
    while (ndone < n) {
        while (nready) {
            int i = ready[--nready];
            const ct_step *st = &s->steps[i];
            char *dst = bufs[st->buf] + (size_t) st->off * es;
            int bytes = (int) ((size_t) st->len * es);
            if (st->op == CT_SEND || st->op == CT_RECV) {
                if (st->op == CT_SEND)
                    rc = MPI_Isend(dst, bytes, MPI_BYTE, st->peer, tag_base + st->chan, comm,
                                   &reqs[nreq]);
                else
                    rc = MPI_Irecv(dst, bytes, MPI_BYTE, st->peer, tag_base + st->chan, comm,
                                   &reqs[nreq]);
                if (rc != MPI_SUCCESS)
                    goto out;
                req_step[nreq++] = i;
                if (next_same[i] >= 0 && --waiting[next_same[i]] == 0)
                    ready[nready++] = next_same[i];
                continue;
            }
            char *src = bufs[st->sbuf] + (size_t) st->soff * es;
            if (st->op == CT_COPY) {
                if (src != dst)
                    memmove(dst, src, (size_t) st->len * es);
            } else if (st->op == CT_REDUCE_LEFT) {
                rc = MPI_Reduce_local(src, dst, (int) st->len, dtype, op);
            } else {
                /* dst = dst op src: src = dst op src, then copy */
                rc = MPI_Reduce_local(dst, src, (int) st->len, dtype, op);
                memcpy(dst, src, (size_t) st->len * es);
            }
            if (rc != MPI_SUCCESS)
                goto out;
            ndone++;
            RELEASE(i);
        }
        if (ndone == n)
            break;
        int outc;
        rc = MPI_Waitany(nreq, reqs, &idx[0], sts);
        outc = 1;
        if (rc != MPI_SUCCESS)
            goto out;
        for (int k = 0; k < outc; k++) {
            int i = req_step[idx[k]];
            ndone++;
            RELEASE(i);
        }
        /* compact the finished requests away */
        int w = 0;
        for (int k = 0; k < nreq; k++)
            if (reqs[k] != MPI_REQUEST_NULL) {
                reqs[w] = reqs[k];
                req_step[w++] = req_step[k];
            }
        nreq = w;
    }
#undef RELEASE
  out:
    free(tmp);
    free(waiting);
    free(dstart);
    free(dlist);
    free(next_same);
    free(ready);
    free(reqs);
    free(req_step);
    free(idx);
    free(fill);
    free(sts);
    return rc;
}
