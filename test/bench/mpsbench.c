/* MPS channel benchmark (maint/bench-mps): pool buffers against plain MPI_Send/MPI_Recv from
 * user memory, on one link of two processes. Started by mpsrun on test/bench/mps.topo:
 *   mpsbench [-s SIZES] [-b BYTES] [-l ITERS]
 * For each size, one line per measurement, "KIND SIZE VALUE":
 *   bw-pool    MB/s  sender: MPS_Buf_get, write, MPS_Buf_send; receiver: MPS_Buf_get (the data
 *                    landed in a pre-posted pool buffer), read, MPS_Buf_release; 4 buffers
 *   bw-plain   MB/s  sender: write a user buffer, MPI_Send; receiver: MPI_Recv, read
 *   lat-pool   us    ping-pong, half the round trip, both sides with a send and a receive pool
 *   lat-plain  us    ping-pong with MPI_Send/MPI_Recv from user memory
 *              (as many messages or round trips as make each measurement last >= 20 ms)
 *   copied     B     bytes the send pool moved through the MPI library (MPS_Pool_counters) over
 *                    the bw-pool and lat-pool runs: 0 when every send was a hand-off (native)
 * On the native back end a pool send lends the buffer (only ownership moves), so bw-pool and
 * lat-pool are the hand-off rate and time; EMPS moves the bytes through MPI.
 * The application touches one int per message in both kinds (it produces and consumes data in
 * place with pools, in its own memory without), so what differs is the transfer. */
#include <mps.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUF 4

static int rank, peer;
static MPI_Comm com;

static void die(const char *what, int rc)
{
    fprintf(stderr, "mpsbench: %s: %s (%s)\n", what, MPS_Error_string(rc), MPS_Error_detail());
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPS_SUCCESS)                                                                    \
            die(#call, rc_);                                                                       \
    } while (0)

static double bw_pool(MPS_pool_t snd, MPS_pool_t rcv, int size, int iters)
{
    void *b;
    MPI_Barrier(com);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            OK(MPS_Buf_get(snd, &b));
            *(int *)b = i;
            OK(MPS_Buf_send(snd, b, size, 0));
        } else {
            OK(MPS_Buf_get(rcv, &b));
            if (*(int *)b != i)
                die("bw-pool: message out of order", MPS_ERR_ARG);
            OK(MPS_Buf_release(rcv, b));
        }
    }
    /* the receiver has everything when its ack arrives */
    int ack = 0;
    if (rank == 1)
        MPI_Send(&ack, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
    else
        MPI_Recv(&ack, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return (double)size * iters / (MPI_Wtime() - t0) / 1e6;
}

static double bw_plain(char *ubuf, int size, int iters)
{
    MPI_Comm plain;
    MPI_Comm_dup(MPI_COMM_WORLD, &plain);   /* not the link's: its receive pool takes all there */
    MPI_Barrier(plain);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            *(int *)ubuf = i;
            MPI_Send(ubuf, size, MPI_BYTE, peer, 0, plain);
        } else {
            MPI_Recv(ubuf, size, MPI_BYTE, peer, 0, plain, MPI_STATUS_IGNORE);
            if (*(int *)ubuf != i)
                die("bw-plain: message out of order", MPS_ERR_ARG);
        }
    }
    int ack = 0;
    if (rank == 1)
        MPI_Send(&ack, 1, MPI_INT, peer, 1, plain);
    else
        MPI_Recv(&ack, 1, MPI_INT, peer, 1, plain, MPI_STATUS_IGNORE);
    double r = (double)size * iters / (MPI_Wtime() - t0) / 1e6;
    MPI_Comm_free(&plain);
    return r;
}

static double lat_pool(MPS_pool_t snd, MPS_pool_t rcv, int size, int iters)
{
    void *b;
    MPI_Barrier(com);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            OK(MPS_Buf_get(snd, &b));
            *(int *)b = i;
            OK(MPS_Buf_send(snd, b, size, 0));
            OK(MPS_Buf_get(rcv, &b));
            OK(MPS_Buf_release(rcv, b));
        } else {
            OK(MPS_Buf_get(rcv, &b));
            int v = *(int *)b;
            OK(MPS_Buf_release(rcv, b));
            OK(MPS_Buf_get(snd, &b));
            *(int *)b = v;
            OK(MPS_Buf_send(snd, b, size, 0));
        }
    }
    return (MPI_Wtime() - t0) / iters / 2 * 1e6;
}

