/*
 * Errors are returned, not fatal. Under MPI_ERRORS_RETURN a receive whose datatype
 * does not fit the message (3 chars into ints: MPI_ERR_TYPE) or whose buffer is too small
 * (MPI_ERR_TRUNCATE) returns the error, the offending message is consumed, its sender
 * completes (a synchronous send too), and the next message with the same envelope arrives
 * intact. Every case runs at four sizes read from the CVARs at run time (one-packet small and
 * large, eager, rendezvous), on every receive path: posted before arrival, unexpected, probed
 * while arriving, mprobe+mrecv, persistent (posted and unexpected), and Waitall next to a good
 * receive. The testlist runs it with limits that lead each size to each protocol, and under
 * each rendezvous mode; the sender checks with the protocol counters (MPI_T) that each
 * message went the way the case means.
 * Also: a struct of 3 chars received as indexed ints, a partitioned
 * receive smaller than its send, and an Irecv from MPI_PROC_NULL that is cancelled. MPICH's
 * MTest convention: rank 0 prints " No Errors" (" Found N errors" and a non-zero exit on any
 * error); the limits and sizes and "errret: N cases, N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

#define TAG_GO   32000      /* receiver -> sender: the receive is posted, send now */
#define TAG_MARK 32001      /* sender -> receiver: sent after the message, so it has arrived */

static void fill(char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char) ((i * 7 + (size_t) seed * 13 + 1) & 0xff);
}

static int bad_data(const char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (char) ((i * 7 + (size_t) seed * 13 + 1) & 0xff))
            return 1;
    return 0;
}

/* MPI_T: the limits and the per-protocol counters (mpit.h) */
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

/* ---- the cases ----------------------------------------------------------------------- */

enum { E_MISMATCH, E_TRUNC_CONTIG, E_TRUNC_NONCONTIG, NERR };
static const char *err_name[NERR] = { "mismatch", "truncate-contig", "truncate-noncontig" };

enum { W_POSTED, W_UNEXP, W_PROBE, W_MPROBE, W_PERSIST_POSTED, W_PERSIST_UNEXP, W_WAITALL,
    NPATH
};
static const char *path_name[NPATH] = { "posted", "unexpected", "probe-then-recv", "mprobe",
    "persistent-posted", "persistent-unexpected", "waitall"
};


/* an indexed type of n ints: every other int, so it is not contiguous */
static MPI_Datatype int_holes(int n, MPI_Aint * extent)
{
    MPI_Datatype t;
    int *bl = malloc(n * sizeof(int)), *dp = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) {
        bl[i] = 1;
        dp[i] = 2 * i;
    }
    MPI_Type_indexed(n, bl, dp, MPI_INT, &t);
    MPI_Type_commit(&t);
    free(bl);
    free(dp);
    *extent = (MPI_Aint) (2 * n) * sizeof(int);
    return t;
}

static void expect_class(int rc, int want, const char *what)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls != want) {
        char s[MPI_MAX_ERROR_STRING] = "";
        int len;
        if (rc != MPI_SUCCESS)
            MPI_Error_string(rc, s, &len);
        ERR("%s: error class %d, want %d (%s)", what, cls, want, s);
    }
}

/* The protocol a message of len bytes went by, as the sender's counters say it went. */
static void check_proto(const unsigned long long *before, long len, long onepkt_max,
                        long eager_limit, const char *what)
{
    unsigned long long after[P_COUNT];
    int want[P_COUNT] = { 0 }, ok = 0;
    proto_counts(after);
    if (len <= onepkt_max)
        want[P_ONEPACKET] = 1;
    else if (len > eager_limit)
        want[P_RNDV] = 1;
    else
        want[P_EAGER] = want[P_ADAPTIVE] = want[P_RNDV] = 1;
    for (int p = 0; p < P_COUNT; p++)
        if (after[p] != before[p])
            ok += want[p] ? 1 : -100;
    if (ok != 1)
        ERR("%s: %ld bytes did not go by the expected protocol (sent onepacket %llu, eager "
            "%llu, adaptive %llu, rndv %llu)", what, len, after[0] - before[0],
            after[1] - before[1], after[2] - before[2], after[3] - before[3]);
}

/* One case: rank 1 sends a message of len bytes with tag; rank 0 receives it wrongly (err) by
 * path, then both exchange a correct message with the same envelope. */
