/* MPS tests (maint/test --only=mps): `mps_tests NAME` under `mpsrun test/mps/tests.topo --`.
 * Every check is on return codes, data and ownership; a failing check names itself and aborts
 * the job. p1 (rank 0) and p2 (rank 1) are the two processes of tests.topo. */
#define _GNU_SOURCE
#include <mps.h>

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char me[MPS_MAX_NAME] = "?";
static int wrank;

#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "FAIL %s:%d [%s]: ", __FILE__, __LINE__, me);                           \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fprintf(stderr, " (last MPS detail: %s)\n", MPS_Error_detail());                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                           \
        }                                                                                           \
    } while (0)
#define EXPECT(call, code)                                                                          \
    do {                                                                                            \
        int rc_ = (call);                                                                           \
        CHECK(rc_ == (code), "%s returned %d (%s), expected %d (%s)", #call, rc_, MPS_Error_string(rc_), \
              (code), MPS_Error_string(code));                                                      \
    } while (0)
/* the error's detail names what was wrong */
#define DETAIL_HAS(s) CHECK(strstr(MPS_Error_detail(), (s)), "the detail does not name '%s'", (s))

enum { TAG_CTL = 1000 };
static void ctl_send(void)
{
    int x = 1;
    MPI_Send(&x, 1, MPI_INT, 1 - wrank, TAG_CTL, MPI_COMM_WORLD);
}
static void ctl_recv(void)
{
    int x;
    MPI_Recv(&x, 1, MPI_INT, 1 - wrank, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static MPI_Comm channel(const char *link, int *rrank)
{
    MPI_Comm c;
    int l, r;
    EXPECT(MPS_Channel_create(link, wrank == 0 ? "p2" : "p1", &c, &l, &r), MPS_SUCCESS);
    /* the link's first end in the file is rank 0 (c lists p2 first) */
    int first_is_me = strcmp(link, "c") ? wrank == 0 : wrank == 1, crank;
    MPI_Comm_rank(c, &crank);
    CHECK(l == !first_is_me && r == first_is_me && crank == l, "link %s: lrank %d rrank %d, rank %d", link, l, r,
          crank);
    if (rrank)
        *rrank = r;
    return c;
}

/* a send pool finalizes once its sends have been received */
static void finalize_send_pool(MPS_pool_t p)
{
    double end = MPI_Wtime() + 30;
    int rc;
    while ((rc = MPS_Buf_pool_finalize(p)) == MPS_ERR_BUSY && MPI_Wtime() < end)
        ;
    EXPECT(rc, MPS_SUCCESS);
}

static void fill(void *buf, int bytes, int seq)
{
    int *b = buf;
    for (int i = 0; i < bytes / (int)sizeof(int); i++)
        b[i] = seq * 1000003 + i;
}
static void check_fill(const void *buf, int bytes, int seq)
{
    const int *b = buf;
    for (int i = 0; i < bytes / (int)sizeof(int); i++)
        CHECK(b[i] == seq * 1000003 + i, "message %d: int %d is %d", seq, i, b[i]);
}

/* names, ranks, placement */
static void t_names(void)
{
    char name[MPS_MAX_NAME];
    int r;
    EXPECT(MPS_Process_get_rank(me, &r), MPS_SUCCESS);
    CHECK(r == wrank, "get_rank(%s) = %d", me, r);
    EXPECT(MPS_Process_get_name(1 - wrank, name), MPS_SUCCESS);
    CHECK(!strcmp(name, wrank == 0 ? "p2" : "p1"), "the other process is '%s'", name);
    EXPECT(MPS_Process_get_rank("nosuchproc", &r), MPS_ERR_NAME);
    DETAIL_HAS("nosuchproc");
    EXPECT(MPS_Process_get_name(2, name), MPS_ERR_NAME);
    EXPECT(MPS_Process_get_name(-1, name), MPS_ERR_NAME);
    EXPECT(MPS_Process_get_name(0, NULL), MPS_ERR_ARG);
    /* maint/test says which back end must run (MPS_EXPECT_BACKEND) */
    const char *want = getenv("MPS_EXPECT_BACKEND");
    CHECK(!want || !strcmp(MPS_Backend_name(), want), "back end %s, not %s", MPS_Backend_name(), want);
    /* tests.topo: p1 on cpu 0, p2 on cpu 1 (mpsrun binds) */
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity");
    CHECK(CPU_COUNT(&set) == 1 && CPU_ISSET(wrank, &set), "%s is bound to %d cpus, not to cpu %d alone", me,
          CPU_COUNT(&set), wrank);
    printf("%s: rank %d, bound to cpu %d\n", me, wrank, wrank);
}

static int native(void)
{
    return !strcmp(MPS_Backend_name(), "native");
}

/* the native back end's path between nodes, forced on one node (MPS_RMA=1): the receiver
 * reads a handed-off buffer into its own (MPI_Get), so the sender's is back once taken */
static int rma(void)
{
    return native() && getenv("MPS_RMA") && !strcmp(getenv("MPS_RMA"), "1");
}

/* t_exhaust's steps, both back ends: the sender takes both buffers of the link's 2 x 1 MiB
 * pool, finds it exhausted (all held by the application: a blocking get could never end, so
 * it is an error), waits for the receiver to see its own pool empty, and sends both */
static MPS_pool_t exhaust_send_two(MPI_Comm c, int *bs, void *b[2])
{
    MPS_pool_t p;
    int bc = 0;
    void *x;
    *bs = 0;
    EXPECT(MPS_Buf_pool_init(c, MPS_SND, bs, &bc, &p), MPS_SUCCESS);
    CHECK(*bs == 1 << 20 && bc == 2, "pool %d x %d, not the link's 2 x 1 MiB", bc, *bs);
    EXPECT(MPS_Buf_get(p, &b[0]), MPS_SUCCESS);
    EXPECT(MPS_Buf_get(p, &b[1]), MPS_SUCCESS);
    EXPECT(MPS_Buf_tryget(p, &x), MPS_EEMPTY);
    EXPECT(MPS_Buf_tryget(p, &x), EEMPTY);
    EXPECT(MPS_Buf_get(p, &x), MPS_ERR_BUSY);
    DETAIL_HAS("holds all 2 buffers");
    EXPECT(MPS_Buf_get_timeout(p, &x, 0.1), MPS_ERR_BUSY);
    MPI_Barrier(MPI_COMM_WORLD);     /* the receiver has seen its pool empty */
    for (int i = 0; i < 2; i++) {
        fill(b[i], *bs, i);
        EXPECT(MPS_Buf_send(p, b[i], *bs, 10 + i), MPS_SUCCESS);
    }
    return p;
}

/* the receiver's pool, empty (nothing sent yet: a deadline passes) */
static MPS_pool_t exhaust_recv_pool(MPI_Comm c, int *bs)
{
    MPS_pool_t p;
    int bc = 0;
    void *x;
    *bs = 0;
    EXPECT(MPS_Buf_pool_init(c, MPS_RCV, bs, &bc, &p), MPS_SUCCESS);
    EXPECT(MPS_Buf_tryget(p, &x), MPS_EEMPTY);
    EXPECT(MPS_Buf_get_timeout(p, &x, 0.1), MPS_ERR_TIMEOUT);
    MPI_Barrier(MPI_COMM_WORLD);
    return p;
}

/* the receiver takes the two messages and holds both buffers: its pool is exhausted */
static void exhaust_take_two(MPS_pool_t p, int bs, void *b[2])
{
    void *x;
    for (int i = 0; i < 2; i++) {
        int bytes, tag;
        EXPECT(MPS_Buf_get(p, &b[i]), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, b[i], &bytes, &tag), MPS_SUCCESS);
        CHECK(bytes == bs && tag == 10 + i, "message %d: %d bytes, tag %d", i, bytes, tag);
        check_fill(b[i], bs, i);
    }
    EXPECT(MPS_Buf_tryget(p, &x), MPS_EEMPTY);
    EXPECT(MPS_Buf_get(p, &x), MPS_ERR_BUSY);      /* it holds both */
}

/* the native back end lends buffers: a send pool's buffer comes back when the receiver
 * releases it, so the sender's get waits for the receiver's release (zero copy: no other
 * buffer holds the data meanwhile) */
static void t_exhaust_native(MPI_Comm c)
{
    MPS_pool_t p;
    int bs = 0;
    void *b[2], *x;
    long long h, cp;
    if (wrank == 0) {
        p = exhaust_send_two(c, &bs, b);
        /* both lent: none comes back before the receiver releases one */
        EXPECT(MPS_Buf_tryget(p, &x), MPS_EEMPTY);
        EXPECT(MPS_Buf_get_timeout(p, &x, 0.1), MPS_ERR_TIMEOUT);
        ctl_send();
        /* blocks until the receiver releases buffer 1, which it wrote into */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        CHECK(x == b[1], "got %p back, not the buffer the receiver released (%p)", x, b[1]);
        CHECK(*(int *)x == 0x5eed, "the receiver's write is not in the buffer (%#x): it had a copy", *(int *)x);
        fill(x, bs, 2);
        EXPECT(MPS_Buf_send(p, x, bs, 12), MPS_SUCCESS);
        /* both buffers lent (the receiver holds them until told) */
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);
        DETAIL_HAS("in flight");
        ctl_send();
        ctl_recv();     /* the receiver gave both back */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 13);
        EXPECT(MPS_Buf_send(p, x, 64, 13), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == 4 && cp == 0, "send pool: %lld hand-offs, %lld bytes copied (expected 4, 0)", h, cp);
        finalize_send_pool(p);
    } else {
        p = exhaust_recv_pool(c, &bs);
        ctl_recv();
        exhaust_take_two(p, bs, b);
        *(int *)b[1] = 0x5eed;                          /* the application owns it: may write */
        EXPECT(MPS_Buf_release(p, b[1]), MPS_SUCCESS);
        int bytes, tag;
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);       /* message 3, in the same buffer */
        CHECK(x == b[1], "message 3 is at %p, not in the sender's buffer 1 (%p)", x, b[1]);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
        CHECK(tag == 12, "message 3 has tag %d", tag);
        check_fill(x, bs, 2);
        /* misuse of lent buffers: errors, and the pool goes on */
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);
        DETAIL_HAS("holds 2 buffer");
        MPS_pool_t q;
        int qs = 0, qc = 0;
        EXPECT(MPS_Buf_pool_init(c, MPS_SND, &qs, &qc, &q), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(q, x), MPS_ERR_BUF_FOREIGN);
        DETAIL_HAS("another pool");
        EXPECT(MPS_Buf_release(p, (char *)x + 8), MPS_ERR_BUF_UNKNOWN);
        EXPECT(MPS_Buf_pool_finalize(q), MPS_SUCCESS);
        ctl_recv();     /* the sender saw its pool busy */
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, b[0]), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_ERR_BUF_NOT_OWNED);
        DETAIL_HAS("released twice");
        EXPECT(MPS_Buf_received(p, b[0], &bytes, &tag), MPS_ERR_BUF_NOT_OWNED);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == 3 && cp == 0, "receive pool: %lld hand-offs, %lld bytes copied (expected 3, 0)", h, cp);
        ctl_send();
        /* a hand-off not taken: finalizing would lose it */
        int idx;
        EXPECT(MPS_Select(1, &c, 30, &idx), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);
        DETAIL_HAS("not taken");
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
        CHECK(bytes == 64 && tag == 13, "message 4: %d bytes, tag %d", bytes, tag);
        check_fill(x, 64, 13);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    }
    printf("%s: exhaust ok (native: lent buffers)\n", me);
}