static double lat_plain(char *ubuf, int size, int iters)
{
    MPI_Comm plain;
    MPI_Comm_dup(MPI_COMM_WORLD, &plain);
    MPI_Barrier(plain);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            *(int *)ubuf = i;
            MPI_Send(ubuf, size, MPI_BYTE, peer, 0, plain);
            MPI_Recv(ubuf, size, MPI_BYTE, peer, 0, plain, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(ubuf, size, MPI_BYTE, peer, 0, plain, MPI_STATUS_IGNORE);
            MPI_Send(ubuf, size, MPI_BYTE, peer, 0, plain);
        }
    }
    double r = (MPI_Wtime() - t0) / iters / 2 * 1e6;
    MPI_Comm_free(&plain);
    return r;
}

/* a latency measurement spans at least 20 ms (rank 0 decides, both repeat with 10x the
 * iterations): a hand-off round trip takes microseconds, and one descheduling of either
 * process in a window shorter than a time slice would be all the measurement shows */
static double lat_long(int pool, MPS_pool_t snd, MPS_pool_t rcv, char *ubuf, int size, int iters)
{
    for (;;) {
        double r = pool ? lat_pool(snd, rcv, size, iters) : lat_plain(ubuf, size, iters);
        int again = r * iters * 2e-6 < 0.02 && iters < 10000000;
        MPI_Bcast(&again, 1, MPI_INT, 0, com);
        if (!again)
            return r;
        iters *= 10;
    }
}

/* the same for throughput: pool hand-offs move no bytes, so bytes/size of them can take less
 * than a time slice */
static double bw_long(int pool, MPS_pool_t snd, MPS_pool_t rcv, char *ubuf, int size, int iters)
{
    for (;;) {
        double r = pool ? bw_pool(snd, rcv, size, iters) : bw_plain(ubuf, size, iters);
        int again = (double)size * iters / (r * 1e6) < 0.02 && iters < 10000000;
        MPI_Bcast(&again, 1, MPI_INT, 0, com);
        if (!again)
            return r;
        iters *= 10;
    }
}

int main(int argc, char **argv)
{
    const char *sizes = "65536,262144,1048576,4194304";
    long bytes = 256L << 20;    /* per bandwidth measurement */
    int lat_iters = 0;          /* 0: by size */
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "-b"))
            bytes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-l"))
            lat_iters = atoi(argv[i + 1]);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int lrank, rrank;
    OK(MPS_Channel_create("link", rank == 0 ? "b" : "a", &com, &lrank, &rrank));
    peer = 1 - rank;
    char *list = strdup(sizes);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int size = atoi(t), bs = size, bc = NBUF;
        MPS_pool_t snd, rcv;
        OK(MPS_Buf_pool_init(com, MPS_SND, &bs, &bc, &snd));
        OK(MPS_Buf_pool_init(com, MPS_RCV, &bs, &bc, &rcv));
        char *ubuf = malloc(size);
        memset(ubuf, 0, size);
        int iters = (int)(bytes / size) < 20 ? 20 : (int)(bytes / size);
        int liters = lat_iters ? lat_iters : (size <= 262144 ? 200 : 50);
        /* warm up both paths (registration caches, page faults) */
        bw_pool(snd, rcv, size, NBUF * 2);
        bw_plain(ubuf, size, NBUF * 2);
        double v[4] = {bw_long(1, snd, rcv, NULL, size, iters), bw_long(0, NULL, NULL, ubuf, size, iters),
                       lat_long(1, snd, rcv, NULL, size, liters), lat_long(0, NULL, NULL, ubuf, size, liters)};
        long long handoffs, copied;
        OK(MPS_Pool_counters(snd, &handoffs, &copied));
        if (rank == 0)
            printf("bw-pool %d %.1f\nbw-plain %d %.1f\nlat-pool %d %.2f\nlat-plain %d %.2f\ncopied %d %lld\n", size,
                   v[0], size, v[1], size, v[2], size, v[3], size, copied);
        fflush(stdout);
        /* every send is received: the send pool finalizes once its last sends are seen done */
        MPI_Barrier(com);
        int rc;
        while ((rc = MPS_Buf_pool_finalize(snd)) == MPS_ERR_BUSY)
            ;
        OK(rc);
        OK(MPS_Buf_pool_finalize(rcv));
        free(ubuf);
    }
    free(list);
    MPI_Finalize();
    return 0;
}
