/*
 * Native point-to-point specifics (issue 4): sizes on both sides of every protocol threshold
 * with contiguous and strided types, send cancel of unmatched eager and rendezvous messages
 * (standard and synchronous), and the MPI_T performance variables (messages per protocol,
 * unexpected-queue length and its high-water mark). Run under each forced protocol by the
 * testlist. Prints "native: N errors" and exits non-zero on any error.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

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

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v ? atol(v) : dflt;
}

/* --- MPI_T -------------------------------------------------------------------------------- */

static MPI_T_pvar_session session;

static int pvar_index(const char *name)
{
    int idx;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS)
        return idx;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_LEVEL, &idx) == MPI_SUCCESS)
        return idx;
    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_HIGHWATERMARK, &idx) == MPI_SUCCESS)
        return idx;
    ERR("performance variable %s not found", name);
    return -1;
}

static unsigned long long pvar_read(const char *name)
{
    int idx = pvar_index(name), count;
    unsigned long long v = 0;
    MPI_T_pvar_handle h;
    if (idx < 0)
        return 0;
    MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count);
    MPI_T_pvar_start(session, h);
    MPI_T_pvar_read(session, h, &v);
    MPI_T_pvar_handle_free(session, &h);
    return v;
}

/* --- thresholds ------------------------------------------------------------------------- */

/* every size next to a threshold, contiguous and strided on either side, four send modes */
static void thresholds(void)
{
    long packet = env_long("MPIR_CVAR_AMLAPI_PACKET_SIZE", 8192);
    long eager = env_long("MPIR_CVAR_AMLAPI_EAGER_LIMIT", 12288);
    long one = packet - 72 - 24;        /* aml header, MPI envelope */
    long sizes[] = { 0, 1, one - 1, one, one + 1, eager - 1, eager, eager + 1, 3 * eager + 5 };
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
                    fill(tmp, n, seed);
                    if (shape == 1) {
                        for (int i = 0; i < n; i++)
                            s[2 * i] = tmp[i];
                        sdt = t;
                    } else {
                        memcpy(s, tmp, n);
                    }
                    int cnt = shape == 1 ? 1 : n;
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

/* An eager or rendezvous send that nobody has matched is cancelled (the receiver is in a
 * barrier, so it answers); the receiver then finds only the marker sent afterwards. */
static void send_cancel(void)
{
    static const int lens[] = { 20000, 300000 };
    char *b = malloc(300000), *r = malloc(300000);
    for (int k = 0; k < 2; k++) {
        for (int sync = 0; sync < 2; sync++) {
            int n = lens[k], tag = 300 + k * 2 + sync;
            MPI_Request marker = MPI_REQUEST_NULL;
            if (rank == 0) {
                MPI_Request req;
                MPI_Status st;
                int flag;
                fill(b, n, 77);
                if (sync)
                    MPI_Issend(b, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &req);
                else
                    MPI_Isend(b, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &req);
                MPI_Cancel(&req);
                MPI_Wait(&req, &st);
                MPI_Test_cancelled(&st, &flag);
                if (!flag)
                    ERR("unmatched %s send of %d bytes was not cancelled",
                        sync ? "synchronous" : "standard", n);
                fill(b, 8, 78);
                /* nonblocking: a forced rendezvous completes only when received */
                MPI_Isend(b, 8, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &marker);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 1) {
                MPI_Status st;
                int got;
                MPI_Recv(r, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_CHAR, &got);
                if (got != 8 || bad(r, 8, 78))
                    ERR("after a cancelled send of %d bytes the receiver got %d bytes", n, got);
            }
            MPI_Wait(&marker, MPI_STATUS_IGNORE);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    /* a matched send cannot be cancelled: the cancel is answered "too late" */
    if (rank == 0) {
        MPI_Request req;
        MPI_Status st;
        int flag;
        MPI_Isend(b, 300000, MPI_CHAR, 1, 310, MPI_COMM_WORLD, &req);
        MPI_Recv(NULL, 0, MPI_CHAR, 1, 311, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        if (flag)
            ERR("a received send was reported cancelled");
    } else if (rank == 1) {
        MPI_Recv(r, 300000, MPI_CHAR, 0, 310, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_CHAR, 0, 311, MPI_COMM_WORLD);
    }
    free(b);
    free(r);
}

/* --- performance variables -------------------------------------------------------------- */

static void pvars(void)
{
    const int per = 5;
    const char *proto_force = getenv("MPIR_CVAR_AMLAPI_PROTOCOL");
    unsigned long long before[4], after[4];
    static const char *const names[4] = { "amlapi_msgs_onepacket", "amlapi_msgs_eager",
        "amlapi_msgs_rndv", "amlapi_msgs_adaptive"
    };
    /* between one packet and the eager limit: adaptive eager unless its credits are 0 */
    int mid = env_long("MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS", 32) ? 3 : 1;
    char *b = calloc(1, 1 << 20);
    unsigned long long hwm0, hwm_v, level;

    /* one message of each size class: its protocol's counter grows */
    for (int i = 0; i < 4; i++)
        before[i] = pvar_read(names[i]);
    long one = env_long("MPIR_CVAR_AMLAPI_PACKET_SIZE", 8192) - 72 - 24;
    long eager = env_long("MPIR_CVAR_AMLAPI_EAGER_LIMIT", 12288);
    if (rank == 0) {
        MPI_Send(b, 10, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Send(b, (int) ((one + eager) / 2), MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Send(b, (int) (eager + 1 < 200000 ? 200000 : eager + 1), MPI_CHAR, 1, 1,
                 MPI_COMM_WORLD);
    } else if (rank == 1) {
        for (int i = 0; i < 3; i++)
            MPI_Recv(b, 1 << 20, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < 4; i++)
        after[i] = pvar_read(names[i]);
    if (rank == 0) {
        if (!proto_force || !strcmp(proto_force, "auto")) {
            for (int i = 0; i < 3; i++) {
                int k = i == 1 ? mid : i;
                if (after[k] < before[k] + 1)
                    ERR("%s did not count a message (%llu -> %llu)", names[k], before[k],
                        after[k]);
            }
        } else {
            int f = !strcmp(proto_force, "eager") ? 1 : !strcmp(proto_force, "adaptive") ? 3 : 2;
            if (after[f] < before[f] + 2)
                ERR("%s forced: %s went %llu -> %llu", proto_force, names[f], before[f],
                    after[f]);
        }
    }

    /* unexpected queue: everyone floods rank 0 while it waits in a barrier; every message
     * is an early arrival when the barrier ends (per-sender order), then it drains */
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
    MPI_Barrier(MPI_COMM_WORLD);
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
    int provided, total;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_pvar_session_create(&session);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "native needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static const struct { const char *name; void (*fn)(void); } sec[] = {
        {"thresholds", thresholds}, {"send cancel", send_cancel}, {"pvars", pvars}
    };
    for (unsigned i = 0; i < sizeof(sec) / sizeof(sec[0]); i++) {
        if (rank == 0 && getenv("NATIVE_VERBOSE"))
            printf("native: %s\n", sec[i].name), fflush(stdout);
        sec[i].fn();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("native: %d ranks, %d errors\n", size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
