/*
 * Shared single copy: large on-node messages are copied by both ranks, the
 * receiver from the front and the sender's progress from its end. Each pair of ranks
 * exchanges messages of 32 KiB - 1, 64 KiB, 1 MiB + 3 and 4 MiB (odd offsets in both
 * buffers), each byte checked, then a receive that is truncated (MPI_ERR_TRUNCATE, the bytes
 * that fit are checked). Afterwards the counters must say what happened: with vnode and
 * single copy on, every rank shared copies (amlapi_vnode_shared_copies) and, summed over the
 * ranks, senders helped (amlapi_vnode_helped_bytes); without single copy or through UCX, no
 * copy is shared. MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on
 * any error); the counters and "shcopy: ..., N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, errs;
#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

static unsigned char pat(size_t i, int who, int iter)
{
    return (unsigned char) (i * 13 + (i >> 11) + who * 31 + iter * 7);
}

int main(int argc, char **argv)
{
    int size, total;
    const size_t sizes[] = { 32767, 65536, (1 << 20) + 3, 4 << 20 };
    const size_t max = (4 << 20) + 64;
    unsigned char *sbuf, *rbuf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    mpit_init();
    sbuf = malloc(max);
    rbuf = malloc(max);
    int peer = rank ^ 1;
    if (peer < size) {
        for (int iter = 0; iter < 8; iter++) {
            for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                size_t n = sizes[s];
                for (size_t i = 0; i < n; i++)
                    sbuf[3 + i] = pat(i, rank, iter);
                memset(rbuf, 0, n + 16);
                MPI_Sendrecv(sbuf + 3, (int) n, MPI_BYTE, peer, s, rbuf + 5, (int) n, MPI_BYTE,
                             peer, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++)
                    if (rbuf[5 + i] != pat(i, peer, iter) && bad++ < 3)
                        ERR("size %zu iter %d: byte %zu is %#x, not %#x", n, iter, i,
                            rbuf[5 + i], pat(i, peer, iter));
                if (rbuf[4] != 0 || rbuf[5 + n] != 0)
                    ERR("size %zu iter %d: a byte outside the receive buffer changed", n, iter);
            }
        }
        /* truncation: the lower rank sends 1 MiB into the higher rank's 300000 bytes */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        size_t n = 1 << 20, fit = 300000;
        if (rank < peer) {
            for (size_t i = 0; i < n; i++)
                sbuf[i] = pat(i, rank, 99);
            MPI_Send(sbuf, (int) n, MPI_BYTE, peer, 77, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            memset(rbuf, 0, fit + 16);
            int rc = MPI_Recv(rbuf, (int) fit, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &st), cls;
            MPI_Error_class(rc, &cls);
            if (cls != MPI_ERR_TRUNCATE)
                ERR("truncated receive returned error class %d, not MPI_ERR_TRUNCATE", cls);
            for (size_t i = 0; i < fit; i++)
                if (rbuf[i] != pat(i, peer, 99)) {
                    ERR("truncated receive: byte %zu is %#x, not %#x", i, rbuf[i],
                        pat(i, peer, 99));
                    break;
                }
            if (rbuf[fit] != 0)
                ERR("truncated receive wrote past the buffer");
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    unsigned long long shared = pvar_read("amlapi_vnode_shared_copies");
    unsigned long long helped = pvar_read("amlapi_vnode_helped_bytes"), helped_all;
    unsigned long long local = pvar_read("amlapi_vnode_peers");
    int off = !pvar_read("amlapi_vnode_single_copy") || local == 0;
    int all_local = !off && local == (unsigned) size - 1;
    MPI_Allreduce(&helped, &helped_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (peer < size && all_local && shared == 0)
        ERR("no single copy was shared");
    if (off && shared != 0)
        ERR("%llu copies shared although sharing is off or not possible", shared);
    /* a sender blocked in MPI_Sendrecv helps, unless ranks share cores (then they sleep) */
    if (all_local && size > 1 && size <= sysconf(_SC_NPROCESSORS_ONLN) && helped_all == 0)
        ERR("no sender helped any copy");
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("shcopy: %d ranks, shared copies on rank 0: %llu, bytes helped (all ranks): "
               "%llu, %d errors\n", size, shared, helped_all, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    free(sbuf);
    free(rbuf);
    mpit_finalize();
    MPI_Finalize();
    return total ? 1 : 0;
}