static void one_case(int tag, long len, int err, int path, int sync, long onepkt_max,
                     long eager_limit)
{
    char what[160];
    char *sbuf = malloc(len), *rbuf = malloc(2 * len + 64);
    snprintf(what, sizeof(what), "%s %s %s, %ld bytes, tag %d", sync ? "ssend" : "send",
             err_name[err], path_name[path], len, tag);

    if (rank == 1) {
        MPI_Request r;
        unsigned long long before[P_COUNT];
        int rc;
        fill(sbuf, len, tag);
        if (path == W_POSTED || path == W_PERSIST_POSTED || path == W_WAITALL)
            MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        proto_counts(before);
        rc = (sync ? MPI_Issend : MPI_Isend) (sbuf, (int) len, MPI_CHAR, 0, tag, MPI_COMM_WORLD,
                                              &r);
        check_proto(before, len, onepkt_max, eager_limit, what);
        expect_class(rc, MPI_SUCCESS, what);
        if (path == W_UNEXP || path == W_PERSIST_UNEXP || path == W_MPROBE)
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_MARK, MPI_COMM_WORLD);
        /* the send completes although its receive failed (a synchronous one too) */
        rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        expect_class(rc, MPI_SUCCESS, what);
        /* the same envelope again, correct this time */
        fill(sbuf, len, tag + 1);
        rc = (sync ? MPI_Ssend : MPI_Send) (sbuf, (int) len, MPI_CHAR, 0, tag, MPI_COMM_WORLD);
        expect_class(rc, MPI_SUCCESS, what);
    } else if (rank == 0) {
        MPI_Datatype type;
        MPI_Aint extent = 0;
        int count, want, rc, n = 0;
        MPI_Status st;
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_Message msg;
        switch (err) {
            case E_MISMATCH:   /* room for it all, but not whole ints */
                n = (int) (len + 3) / 4 + 1;
                type = int_holes(n, &extent);
                count = 1;
                want = MPI_ERR_TYPE;
                break;
            case E_TRUNC_CONTIG:
                type = MPI_CHAR;
                count = (int) len / 2;
                extent = len;
                want = MPI_ERR_TRUNCATE;
                break;
            default:   /* whole ints, but fewer bytes than the message */
                n = (int) len / 8;
                type = int_holes(n, &extent);
                count = 1;
                want = MPI_ERR_TRUNCATE;
                break;
        }
        char *tbuf = malloc(extent + 64);

        if (path == W_UNEXP || path == W_PERSIST_UNEXP || path == W_MPROBE)
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_MARK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        switch (path) {
            case W_POSTED:
                MPI_Irecv(tbuf, count, type, 1, tag, MPI_COMM_WORLD, &r);
                MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
                rc = MPI_Wait(&r, &st);
                break;
            case W_UNEXP:
                rc = MPI_Recv(tbuf, count, type, 1, tag, MPI_COMM_WORLD, &st);
                break;
            case W_PROBE:
                MPI_Probe(1, tag, MPI_COMM_WORLD, &st);
                rc = MPI_Recv(tbuf, count, type, 1, tag, MPI_COMM_WORLD, &st);
                break;
            case W_MPROBE:{
                    int pc;
                    MPI_Mprobe(1, tag, MPI_COMM_WORLD, &msg, &st);
                    MPI_Get_count(&st, MPI_CHAR, &pc);
                    if (pc != len)
                        ERR("%s: mprobe count %d", what, pc);
                    rc = MPI_Mrecv(tbuf, count, type, &msg, &st);
                    break;
                }
            case W_PERSIST_POSTED:
            case W_PERSIST_UNEXP:
                MPI_Recv_init(tbuf, count, type, 1, tag, MPI_COMM_WORLD, &r);
                MPI_Start(&r);
                if (path == W_PERSIST_POSTED)
                    MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
                rc = MPI_Wait(&r, &st);
                MPI_Request_free(&r);
                break;
            default:{  /* W_WAITALL: next to a good receive that must be untouched */
                    MPI_Request rr[3], rs;
                    MPI_Status sts[3];
                    int v[2] = { 0, 0 }, cls;
                    /* good, bad, good: MPICH's Waitall may leave those after the failed one
                     * MPI_ERR_PENDING (not completed by this call), which MPI allows */
                    MPI_Irecv(&v[0], 1, MPI_INT, 0, tag, MPI_COMM_WORLD, &rr[0]);
                    MPI_Irecv(tbuf, count, type, 1, tag, MPI_COMM_WORLD, &rr[1]);
                    MPI_Irecv(&v[1], 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD, &rr[2]);
                    MPI_Isend(&tag, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, &rs);     /* to self */
                    MPI_Send(&tag, 1, MPI_INT, 0, tag + 1, MPI_COMM_WORLD);
                    MPI_Wait(&rs, MPI_STATUS_IGNORE);
                    MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
                    rc = MPI_Waitall(3, rr, sts);
                    expect_class(rc, MPI_ERR_IN_STATUS, what);
                    expect_class(sts[0].MPI_ERROR, MPI_SUCCESS, what);
                    MPI_Error_class(sts[2].MPI_ERROR, &cls);
                    if (cls == MPI_ERR_PENDING)
                        expect_class(MPI_Wait(&rr[2], &sts[2]), MPI_SUCCESS, what);
                    else
                        expect_class(sts[2].MPI_ERROR, MPI_SUCCESS, what);
                    if (v[0] != tag || v[1] != tag)
                        ERR("%s: the good receives next to it got %d %d, want %d", what, v[0],
                            v[1], tag);
                    rc = sts[1].MPI_ERROR;
                    st = sts[1];
                }
        }
        expect_class(rc, want, what);
        if (st.MPI_SOURCE != 1 || st.MPI_TAG != tag)
            ERR("%s: status source %d tag %d", what, st.MPI_SOURCE, st.MPI_TAG);
        /* amlapi keeps what fits of a truncated message (MPI does not require it) */
        fill(sbuf, len, tag);
        if (err == E_TRUNC_CONTIG && memcmp(tbuf, sbuf, count))
            ERR("%s: the part of the message that fits is not in the buffer", what);
        if (err == E_TRUNC_NONCONTIG)
            for (int i = 0; i < n; i++)
                if (memcmp(tbuf + 8 * i, sbuf + 4 * i, 4)) {
                    ERR("%s: int %d of the part that fits is wrong", what, i);
                    break;
                }
        if (type != MPI_CHAR)
            MPI_Type_free(&type);
        free(tbuf);

        /* the next message with the same envelope matches and arrives intact */
        memset(rbuf, 0, 2 * len + 64);
        rc = MPI_Recv(rbuf, (int) (2 * len + 64), MPI_CHAR, 1, tag, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_SUCCESS, what);
        MPI_Get_count(&st, MPI_CHAR, &n);
        if (n != len || bad_data(rbuf, len, tag + 1))
            ERR("%s: the next message came wrong (%d bytes)", what, n);
    }
    free(sbuf);
    free(rbuf);
}

