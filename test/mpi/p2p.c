/*
 * Point-to-point behaviour over amlapi, as an MPI user sees it: every send mode, blocking
 * and nonblocking, sizes from 0 B to 64 MiB, ANY_SOURCE/ANY_TAG, probe/mprobe, cancel,
 * non-contiguous datatypes. Needs >= 2 ranks. MPICH's MTest convention: rank 0 prints
 * " No Errors" (" Found N errors" and a non-zero exit on any error); the section names and
 * "p2p: N ranks, N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stddef.h>
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
        b[i] = (char) ((i * 31 + (size_t) seed * 17) & 0xff);
}

static size_t check(const char *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (char) ((i * 31 + (size_t) seed * 17) & 0xff))
            return i;
    return (size_t) -1;
}

/* every send mode x blocking/nonblocking x size; rank 0 sends, rank 1 receives */
static void send_modes(void)
{
    static const size_t sizes[] = { 0, 1, 100, 8000, 8200, 65536, 65537, 300000, 1 << 22 };
    const size_t maxn = 1 << 22;
    char *buf = malloc(maxn);
    int bsize = (int) (maxn + MPI_BSEND_OVERHEAD) * 2;
    void *bbuf = malloc(bsize);
    MPI_Buffer_attach(bbuf, bsize);
    for (int mode = 0; mode < 8; mode++) {
        for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            int n = (int) sizes[k], seed = mode * 100 + (int) k;
            if (rank == 0) {
                MPI_Request r;
                fill(buf, n, seed);
                if (mode == 3) /* ready send: the receive must be posted */
                    MPI_Recv(NULL, 0, MPI_CHAR, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                switch (mode) {
                    case 0: MPI_Send(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD); break;
                    case 1: MPI_Ssend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD); break;
                    case 2: MPI_Bsend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD); break;
                    case 3: MPI_Rsend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD); break;
                    case 4: MPI_Isend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD, &r);
                        MPI_Wait(&r, MPI_STATUS_IGNORE); break;
                    case 5: MPI_Issend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD, &r);
                        MPI_Wait(&r, MPI_STATUS_IGNORE); break;
                    case 6: MPI_Ibsend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD, &r);
                        MPI_Wait(&r, MPI_STATUS_IGNORE); break;
                    case 7: MPI_Irecv(NULL, 0, MPI_CHAR, 1, 99, MPI_COMM_WORLD, &r);
                        MPI_Wait(&r, MPI_STATUS_IGNORE);
                        MPI_Irsend(buf, n, MPI_CHAR, 1, seed, MPI_COMM_WORLD, &r);
                        MPI_Wait(&r, MPI_STATUS_IGNORE); break;
                }
            } else if (rank == 1) {
                MPI_Request r;
                MPI_Status st;
                int cnt;
                memset(buf, 0, n);
                MPI_Irecv(buf, n, MPI_CHAR, 0, seed, MPI_COMM_WORLD, &r);
                if (mode == 3 || mode == 7)
                    MPI_Send(NULL, 0, MPI_CHAR, 0, 99, MPI_COMM_WORLD);
                MPI_Wait(&r, &st);
                MPI_Get_count(&st, MPI_CHAR, &cnt);
                if (cnt != n || st.MPI_SOURCE != 0 || st.MPI_TAG != seed)
                    ERR("mode %d size %d: count %d source %d tag %d", mode, n, cnt,
                        st.MPI_SOURCE, st.MPI_TAG);
                else if (check(buf, n, seed) != (size_t) -1)
                    ERR("mode %d size %d: data wrong at %zu", mode, n, check(buf, n, seed));
            }
        }
    }
    MPI_Buffer_detach(&bbuf, &bsize);
    free(bbuf);
    free(buf);
}

