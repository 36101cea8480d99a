/* Tests of libmpioverlap (src/overlap), run on 2 ranks with the library preloaded (or linked
 * in at compile time); each checks data, not just that nothing crashed. `ov_tests NAME`:
 *   calls     the converted calls and the pass-through sends, data checked
 *   wrappers  every other wrapped call (collectives, nonblocking ones, Wait/Test forms,
 *             probes, Pack/Unpack, communicators, a window) given a buffer a deferred
 *             receive protects
 *   offsets   faults on send and receive buffers at sampled page offsets, sizes small/large;
 *             bytes around the buffer untouched
 *   overlap   Natvig and Elster 2006 §2.5: sends on the same elements, receive then send
 *             of the same area, receive and send sharing a page both ways
 *   syscall   write/read/send/recv/writev/readv/fwrite/pwrite on buffers in flight: no EFAULT
 *   segv      the application's own SIGSEGV handler (installed before and after MPI_Init)
 *             still gets its faults; ours still work
 *   chain     back-to-back exchanges (test/check/overlap.test checks the report's chain
 *             counters)
 *   nochain   the same with computation between them
 *   adapt     a ping-pong reading each message at once (test/check/overlap.test checks that
 *             its call sites turned blocking, by the report)
 *   threads   an application thread after MPI_Init: pass-through from then on, still right
 *   multiple  MPI_Init_thread(MPI_THREAD_MULTIPLE): pass-through, still right
 *   crash     a fault not on our pages, no handler: the process dies of SIGSEGV
 *   types     derived datatypes (a matrix column, interleaved columns, the type freed at
 *             once), statuses of deferred receives (source, tag, count of a short message,
 *             a copied status, elements, cancelled), MPI_Sendrecv_replace (contiguous,
 *             derived, with a status), a wildcard receive with a status
 *   park      a thread the library does not know of (started through libc's own
 *             pthread_create, as MPI's progress threads are) writes next to a deferred
 *             receive's buffer on its page, while the owner computes; the owner then reads
 *             the buffer with no MPI call in between and must see the message
 *   parkrace  such a thread stores next to the receive's buffer without pause while the owner
 *             receives and reads 300 messages: every message right, no store lost, no crash
 * Exit 0 when every check passed; each failure prints what differed. */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

static int rank, size, peer, fails;
static long pg;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fails++;                                                            \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

static unsigned char pat(long i, int seed) { return (unsigned char)(i * 131 + seed * 7 + 1); }
static void fill(unsigned char *p, long n, int seed) { for (long i = 0; i < n; i++) p[i] = pat(i, seed); }
static long bad(const unsigned char *p, long n, int seed)
{
    for (long i = 0; i < n; i++)
        if (p[i] != pat(i, seed))
            return i;
    return -1;
}

/* page-aligned arena so offsets are exact; guard bytes around each buffer */
static unsigned char *arena(long pages)
{
    void *p = mmap(NULL, (size_t)(pages * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); MPI_Abort(MPI_COMM_WORLD, 1); }
    return p;
}

