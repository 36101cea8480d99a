/* EMPS: the MPS back end over any MPI, with standard MPI calls only. Pool memory comes from
 * MPI_Alloc_mem (where an MPI registers memory for its transports, it does so there), a
 * receive pool pre-posts MPI_Irecv into its buffers, and the transport is whatever the MPI
 * library chooses: the link's medium can only be checked, not selected. */
#define _GNU_SOURCE
#include "mps_impl.h"

#include <string.h>
#include <unistd.h>

static int emps_medium_check(const mps_topo *t, const mps_topo_link *l)
{
    if (!strcmp(l->medium, "mpi"))
        return MPS_SUCCESS;
    if (!strcmp(l->medium, "shm")) {
        /* MPI libraries carry traffic between processes of one host through shared memory */
        const char *h0 = t->procs[l->end[0]].host, *h1 = t->procs[l->end[1]].host;
        if (strcmp(h0, h1))
            return mps_error(MPS_ERR_MEDIUM, "link '%s' (%s:%d): medium shm between processes on different hosts (%s, %s)",
                             l->name, t->file, l->line, h0, h1);
        return MPS_SUCCESS;
    }
    return mps_error(MPS_ERR_MEDIUM, "link '%s' (%s:%d): medium '%s' is not provided by the EMPS back end, which "
                     "leaves the transport to the MPI library (use medium=mpi, or shm between processes of one host)",
                     l->name, t->file, l->line, l->medium);
}

/* shm: the two ends must really share a host, whatever the file says */
static int emps_channel_check(const mps_topo *t, const mps_topo_link *l, MPI_Comm comm)
{
    if (strcmp(l->medium, "shm"))
        return MPS_SUCCESS;
    char mine[MPI_MAX_PROCESSOR_NAME] = "", theirs[MPI_MAX_PROCESSOR_NAME] = "";
    int len, me;
    MPI_Get_processor_name(mine, &len);
    MPI_Comm_rank(comm, &me);
    int rc = MPI_Sendrecv(mine, sizeof(mine), MPI_CHAR, 1 - me, 0, theirs, sizeof(theirs), MPI_CHAR, 1 - me, 0, comm,
                          MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mps_mpi_error("MPI_Sendrecv (link host check)", rc);
    if (strcmp(mine, theirs))
        return mps_error(MPS_ERR_MEDIUM, "link '%s' (%s:%d): medium shm, but its ends run on hosts %s and %s",
                         l->name, t->file, l->line, mine, theirs);
    return MPS_SUCCESS;
}

static int emps_mem_alloc(MPS_pool_t p, size_t bytes, void **mem)
{
    (void)p;
    int rc = MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, mem);
    if (rc != MPI_SUCCESS)
        return mps_error(MPS_ERR_NOMEM, "MPI_Alloc_mem of %zu bytes for a pool failed", bytes);
    return MPS_SUCCESS;
}

static void emps_mem_free(MPS_pool_t p, void *mem)
{
    (void)p;
    MPI_Free_mem(mem);
}

static int emps_post_recv(MPS_pool_t p, int i)
{
    int rc = MPI_Irecv(p->mem + p->stride * i, p->bufsize, MPI_BYTE, p->peer, MPI_ANY_TAG, p->comm, &p->bufs[i].req);
    return rc == MPI_SUCCESS ? MPS_SUCCESS : mps_mpi_error("MPI_Irecv (pool buffer)", rc);
}

static int emps_start_send(MPS_pool_t p, int i, int bytes, int tag)
{
    int rc = MPI_Isend(p->mem + p->stride * i, bytes, MPI_BYTE, p->peer, tag, p->comm, &p->bufs[i].req);
    return rc == MPI_SUCCESS ? MPS_SUCCESS : mps_mpi_error("MPI_Isend (pool buffer)", rc);
}

static int emps_test(MPS_pool_t p, int i, int *done)
{
    MPI_Status st;
    int rc = MPI_Test(&p->bufs[i].req, done, &st);
    /* a truncated receive is an error here only if the application made the channel's
     * communicator return errors (MPI_ERRORS_RETURN); by default MPI aborts */
    if (rc != MPI_SUCCESS) {
        int cls;
        MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_TRUNCATE)
            return mps_error(MPS_ERR_TRUNCATE, "a message larger than the %d-byte buffers of a receive pool", p->bufsize);
        return mps_mpi_error("MPI_Test (pool buffer)", rc);
    }
    if (*done && p->way == MPS_RCV) {
        MPI_Get_count(&st, MPI_BYTE, &p->bufs[i].bytes);
        p->bufs[i].tag = st.MPI_TAG;
    }
    return MPS_SUCCESS;
}

static int emps_cancel_recv(MPS_pool_t p, int i, int *cancelled)
{
    MPI_Status st;
    int rc = MPI_Cancel(&p->bufs[i].req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&p->bufs[i].req, &st);
    if (rc != MPI_SUCCESS)
        return mps_mpi_error("MPI_Cancel (pool receive)", rc);
    MPI_Test_cancelled(&st, cancelled);
    if (!*cancelled) {
        MPI_Get_count(&st, MPI_BYTE, &p->bufs[i].bytes);
        p->bufs[i].tag = st.MPI_TAG;
    }
    return MPS_SUCCESS;
}

const mps_backend mps_emps_backend = {
    .name = "emps",
    .medium_check = emps_medium_check,
    .channel_check = emps_channel_check,
    .mem_alloc = emps_mem_alloc,
    .mem_free = emps_mem_free,
    .post_recv = emps_post_recv,
    .start_send = emps_start_send,
    .test = emps_test,
    .cancel_recv = emps_cancel_recv,
};
