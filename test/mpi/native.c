/*
 * Native point-to-point specifics: sizes on both sides of every protocol threshold
 * with contiguous and strided types, each message asserted to take the protocol its size
 * calls for (the limits are read from the library's control variables, the protocol from the
 * amlapi_msgs_* counters), send cancel of unmatched eager and rendezvous messages (standard
 * and synchronous), and the unexpected-queue performance variables. Run by the testlist with
 * limits that lead its sizes to each protocol. MPICH's MTest convention: rank 0 prints
 * " No Errors" (" Found N errors" and a non-zero exit on any error); the section names and
 * "native: N ranks, N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

#include "mpit.h"
#include "mtest.h"

static struct limits lim;

static int verbose;             /* mtest_verbose() */

static void fill(char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char) ((i * 7 + (size_t) seed * 13) & 0xff);
}

static int bad(const char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (char) ((i * 7 + (size_t) seed * 13) & 0xff))
            return 1;
    return 0;
}

/* Asserts that exactly one message went between the counts c0 and c1, by protocol want. */
static void check_proto(const unsigned long long c0[P_COUNT],
                        const unsigned long long c1[P_COUNT], int want, const char *what, long n)
{
    for (int p = 0; p < P_COUNT; p++) {
        unsigned long long d = c1[p] - c0[p];
        if (d != (p == want))
            ERR("%s of %ld bytes (one-packet limit %ld, eager limit %d, credits %d): "
                "amlapi_msgs_%s grew by %llu, want %d", what, n, lim.onepacket, lim.eager,
                lim.credits, proto_name[p], d, p == want);
    }
}

/* --- thresholds ------------------------------------------------------------------------- */

/* every size next to a threshold, contiguous and strided on either side, four send modes;
 * the sender asserts the protocol of each message */
