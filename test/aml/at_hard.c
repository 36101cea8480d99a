/*
 * aml's unit tests of hardening: each of these failed or hung before its fix (a failed send,
 * messages left at quiesce, fences over deferred messages, rejected rendezvous, early packets
 * in the stash, an adaptive chunk announcing a huge message).
 */
#include "at.h"
#include <unistd.h>
#include <time.h>

/* ---- hardening: each of these failed or hung before its fix ------------------ */

/* A transport error on a send is fatal and names the peer; before, aml_send_desc returned an
 * error after taking the sequence number, the receiver stashed every later packet and quiesce
 * hung. Rank 0 sends a two-packet eager message whose second packet fails. */
void eager_only(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_EAGER;
}

int t_send_fail(rank_ctx_t * c)
{
    static unsigned char data[100000];    /* two packets or more, through UCX or vnode */
    rx_setup(c, sizeof(data));
    test_barrier(c);
    if (c->rank == 0) {
        /* a header rank 1's handler accepts: it must not die of a refused message first */
        msg_hdr_t h = { 0, 1, 0, 0 };
        aml_debug_fail_send(c->aml, 2);
        aml_amsend(c->aml, 1, 3, &h, sizeof(h), data, sizeof(data), NULL, NULL, NULL);
        return 1;               /* not reached: the send is fatal */
    }
    for (;;)
        aml_progress(c->aml);
    return 1;
}

/* Crossed unmatched messages at finalize: each rank sends the other a message that the
 * receiver's handler defers and nobody ever accepts. aml_quiesce drops them and completes
 * both senders; before, both ranks waited for their own send forever. */
static int cross_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                         aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (info->msg == AML_HANDLE_NONE)
        return 1;
    recv->defer = 1;
    return 0;
}

int t_quiesce_crossed(rank_ctx_t * c)
{
    const size_t n = 200000;
    unsigned char *data = malloc(n);
    aml_cntr_t org, cmpl;
    aml_xfer_t x;
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    CHECK_OK(aml_register_handler(c->aml, 4, cross_handler, NULL));
    test_barrier(c);
    memset(&x, 0, sizeof(x));
    x.peer = 1 - c->rank;
    x.handler = 4;
    x.data = data;
    x.len = n;
    x.org_cntr = &org;
    CHECK_OK(aml_xfer(c->aml, &x));
    /* a second one naming a completion counter (full header; the put variant's DONE) */
    x.cmpl_cntr = &cmpl;
    CHECK_OK(aml_xfer(c->aml, &x));
    CHECK_OK(aml_quiesce(c->aml));
    CHECK(aml_cntr_get(&org) == 2, "origin counter %lld after quiesce",
          (long long) aml_cntr_get(&org));
    CHECK(aml_cntr_get(&cmpl) == 1, "completion counter %lld after quiesce (a dropped message "
          "counts as delivered)", (long long) aml_cntr_get(&cmpl));
    free(data);
    return 0;
}

/* A message that arrives while its receiver is already in aml_quiesce, whose handler
 * replies: before, the receiver had closed its endpoints and the reply crashed on a NULL
 * endpoint (or the message was never handled). */
static int late_replies;
static int reply_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) ctx;
    (void) recv;
    if (info->src == 1 && aml_amsend(aml, 1, 7, NULL, 0, NULL, 0, NULL, NULL, NULL) != AML_OK)
        return 1;
    return 0;
}

static int replied_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                           aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    (void) info;
    (void) recv;
    late_replies++;
    return 0;
}

int t_quiesce_late(rank_ctx_t * c)
{
    CHECK_OK(aml_register_handler(c->aml, 6, reply_handler, NULL));
    CHECK_OK(aml_register_handler(c->aml, 7, replied_handler, NULL));
    test_barrier(c);
    if (c->rank == 1) {
        usleep(50000);          /* rank 0 is in aml_quiesce by now */
        CHECK_OK(aml_amsend(c->aml, 0, 6, NULL, 0, NULL, 0, NULL, NULL, NULL));
        while (late_replies == 0)
            aml_progress(c->aml);
    }
    CHECK_OK(aml_quiesce(c->aml));
    return 0;
}

/* aml_fence covers deferred messages: it returns only once everything sent before it was
 * landed (or rejected) and its handlers ran at the target. Rank 1 defers an adaptive eager
 * and a rendezvous message and accepts them only after a while; a message rank 0 sends after
 * its fence must find both complete. Before, the adaptive one was acknowledged when its data
 * arrived, and a deferred rendezvous was not counted at all. */
static aml_handle_t fd_msgs[2];
static int fd_n, fd_done, fd_probe_ok = -1;
static int fd_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (info->msg == AML_HANDLE_NONE || fd_n >= 2)
        return 1;
    fd_msgs[fd_n++] = info->msg;
    recv->defer = 1;
    return 0;
}

static void fd_compl(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    fd_done++;
}

static int fd_probe(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    (void) info;
    (void) recv;
    fd_probe_ok = fd_done == 2;
    return 0;
}