/* The scenario: 3 chars sent with a struct type, received as indexed ints. */
static void scenario(void)
{
    if (rank == 1) {
        MPI_Datatype s;
        int bl[1] = { 3 };
        MPI_Aint dp[1] = { 0 };
        MPI_Datatype ty[1] = { MPI_CHAR };
        char c[3] = { 'a', 'b', 'c' };
        MPI_Type_create_struct(1, bl, dp, ty, &s);
        MPI_Type_commit(&s);
        MPI_Send(c, 1, s, 0, 7, MPI_COMM_WORLD);
        MPI_Type_free(&s);
        MPI_Send(c, 3, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    } else if (rank == 0) {
        MPI_Datatype t;
        MPI_Aint extent;
        int buf[16], rc, n;
        char c[3];
        MPI_Status st;
        t = int_holes(4, &extent);
        rc = MPI_Recv(buf, 1, t, 1, 7, MPI_COMM_WORLD, &st);
        expect_class(rc, MPI_ERR_TYPE, "struct of 3 chars received as indexed ints");
        MPI_Type_free(&t);
        rc = MPI_Recv(c, 3, MPI_CHAR, 1, 7, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_CHAR, &n);
        if (rc != MPI_SUCCESS || n != 3 || memcmp(c, "abc", 3))
            ERR("the message after the mismatch came wrong");
    }
}

/* Partitioned communication (MPICH's generic layer over aml's active messages): a receive
 * smaller than the send is MPI_ERR_OTHER ("partitioned sizes differ", MPICH's own check),
 * both sides complete, and the next one arrives intact. n ints per partition: one packet,
 * and more than the eager limit (rendezvous). */
static void partitioned(int n)
{
    int *b = calloc(2 * n, sizeof(int)), rc;
    MPI_Request r;
    char what[64];
    for (int good = 0; good < 2; good++) {
        snprintf(what, sizeof(what), "partitioned, %d ints, %s", 2 * n,
                 good ? "matching" : "receive too small");
        if (rank == 1) {
            for (int i = 0; i < 2 * n; i++)
                b[i] = i + good;
            MPI_Psend_init(b, 2, n, MPI_INT, 0, 50 + good, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
            MPI_Start(&r);
            MPI_Pready(1, r);
            MPI_Pready(0, r);
            expect_class(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS, what);
            MPI_Request_free(&r);
        } else if (rank == 0) {
            memset(b, 0, 2 * n * sizeof(int));
            MPI_Precv_init(b, 2, good ? n : n / 2, MPI_INT, 1, 50 + good, MPI_COMM_WORLD,
                           MPI_INFO_NULL, &r);
            MPI_Start(&r);
            rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
            expect_class(rc, good ? MPI_SUCCESS : MPI_ERR_OTHER, what);
            MPI_Request_free(&r);
            for (int i = 0; good && i < 2 * n; i++)
                if (b[i] != i + good) {
                    ERR("%s: int %d is %d", what, i, b[i]);
                    break;
                }
        }
    }
    free(b);
}

/* A receive from MPI_PROC_NULL completes at once; cancelling it has no effect (not
 * cancelled, count 0). MPICH 4.0.2 answers it above the device, with its generic completed
 * request, whose status says source 0 tag 0 on every netmod: the source is not checked. */
static void proc_null(void)
{
    MPI_Request r;
    MPI_Status st;
    int flag = -1, n = -1, buf;
    MPI_Irecv(&buf, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &r);
    if (MPI_Cancel(&r) != MPI_SUCCESS)
        ERR("MPI_Cancel of an Irecv from MPI_PROC_NULL failed");
    if (MPI_Wait(&r, &st) != MPI_SUCCESS)
        ERR("MPI_Wait of a cancelled Irecv from MPI_PROC_NULL failed");
    MPI_Test_cancelled(&st, &flag);
    MPI_Get_count(&st, MPI_INT, &n);
    if (flag != 0 || n != 0)
        ERR("Irecv from MPI_PROC_NULL, cancelled: cancelled %d count %d", flag, n);
}

int main(int argc, char **argv)
{
    int size, packet, eager, credits, cases = 0;
    long sizes[4];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpit_init();
    if (size < 2) {
        fprintf(stderr, "errret needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    {
        struct limits l;
        read_limits(&l);        /* the eager limit between ranks 0 and 1 (vnode's on one node) */
        packet = l.packet;
        eager = l.eager;
        credits = l.credits;
    }
    if (packet < 0 || eager < 0 || credits < 0)
        exit(1);
    /* 4k+3 bytes, so that they never fill whole ints: the mismatch is detectable */
    sizes[0] = 3;
    sizes[1] = (packet / 2) / 4 * 4 + 3;        /* one packet, from the caller's buffer */
    sizes[2] = (packet + eager) / 2 / 4 * 4 + 3;        /* more than a packet, eager */
    sizes[3] = 4L * eager + 3;  /* rendezvous */
    /* the largest one-packet message: a packet less the headers; at most a packet */
    long onepkt_max = packet / 2 + 64;
    if (rank == 0 && verbose)
        printf("errret: packet %d, eager limit %d, credits %d; sizes %ld %ld %ld %ld\n",
               packet, eager, credits, sizes[0], sizes[1], sizes[2], sizes[3]);

    scenario();
    proc_null();
    partitioned(2);
    partitioned(eager / 4 + 1);

    int tag = 100;
    for (int s = 0; s < 4; s++) {
        if (s == 2 && eager <= packet)
            continue;   /* no eager size between a packet and the limit */
        for (int e = 0; e < NERR; e++)
            for (int p = 0; p < NPATH; p++)
                for (int sync = 0; sync < 2; sync++, tag += 2, cases++)
                    one_case(tag, sizes[s], e, p, sync, onepkt_max, eager);
    }

    /* Every adaptive message above, failed receives included, gave its sender's credit back:
     * after a barrier (the receiver's tokens precede its barrier messages) an eager-sized
     * message still goes adaptive, not by the rendezvous a sender out of credits uses. */
    if (credits > 0 && eager > packet) {
        char *b = calloc(1, sizes[2]);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            unsigned long long before[P_COUNT], after[P_COUNT];
            MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            proto_counts(before);
            MPI_Send(b, (int) sizes[2], MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            proto_counts(after);
            if (after[P_ADAPTIVE] != before[P_ADAPTIVE] + 1)
                ERR("after the failed receives an eager-sized message did not go adaptive "
                    "(credits not given back?): adaptive %llu, rndv %llu",
                    after[P_ADAPTIVE] - before[P_ADAPTIVE], after[P_RNDV] - before[P_RNDV]);
        } else if (rank == 0) {
            MPI_Request r;
            MPI_Irecv(b, (int) sizes[2], MPI_CHAR, 1, 1, MPI_COMM_WORLD, &r);
            MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        free(b);
    }

    mpit_finalize();
    int total;
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("errret: %d cases, %d errors\n", cases, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
