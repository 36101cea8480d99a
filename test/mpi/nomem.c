/*
 * Out of memory inside a user's call is an error its handler sees, MPI_ERR_NO_MEM, and the job
 * goes on. A send of a non-contiguous datatype needs a pack buffer and a receive into one a
 * staging buffer, each as large as the message; with the address space limited (RLIMIT_AS)
 * to a little more than the rank already uses, neither fits: the send fails without sending,
 * the receive fails and its message is consumed, and afterwards, the limit lifted, the same
 * two transfers succeed with their data intact. 2 ranks. MPICH's MTest convention: rank 0
 * prints " No Errors" (" Found N errors" on any error); "nomem: N errors" only with
 * MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "mtest.h"

#define NINT (32 << 20)         /* 128 MiB of ints per message; the strided type spans 256 */
#define HEADROOM (64 << 20)     /* what the rank may still map while limited */

static int rank, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

/* the size of this process's address space, from /proc/self/status (VmSize, kB) */
static long long vm_bytes(void)
{
    char line[256];
    long long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static int verbose;             /* mtest_verbose() */

static struct rlimit saved;

static void limit(void)
{
    struct rlimit r;
    long long vm = vm_bytes();
    getrlimit(RLIMIT_AS, &saved);
    r = saved;
    r.rlim_cur = (rlim_t) (vm + HEADROOM);
    if (vm < 0 || setrlimit(RLIMIT_AS, &r) != 0)
        ERR("cannot limit the address space (VmSize %lld)", vm);
}

static void unlimit(void)
{
    if (setrlimit(RLIMIT_AS, &saved) != 0)
        ERR("cannot restore the address-space limit");
}

static void expect_nomem(int rc, const char *what)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_NO_MEM) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        s[0] = 0;
        if (rc != MPI_SUCCESS)
            MPI_Error_string(rc, s, &len);
        ERR("%s: error class %d, expected MPI_ERR_NO_MEM (%d): %s", what, cls, MPI_ERR_NO_MEM,
            s);
    }
}

int main(int argc, char **argv)
{
    int size, rc, total, *strided, *contig;
    MPI_Datatype every_other;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "nomem: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Type_vector(NINT, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    strided = malloc((size_t) NINT * 2 * sizeof(int));
    contig = malloc((size_t) NINT * sizeof(int));
    if (!strided || !contig)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < (size_t) NINT; i++) {
        strided[2 * i] = (int) i;
        strided[2 * i + 1] = -1;
        contig[i] = (int) (i ^ 0x5a5a);
    }

    /* 1. rank 0's strided send cannot pack: MPI_ERR_NO_MEM, nothing sent */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        limit();
        rc = MPI_Send(strided, 1, every_other, 1, 1, MPI_COMM_WORLD);
        unlimit();
        expect_nomem(rc, "send of a non-contiguous type");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. rank 1's strided receive of a contiguous message cannot stage it: MPI_ERR_NO_MEM,
     * the message is consumed (the next one with the same envelope is the next below) */
    if (rank == 0) {
        MPI_Send(contig, NINT, MPI_INT, 1, 2, MPI_COMM_WORLD);
    } else {
        limit();
        rc = MPI_Recv(strided, 1, every_other, 0, 2, MPI_COMM_WORLD, &st);
        unlimit();
        expect_nomem(rc, "receive into a non-contiguous type");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3. without the limit both work, data intact */
    if (rank == 0) {
        MPI_Send(strided, 1, every_other, 1, 1, MPI_COMM_WORLD);
        MPI_Send(contig, NINT, MPI_INT, 1, 2, MPI_COMM_WORLD);
    } else {
        int *got = malloc((size_t) NINT * sizeof(int));
        if (!got)
            MPI_Abort(MPI_COMM_WORLD, 2);
        rc = MPI_Recv(got, NINT, MPI_INT, 0, 1, MPI_COMM_WORLD, &st);
        if (rc != MPI_SUCCESS)
            ERR("strided send, unlimited: error %d", rc);
        for (size_t i = 0; i < (size_t) NINT && rc == MPI_SUCCESS; i++)
            if (got[i] != (int) i) {
                ERR("strided send: int %zu is %d", i, got[i]);
                break;
            }
        memset(strided, 0, (size_t) NINT * 2 * sizeof(int));
        rc = MPI_Recv(strided, 1, every_other, 0, 2, MPI_COMM_WORLD, &st);
        if (rc != MPI_SUCCESS)
            ERR("strided receive, unlimited: error %d", rc);
        for (size_t i = 0; i < (size_t) NINT && rc == MPI_SUCCESS; i++)
            if (strided[2 * i] != (int) (i ^ 0x5a5a) || strided[2 * i + 1] != 0) {
                ERR("strided receive: int %zu is %d", i, strided[2 * i]);
                break;
            }
        free(got);
    }

    MPI_Type_free(&every_other);
    free(strided);
    free(contig);
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("nomem: %d errors\n", total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
