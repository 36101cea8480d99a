/*
 * Unexpected-message memory under a flood (adaptive eager, issue 4). Every other rank sends
 * rank 0 FLOOD_PER messages of FLOOD_LEN bytes (between one packet and the eager limit) while
 * rank 0 has posted nothing, then a 0-byte "done" that rank 0 does receive: per-sender order
 * puts every flood message's header at rank 0 before it. Then rank 0 reads the pvars:
 *   - credits K = MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS > 0: rank 0 holds at most K messages' data
 *     per sender (amlapi_unexpected_bytes_max <= (size-1) * K * len); the senders sent the
 *     rest by rendezvous (their amlapi_msgs_rndv grew by at least per - K);
 *   - K = 0 (ordered eager): rank 0 holds every message, (size-1) * per * len bytes.
 * Finally rank 0 receives everything with MPI_ANY_SOURCE and checks data and per-sender order,
 * and the unexpected queue is empty again. Prints "flood: N errors".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errs;
static MPI_T_pvar_session session;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v ? atol(v) : dflt;
}

static unsigned long long pvar_read(const char *name)
{
    int idx, count;
    unsigned long long v = 0;
    MPI_T_pvar_handle h;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_LEVEL, &idx) != MPI_SUCCESS &&
        MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) != MPI_SUCCESS) {
        ERR("performance variable %s not found", name);
        return 0;
    }
    MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count);
    MPI_T_pvar_read(session, h, &v);
    MPI_T_pvar_handle_free(session, &h);
    return v;
}

static char val(int src, int msg, size_t i)
{
    return (char) ((i * 11 + (size_t) src * 29 + (size_t) msg * 7) & 0xff);
}

int main(int argc, char **argv)
{
    int provided, total;
    const int per = (int) env_long("FLOOD_PER", 100);
    const size_t len = (size_t) env_long("FLOOD_LEN", 30000);
    const long credits = env_long("MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS", 32);
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&session);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = malloc(len * (size_t) per);

    if (rank != 0) {
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * per);
        unsigned long long rndv0 = pvar_read("amlapi_msgs_rndv"), rndv1;
        for (int m = 0; m < per; m++) {
            for (size_t i = 0; i < len; i++)
                buf[m * len + i] = val(rank, m, i);
            /* nonblocking: without a credit a message goes by rendezvous and completes only
             * when rank 0 receives it */
            MPI_Isend(buf + m * len, (int) len, MPI_CHAR, 0, 7, MPI_COMM_WORLD, &reqs[m]);
        }
        MPI_Send(NULL, 0, MPI_CHAR, 0, 8, MPI_COMM_WORLD);
        rndv1 = pvar_read("amlapi_msgs_rndv");
        if (credits > 0 && rndv1 - rndv0 < (unsigned long long) (per - credits))
            ERR("%llu of %d messages went by rendezvous with %ld credits, want >= %ld",
                rndv1 - rndv0, per, credits, per - credits);
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
        printf("flood: %d senders x %d x %zu B, credits %ld: unexpected bytes high-water mark "
               "%llu of %llu sent\n", size - 1, per, len, credits, bytes_max, held_all);
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
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("flood: %d ranks, %d errors\n", size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