static void thresholds(void)
{
    long eager = lim.eager, one = lim.onepacket;
    long sizes[] = { 0, 1, one - 1, one, one + 1, eager - 1, eager, eager + 1, 3 * eager + 5 };
    static const char *const mode_name[4] = { "MPI_Send", "MPI_Ssend", "MPI_Isend",
        "unexpected MPI_Isend"
    };
    long maxn = 3 * eager + 5;
    char *s = malloc(2 * maxn + 16), *r = malloc(2 * maxn + 16), *tmp = malloc(maxn + 16);
    MPI_Datatype strided;
    /* every other byte: the packed size is half the extent */
    MPI_Type_vector((int) maxn, 1, 2, MPI_CHAR, &strided);
    MPI_Type_commit(&strided);

    for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int n = (int) sizes[k];
        for (int shape = 0; shape < 3; shape++) {       /* 0 contig, 1 strided send, 2 strided recv */
            for (int mode = 0; mode < 4; mode++) {
                int seed = (int) k * 31 + shape * 7 + mode, tag = 1000 + mode;
                MPI_Datatype sdt = MPI_CHAR, rdt = MPI_CHAR;
                MPI_Datatype t = MPI_DATATYPE_NULL;
                if (shape) {
                    MPI_Type_vector(n, 1, 2, MPI_CHAR, &t);
                    MPI_Type_commit(&t);
                }
                if (rank == 0) {
                    MPI_Request req;
                    unsigned long long c0[P_COUNT], c1[P_COUNT];
                    fill(tmp, n, seed);
                    if (shape == 1) {
                        for (int i = 0; i < n; i++)
                            s[2 * i] = tmp[i];
                        sdt = t;
                    } else {
                        memcpy(s, tmp, n);
                    }
                    int cnt = shape == 1 ? 1 : n;
                    /* between the two counts this rank sends only the message itself (the
                     * receiver's acknowledgements are its own sends) */
                    proto_counts(c0);
                    switch (mode) {
                        case 0:
                            MPI_Send(s, cnt, sdt, 1, tag, MPI_COMM_WORLD);
                            break;
                        case 1:
                            MPI_Ssend(s, cnt, sdt, 1, tag, MPI_COMM_WORLD);
                            break;
                        case 2:
                            MPI_Isend(s, cnt, sdt, 1, tag, MPI_COMM_WORLD, &req);
                            MPI_Wait(&req, MPI_STATUS_IGNORE);
                            break;
                        default:       /* unexpected at the receiver: it waits for our go */
                            MPI_Isend(s, cnt, sdt, 1, tag, MPI_COMM_WORLD, &req);
                    }
                    proto_counts(c1);
                    check_proto(c0, c1, expected_proto(&lim, n), mode_name[mode], n);
                    if (mode == 3) {
                        MPI_Send(NULL, 0, MPI_CHAR, 1, 9, MPI_COMM_WORLD);
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                    }
                } else if (rank == 1) {
                    MPI_Status st;
                    int got;
                    if (mode == 3) {
                        MPI_Recv(NULL, 0, MPI_CHAR, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        MPI_Probe(0, tag, MPI_COMM_WORLD, &st);
                        MPI_Get_count(&st, MPI_CHAR, &got);
                        if (got != n)
                            ERR("probe of %d bytes says %d", n, got);
                    }
                    memset(r, 0, 2 * maxn + 16);
                    if (shape == 2) {
                        rdt = t;
                        MPI_Recv(r, 1, rdt, 0, tag, MPI_COMM_WORLD, &st);
                        for (int i = 0; i < n; i++)
                            tmp[i] = r[2 * i];
                    } else {
                        MPI_Recv(r, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
                        memcpy(tmp, r, n);
                    }
                    MPI_Get_count(&st, MPI_CHAR, &got);
                    if (got != n || bad(tmp, n, seed))
                        ERR("size %d shape %d mode %d: count %d or data wrong", n, shape, mode,
                            got);
                }
                /* the receiver returned its adaptive-eager token before this reply (same
                 * ordered channel): the sender holds every credit again, so each message's
                 * protocol depends on its size alone, not on how far the sender ran ahead */
                if (rank == 1)
                    MPI_Send(NULL, 0, MPI_CHAR, 0, 10, MPI_COMM_WORLD);
                else if (rank == 0)
                    MPI_Recv(NULL, 0, MPI_CHAR, 1, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (shape)
                    MPI_Type_free(&t);
            }
        }
    }
    /* truncation: the error class, and the bytes that fit */
    if (rank == 0) {
        fill(s, 20000, 3);
        MPI_Send(s, 20000, MPI_CHAR, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Status st;
        int rc, cls;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = MPI_Recv(r, 100, MPI_CHAR, 0, 5, MPI_COMM_WORLD, &st);
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_TRUNCATE)
            ERR("truncated receive: error class %d, want MPI_ERR_TRUNCATE", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    MPI_Type_free(&strided);
    free(s);
    free(r);
    free(tmp);
}

/* --- send cancel ------------------------------------------------------------------------ */

/* An eager (or adaptive) and a rendezvous send that nobody has matched are cancelled (the
 * receiver is in a barrier, so it answers); the receiver then finds only the marker sent
 * afterwards with the same tag. Ordered eager and rendezvous messages are whole at the
 * receiver when the cancel request (sent after them, in order) arrives, so their cancel must
 * succeed; adaptive eager data may still be arriving over other lanes, and then MPI's other
 * outcome (not cancelled, and received) is checked. */
static void send_cancel(void)
{
    long lens[2] = { (lim.onepacket + lim.eager) / 2, lim.eager + 1 < 300000 ? 300000 :
        lim.eager + 1
    };
    char *b = malloc(lens[1]), *r = malloc(lens[1]);
    int first = lim.onepacket < lim.eager ? 0 : 1;     /* no eager range: rendezvous only */
    for (int k = first; k < 2; k++) {
        for (int sync = 0; sync < 2; sync++) {
            int n = (int) lens[k], tag = 300 + k * 2 + sync, flag = 0;
            int proto = expected_proto(&lim, n);
            MPI_Request marker[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
            if (rank == 0) {
                MPI_Request req;
                unsigned long long c0[P_COUNT], c1[P_COUNT];
                const char *what = sync ? "synchronous" : "standard";
                fill(b, n, 77);
                proto_counts(c0);
                if (sync)
                    MPI_Issend(b, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &req);
                else
                    MPI_Isend(b, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &req);
                proto_counts(c1);
                check_proto(c0, c1, proto, "send to cancel", n);
                flag = cancel_counted(&req, proto, n, what);
                if (!flag && proto != P_ADAPTIVE)
                    ERR("unmatched %s %s send of %d bytes was not cancelled", what,
                        proto_name[proto], n);
                /* nonblocking: a rendezvous completes only when received, and the
                 * receiver waits in the barrier */
                MPI_Isend(&flag, 1, MPI_INT, 1, tag + 100, MPI_COMM_WORLD, &marker[0]);
                fill(b, 8, 78);
                MPI_Isend(b, 8, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &marker[1]);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 1) {
                MPI_Status st;
                int got;
                MPI_Recv(&flag, 1, MPI_INT, 0, tag + 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (!flag) {    /* not cancelled: it must arrive, before the marker */
                    MPI_Recv(r, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
                    MPI_Get_count(&st, MPI_CHAR, &got);
                    if (got != n || bad(r, n, 77))
                        ERR("a send of %d bytes that was not cancelled arrived as %d bytes or "
                            "corrupt", n, got);
                }
                MPI_Recv(r, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_CHAR, &got);
                if (got != 8 || bad(r, 8, 78))
                    ERR("after a %s send of %d bytes the receiver got %d bytes, want the "
                        "8-byte marker", flag ? "cancelled" : "completed", n, got);
            }
            MPI_Waitall(2, marker, MPI_STATUSES_IGNORE);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    /* a matched send cannot be cancelled: the cancel is answered "too late" */
    if (rank == 0) {
        MPI_Request req;
        MPI_Isend(b, (int) lens[1], MPI_CHAR, 1, 310, MPI_COMM_WORLD, &req);
        MPI_Recv(NULL, 0, MPI_CHAR, 1, 311, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (cancel_counted(&req, expected_proto(&lim, lens[1]), lens[1], "received"))
            ERR("a received send was reported cancelled");
    } else if (rank == 1) {
        MPI_Recv(r, (int) lens[1], MPI_CHAR, 0, 310, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_CHAR, 0, 311, MPI_COMM_WORLD);
    }
    free(b);
    free(r);
}

/* --- performance variables -------------------------------------------------------------- */

static void pvars(void)
{
    const int per = 5;
    char *b = calloc(1, 1 << 20);
    unsigned long long hwm0, hwm_v, level;

    /* unexpected queue: everyone floods rank 0, then sends it a 0-byte "done" that rank 0
     * receives: per-sender order puts every flood message at rank 0 before its sender's done
     * (a barrier would not: its messages need not come from every sender, nor by the same
     * transport), so all are early arrivals then; then they drain */
    hwm0 = pvar_read("amlapi_unexpected_msgs_max");
    level = pvar_read("amlapi_unexpected_msgs");
    MPI_Barrier(MPI_COMM_WORLD);       /* nobody floods before everyone has looked */
    /* early barrier messages of faster ranks may sit in the queue: allow a few (slack) */
    const unsigned long long slack = 2 * (unsigned long long) size;
    if (level > slack)
        ERR("unexpected queue holds %llu messages before the flood", level);
    MPI_Request reqs[16] = { MPI_REQUEST_NULL };
    if (rank != 0)     /* nonblocking: rendezvous sends complete only when received */
        for (int i = 0; i < per; i++)
            MPI_Isend(b, 100 + i * 5000, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &reqs[i]);
    if (rank != 0)
        MPI_Send(NULL, 0, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    else
        for (int i = 1; i < size; i++)
            MPI_Recv(NULL, 0, MPI_CHAR, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
        level = pvar_read("amlapi_unexpected_msgs");
        if (level < (unsigned long long) (per * (size - 1)) ||
            level > (unsigned long long) (per * (size - 1)) + slack)
            ERR("unexpected queue holds %llu messages, want %d", level, per * (size - 1));
        for (int i = 0; i < per * (size - 1); i++)
            MPI_Recv(b, 200000, MPI_CHAR, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        level = pvar_read("amlapi_unexpected_msgs");
        if (level > slack)
            ERR("unexpected queue holds %llu messages after draining", level);
        hwm_v = pvar_read("amlapi_unexpected_msgs_max");
        if (hwm_v < (unsigned long long) (per * (size - 1)) || hwm_v < hwm0)
            ERR("unexpected high-water mark %llu (was %llu), want >= %d", hwm_v, hwm0,
                per * (size - 1));
    }
    if (rank != 0)
        MPI_Waitall(per, reqs, MPI_STATUSES_IGNORE);
    free(b);
}

int main(int argc, char **argv)
{
    int total;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    verbose = mtest_verbose();
    mpit_init();
    read_limits(&lim);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "native needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static const struct { const char *name; void (*fn)(void); } sec[] = {
        {"thresholds", thresholds}, {"send cancel", send_cancel}, {"pvars", pvars}
    };
    for (unsigned i = 0; i < sizeof(sec) / sizeof(sec[0]); i++) {
        if (rank == 0 && verbose)
            printf("native: %s\n", sec[i].name), fflush(stdout);
        sec[i].fn();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("native: %d ranks, %d errors\n", size, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
