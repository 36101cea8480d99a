/* The plain-MPI executor: walks a schedule (ct_walk), posting each message as soon as it may
 * start, running copies and reductions as their inputs complete, and waiting on whatever is
 * in flight. */
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
    ct_walk w;
    char *tmp = s->tmp_elems ? malloc((size_t) s->tmp_elems * es) : NULL;
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t) n);
    int *req_step = malloc(sizeof(int) * (size_t) n);
    if ((s->tmp_elems && !tmp) || !reqs || !req_step || ct_walk_init(&w, s) != CT_OK) {
        free(tmp);
        free(reqs);
        free(req_step);
        return MPI_ERR_NO_MEM;
    }
    char *bufs[CT_NBUFS] = { (char *) sendbuf, recvbuf, tmp };
    int nreq = 0;
    while (!ct_walk_finished(&w)) {
        int i;
        while ((i = ct_walk_next(&w)) >= 0) {
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
                ct_walk_posted(&w, i);
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
            ct_walk_done(&w, i);
        }
        if (ct_walk_finished(&w))
            break;
        /* SimGrid's Waitsome is slow (docs/benchmarks/2026-11-25-simulation.md): wait for one,
         * then compact */
        int k;
        rc = MPI_Waitany(nreq, reqs, &k, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            goto out;
        ct_walk_done(&w, req_step[k]);
        reqs[k] = reqs[nreq - 1];
        req_step[k] = req_step[nreq - 1];
        nreq--;
    }
  out:
    ct_walk_free(&w);
    free(tmp);
    free(reqs);
    free(req_step);
    return rc;
}
