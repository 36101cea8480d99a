/* vnode_tests --bench: 2-rank ping-pong latency, median round trip / 2, and a streaming rate
 * (windows of 64 packets, then a 1-byte answer, as ambench msgrate does). Not a test. */
#define _GNU_SOURCE
#include "vt.h"
#include "vt_tests.h"
#include <string.h>
#include <time.h>

#define ITERS 100000
#define WARMUP 2000

static char sink[65536];
static void got_one(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                    size_t len)
{
    memcpy(sink, data, len);    /* as MPI's receiver does */
    ++*(int *) arg;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static void wait_one(vnode_t * v, int *got)
{
    while (!*got)
        CHECK(vnode_poll(v, got_one, got) >= 0, "poll: %s", vnode_error(v));
    *got = 0;
}

static int bench_body(vt_ctx_t * c)
{
    static const size_t sizes[] = { 8, 2048, 4096 };
    vnode_t *v = c->v;
    int peer = 1 - c->rank, got = 0;
    unsigned char buf[4096];
    uint64_t *rtt = malloc(ITERS * sizeof(uint64_t));
    memset(buf, 1, sizeof(buf));
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t hl = 8, l = sizes[s] - 8;
        vt_barrier(c);
        for (int i = 0; i < WARMUP + ITERS; i++) {
            if (c->rank == 0) {
                uint64_t t0 = now_ns();
                CHECK_OK(v, vnode_send(v, peer, buf, hl, buf + hl, l));
                wait_one(v, &got);
                if (i >= WARMUP)
                    rtt[i - WARMUP] = now_ns() - t0;
            } else {
                wait_one(v, &got);
                CHECK_OK(v, vnode_send(v, peer, buf, hl, buf + hl, l));
            }
        }
        if (c->rank == 0) {
            qsort(rtt, ITERS, sizeof(uint64_t), cmp_u64);
            printf("vnode ping-pong, %5zu-byte packets (hlen+len), %d round trips: one way "
                   "(round trip / 2) median %.0f ns, 10%% %.0f ns, 90%% %.0f ns\n", sizes[s],
                   ITERS, rtt[ITERS / 2] / 2.0, rtt[ITERS / 10] / 2.0, rtt[ITERS * 9 / 10] / 2.0);
            fflush(stdout);
        }
    }
    /* rate: 28-byte packets sent as header only, the size of an 8-byte MPI message (8-byte
     * compact aml header, 12-byte MPI envelope, 8 bytes of data) */
    for (int rep = 0; rep < 3; rep++) {
        enum { WIN = 64, ROUNDS = 20000 };
        vt_barrier(c);
        uint64_t t0 = now_ns();
        for (int i = 0; i < ROUNDS; i++) {
            if (c->rank == 0) {
                for (int j = 0; j < WIN; j++) {
                    int rc;
                    while ((rc = vnode_send(v, peer, buf, 28, NULL, 0)) == VNODE_AGAIN)
                        CHECK(vnode_poll(v, got_one, &got) >= 0, "poll: %s", vnode_error(v));
                    CHECK_OK(v, rc);
                }
                wait_one(v, &got);
            } else {
                while (got < WIN)
                    CHECK(vnode_poll(v, got_one, &got) >= 0, "poll: %s", vnode_error(v));
                got = 0;
                CHECK_OK(v, vnode_send(v, peer, buf, 1, NULL, 0));
            }
        }
        if (c->rank == 0) {
            printf("vnode rate, 28-byte packets in windows of %d: %.2f Mpkt/s\n", WIN,
                   (double) WIN * ROUNDS * 1e3 / (now_ns() - t0));
            fflush(stdout);
        }
    }
    free(rtt);
    return 0;
}

int vt_bench(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.timeout_s = 300 };
    return vt_run(2, bench_body, &o);
}