/* one 64 MiB message each way between 0 and 1 */
static void huge(void)
{
    size_t n = 64u << 20;
    char *buf = malloc(n);
    if (rank <= 1) {
        int peer = 1 - rank;
        char *rbuf = malloc(n);
        fill(buf, n, 7 + rank);
        MPI_Sendrecv(buf, (int) n, MPI_CHAR, peer, 5, rbuf, (int) n, MPI_CHAR, peer, 5,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (check(rbuf, n, 7 + peer) != (size_t) -1)
            ERR("64 MiB message wrong at %zu", check(rbuf, n, 7 + peer));
        free(rbuf);
    }
    free(buf);
}

/* every rank sends to rank 0 with its rank as tag; rank 0 takes ANY_SOURCE/ANY_TAG and checks
 * per-source order across sizes that switch protocol */
static void any_source(void)
{
    const int per = 20;
    static const int lens[] = { 4, 9000, 70000, 16, 200000 };
    char *buf = malloc(200000);
    if (rank != 0) {
        for (int i = 0; i < per; i++) {
            int n = lens[i % 5];
            fill(buf, n, rank * 1000 + i);
            MPI_Send(buf, n, MPI_CHAR, 0, i, MPI_COMM_WORLD);
        }
    } else {
        int next[64] = { 0 };
        for (int k = 0; k < per * (size - 1); k++) {
            MPI_Status st;
            int cnt;
            MPI_Recv(buf, 200000, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &cnt);
            int s = st.MPI_SOURCE, i = st.MPI_TAG;
            if (i != next[s]++)
                ERR("from %d: message %d arrived when %d was due", s, i, next[s] - 1);
            if (cnt != lens[i % 5] || check(buf, cnt, s * 1000 + i) != (size_t) -1)
                ERR("from %d message %d: count %d or data wrong", s, i, cnt);
        }
    }
    free(buf);
}

/* probe, iprobe, mprobe/mrecv, improbe/imrecv */
static void probes(void)
{
    char *buf = malloc(300000);
    static const int lens[] = { 10, 20000, 300000 };
    for (int k = 0; k < 3; k++) {
        int n = lens[k];
        if (rank == 0) {
            fill(buf, n, 50 + k);
            MPI_Send(buf, n, MPI_CHAR, 1, 40 + k, MPI_COMM_WORLD);
            MPI_Send(buf, n, MPI_CHAR, 1, 40 + k, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Status st;
            MPI_Message msg;
            int cnt, flag = 0;
            MPI_Probe(0, 40 + k, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &cnt);
            if (cnt != n)
                ERR("probe count %d, want %d", cnt, n);
            MPI_Mprobe(0, 40 + k, MPI_COMM_WORLD, &msg, &st);
            memset(buf, 0, n);
            MPI_Mrecv(buf, n, MPI_CHAR, &msg, &st);
            if (check(buf, n, 50 + k) != (size_t) -1)
                ERR("mrecv data, size %d", n);
            while (!flag)
                MPI_Improbe(0, 40 + k, MPI_COMM_WORLD, &flag, &msg, &st);
            MPI_Request r;
            memset(buf, 0, n);
            MPI_Imrecv(buf, n, MPI_CHAR, &msg, &r);
            MPI_Wait(&r, &st);
            if (check(buf, n, 50 + k) != (size_t) -1)
                ERR("imrecv data, size %d", n);
            MPI_Iprobe(0, 40 + k, MPI_COMM_WORLD, &flag, &st);
            if (flag)
                ERR("iprobe found a message that was received");
        }
    }
    free(buf);
}

/* Cancel a posted receive (must succeed). Cancel sends that really send a CANCEL_REQ: an
 * unmatched eager-range (adaptive eager by default) and an unmatched rendezvous-size standard
 * send; the counters amlapi_send_cancels_ok/failed show that the receiver answered. Rendezvous
 * and ordered eager messages are whole at the receiver when the cancel request arrives behind
 * them, so their cancel must succeed, and the receiver must then never see them: a later
 * message with the same tag arrives intact instead. Adaptive eager data may still be arriving
 * after the cancel request (aml may spread it over lanes): then the cancel may come too late, which MPI
 * allows, and the message must be received. A small send completed at injection has no
 * message id and is not cancelled by default; whatever the outcome, it must agree with the
 * counters and with what the receiver gets. */
static void cancels(void)
{
    MPI_Request r;
    MPI_Status st;
    int flag;
    char b[16];
    MPI_Irecv(b, 16, MPI_CHAR, MPI_ANY_SOURCE, 777, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    if (!flag)
        ERR("receive was not cancelled");

    long lens[3] = { 16, (lim.onepacket + lim.eager) / 2,
        lim.eager + 1 < 300000 ? 300000 : lim.eager + 1
    };
    char *buf = malloc(lens[2]);
    for (int k = 0; k < 3; k++) {
        int n = (int) lens[k], tag = 780 + k, proto = expected_proto(&lim, n);
        if (k == 1 && lim.onepacket >= lim.eager)
            continue;   /* no eager range */
        if (rank == 0) {
            unsigned long long ok0 = pvar_read("amlapi_send_cancels_ok");
            unsigned long long no0 = pvar_read("amlapi_send_cancels_failed");
            unsigned long long c0[P_COUNT], c1[P_COUNT];
            fill(buf, n, 900 + k);
            proto_counts(c0);
            MPI_Isend(buf, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &r);
            proto_counts(c1);
            /* the message really went by the protocol named (every credit is back after the
             * barriers between sections) */
            if (c1[proto] - c0[proto] != 1)
                ERR("send of %d bytes to cancel did not go by %s", n, proto_name[proto]);
            MPI_Cancel(&r);
            MPI_Wait(&r, &st);
            MPI_Test_cancelled(&st, &flag);
            unsigned long long ok = pvar_read("amlapi_send_cancels_ok") - ok0;
            unsigned long long no = pvar_read("amlapi_send_cancels_failed") - no0;
            if (ok != (unsigned long long) !!flag || ok + no > 1)
                ERR("cancel of %d bytes: cancelled %d but amlapi_send_cancels_ok +%llu, "
                    "amlapi_send_cancels_failed +%llu", n, flag, ok, no);
            if (k > 0 && ok + no != 1)
                ERR("cancel of an unmatched %s send of %d bytes sent no CANCEL_REQ (no "
                    "answer counted)", proto_name[proto], n);
            if (k > 0 && !flag && proto != P_ADAPTIVE)
                ERR("unmatched %s send of %d bytes was not cancelled", proto_name[proto], n);
            MPI_Send(&flag, 1, MPI_INT, 1, 779, MPI_COMM_WORLD);
            fill(buf, 8, 950 + k);
            /* the same tag again: the receiver must get this, not the cancelled message */
            MPI_Send(buf, 8, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
        } else if (rank == 1) {
            int cnt;
            MPI_Recv(&flag, 1, MPI_INT, 0, 779, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (!flag) {        /* not cancelled: it comes first, intact */
                MPI_Recv(buf, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_CHAR, &cnt);
                if (cnt != n || check(buf, n, 900 + k) != (size_t) -1)
                    ERR("a send of %d bytes that was not cancelled arrived as %d bytes or "
                        "corrupt", n, cnt);
            }
            MPI_Recv(buf, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_CHAR, &cnt);
            if (cnt != 8 || check(buf, 8, 950 + k) != (size_t) -1)
                ERR("after a %s send of %d bytes the receiver got %d bytes, want the 8-byte "
                    "message sent after it", flag ? "cancelled" : "completed", n, cnt);
        }
    }
    free(buf);
}

/* non-contiguous send and receive datatypes of different shapes */
static void noncontig(void)
{
    const int count = 5000;
    MPI_Datatype vec, idx, st;
    int blens[3] = { 1, 3, 2 }, displs[3] = { 0, 5, 11 };
    MPI_Type_vector(count, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_indexed(3, blens, displs, MPI_INT, &idx);
    MPI_Type_commit(&idx);
    struct rec { char c; double d; int i[2]; };
    int sb[3] = { 1, 1, 2 };
    MPI_Aint sd[3] = { offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i) };
    MPI_Datatype stt[3] = { MPI_CHAR, MPI_DOUBLE, MPI_INT };
    MPI_Type_create_struct(3, sb, sd, stt, &st);
    MPI_Type_commit(&st);
    int *a = calloc(3 * count, sizeof(int)), *b = calloc(3 * count, sizeof(int));
    struct rec *r = calloc(count, sizeof(*r));
    if (rank == 0) {
        for (int i = 0; i < 3 * count; i++)
            a[i] = i;
        /* vector -> contiguous ints, indexed (many) -> vector, struct -> struct */
        MPI_Send(a, 1, vec, 1, 60, MPI_COMM_WORLD);
        MPI_Send(a, count / 6, idx, 1, 61, MPI_COMM_WORLD);
        for (int i = 0; i < count; i++) {
            r[i].c = (char) i;
            r[i].d = i * 0.5;
            r[i].i[0] = i;
            r[i].i[1] = -i;
        }
        MPI_Send(r, count, st, 1, 62, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(b, count, MPI_INT, 0, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < count; i++)
            if (b[i] != 3 * i) {
                ERR("vector->contig at %d: %d", i, b[i]);
                break;
            }
        memset(b, 0, 3 * count * sizeof(int));
        /* count/6 indexed elements = 6 ints each, extent 13 ints; one vector of count
         * ints has room: the k-th int of the stream lands at b[3k] */
        MPI_Recv(b, 1, vec, 0, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int k = 0;
        for (int blk = 0; blk < count / 6 && !errs; blk++)
            for (int j = 0; j < 3; j++)
                for (int e = 0; e < blens[j]; e++, k++)
                    if (k < count && b[3 * k] != blk * 13 + displs[j] + e) {
                        ERR("indexed->vector at %d: %d", k, b[3 * k]);
                        j = 3;
                        break;
                    }
        memset(r, 0, count * sizeof(*r));
        MPI_Recv(r, count, st, 0, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < count; i++)
            if (r[i].c != (char) i || r[i].d != i * 0.5 || r[i].i[0] != i || r[i].i[1] != -i) {
                ERR("struct at %d", i);
                break;
            }
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&idx);
    MPI_Type_free(&st);
    free(a);
    free(b);
    free(r);
}

/* nonblocking exchange with all ranks at once, several sizes */
static void all_to_all(void)
{
    static const int lens[] = { 0, 100, 20000, 150000 };
    for (int k = 0; k < 4; k++) {
        int n = lens[k];
        char *s = malloc((size_t) n * size + 1), *r = malloc((size_t) n * size + 1);
        MPI_Request *req = malloc(2 * size * sizeof(MPI_Request));
        for (int p = 0; p < size; p++) {
            fill(s + (size_t) p * n, n, rank * 64 + p);
            MPI_Irecv(r + (size_t) p * n, n, MPI_CHAR, p, 70, MPI_COMM_WORLD, &req[p]);
        }
        for (int p = 0; p < size; p++)
            MPI_Isend(s + (size_t) p * n, n, MPI_CHAR, p, 70, MPI_COMM_WORLD, &req[size + p]);
        MPI_Waitall(2 * size, req, MPI_STATUSES_IGNORE);   /* (gcc 12 warns wrongly here) */
        for (int p = 0; p < size; p++)
            if (check(r + (size_t) p * n, n, p * 64 + rank) != (size_t) -1)
                ERR("exchange size %d from %d", n, p);
        free(s);
        free(r);
        free(req);
    }
}

int main(int argc, char **argv)
{
    int provided, total;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    mpit_init();
    read_limits(&lim);
    if (provided != MPI_THREAD_MULTIPLE)
        ERR("MPI_THREAD_MULTIPLE not provided (%d)", provided);
    if (size < 2) {
        fprintf(stderr, "p2p needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* sections are separated by barriers so that wildcard receives of one section cannot
     * match messages of the next */
    static const struct { const char *name; void (*fn)(void); } sec[] = {
        {"send modes", send_modes}, {"any source", any_source}, {"probes", probes},
        {"cancel", cancels}, {"noncontig", noncontig}, {"all to all", all_to_all},
        {"64 MiB", huge}
    };
    for (unsigned i = 0; i < sizeof(sec) / sizeof(sec[0]); i++) {
        if (rank == 0 && verbose)
            printf("p2p: %s\n", sec[i].name), fflush(stdout);
        sec[i].fn();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("p2p: %d ranks, %d errors\n", size, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