static void t_calls(void)
{
    long n = 5 * pg + 123;
    unsigned char *a = arena(8), *b = arena(8);
    int tag = 0;
    /* the converted three, small and large, both directions */
    for (int big = 0; big < 2; big++) {
        long len = big ? n : 200;
        if (rank == 0) {
            fill(a, len, tag);
            MPI_Send(a, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
            memset(a, 0, (size_t)len);      /* touches the send buffer at once */
        } else {
            MPI_Recv(b, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(bad(b, len, tag) < 0, "MPI_Send/Recv %ld bytes: byte %ld differs", len, bad(b, len, tag));
        }
        tag++;
        fill(a, len, tag + rank);
        memset(b, 0, (size_t)len);
        MPI_Sendrecv(a, (int)len, MPI_BYTE, peer, tag, b, (int)len, MPI_BYTE, peer, tag,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, len, tag + peer) < 0, "MPI_Sendrecv %ld bytes: byte %ld differs", len, bad(b, len, tag + peer));
        tag++;
    }
    /* a status asked for: stays blocking, status right */
    if (rank == 0) {
        fill(a, 1000, 9);
        MPI_Send(a, 1000, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        int cnt;
        MPI_Recv(b, 4000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK(cnt == 1000 && st.MPI_TAG == 9 && st.MPI_SOURCE == peer, "status: count %d tag %d", cnt, st.MPI_TAG);
        CHECK(bad(b, 1000, 9) < 0, "Recv with status: data");
    }
    /* a shorter message than the buffer: bytes beyond it unchanged */
    if (rank == 0) {
        fill(a, 3 * pg, 11);
        MPI_Send(a, (int)(3 * pg), MPI_BYTE, peer, 11, MPI_COMM_WORLD);
    } else {
        memset(b, 0xee, (size_t)(6 * pg));
        MPI_Recv(b, (int)(5 * pg), MPI_BYTE, peer, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, 3 * pg, 11) < 0, "short message: data");
        CHECK(b[3 * pg] == 0xee && b[5 * pg - 1] == 0xee, "short message: bytes past it changed");
    }
    /* doubles, derived type (passed through) */
    double *d = (double *)a, *e = (double *)b;
    for (int i = 0; i < 1000; i++) d[i] = rank * 1000 + i + 0.5;
    MPI_Sendrecv(d, 1000, MPI_DOUBLE, peer, 20, e, 1000, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(e[999] == peer * 1000 + 999.5 && e[0] == peer * 1000 + 0.5, "doubles");
    MPI_Datatype vec;
    MPI_Type_vector(100, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    memset(e, 0, 200 * sizeof(double));
    MPI_Sendrecv(d, 1, vec, peer, 21, e, 1, vec, peer, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(e[198] == peer * 1000 + 198.5 && e[1] == 0, "vector type: %g %g", e[198], e[1]);
    MPI_Type_free(&vec);
    /* the pass-through sends */
    fill(a, 3000, 30 + rank);
    if (rank == 0) {
        MPI_Ssend(a, 3000, MPI_BYTE, peer, 30, MPI_COMM_WORLD);
        int bsz = 3000 + MPI_BSEND_OVERHEAD;
        void *bb = malloc((size_t)bsz);
        MPI_Buffer_attach(bb, bsz);
        MPI_Bsend(a, 3000, MPI_BYTE, peer, 31, MPI_COMM_WORLD);
        MPI_Buffer_detach(&bb, &bsz);
        free(bb);
        MPI_Recv(b, 1, MPI_BYTE, peer, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);     /* ready */
        MPI_Rsend(a, 3000, MPI_BYTE, peer, 33, MPI_COMM_WORLD);
    } else {
        for (int t = 30; t <= 33; t++) {
            if (t == 32) {
                MPI_Request q;
                MPI_Irecv(b, 3000, MPI_BYTE, peer, 33, MPI_COMM_WORLD, &q);
                MPI_Send(a, 1, MPI_BYTE, peer, 32, MPI_COMM_WORLD);
                MPI_Wait(&q, MPI_STATUS_IGNORE);
                t = 33;
            } else {
                MPI_Recv(b, 3000, MPI_BYTE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            CHECK(bad(b, 3000, 30) < 0, "Ssend/Bsend/Rsend tag %d", t);
        }
    }
    fill(a, 2 * pg, 40 + rank);
    MPI_Sendrecv_replace(a, (int)(2 * pg), MPI_BYTE, peer, 40, peer, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(bad(a, 2 * pg, 40 + peer) < 0, "Sendrecv_replace");
    /* a deferred receive, then the application's own nonblocking calls on it */
    fill(a, 2 * pg, 50 + rank);
    MPI_Sendrecv(a, (int)(2 * pg), MPI_BYTE, peer, 50, b, (int)(2 * pg), MPI_BYTE, peer, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request q[2];
    MPI_Isend(b, (int)(2 * pg), MPI_BYTE, peer, 51, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(a, (int)(2 * pg), MPI_BYTE, peer, 51, MPI_COMM_WORLD, &q[1]);
    /* while those are outstanding, blocking calls stay blocking (and correct) */
    unsigned char *c = arena(3);
    fill(c, pg, 52 + rank);
    MPI_Sendrecv(c, (int)pg, MPI_BYTE, peer, 52, c + pg, (int)pg, MPI_BYTE, peer, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(bad(c + pg, pg, 52 + peer) < 0, "Sendrecv beside outstanding Isend/Irecv");
    int flag = 0;
    while (!flag)
        MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE);
    CHECK(bad(a, 2 * pg, 50 + rank) < 0, "Isend of a deferred receive's buffer");
    /* collectives and probes on buffers in flight */
    fill(a, pg, 60 + rank);
    MPI_Sendrecv(a, 100, MPI_BYTE, peer, 60, b, 100, MPI_BYTE, peer, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int s = b[99], r = 0;
    MPI_Allreduce(&s, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(r == pat(99, 60) + pat(99, 61), "Allreduce after Sendrecv");
    MPI_Sendrecv(a, (int)pg, MPI_BYTE, peer, 61, b, (int)pg, MPI_BYTE, peer, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Bcast(b, (int)pg, MPI_BYTE, 0, MPI_COMM_WORLD);     /* root's b is a deferred receive */
    CHECK(bad(b, pg, 61) < 0, "Bcast of a deferred receive's buffer");
    MPI_Gather(b, 10, MPI_BYTE, c, 10, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_Send(a, 10, MPI_BYTE, peer, 70, MPI_COMM_WORLD);
    else {
        MPI_Status st;
        int cnt;
        MPI_Probe(peer, 70, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK(cnt == 10, "Probe count %d", cnt);
        MPI_Recv(b, 10, MPI_BYTE, peer, 70, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, 10, 60) < 0 || bad(b, 10, 61) < 0, "Probe then Recv");
    }
    /* persistent requests: from here on the process stays blocking; still correct */
    MPI_Request pq[2];
    fill(a, 3 * pg, 80 + rank);
    MPI_Send_init(a, (int)(3 * pg), MPI_BYTE, peer, 80, MPI_COMM_WORLD, &pq[0]);
    MPI_Recv_init(b, (int)(3 * pg), MPI_BYTE, peer, 80, MPI_COMM_WORLD, &pq[1]);
    MPI_Startall(2, pq);
    MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
    CHECK(bad(b, 3 * pg, 80 + peer) < 0, "persistent requests");
    MPI_Request_free(&pq[0]);
    MPI_Request_free(&pq[1]);
    MPI_Sendrecv(a, (int)(3 * pg), MPI_BYTE, peer, 81, b, (int)(3 * pg), MPI_BYTE, peer, 81, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(bad(b, 3 * pg, 80 + peer) < 0, "Sendrecv after persistent requests");
}

/* Every other wrapped call, each given a buffer a deferred receive still protects (run with
 * MPIOVERLAP_ATONCE=0 and MPIOVERLAP_RECV_MIN=0 it is inaccessible when the call comes): the
 * call must see the received data, and its own results must be right. */
static unsigned char *wa, *wb, *wc;
static long wl;
static int wseed;
static void arm(void)       /* wb <- the peer's pattern wseed + peer, deferred */
{
    wseed++;
    fill(wa, wl, wseed + rank);
    MPI_Sendrecv(wa, (int)wl, MPI_BYTE, peer, wseed, wb, (int)wl, MPI_BYTE, peer, wseed,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
/* c holds, per byte, pat(seed + 0) ^ pat(seed + 1) */
static long badx(const unsigned char *c, long n)
{
    for (long i = 0; i < n; i++)
        if (c[i] != (pat(i, wseed) ^ pat(i, wseed + 1)))
            return i;
    return -1;
}
static void t_wrappers(void)
{
    wl = 2 * pg + 100;
    wa = arena(4); wb = arena(4); wc = arena(8);
    int L = (int)wl, cnt2[2] = { L, L }, dsp2[2] = { 0, L };
    MPI_Request q;
    arm(); MPI_Reduce(wb, wc, L, MPI_BYTE, MPI_BXOR, 0, MPI_COMM_WORLD);
    CHECK(rank || badx(wc, wl) < 0, "Reduce");
    arm(); MPI_Allreduce(wb, wc, L, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD);
    CHECK(badx(wc, wl) < 0, "Allreduce");
    arm(); MPI_Scan(wb, wc, L, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD);
    CHECK(rank == 0 ? bad(wc, wl, wseed + 1) < 0 : badx(wc, wl) < 0, "Scan");
    arm(); MPI_Exscan(wb, wc, L, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD);
    CHECK(rank == 0 || bad(wc, wl, wseed + 1) < 0, "Exscan");
    arm(); memcpy(wc, wa, (size_t)wl); MPI_Reduce_local(wb, wc, L, MPI_BYTE, MPI_BXOR);
    CHECK(badx(wc, wl) < 0, "Reduce_local");
    arm(); MPI_Reduce_scatter_block(wb, wc, L / 2, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD);
    { int ok = 1; for (long i = 0; i < wl / 2; i++) { long j = rank * (wl / 2) + i; if (wc[i] != (pat(j, wseed) ^ pat(j, wseed + 1))) ok = 0; }
      CHECK(ok, "Reduce_scatter_block"); }
    arm(); { int rc2[2] = { L / 2, L / 2 }; MPI_Reduce_scatter(wb, wc, rc2, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD); }
    { int ok = 1; for (long i = 0; i < wl / 2; i++) { long j = rank * (wl / 2) + i; if (wc[i] != (pat(j, wseed) ^ pat(j, wseed + 1))) ok = 0; }
      CHECK(ok, "Reduce_scatter"); }
    arm(); MPI_Gather(wb, L, MPI_BYTE, wc, L, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(rank || (bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0), "Gather");
    arm(); MPI_Gatherv(wb, L, MPI_BYTE, wc, cnt2, dsp2, MPI_BYTE, 1, MPI_COMM_WORLD);
    CHECK(!rank || (bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0), "Gatherv");
    arm(); MPI_Allgather(wb, L, MPI_BYTE, wc, L, MPI_BYTE, MPI_COMM_WORLD);
    CHECK(bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0, "Allgather");
    arm(); MPI_Allgatherv(wb, L, MPI_BYTE, wc, cnt2, dsp2, MPI_BYTE, MPI_COMM_WORLD);
    CHECK(bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0, "Allgatherv");
    /* root's send buffer is the deferred receive: both halves its peer's data */
    arm(); memcpy(wc, wb, 1); MPI_Scatter(wb, L / 2, MPI_BYTE, wc + 4 * pg, L / 2, MPI_BYTE, 0, MPI_COMM_WORLD);
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[4 * pg + i] != pat(o + i, wseed + 1)) ok = 0;
      CHECK(ok, "Scatter"); }
    arm(); { int c2[2] = { L / 2, L / 2 }, d2[2] = { 0, L / 2 };
             MPI_Scatterv(wb, c2, d2, MPI_BYTE, wc + 4 * pg, L / 2, MPI_BYTE, 0, MPI_COMM_WORLD); }
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[4 * pg + i] != pat(o + i, wseed + 1)) ok = 0;
      CHECK(ok, "Scatterv"); }
    /* alltoall of halves: I get the peer's half [rank], which is the peer's b = my pattern */
    arm(); MPI_Alltoall(wb, L / 2, MPI_BYTE, wc, L / 2, MPI_BYTE, MPI_COMM_WORLD);
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[peer * (wl / 2) + i] != pat(o + i, wseed + rank)) ok = 0;
      CHECK(ok, "Alltoall"); }
    arm(); { int c2[2] = { L / 2, L / 2 }, d2[2] = { 0, L / 2 };
             MPI_Alltoallv(wb, c2, d2, MPI_BYTE, wc, c2, d2, MPI_BYTE, MPI_COMM_WORLD); }
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[peer * (wl / 2) + i] != pat(o + i, wseed + rank)) ok = 0;
      CHECK(ok, "Alltoallv"); }
    arm(); { int c2[2] = { L / 2, L / 2 }, d2[2] = { 0, L / 2 }; MPI_Datatype t2[2] = { MPI_BYTE, MPI_BYTE };
             MPI_Alltoallw(wb, c2, d2, t2, wc, c2, d2, t2, MPI_COMM_WORLD); }
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[peer * (wl / 2) + i] != pat(o + i, wseed + rank)) ok = 0;
      CHECK(ok, "Alltoallw"); }
    /* nonblocking collectives, then a blocking call while they are outstanding */
    arm(); MPI_Ibcast(wb, L, MPI_BYTE, 1, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wb, wl, wseed) < 0, "Ibcast");
    arm(); MPI_Iallreduce(wb, wc, L, MPI_BYTE, MPI_BXOR, MPI_COMM_WORLD, &q);
    { int flag = 0; while (!flag) MPI_Test(&q, &flag, MPI_STATUS_IGNORE); }
    CHECK(badx(wc, wl) < 0, "Iallreduce");
    arm(); MPI_Ireduce(wb, wc, L, MPI_BYTE, MPI_BXOR, 0, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(rank || badx(wc, wl) < 0, "Ireduce");
    arm(); MPI_Iallgather(wb, L, MPI_BYTE, wc, L, MPI_BYTE, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0, "Iallgather");
    arm(); MPI_Igather(wb, L, MPI_BYTE, wc, L, MPI_BYTE, 0, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(rank || (bad(wc, wl, wseed + 1) < 0 && bad(wc + wl, wl, wseed) < 0), "Igather");
    arm(); MPI_Iscatter(wb, L / 2, MPI_BYTE, wc + 4 * pg, L / 2, MPI_BYTE, 0, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[4 * pg + i] != pat(o + i, wseed + 1)) ok = 0;
      CHECK(ok, "Iscatter"); }
    arm(); MPI_Ialltoall(wb, L / 2, MPI_BYTE, wc, L / 2, MPI_BYTE, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    { long o = rank * (wl / 2); int ok = 1; for (long i = 0; i < wl / 2; i++) if (wc[peer * (wl / 2) + i] != pat(o + i, wseed + rank)) ok = 0;
      CHECK(ok, "Ialltoall"); }
    arm(); MPI_Ibarrier(MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wb, wl, wseed + peer) < 0, "Ibarrier");
    /* the application's own point-to-point, completed by each Wait/Test form */
    for (int form = 0; form < 4; form++) {
        arm();
        MPI_Request r2[2];
        static unsigned char bb[3 * 4096 + MPI_BSEND_OVERHEAD + 256];
        MPI_Irecv(wc, L, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &r2[1]);
        if (form == 0) MPI_Issend(wb, L, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &r2[0]);
        else if (form == 1) { MPI_Buffer_attach(bb, sizeof bb); MPI_Ibsend(wb, L, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &r2[0]); }
        else MPI_Isend(wb, L, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &r2[0]);
        int idx, outc, ids[2], flag = 0, left = 2;
        while (left > 0) {
            if (form == 0) { MPI_Waitany(2, r2, &idx, MPI_STATUS_IGNORE); left--; }
            else if (form == 1) { MPI_Waitsome(2, r2, &outc, ids, MPI_STATUSES_IGNORE); left -= outc; }
            else if (form == 2) { MPI_Testany(2, r2, &idx, &flag, MPI_STATUS_IGNORE); if (flag && idx != MPI_UNDEFINED) left--; }
            else { MPI_Testsome(2, r2, &outc, ids, MPI_STATUSES_IGNORE); if (outc > 0) left -= outc; }
        }
        if (form == 1) { void *x; int xs; MPI_Buffer_detach(&x, &xs); }
        CHECK(bad(wc, wl, wseed + rank) < 0, "Issend/Ibsend/Isend + Waitany/Waitsome/Testany/Testsome form %d", form);
    }
    /* Irsend: the receive is posted before the ready message */
    arm();
    MPI_Irecv(wc, L, MPI_BYTE, peer, 101, MPI_COMM_WORLD, &q);
    MPI_Barrier(MPI_COMM_WORLD);
    { MPI_Request r3; MPI_Irsend(wb, L, MPI_BYTE, peer, 101, MPI_COMM_WORLD, &r3); MPI_Wait(&r3, MPI_STATUS_IGNORE); }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wc, wl, wseed + rank) < 0, "Irsend");
    /* matched probes */
    arm();
    MPI_Isend(wa, L, MPI_BYTE, peer, 102, MPI_COMM_WORLD, &q);
    { MPI_Message m; MPI_Status st; MPI_Mprobe(peer, 102, MPI_COMM_WORLD, &m, &st); MPI_Mrecv(wb, L, MPI_BYTE, &m, MPI_STATUS_IGNORE); }
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wb, wl, wseed + peer) < 0, "Mprobe/Mrecv into a deferred receive's buffer");
    arm();
    { MPI_Request s3; MPI_Message m; int flag = 0;
      MPI_Isend(wa, L, MPI_BYTE, peer, 103, MPI_COMM_WORLD, &s3);
      while (!flag) MPI_Improbe(peer, 103, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
      MPI_Imrecv(wb, L, MPI_BYTE, &m, &q); MPI_Wait(&q, MPI_STATUS_IGNORE); MPI_Wait(&s3, MPI_STATUS_IGNORE); }
    CHECK(bad(wb, wl, wseed + peer) < 0, "Improbe/Imrecv");
    arm(); { int flag; MPI_Iprobe(MPI_ANY_SOURCE, 9999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); }
    /* Pack / Unpack of a deferred receive's buffer */
    arm(); { int pos = 0; MPI_Pack(wb, L, MPI_BYTE, wc, 4 * (int)pg, &pos, MPI_COMM_WORLD);
             CHECK(bad(wc, wl, wseed + peer) < 0, "Pack"); }
    arm(); { int pos = 0; fill(wc, wl, 7); MPI_Unpack(wc, 4 * (int)pg, &pos, wb, L, MPI_BYTE, MPI_COMM_WORLD);
             CHECK(bad(wb, wl, 7) < 0, "Unpack into a deferred receive's buffer"); }
    /* communicators, cancel */
    arm(); { MPI_Comm c1, c2, c3; MPI_Group g; MPI_Comm_dup(MPI_COMM_WORLD, &c1); MPI_Comm_split(c1, 0, rank, &c2);
             MPI_Comm_group(c2, &g); MPI_Comm_create(c2, g, &c3); MPI_Group_free(&g);
             MPI_Sendrecv(wa, L, MPI_BYTE, peer, 0, wc, L, MPI_BYTE, peer, 0, c3, MPI_STATUS_IGNORE);
             CHECK(bad(wc, wl, wseed + peer) < 0, "Sendrecv on a created communicator");
             MPI_Comm_free(&c3); MPI_Comm_free(&c2); MPI_Comm_free(&c1); }
    arm(); MPI_Irecv(wc, L, MPI_BYTE, peer, 104, MPI_COMM_WORLD, &q); MPI_Cancel(&q); MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(bad(wb, wl, wseed + peer) < 0, "Cancel");
    /* a window on a deferred receive's buffer: sticky from here on */
    arm(); { MPI_Win w; MPI_Win_create(wb, wl, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w); MPI_Win_fence(0, w);
             MPI_Put(wa, 10, MPI_BYTE, peer, 0, 10, MPI_BYTE, w); MPI_Win_fence(0, w);
             CHECK(bad(wb, 10, wseed + peer) < 0 && wb[10] == pat(10, wseed + peer), "Win_create + Put on it");
             MPI_Win_free(&w); }
    arm(); CHECK(bad(wb, wl, wseed + peer) < 0, "Sendrecv after a window");
}

/* faults at sampled page offsets, send and receive, small and large; the receiver checks the
 * bytes just before and after the buffer kept their values */
static void t_offsets(void)
{
    static const long offs[] = { 0, 1, 8, 1000, 2048, 4000, 4095 };
    long sizes[] = { 64, pg - 8, 3 * pg + 17, 9 * pg };
    unsigned char *a = arena(12), *b = arena(12);
    int tag = 0;
    for (unsigned oi = 0; oi < sizeof offs / sizeof offs[0]; oi++)
        for (unsigned si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            long off = offs[oi] % pg, len = sizes[si];
            /* touch points: first, middle, last byte of the buffer */
            long touch[3] = { 0, len / 2, len - 1 };
            for (int ti = 0; ti < 3; ti++, tag++) {
                if (rank == 0) {
                    fill(a + off, len, tag);
                    MPI_Send(a + off, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
                    a[off + touch[ti]] ^= 0xff;     /* fault: waits for the send */
                    a[off + touch[ti]] ^= 0xff;
                    a[off + len] = 0x5a;            /* beside the buffer */
                } else {
                    memset(b, 0x77, (size_t)(12 * pg));
                    MPI_Recv(b + off, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    unsigned char v = b[off + touch[ti]];       /* fault: waits, copies in */
                    CHECK(v == pat(touch[ti], tag), "offset %ld len %ld touch %ld: %u", off, len, touch[ti], v);
                    CHECK(bad(b + off, len, tag) < 0, "offset %ld len %ld: byte %ld differs", off, len, bad(b + off, len, tag));
                    CHECK((off == 0 || b[off - 1] == 0x77) && b[off + len] == 0x77,
                          "offset %ld len %ld: bytes beside the buffer changed", off, len);
                }
            }
        }
    /* a write right beside a receive buffer on its page, before touching the buffer */
    if (rank == 1) {
        MPI_Recv(b + 100, 1000, MPI_BYTE, peer, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        b[50] = 1;          /* same page, not the buffer: waits all the same, then goes on */
        CHECK(b[50] == 1 && bad(b + 100, 1000, 999) < 0, "write beside a receive buffer");
    } else {
        fill(a, 1000, 999);
        MPI_Send(a, 1000, MPI_BYTE, peer, 999, MPI_COMM_WORLD);
    }
}

static void t_overlap(void)
{
    unsigned char *a = arena(12), *b = arena(12);
    long len = 3 * pg;
    /* sends of the same elements run together; a write after them waits for both */
    if (rank == 0) {
        fill(a, len, 1);
        MPI_Send(a, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        MPI_Send(a + 100, (int)len - 200, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        memset(a, 0, (size_t)len);
    } else {
        MPI_Recv(b, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(b + 4 * pg, (int)len - 200, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, len, 1) < 0, "first of two overlapping sends");
        for (long i = 0; i < len - 200; i++)
            if (b[4 * pg + i] != pat(i + 100, 1)) {
                CHECK(0, "second of two overlapping sends, byte %ld", i);
                break;
            }
    }
    /* a receive, then a send of the same area: sends what arrived (the receive completes
     * first); a receive into an area a send is reading waits for the send */
    if (rank == 0) {
        fill(a, len, 3);
        MPI_Send(a, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        MPI_Recv(b, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, len, 3) < 0, "relayed data");
        fill(a, len, 5);
        MPI_Send(a, (int)len, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        MPI_Recv(a, (int)len, MPI_BYTE, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);   /* same area */
        CHECK(bad(a, len, 6) < 0, "receive into the area of a send in flight");
    } else {
        MPI_Recv(b, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(b, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
        MPI_Recv(b, (int)len, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, len, 5) < 0, "data before the same-area receive");
        fill(b, len, 6);
        MPI_Send(b, (int)len, MPI_BYTE, peer, 6, MPI_COMM_WORLD);
    }
    /* shared pages: a receive into the first half of page 1, then sends from the second
     * half (small: copied out around the inaccessible page) and from a large area starting
     * there; then a large send and a receive sharing a page (the receive waits for it) */
    long h = pg / 2;
    if (rank == 0) {
        fill(a, 2 * pg, 7);
        MPI_Recv(a + pg, (int)h, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(a + pg + h, (int)h, MPI_BYTE, peer, 8, MPI_COMM_WORLD);
        fill(a + pg + h, 3 * pg, 9);
        MPI_Send(a + pg + h, (int)(3 * pg), MPI_BYTE, peer, 9, MPI_COMM_WORLD);
        CHECK(bad(a + pg, h, 7) < 0, "receive sharing its page with two sends");
        fill(a + 6 * pg, 2 * pg + h, 10);
        MPI_Send(a + 6 * pg, (int)(2 * pg + h), MPI_BYTE, peer, 10, MPI_COMM_WORLD);
        MPI_Recv(a + 8 * pg + h, 100, MPI_BYTE, peer, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(a + 8 * pg + h, 100, 11) < 0, "receive on the last page of a send");
        CHECK(bad(a + 6 * pg, 2 * pg + h, 10) < 0, "send area after a receive beside it");
    } else {
        fill(b, h, 7);
        MPI_Send(b, (int)h, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
        MPI_Recv(b, (int)h, MPI_BYTE, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long i = 0; i < h; i++)
            if (b[i] != pat(pg + h + i, 7)) {
                CHECK(0, "send copied out around a receive: byte %ld", i);
                break;
            }
        MPI_Recv(b, (int)(3 * pg), MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, 3 * pg, 9) < 0, "large send beside a receive");
        MPI_Recv(b, (int)(2 * pg + h), MPI_BYTE, peer, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(bad(b, 2 * pg + h, 10) < 0, "large send sharing a page with a later receive");
        fill(b, 100, 11);
        MPI_Send(b, 100, MPI_BYTE, peer, 11, MPI_COMM_WORLD);
    }
}

static void t_syscall(void)
{
    unsigned char *a = arena(8), *b = arena(8);
    long len = 3 * pg + 5;
    char path[] = "/tmp/ov_testsXXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    /* each round: a deferred receive into b (inaccessible), then a system call reading b;
     * a large deferred send from a (read-only), then a system call writing into a */
    for (int round = 0; round < 8; round++) {
        fill(a, len, round + rank);
        MPI_Sendrecv(a, (int)len, MPI_BYTE, peer, round, b, (int)len, MPI_BYTE, peer, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ssize_t w = -1;
        unsigned char back[8 * 4096 + 64];
        errno = 0;
        switch (round) {
        case 0: w = pwrite(fd, b, (size_t)len, 0); break;
        case 1: w = write(fd, b, (size_t)len); break;
        case 2: w = send(sv[0], b, 1000, 0); break;
        case 3: { struct iovec v[2] = { { b, 100 }, { b + 2 * pg, 100 } }; w = writev(fd, v, 2); break; }
        case 4: { FILE *f = fdopen(dup(fd), "w"); w = (ssize_t)fwrite(b, 1, (size_t)len, f); fclose(f); break; }
        case 5: w = sendto(sv[0], b, 1000, 0, NULL, 0); break;
        default: w = write(fd, b, 10); break;
        }
        CHECK(w > 0, "round %d: system call reading a receive buffer: %zd (%s)", round, w, strerror(errno));
        if (round == 0) {
            ssize_t r = pread(fd, back, (size_t)len, 0);
            CHECK(r == len && bad(back, len, round + peer) < 0, "pwrite wrote the received data");
        }
        if (round == 2 || round == 5) {
            ssize_t r = recv(sv[1], back, 1000, MSG_WAITALL);
            CHECK(r == 1000 && bad(back, 1000, round + peer) < 0, "socket got the received data");
        }
        /* kernel writes into a send buffer in flight (a is read-only): waits for the send */
        lseek(fd, 0, SEEK_SET);
        fill(a, len, 100);
        pwrite(fd, a, (size_t)len, 0);
        fill(a, len, round + rank);
        MPI_Sendrecv(a, (int)len, MPI_BYTE, peer, 50 + round, b, (int)len, MPI_BYTE, peer, 50 + round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errno = 0;
        ssize_t r;
        if (round % 3 == 0) r = pread(fd, a, (size_t)len, 0);
        else if (round % 3 == 1) { lseek(fd, 0, SEEK_SET); r = read(fd, a, (size_t)len); }
        else { struct iovec v[1] = { { a, (size_t)len } }; lseek(fd, 0, SEEK_SET); r = readv(fd, v, 1); }
        CHECK(r == len && bad(a, len, 100) < 0, "round %d: system call writing a send buffer: %zd (%s)", round, r, strerror(errno));
        CHECK(bad(b, len, round + peer) < 0, "round %d: data sent from a buffer then overwritten by read", round);
        if (round == 7) {
            MPI_Sendrecv(a, 10, MPI_BYTE, peer, 90, b, (int)len, MPI_BYTE, peer, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            FILE *f = fopen("/dev/zero", "r");
            size_t n = fread(b, 1, (size_t)len, f);
            fclose(f);
            CHECK(n == (size_t)len && b[0] == 0 && b[len - 1] == 0, "fread into a receive buffer");
        }
    }
    close(fd);
    close(sv[0]);
    close(sv[1]);
}

static sigjmp_buf jb;
static volatile int app_faults;
static void app_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig; (void)si; (void)uc;
    app_faults++;
    siglongjmp(jb, 1);
}

static void t_segv_after(void)
{
    /* installed again after MPI_Init (through our interposed sigaction) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = app_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    unsigned char *a = arena(8), *b = arena(8);
    unsigned char *own = arena(1);
    mprotect(own, (size_t)pg, PROT_NONE);
    for (int i = 0; i < 3; i++) {
        fill(a, 2 * pg, i + rank);
        MPI_Sendrecv(a, (int)(2 * pg), MPI_BYTE, peer, i, b, (int)(2 * pg), MPI_BYTE, peer, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (sigsetjmp(jb, 1) == 0) {
            volatile unsigned char x = own[i];      /* the application's own fault */
            (void)x;
            CHECK(0, "no fault on the application's own protected page");
        }
        CHECK(b[5] == pat(5, i + peer), "our fault after the application's");
        CHECK(bad(b, 2 * pg, i + peer) < 0, "data");
    }
    CHECK(app_faults == 3, "application's handler ran %d times, not 3", app_faults);
    struct sigaction old;
    sigaction(SIGSEGV, NULL, &old);
    CHECK((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == app_handler,
          "sigaction reports the application's handler");
}

/* four exchanges back to back then computation: a chain (or, with `spread`, computation
 * between them too: no chain) */
static volatile double sink;
static void compute(long n) { double s = 0; for (long i = 0; i < n; i++) s += i * 0.5; sink = s; }
static void t_chain(int spread)
{
    long len = 2 * pg;
    unsigned char *a = arena(16), *b = arena(16);
    for (int it = 0; it < 12; it++) {
        for (int k = 0; k < 4; k++)
            fill(a + k * 3 * pg, len, it * 4 + k + rank);
        for (int k = 0; k < 4; k++) {
            MPI_Sendrecv(a + k * 3 * pg, (int)len, MPI_BYTE, peer, k, b + k * 3 * pg, (int)len,
                         MPI_BYTE, peer, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (spread)
                compute(20000);
        }
        compute(20000);
        for (int k = 0; k < 4; k++)
            CHECK(bad(b + k * 3 * pg, len, it * 4 + k + peer) < 0, "iteration %d exchange %d", it, k);
    }
}

/* a ping-pong that reads each message at once: its call sites turn blocking (ov_adapt.c) */
static void t_adapt(void)
{
    long len = 3 * pg;
    unsigned char *a = arena(4);
    for (int it = 0; it < 200; it++) {
        if (rank == 0) {
            fill(a, len, it);
            MPI_Send(a, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD);
            MPI_Recv(a, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(bad(a, len, it + 1) < 0, "ping-pong %d", it);
        } else {
            MPI_Recv(a, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(bad(a, len, it) < 0, "ping-pong %d", it);
            fill(a, len, it + 1);
            MPI_Send(a, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD);
        }
    }
}

/* an application thread: the library says it turns into a pass-through, results stay right */
static void *idle(void *x) { return x; }
static void t_threads(void)
{
    pthread_t th;
    pthread_create(&th, NULL, idle, NULL);
    pthread_join(th, NULL);
    t_overlap();
}

/* a fault on no page of ours, with no handler of the application: the default action */
static void t_crash(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        volatile uintptr_t addr = 16;
        volatile unsigned char *p = (volatile unsigned char *)addr;
        *p = 1;
        fprintf(stderr, "rank 1 survived a store to address 16\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- derived datatypes, statuses, Sendrecv_replace ----------------------------------- */
#define ROWS 48
#define COLS 1024       /* a row of doubles is 2 pages: a column spans 96 pages */
static double cell(int i, int j, int seed) { return seed * 1e6 + i * 1000.0 + j; }

static void mat_fill(double *m, int seed)
{
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            m[(long)i * COLS + j] = cell(i, j, seed);
}

/* column c of m holds column sc of a seed-s matrix, every other cell its own seed's */
static long mat_bad(const double *m, int seed, const int *cols, const int *srccols, int ncols, int sseed)
{
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            double want = cell(i, j, seed);
            for (int k = 0; k < ncols; k++)
                if (j == cols[k])
                    want = cell(i, srccols[k], sseed);
            if (m[(long)i * COLS + j] != want)
                return (long)i * COLS + j;
        }
    return -1;
}

static void t_types(void)
{
    long mbytes = (long)ROWS * COLS * (long)sizeof(double);
    double *a = (double *)arena(mbytes / pg + 1), *b = (double *)arena(mbytes / pg + 1);
    MPI_Datatype col;
    MPI_Status st;
    int tag = 500;

    /* 1. a column sent and received with a vector type, freed right after the calls; the
     *    sender then writes its matrix (read-only span: waits), the receiver reads its own
     *    (inaccessible: waits, then the unpack wrote only the column) */
    for (int rep = 0; rep < 3; rep++, tag++) {
        MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &col);
        MPI_Type_commit(&col);
        if (rank == 0) {
            mat_fill(a, 1);
            MPI_Send(&a[5], 1, col, peer, tag, MPI_COMM_WORLD);
            MPI_Type_free(&col);
            mat_fill(a, 2);     /* touches the send's pages at once */
            MPI_Recv(&b[0], 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            mat_fill(b, 3);
            MPI_Recv(&b[7], 1, col, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Type_free(&col);
            int cols[] = { 7 }, src[] = { 5 };
            long k = mat_bad(b, 3, cols, src, 1, 1);
            CHECK(k < 0, "column receive (rep %d): cell %ld wrong (%g)", rep, k, k < 0 ? 0 : b[k]);
            MPI_Send(&b[0], 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD);
        }
    }

    /* 2. two receives into interleaved columns back to back (their spans overlap: the
     *    second orders after the first), with statuses; each unpack leaves the other's
     *    column alone */
    MPI_Type_vector(ROWS, 1, COLS, MPI_DOUBLE, &col);
    MPI_Type_commit(&col);
    tag++;
    if (rank == 0) {
        mat_fill(a, 4);
        MPI_Send(&a[10], 1, col, peer, tag, MPI_COMM_WORLD);
        MPI_Send(&a[20], 1, col, peer, tag + 1, MPI_COMM_WORLD);
    } else {
        MPI_Status s1, s2;
        mat_fill(b, 5);
        MPI_Recv(&b[8], 1, col, peer, tag, MPI_COMM_WORLD, &s1);
        MPI_Recv(&b[9], 1, col, peer, tag + 1, MPI_COMM_WORLD, &s2);
        CHECK(s1.MPI_SOURCE == peer && s1.MPI_TAG == tag && s2.MPI_SOURCE == peer && s2.MPI_TAG == tag + 1,
              "interleaved statuses: source/tag %d/%d %d/%d", s1.MPI_SOURCE, s1.MPI_TAG, s2.MPI_SOURCE, s2.MPI_TAG);
        int c1 = -1, e2 = -1;
        MPI_Get_count(&s1, col, &c1);
        MPI_Get_elements(&s2, MPI_DOUBLE, &e2);
        CHECK(c1 == 1 && e2 == ROWS, "interleaved statuses: count %d (want 1), elements %d (want %d)", c1, e2, ROWS);
        int cols[] = { 8, 9 }, src[] = { 10, 20 };
        long k = mat_bad(b, 5, cols, src, 2, 4);
        CHECK(k < 0, "interleaved columns: cell %ld wrong (%g)", k, k < 0 ? 0 : b[k]);
    }
    tag += 2;

    /* 3. MPI_Recv with a status, a message shorter than the buffer: source, tag right at
     *    once, count right when read (through a copy of the status too) */
    unsigned char *u = (unsigned char *)a, *v = (unsigned char *)b;
    long big = 3 * pg, got = 2 * pg + 77;
    if (rank == 0) {
        fill(u, got, 9);
        MPI_Send(u, (int)got, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
    } else {
        memset(v, 0xee, (size_t)big);
        MPI_Recv(v, (int)big, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
        int src = st.MPI_SOURCE, tg = st.MPI_TAG;
        MPI_Status copy = st;
        int c = -1, c2 = -1, canc = -1;
        MPI_Count ex = -1;
        MPI_Get_count(&copy, MPI_BYTE, &c);
        MPI_Get_count(&st, MPI_BYTE, &c2);
        MPI_Get_elements_x(&st, MPI_BYTE, &ex);
        MPI_Test_cancelled(&st, &canc);
        CHECK(src == peer && tg == tag, "status: source %d tag %d (want %d %d)", src, tg, peer, tag);
        CHECK(c == got && c2 == got && ex == got && canc == 0,
              "status: count %d / %d / elements %lld, cancelled %d (want %ld, 0)", c, c2, (long long)ex, canc, got);
        long k = bad(v, got, 9);
        CHECK(k < 0, "status receive: byte %ld wrong", k);
        int rest = 1;
        for (long i = got; i < big; i++)
            rest &= v[i] == 0xee;
        CHECK(rest, "status receive: bytes past the message changed");
    }
    tag++;

    /* 4. a wildcard tag with a status stays blocking: still right */
    if (rank == 0) {
        fill(u, 2 * pg, 10);
        MPI_Send(u, (int)(2 * pg), MPI_BYTE, peer, tag + 3, MPI_COMM_WORLD);
    } else {
        MPI_Recv(v, (int)(3 * pg), MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        int c = -1;
        MPI_Get_count(&st, MPI_BYTE, &c);
        CHECK(st.MPI_TAG == tag + 3 && st.MPI_SOURCE == peer && c == 2 * pg && bad(v, 2 * pg, 10) < 0,
              "wildcard receive: tag %d source %d count %d", st.MPI_TAG, st.MPI_SOURCE, c);
    }
    tag += 4;

    /* 5. Sendrecv with a derived type and a status, both ways at once */
    mat_fill(a, 20 + rank);
    mat_fill(b, 30 + rank);
    MPI_Sendrecv(&a[3], 1, col, peer, tag, &b[4], 1, col, peer, tag, MPI_COMM_WORLD, &st);
    {
        int c = -1;
        MPI_Get_count(&st, col, &c);
        int cols[] = { 4 }, src[] = { 3 };
        long k = mat_bad(b, 30 + rank, cols, src, 1, 20 + peer);
        CHECK(k < 0 && c == 1 && st.MPI_SOURCE == peer && st.MPI_TAG == tag,
              "Sendrecv derived: cell %ld, count %d, source %d, tag %d", k, c, st.MPI_SOURCE, st.MPI_TAG);
    }
    tag++;

    /* 6. Sendrecv_replace: contiguous (3 pages and a bit), with a status; then a column */
    long n = 3 * pg + 100;
    fill(u, n, 40 + rank);
    MPI_Sendrecv_replace(u, (int)n, MPI_BYTE, peer, tag, peer, tag, MPI_COMM_WORLD, &st);
    {
        int c = -1;
        long k = bad(u, n, 40 + peer);     /* touches it at once */
        MPI_Get_count(&st, MPI_BYTE, &c);
        CHECK(k < 0 && c == n && st.MPI_SOURCE == peer && st.MPI_TAG == tag,
              "Sendrecv_replace: byte %ld wrong, count %d, source %d, tag %d", k, c, st.MPI_SOURCE, st.MPI_TAG);
    }
    tag++;
    mat_fill(a, 50 + rank);
    MPI_Sendrecv_replace(&a[6], 1, col, peer, tag, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    {
        int cols[] = { 6 }, src[] = { 6 };
        long k = mat_bad(a, 50 + rank, cols, src, 1, 50 + peer);
        CHECK(k < 0, "Sendrecv_replace derived: cell %ld wrong (%g)", k, k < 0 ? 0 : a[k]);
    }
    MPI_Type_free(&col);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* libc's pthread_create: the library's interposed one would (rightly) turn the thread into a
 * pass-through, and MPI's threads are not started through it either */
typedef int (*real_create_t)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static real_create_t libc_create(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    real_create_t f = libc ? (real_create_t) dlsym(libc, "pthread_create") : NULL;
    CHECK(f, "no libc pthread_create: %s", dlerror());
    return f;
}

/* ---- a foreign thread opens a receive's page while the owner computes ------------------ */
static unsigned char *park_page;
static volatile int park_go, park_done;

static void *park_thread(void *x)
{
    (void)x;
    while (!park_go)
        ;
    park_page[0] = 0x5a;    /* outside the receive, on its first page: a fault "inside MPI" */
    /* a release store: with a plain volatile one the compiler may (and gcc 12 does) move
     * the non-volatile store above after it, and the owner would look too early */
    __atomic_store_n(&park_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void t_park(void)
{
    long n = 3 * pg;
    unsigned char *a = arena(5);
    int tag = 900;
    if (rank == 0) {
        fill(a, n, 61);
        MPI_Send(a, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
    } else {
        real_create_t real_create = libc_create();
        if (!real_create)
            return;
        park_page = a;
        pthread_t th;
        real_create(&th, NULL, park_thread, NULL);
        memset(a + 64, 0xee, (size_t)n);
        MPI_Recv(a + 64, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        park_go = 1;
        while (!__atomic_load_n(&park_done, __ATOMIC_ACQUIRE))
            ;                   /* application code: no library call until the check */
        long k = bad(a + 64, n, 61);
        CHECK(k < 0, "after a foreign thread opened the receive's page: byte %ld is %#x (old bytes)", k,
              k < 0 ? 0 : a[64 + k]);
        CHECK(a[0] == 0x5a, "the foreign thread's store is lost");
        pthread_join(th, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- the same thread stores without pause while the owner completes the receives ----------
 * Some of its faults land while the owner is taking a finished request out of the table and
 * has not yet opened the page: the handler must retry them, not pass them on as the
 * application's (which kills the process). */
static volatile int race_stop;
static volatile unsigned long race_stores;

static void *race_thread(void *x)
{
    unsigned char *p = x;
    unsigned long k = 0;
    while (!__atomic_load_n(&race_stop, __ATOMIC_ACQUIRE))
        __atomic_store_n(p, (unsigned char)++k, __ATOMIC_RELAXED);
    race_stores = k;
    return NULL;
}

static void t_parkrace(void)
{
    long n = 3 * pg;
    unsigned char *a = arena(5);
    int iters = 300;
    if (rank == 0) {
        for (int it = 0; it < iters; it++) {
            fill(a, n, 70 + it % 50);
            MPI_Send(a, (int)n, MPI_BYTE, peer, 950, MPI_COMM_WORLD);
        }
    } else {
        real_create_t real_create = libc_create();
        if (!real_create)
            return;
        pthread_t th;
        real_create(&th, NULL, race_thread, a);
        for (int it = 0; it < iters; it++) {
            MPI_Recv(a + 64, (int)n, MPI_BYTE, peer, 950, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            long k = bad(a + 64, n, 70 + it % 50);     /* the owner's fault completes it */
            CHECK(k < 0, "iteration %d: byte %ld is %#x (old bytes)", it, k, k < 0 ? 0 : a[64 + k]);
            if (k >= 0)
                break;
        }
        __atomic_store_n(&race_stop, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        CHECK(a[0] == (unsigned char)race_stores, "the thread's last store is lost (%#x, want %#x)",
              a[0], (unsigned char)race_stores);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    pg = sysconf(_SC_PAGESIZE);
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "segv")) {
        /* installed before MPI_Init */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = app_handler;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, NULL);
    }
    if (!strcmp(t, "multiple")) {
        int prov;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
        t = "overlap";
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "ov_tests runs on 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    if (!strcmp(t, "calls")) t_calls();
    else if (!strcmp(t, "wrappers")) t_wrappers();
    else if (!strcmp(t, "offsets")) t_offsets();
    else if (!strcmp(t, "overlap")) t_overlap();
    else if (!strcmp(t, "syscall")) t_syscall();
    else if (!strcmp(t, "segv")) t_segv_after();
    else if (!strcmp(t, "chain")) t_chain(0);
    else if (!strcmp(t, "nochain")) t_chain(1);
    else if (!strcmp(t, "threads")) t_threads();
    else if (!strcmp(t, "adapt")) t_adapt();
    else if (!strcmp(t, "crash")) t_crash();
    else if (!strcmp(t, "types")) t_types();
    else if (!strcmp(t, "park")) t_park();
    else if (!strcmp(t, "parkrace")) t_parkrace();
    else {
        if (rank == 0) fprintf(stderr, "ov_tests: unknown test '%s' (calls wrappers offsets overlap syscall segv chain nochain adapt threads multiple crash types park parkrace)\n", t);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ov_tests %s: %s (%d failed checks)\n", t, all ? "FAILED" : "passed", all);
    MPI_Finalize();
    return all != 0;
}