/* pools exhausted: EEMPTY, deadlines, and a blocking get that another rank's release ends */
static void t_exhaust(void)
{
    MPI_Comm c = channel("big", NULL);
    if (native() && !rma()) {
        t_exhaust_native(c);
        return;
    }
    MPS_pool_t p;
    int bs = 0;
    void *b[2], *x;
    if (wrank == 0) {
        p = exhaust_send_two(c, &bs, b);
        /* back once the receiver's pre-posted receives took them */
        for (int i = 0; i < 2; i++) {
            EXPECT(MPS_Buf_get(p, &b[i]), MPS_SUCCESS);
            fill(b[i], bs, 2 + i);
            EXPECT(MPS_Buf_send(p, b[i], bs, 12 + i), MPS_SUCCESS);
        }
        ctl_recv();     /* the receiver holds both its buffers: no receive is posted */
        EXPECT(MPS_Buf_tryget(p, &x), MPS_EEMPTY);
        EXPECT(MPS_Buf_get_timeout(p, &x, 0.1), MPS_ERR_TIMEOUT);  /* both sends in flight */
        ctl_send();
        /* blocks until the receiver releases a buffer and the send lands in it */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        ctl_recv();
        finalize_send_pool(p);
    } else {
        p = exhaust_recv_pool(c, &bs);
        exhaust_take_two(p, bs, b);     /* no receive is posted now */
        ctl_send();
        ctl_recv();     /* the sender saw its pool empty */
        for (int i = 0; i < 2; i++) {
            int bytes, tag;
            EXPECT(MPS_Buf_release(p, b[i]), MPS_SUCCESS);
            EXPECT(MPS_Buf_get(p, &b[i]), MPS_SUCCESS);
            EXPECT(MPS_Buf_received(p, b[i], &bytes, &tag), MPS_SUCCESS);
            CHECK(tag == 12 + i, "message %d has tag %d: out of order", 2 + i, tag);
            check_fill(b[i], bs, 2 + i);
        }
        for (int i = 0; i < 2; i++)
            EXPECT(MPS_Buf_release(p, b[i]), MPS_SUCCESS);
        ctl_send();
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    }
    printf("%s: exhaust ok\n", me);
}

