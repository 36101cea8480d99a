/*
 * The aml message layer alone, measured like the MPI benchmark (test/bench/ambench.c), so
 * maint/bench can put raw UCX (ucx_perftest), aml and MPI over aml side by side (Banikazemi et al.
 * 1999 Fig. 10: what each layer adds).
 *
 *   aml_bench latency|bw [-s SIZES] [-i ITERS] [-p PROTOCOL] [-r get|put|ucx]
 *
 * Two forked ranks (test/aml/launch.c). latency: ping-pong, one-way time = round trip / 2, in
 * microseconds. bw: windows of 64 messages rank 0 -> rank 1, then a 0-byte reply; MB/s
 * (10^6 bytes). Data lands where the header handler says (one receive buffer) and completion
 * is seen through a target counter, LAPI style. Prints "SIZE VALUE" lines from rank 0.
 * PROTOCOL: auto (default), eager, adaptive or rndv; -r: how rendezvous moves data.
 * -m handler: arrival is seen by a completion handler instead of a target counter, as the MPI
 * glue does (no counter named, so one-packet messages use aml's compact header).
 */
#include "launch.h"
#include <stdint.h>
#include <string.h>
#include <time.h>

#define WINDOW 64
#define MAX_SIZES 32

static size_t sizes[MAX_SIZES];
static int nsizes, iters_arg, is_bw, protocol = AML_PROTO_AUTO, rndv_mode = -1, by_handler;
static char *rbuf;
static volatile int64_t arrived;        /* -m handler */

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void bump(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    arrived++;
}

static int land(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    recv->buf = info->msg_len ? rbuf : NULL;
    if (by_handler)
        recv->compl_fn = bump;
    return 0;
}

/* waits until `want` messages arrived in all, by counter or completion handler */
static int wait_arrived(aml_t * aml, aml_cntr_t * tgt, int64_t * seen, int n)
{
    *seen += n;
    if (!by_handler)
        return aml_cntr_wait(aml, tgt, n);
    while (arrived < *seen)
        aml_progress(aml);
    return AML_OK;
}

static void cfg_hook(aml_config_t * cfg)
{
    cfg->protocol = protocol;
    if (rndv_mode >= 0) {       /* -r given; else aml's default */
        cfg->rndv_put = rndv_mode == 1;
        cfg->rndv_ucx = rndv_mode == 2;
    }
}

static int body(rank_ctx_t * c)
{
    size_t max = 0;
    aml_cntr_t tgt, org;
    uintptr_t tgts[2];
    char *sbuf;

    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max)
            max = sizes[i];
    sbuf = malloc(max + 1);
    rbuf = malloc(max + 1);
    CHECK(sbuf && rbuf, "malloc");
    memset(sbuf, 1, max + 1);
    CHECK_OK(aml_register_handler(c->aml, 0, land, NULL));
    CHECK_OK(aml_cntr_init(c->aml, &tgt, 0));
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) & tgt, tgts));
    aml_cntr_t *peer_tgt = by_handler ? NULL : (aml_cntr_t *) tgts[1 - c->rank];
    int peer = 1 - c->rank;
    int64_t seen = 0;

    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        int iters = iters_arg ? iters_arg : is_bw ? (n <= 65536 ? 200 : 40) :
            (n <= 65536 ? 5000 : n <= (1 << 20) ? 500 : 100);
        int warm = iters / 10 + 1;
        double t0 = 0;
        CHECK_OK(aml_gfence(c->aml));
        for (int it = 0; it < warm + iters; it++) {
            if (it == warm)
                t0 = now_us();
            if (!is_bw) {
                if (c->rank == 0) {
                    CHECK_OK(aml_amsend(c->aml, peer, 0, NULL, 0, sbuf, n, peer_tgt, &org, NULL));
                    CHECK_OK(wait_arrived(c->aml, &tgt, &seen, 1));
                    CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
                } else {
                    CHECK_OK(wait_arrived(c->aml, &tgt, &seen, 1));
                    CHECK_OK(aml_amsend(c->aml, peer, 0, NULL, 0, sbuf, n, peer_tgt, &org, NULL));
                    CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
                }
            } else if (c->rank == 0) {
                for (int w = 0; w < WINDOW; w++)
                    CHECK_OK(aml_amsend(c->aml, peer, 0, NULL, 0, sbuf, n, peer_tgt, &org,
                                        NULL));
                CHECK_OK(aml_cntr_wait(c->aml, &org, WINDOW));
                CHECK_OK(wait_arrived(c->aml, &tgt, &seen, 1));
            } else {
                CHECK_OK(wait_arrived(c->aml, &tgt, &seen, WINDOW));
                CHECK_OK(aml_amsend(c->aml, peer, 0, NULL, 0, NULL, 0, peer_tgt, NULL, NULL));
            }
        }
        double us = now_us() - t0;
        if (c->rank == 0) {
            if (is_bw)
                printf("%zu %.2f\n", n, (double) n * WINDOW * iters / us);
            else
                printf("%zu %.3f\n", n, us / iters / 2);
            fflush(stdout);
        }
    }
    CHECK_OK(aml_gfence(c->aml));
    free(sbuf);
    free(rbuf);
    return 0;
}

int main(int argc, char **argv)
{
    const char *sz = "1,8,64,512,4096,16384,65536,262144,1048576,4194304";
    if (argc < 2 || (strcmp(argv[1], "latency") && strcmp(argv[1], "bw"))) {
        fprintf(stderr, "usage: aml_bench latency|bw [-s SIZES] [-i ITERS] "
                "[-p auto|eager|adaptive|rndv] [-r get|put|ucx] [-m counter|handler]\n");
        return 2;
    }
    is_bw = !strcmp(argv[1], "bw");
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s"))
            sz = argv[i + 1];
        else if (!strcmp(argv[i], "-i"))
            iters_arg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m"))
            by_handler = !strcmp(argv[i + 1], "handler");
        else if (!strcmp(argv[i], "-r"))
            rndv_mode = !strcmp(argv[i + 1], "put") ? 1 : !strcmp(argv[i + 1], "ucx") ? 2 : 0;
        else if (!strcmp(argv[i], "-p")) {
            const char *p = argv[i + 1];
            protocol = !strcmp(p, "eager") ? AML_PROTO_EAGER : !strcmp(p, "rndv") ?
                AML_PROTO_RNDV : !strcmp(p, "adaptive") ? AML_PROTO_ADAPTIVE : AML_PROTO_AUTO;
        } else {
            fprintf(stderr, "aml_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    for (const char *p = sz; *p && nsizes < MAX_SIZES; nsizes++) {
        char *end;
        sizes[nsizes] = strtoull(p, &end, 10);
        if (end == p) {
            fprintf(stderr, "aml_bench: bad size list %s\n", sz);
            return 2;
        }
        p = *end ? end + 1 : end;
    }
    return launch(2, body, cfg_hook, 600, -1, NULL);
}
