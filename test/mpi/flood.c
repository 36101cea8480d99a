/*
 * Unexpected-message memory under a flood (adaptive eager). Every other rank sends
 * rank 0 FLOOD_PER messages of FLOOD_LEN bytes (between one packet and the eager limit) while
 * rank 0 has posted nothing, then a 0-byte "done" that rank 0 does receive: per-sender order
 * puts every flood message's header at rank 0 before it. Then rank 0 reads the pvars:
 *   - credits K = MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS > 0: rank 0 holds at most K messages' data
 *     per sender (amlapi_unexpected_bytes_max <= (size-1) * K * len); the senders sent the
 *     rest by rendezvous (their amlapi_msgs_rndv grew by at least per - K);
 *   - K = 0 (ordered eager): rank 0 holds every message, (size-1) * per * len bytes.
 * Finally rank 0 receives everything with MPI_ANY_SOURCE and checks data and per-sender order,
 * and the unexpected queue is empty again. MPICH's MTest convention: rank 0 prints " No Errors"
 * (" Found N errors" on any error); the high-water mark and "flood: N ranks, N errors" only
 * with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v ? atol(v) : dflt;
}

static int verbose;             /* mtest_verbose() */

#include "mpit.h"
#include "mtest.h"

static char val(int src, int msg, size_t i)
{
    return (char) ((i * 11 + (size_t) src * 29 + (size_t) msg * 7) & 0xff);
}

int main(int argc, char **argv)
{
    int total;
    const int per = (int) env_long("FLOOD_PER", 100);
    /* two packets, below the on-node single-copy threshold (12 KiB) */
    const size_t len = (size_t) env_long("FLOOD_LEN", 12000);
    struct limits lim;
    long credits;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    mpit_init();
    read_limits(&lim);
    credits = lim.credits;
    /* the premise: flood messages are eager-range (adaptive eager when credits allow) */
    if (expected_proto(&lim, (long) len) != (credits ? P_ADAPTIVE : P_EAGER))
        ERR("FLOOD_LEN %zu is not in the eager range (one-packet limit %ld, eager limit %d)",
            len, lim.onepacket, lim.eager);
    buf = malloc(len * (size_t) per);

    if (rank != 0) {
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * per);
        unsigned long long c0[P_COUNT], c1[P_COUNT];
        proto_counts(c0);
        for (int m = 0; m < per; m++) {
            for (size_t i = 0; i < len; i++)
                buf[m * len + i] = val(rank, m, i);
            /* nonblocking: without a credit a message goes by rendezvous and completes only
             * when rank 0 receives it */
            MPI_Isend(buf + m * len, (int) len, MPI_CHAR, 0, 7, MPI_COMM_WORLD, &reqs[m]);
        }
        MPI_Send(NULL, 0, MPI_CHAR, 0, 8, MPI_COMM_WORLD);
        proto_counts(c1);
        unsigned long long rndv = c1[P_RNDV] - c0[P_RNDV];
        unsigned long long mid = c1[credits ? P_ADAPTIVE : P_EAGER] - c0[credits ? P_ADAPTIVE :
                                                                          P_EAGER];
        /* the flood and one empty message, nothing else */
        if (rndv + mid != (unsigned long long) per || c1[P_ONEPACKET] - c0[P_ONEPACKET] != 1)
            ERR("flood of %d: %llu rendezvous + %llu %s, %llu one-packet (want %d + 1)", per,
                rndv, mid, proto_name[credits ? P_ADAPTIVE : P_EAGER],
                c1[P_ONEPACKET] - c0[P_ONEPACKET], per);
        if (credits > 0 && rndv < (unsigned long long) (per - credits))
            ERR("%llu of %d messages went by rendezvous with %ld credits, want >= %ld",
                rndv, per, credits, per - credits);
        if (credits == 0 && rndv)
            ERR("%llu messages went by rendezvous with adaptive eager off", rndv);
        MPI_Waitall(per, reqs, MPI_STATUSES_IGNORE);
        free(reqs);
    } else {
        int next[1024] = { 0 };
        unsigned long long msgs, bytes_max, held_all = (unsigned long long) (size - 1) * per * len;
        for (int s = 1; s < size; s++)
            MPI_Recv(NULL, 0, MPI_CHAR, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        msgs = pvar_read("amlapi_unexpected_msgs");
        bytes_max = pvar_read("amlapi_unexpected_bytes_max");
        if (msgs < (unsigned long long) (size - 1) * per)
            ERR("unexpected queue holds %llu messages, want >= %d", msgs, (size - 1) * per);
        if (credits > 0) {
            unsigned long long bound = (unsigned long long) (size - 1) * credits * len;
            if (bytes_max > bound)
                ERR("held %llu unexpected bytes at most, bound with %ld credits is %llu",
                    bytes_max, credits, bound);
        } else if (bytes_max < held_all) {
            ERR("ordered eager held only %llu unexpected bytes, expected all %llu", bytes_max,
                held_all);
        }
        if (verbose)
            printf("flood: %d senders x %d x %zu B, credits %ld: unexpected bytes high-water "
                   "mark %llu of %llu sent\n", size - 1, per, len, credits, bytes_max, held_all);
        for (int k = 0; k < (size - 1) * per; k++) {
            MPI_Status st;
            int cnt;
            MPI_Recv(buf, (int) len, MPI_CHAR, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &cnt);
            int s = st.MPI_SOURCE, m = next[s]++;
            if ((size_t) cnt != len) {
                ERR("message from %d: %d bytes", s, cnt);
                continue;
            }
            for (size_t i = 0; i < len; i++) {
                if (buf[i] != val(s, m, i)) {
                    ERR("message %d from %d: byte %zu wrong (out of order or corrupt)", m, s, i);
                    break;
                }
            }
        }
        msgs = pvar_read("amlapi_unexpected_msgs");
        if (msgs > 2 * (unsigned long long) size)
            ERR("unexpected queue holds %llu messages after draining", msgs);
    }
    free(buf);
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("flood: %d ranks, %d errors\n", size, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