/* deadlines: a timed-out request stays active, can complete later or be cancelled */
static void t_timeout(void)
{
    int rr;
    MPI_Comm a = channel("a", &rr), b = channel("b", NULL);
    int data[16];
    MPI_Request req;
    MPI_Status st;
    if (wrank == 1) {
        MPI_Irecv(data, 16, MPI_INT, rr, 5, a, &req);
        double t0 = MPI_Wtime();
        EXPECT(MPS_Wait_timeout(&req, &st, 0.2), MPS_ERR_TIMEOUT);
        CHECK(MPI_Wtime() - t0 >= 0.2, "timed out after %g s, before the 0.2 s deadline", MPI_Wtime() - t0);
        CHECK(req != MPI_REQUEST_NULL, "the timed-out request was freed");
        EXPECT(MPS_Wait_timeout(&req, &st, 0), MPS_ERR_TIMEOUT);
        EXPECT(MPS_Wait_timeout(&req, &st, -1), MPS_ERR_ARG);
        ctl_send();     /* now the sender sends */
        EXPECT(MPS_Wait_timeout(&req, &st, 30), MPS_SUCCESS);
        CHECK(req == MPI_REQUEST_NULL, "a completed request is not freed");
        CHECK(st.MPI_TAG == 5 && data[0] == 42 && data[15] == 57, "wrong message");
        /* timed out, then cancelled */
        MPI_Irecv(data, 16, MPI_INT, rr, 6, a, &req);
        EXPECT(MPS_Wait_timeout(&req, &st, 0.05), MPS_ERR_TIMEOUT);
        int cancelled = 0;
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &cancelled);
        CHECK(cancelled, "the timed-out receive could not be cancelled");
        /* a pool get with a deadline */
        MPS_pool_t p;
        int bs = 0, bc = 0;
        void *x;
        EXPECT(MPS_Buf_pool_init(b, MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        EXPECT(MPS_Buf_get_timeout(p, &x, 0.2), MPS_ERR_TIMEOUT);
        DETAIL_HAS("'b'");
        EXPECT(MPS_Buf_get_timeout(p, &x, -3), MPS_ERR_ARG);
        ctl_send();
        EXPECT(MPS_Buf_get_timeout(p, &x, 30), MPS_SUCCESS);
        check_fill(x, 64, 7);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    } else {
        for (int i = 0; i < 16; i++)
            data[i] = 42 + i;
        ctl_recv();
        MPI_Send(data, 16, MPI_INT, rr, 5, a);
        MPS_pool_t p;
        int bs = 0, bc = 0;
        void *x;
        EXPECT(MPS_Buf_pool_init(b, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        ctl_recv();
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 7);
        EXPECT(MPS_Buf_send(p, x, 64, 0), MPS_SUCCESS);
        finalize_send_pool(p);
    }
    printf("%s: timeout ok\n", me);
}

/* select over 3 channels: a and c plain MPI, b with a receive pool */
static void t_select(void)
{
    int ra, rb, rc_;
    MPI_Comm c[3] = {channel("a", &ra), channel("b", &rb), channel("c", &rc_)};
    int rr[3] = {ra, rb, rc_};
    MPS_pool_t p;
    int bs = 0, bc = 0, idx, v = 0;
    void *x;
    if (wrank == 1) {
        EXPECT(MPS_Buf_pool_init(c[1], MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        EXPECT(MPS_Select(3, c, 0, &idx), MPS_ERR_TIMEOUT);
        EXPECT(MPS_Select(3, c, 0.1, &idx), MPS_ERR_TIMEOUT);
        EXPECT(MPS_Select(0, c, 0, &idx), MPS_ERR_ARG);
        const int order[3] = {2, 1, 0};
        for (int k = 0; k < 3; k++) {
            ctl_send();     /* the sender sends on channel order[k] only */
            EXPECT(MPS_Select(3, c, 30, &idx), MPS_SUCCESS);
            CHECK(idx == order[k], "select says channel %d has data; only %d has", idx, order[k]);
            if (idx == 1) {
                EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
                EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
            } else {
                MPI_Recv(&v, 1, MPI_INT, rr[idx], MPI_ANY_TAG, c[idx], MPI_STATUS_IGNORE);
            }
            EXPECT(MPS_Select(3, c, 0, &idx), MPS_ERR_TIMEOUT);
        }
        ctl_send();
        ctl_recv();     /* all three have sent */
        int seen[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++) {
            EXPECT(MPS_Select(3, c, 30, &idx), MPS_SUCCESS);
            CHECK(idx >= 0 && idx < 3 && !seen[idx], "select gave channel %d again", idx);
            seen[idx] = 1;
            if (idx == 1) {
                EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
                EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
            } else {
                MPI_Recv(&v, 1, MPI_INT, rr[idx], MPI_ANY_TAG, c[idx], MPI_STATUS_IGNORE);
            }
        }
        EXPECT(MPS_Select(3, c, 0, &idx), MPS_ERR_TIMEOUT);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    } else {
        EXPECT(MPS_Buf_pool_init(c[1], MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        const int order[4] = {2, 1, 0, -1};
        for (int k = 0; k < 4; k++) {
            ctl_recv();
            for (int i = 0; i < 3; i++) {
                if (order[k] >= 0 && i != order[k])
                    continue;
                if (i == 1) {
                    EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
                    EXPECT(MPS_Buf_send(p, x, 4, 0), MPS_SUCCESS);
                } else {
                    MPI_Send(&v, 1, MPI_INT, rr[i], 0, c[i]);
                }
            }
        }
        /* the pool send has landed once select found it; wait for it before saying so */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        ctl_send();
        finalize_send_pool(p);
    }
    printf("%s: select ok\n", me);
}

/* every misuse is an error code, and the pool works on afterwards */
static void t_misuse(void)
{
    MPI_Comm c;
    int l, r, bs = 0, bc = 0;
    MPS_pool_t p, q, dead;
    void *x, *y;
    const char *other = wrank == 0 ? "p2" : "p1";
    EXPECT(MPS_Channel_create("nosuchlink", other, &c, &l, &r), MPS_ERR_NAME);
    DETAIL_HAS("nosuchlink");
    EXPECT(MPS_Channel_create("a", "nobody", &c, &l, &r), MPS_ERR_NAME);
    DETAIL_HAS("nobody");
    EXPECT(MPS_Channel_create("a", me, &c, &l, &r), MPS_ERR_NAME);   /* not the other end */
    EXPECT(MPS_Channel_create("a", other, NULL, &l, &r), MPS_ERR_ARG);
    EXPECT(MPS_Channel_create("viatcp", other, &c, &l, &r), MPS_ERR_MEDIUM);
    DETAIL_HAS("link 'viatcp'");
    EXPECT(MPS_Channel_create("viaucx", other, &c, &l, &r), MPS_ERR_MEDIUM);
    DETAIL_HAS("link 'viaucx'");
    EXPECT(MPS_Buf_pool_init(MPI_COMM_WORLD, MPS_SND, &bs, &bc, &p), MPS_ERR_COMM);
    int rr;
    MPI_Comm a = channel("a", &rr), big = channel("big", NULL);
    EXPECT(MPS_Buf_pool_init(a, 7, &bs, &bc, &p), MPS_ERR_ARG);
    bs = -5;
    EXPECT(MPS_Buf_pool_init(a, MPS_SND, &bs, &bc, &p), MPS_ERR_ARG);
    bs = 0;
    int garbage[8] = {0};
    EXPECT(MPS_Buf_get((MPS_pool_t)garbage, &x), MPS_ERR_POOL);
    if (wrank == 0) {
        EXPECT(MPS_Buf_pool_init(a, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        bs = bc = 0;
        EXPECT(MPS_Buf_pool_init(a, MPS_SND, &bs, &bc, &q), MPS_SUCCESS);
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_ERR_BUF_NOT_OWNED);      /* twice */
        DETAIL_HAS("released twice");
        EXPECT(MPS_Buf_send(p, x, 4, 0), MPS_ERR_BUF_NOT_OWNED);   /* the I/O system owns it */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(q, x), MPS_ERR_BUF_FOREIGN);        /* of another pool */
        DETAIL_HAS("another pool");
        EXPECT(MPS_Buf_release(p, (char *)x + 8), MPS_ERR_BUF_UNKNOWN);
        void *m = malloc(64);
        EXPECT(MPS_Buf_release(p, m), MPS_ERR_BUF_UNKNOWN);
        EXPECT(MPS_Buf_release(p, NULL), MPS_ERR_BUF_UNKNOWN);
        free(m);
        EXPECT(MPS_Buf_send(p, x, bs + 1, 0), MPS_ERR_ARG);        /* more than a buffer */
        EXPECT(MPS_Buf_received(p, x, NULL, NULL), MPS_ERR_ARG);    /* a send pool */
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);             /* the application holds x */
        DETAIL_HAS("holds 1 buffer");
        EXPECT(MPS_Buf_get(q, &y), MPS_SUCCESS);                     /* both pools still work */
        memset(x, 1, bs);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(q, y), MPS_SUCCESS);
        /* two small messages for the receiver's checks */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_send(p, x, 100, 3), MPS_SUCCESS);
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_send(p, x, 200, 4), MPS_SUCCESS);
        finalize_send_pool(p);
        dead = p;
        EXPECT(MPS_Buf_pool_finalize(dead), MPS_ERR_POOL);           /* finalized twice */
        EXPECT(MPS_Buf_get(dead, &x), MPS_ERR_POOL);
        EXPECT(MPS_Buf_pool_finalize(q), MPS_SUCCESS);
        /* a send in flight (1 MiB: no MPI completes it before the receive is posted) */
        bs = bc = 0;
        EXPECT(MPS_Buf_pool_init(big, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_send(p, x, bs, 0), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);
        DETAIL_HAS("in flight");
        ctl_send();
        finalize_send_pool(p);
    } else {
        EXPECT(MPS_Buf_pool_init(a, MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        bs = bc = 0;
        EXPECT(MPS_Buf_pool_init(a, MPS_RCV, &bs, &bc, &q), MPS_ERR_BUSY);   /* a second receive pool */
        int bytes, tag, idx;
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
        CHECK(bytes == 100 && tag == 3, "%d bytes tag %d", bytes, tag);
        EXPECT(MPS_Buf_send(p, x, 4, 0), MPS_ERR_ARG);          /* a receive pool */
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_ERR_BUF_NOT_OWNED);
        EXPECT(MPS_Buf_release(p, x), MPS_ERR_BUF_NOT_OWNED);
        EXPECT(MPS_Select(1, &a, 30, &idx), MPS_SUCCESS);       /* the second message is in */
        EXPECT(MPS_Buf_pool_finalize(p), MPS_ERR_BUSY);          /* it would be lost */
        DETAIL_HAS("not taken");
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
        CHECK(bytes == 200 && tag == 4, "%d bytes tag %d", bytes, tag);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
        EXPECT(MPS_Buf_release(p, x), MPS_ERR_POOL);
        ctl_recv();
        char *buf = malloc(1 << 20);
        MPI_Recv(buf, 1 << 20, MPI_BYTE, 0, MPI_ANY_TAG, big, MPI_STATUS_IGNORE);
        free(buf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("%s: misuse ok\n", me);
}

/* zero copy (native): the receiver reads the sender's bytes where the sender wrote them, and
 * the counters say nothing was copied; a plain MPI_Isend of a pool buffer (the poster's way)
 * still arrives, through MPI, and is counted as copied */
static void t_zerocopy(void)
{
    MPI_Comm c = channel("big", NULL);
    MPS_pool_t p;
    int bs = 0, bc = 0, n = 50;
    long long h, cp;
    void *x;
    CHECK(native(), "back end %s: zero copy is the native back end's", MPS_Backend_name());
    if (wrank == 0) {
        EXPECT(MPS_Buf_pool_init(c, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        ctl_recv();     /* the receive pool exists */
        for (int i = 0; i < n; i++) {
            EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
            fill(x, 4096, i);
            EXPECT(MPS_Buf_send(p, x, bs, i), MPS_SUCCESS);
        }
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 99);
        MPI_Request r;
        MPI_Isend(x, 64, MPI_BYTE, 1, 99, c, &r);       /* the poster's way */
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        /* the MPI_Isend was the application's, not the pool's: not counted here */
        CHECK(h == n && cp == 0, "send pool: %lld hand-offs, %lld bytes through MPI (expected %d, 0)", h, cp, n);
        finalize_send_pool(p);
    } else {
        EXPECT(MPS_Buf_pool_init(c, MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        ctl_send();
        void *seen[2] = {NULL, NULL};
        for (int i = 0; i < n; i++) {
            int bytes, tag;
            EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
            EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
            CHECK(tag == i && bytes == bs, "message %d: tag %d, %d bytes", i, tag, bytes);
            check_fill(x, 4096, i);
            /* the sender has 2 buffers (RMA path: the receive pool has 2): every message is
             * in one of those two places */
            if (!seen[0] || x == seen[0])
                seen[0] = x;
            else if (!seen[1] || x == seen[1])
                seen[1] = x;
            else
                CHECK(0, "message %d is at a third address %p: not the sender's buffers", i, x);
            EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        }
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == n && cp == 0, "%lld hand-offs, %lld bytes copied (expected %d, 0)", h, cp, n);
        int bytes, tag;
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
        CHECK(tag == 99 && bytes == 64, "the MPI_Isend: tag %d, %d bytes", tag, bytes);
        check_fill(x, 64, 99);
        CHECK(x != seen[0] && x != seen[1], "a message sent by MPI_Isend landed in a lent buffer");
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == n && cp == 64, "after the MPI_Isend: %lld hand-offs, %lld bytes copied (expected %d, 64)", h, cp, n);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_ERR_POOL);
    }
    printf("%s: zerocopy ok\n", me);
}

/* order across the two paths (native): a send made before the receive pool exists goes by
 * message; later sends wait in message mode until it is taken, then hand-offs resume */
static void t_order(void)
{
    MPI_Comm c = channel("b", NULL);
    MPS_pool_t p;
    int bs = 0, bc = 0;
    long long h, cp;
    void *x;
    CHECK(native(), "back end %s: order across paths is the native back end's", MPS_Backend_name());
    if (wrank == 0) {
        EXPECT(MPS_Buf_pool_init(c, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 1);
        EXPECT(MPS_Buf_send(p, x, 64, 1), MPS_SUCCESS);    /* no receive pool yet: a message */
        ctl_send();
        ctl_recv();     /* now there is one, but message 1 is not taken */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 2);
        EXPECT(MPS_Buf_send(p, x, 64, 2), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == 0 && cp == 128, "%lld hand-offs, %lld bytes by message (expected 0, 128)", h, cp);
        ctl_send();
        ctl_recv();     /* both taken: hand-offs again */
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, 64, 3);
        EXPECT(MPS_Buf_send(p, x, 64, 3), MPS_SUCCESS);
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == 1 && cp == 128, "%lld hand-offs, %lld bytes by message (expected 1, 128)", h, cp);
        finalize_send_pool(p);
    } else {
        ctl_recv();     /* message 1 is on its way */
        EXPECT(MPS_Buf_pool_init(c, MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        ctl_send();
        ctl_recv();
        for (int i = 1; i <= 3; i++) {
            int bytes, tag;
            if (i == 3)
                ctl_send();
            EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
            EXPECT(MPS_Buf_received(p, x, &bytes, &tag), MPS_SUCCESS);
            CHECK(tag == i && bytes == 64, "message %d of 3 has tag %d (%d bytes): out of order", i, tag, bytes);
            check_fill(x, 64, i);
            EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        }
        EXPECT(MPS_Pool_counters(p, &h, &cp), MPS_SUCCESS);
        CHECK(h == 1 && cp == 128, "receive pool: %lld hand-offs, %lld bytes by message (expected 1, 128)", h, cp);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    }
    printf("%s: order ok\n", me);
}

/* a child of this process touches `buf`: it must die of SIGSEGV (the guard) */
static void expect_fault(volatile int *buf, int write, const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        if (write)
            buf[0] = 1;
        else
            (void)buf[0];
        _exit(0);       /* not caught */
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "%s was not caught (child status %#x)", what, st);
}

/* ownership guard (native): writing a buffer handed over, or touching one given back */
static void t_guard(void)
{
    MPI_Comm a = channel("a", NULL);
    MPS_pool_t p;
    int bs = 0, bc = 0;
    void *x;
    CHECK(native(), "back end %s: the guard is the native back end's", MPS_Backend_name());
    CHECK(getenv("MPS_GUARD") && !strcmp(getenv("MPS_GUARD"), "1"), "run with MPS_GUARD=1 (a checking mode)");
    if (wrank == 0) {
        EXPECT(MPS_Buf_pool_init(a, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        ctl_recv();
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        fill(x, bs, 1);
        EXPECT(MPS_Buf_send(p, x, bs, 0), MPS_SUCCESS);
        expect_fault(x, 1, "a write to a buffer after MPS_Buf_send");
        CHECK(*(int *)x == 1000003, "reading it is allowed");
        ctl_send();
        finalize_send_pool(p);  /* the receiver gave it back */
        EXPECT(MPS_Buf_pool_init(a, MPS_SND, &bs, &bc, &p), MPS_SUCCESS);
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        *(int *)x = 5;          /* owned again: no fault */
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    } else {
        EXPECT(MPS_Buf_pool_init(a, MPS_RCV, &bs, &bc, &p), MPS_SUCCESS);
        ctl_send();
        EXPECT(MPS_Buf_get(p, &x), MPS_SUCCESS);
        check_fill(x, bs, 1);
        ctl_recv();
        EXPECT(MPS_Buf_release(p, x), MPS_SUCCESS);
        expect_fault(x, 0, "a read of a lent buffer after MPS_Buf_release");
        expect_fault(x, 1, "a write to a lent buffer after MPS_Buf_release");
        EXPECT(MPS_Buf_pool_finalize(p), MPS_SUCCESS);
    }
    printf("%s: guard ok\n", me);
}

/* started without a usable topology: every call says why (argv[2]: what the detail says) */
static int t_topology_error(const char *want)
{
    char name[MPS_MAX_NAME];
    int rc = MPS_Process_get_name(0, name);
    int rc2 = MPS_Process_get_rank("p1", &rc2);
    printf("rank %d: %s | %s\n", wrank, MPS_Error_string(rc), MPS_Error_detail());
    return !(rc == MPS_ERR_TOPOLOGY && rc2 == MPS_ERR_TOPOLOGY && strstr(MPS_Error_detail(), want));
}

/* MPS_ARENA_BYTES that is no size (junk, negative, too large): creating a channel fails with
 * MPS_ERR_ARG naming the variable, on both ends, under the native back end */
static int t_arena_error(void)
{
    MPI_Comm c;
    int l, r;
    int rc = MPS_Channel_create("a", wrank == 0 ? "p2" : "p1", &c, &l, &r);
    printf("rank %d: %s | %s\n", wrank, MPS_Error_string(rc), MPS_Error_detail());
    return !(rc == MPS_ERR_ARG && strstr(MPS_Error_detail(), "MPS_ARENA_BYTES"));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (argc == 3 && !strcmp(argv[1], "topology-error")) {
        int bad = t_topology_error(argv[2]);
        MPI_Finalize();
        return bad;
    }
    if (argc == 2 && !strcmp(argv[1], "arena-error")) {
        int bad = t_arena_error();
        MPI_Finalize();
        return bad;
    }
    EXPECT(MPS_Process_get_name(wrank, me), MPS_SUCCESS);
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "names"))
        t_names();
    else if (!strcmp(t, "exhaust"))
        t_exhaust();
    else if (!strcmp(t, "timeout"))
        t_timeout();
    else if (!strcmp(t, "select"))
        t_select();
    else if (!strcmp(t, "misuse"))
        t_misuse();
    else if (!strcmp(t, "zerocopy"))
        t_zerocopy();
    else if (!strcmp(t, "guard"))
        t_guard();
    else if (!strcmp(t, "order"))
        t_order();
    else
        CHECK(0, "usage: mps_tests names|exhaust|timeout|select|misuse|zerocopy|guard|order|arena-error|topology-error WANT");
    MPI_Finalize();
    return 0;
}