int t_fence_defer(rank_ctx_t * c)
{
    static unsigned char data[2][300000], buf[2][300000];
    aml_xfer_t x;
    CHECK_OK(aml_register_handler(c->aml, 4, fd_handler, NULL));
    CHECK_OK(aml_register_handler(c->aml, 5, fd_probe, NULL));
    test_barrier(c);
    if (c->rank == 0) {
        memset(&x, 0, sizeof(x));
        x.peer = 1;
        x.handler = 4;
        x.data = data[0];
        x.len = 10000;
        x.protocol = AML_PROTO_ADAPTIVE;
        CHECK_OK(aml_xfer(c->aml, &x));
        x.data = data[1];
        x.len = sizeof(data[1]);
        x.protocol = AML_PROTO_RNDV;
        CHECK_OK(aml_xfer(c->aml, &x));
        CHECK_OK(aml_fence(c->aml, 1));
        CHECK_OK(aml_amsend(c->aml, 1, 5, NULL, 0, NULL, 0, NULL, NULL, NULL));
    } else {
        aml_recv_t r;
        while (fd_n < 2)
            aml_progress(c->aml);
        for (int i = 0; i < 20000; i++)     /* the fence request arrives meanwhile */
            aml_progress(c->aml);
        CHECK(fd_probe_ok == -1, "a message sent after the fence overtook its deferred "
              "messages");
        for (int i = 0; i < 2; i++) {
            memset(&r, 0, sizeof(r));
            r.buf = buf[i];
            r.compl_fn = fd_compl;
            CHECK_OK(aml_accept(c->aml, fd_msgs[i], &r));
        }
        while (fd_probe_ok == -1)
            aml_progress(c->aml);
        CHECK(fd_probe_ok == 1, "the fence returned before its deferred messages completed");
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* A rejected message counts as delivered for the sender's completion counter in every
 * rendezvous variant; before, the put variant never counted it. Also: a handle is never
 * reused, so a stale one is refused even when a newer message sits in the same record. */
static aml_handle_t rj_msgs[4];
static int rj_n;
static int rj_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (info->msg == AML_HANDLE_NONE || rj_n >= 4)
        return 1;
    rj_msgs[rj_n++] = info->msg;
    recv->defer = 1;
    return 0;
}

int t_reject_cmpl(rank_ctx_t * c)
{
    static unsigned char data[100000];
    aml_cntr_t cmpl, org;
    aml_xfer_t x;
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_register_handler(c->aml, 4, rj_handler, NULL));
    test_barrier(c);
    if (c->rank == 0) {
        memset(&x, 0, sizeof(x));
        x.peer = 1;
        x.handler = 4;
        x.data = data;
        x.len = sizeof(data);
        x.org_cntr = &org;
        x.cmpl_cntr = &cmpl;
        x.protocol = AML_PROTO_RNDV;
        CHECK_OK(aml_xfer(c->aml, &x));
        CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK_OK(aml_xfer(c->aml, &x));         /* accepted this time */
        CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
    } else {
        static unsigned char buf[100000];
        aml_recv_t r;
        while (rj_n < 1)
            aml_progress(c->aml);
        CHECK_OK(aml_reject(c->aml, rj_msgs[0]));
        while (rj_n < 2)
            aml_progress(c->aml);
        CHECK(rj_msgs[1] != rj_msgs[0], "a handle was reused");
        memset(&r, 0, sizeof(r));
        r.buf = buf;
        CHECK(aml_accept(c->aml, rj_msgs[0], &r) == AML_ERR_INVAL, "a stale handle was taken");
        CHECK(aml_reject(c->aml, rj_msgs[0]) == AML_ERR_INVAL, "a stale handle was rejected");
        CHECK_OK(aml_accept(c->aml, rj_msgs[1], &r));
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* debug_reorder holds back every other sequenced packet: the receiver's stash and replay
 * run, and messages still arrive in order (t_order checks) */
int t_order_stash(rank_ctx_t * c)
{
    int64_t stashed = 0;
    int rc = t_order(c);
    CHECK_OK(aml_qenv(c->aml, AML_Q_STASHED, &stashed));
    if (c->rank == 0)
        CHECK(stashed > 0, "no packet arrived ahead of its sequence number");
    return rc;
}

void seq_reorder(aml_config_t * cfg)
{
    cfg->debug_reorder = 1;
}

void seq_reorder_put(aml_config_t * cfg)
{
    cfg->debug_reorder = 1;
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
}

/* An adaptive data packet announcing a 1 TiB message: the receiver keeps the 100 bytes that
 * came, not a buffer of the length announced (which failed, or was taken, whole). */
static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

int t_adapt_claim(rank_ctx_t * c)
{
    long before = rss_kib();
    rx_setup(c, 1 << 20);
    test_barrier(c);
    if (c->rank == 0) {
        aml_pkt_t p;
        char data[100];
        memset(&p, 0, sizeof(p));
        memset(data, 1, sizeof(data));
        p.type = AML_PKT_ADAPT_DATA;
        p.proto = AML_PROTO_ADAPTIVE;
        p.msg_len = (uint64_t) 1 << 40;
        p.msg_id = 5;
        p.addr = 4096;
        CHECK_OK(aml_debug_send_raw(c->aml, 1, &p, sizeof(p), data, sizeof(data)));
    } else {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            aml_progress(c->aml);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 500);
        CHECK(rss_kib() - before < 64 * 1024, "resident memory grew from %ld to %ld KiB", before,
              rss_kib());
    }
    test_barrier(c);
    _exit(0);   /* the message never completes: no finalize */
}
