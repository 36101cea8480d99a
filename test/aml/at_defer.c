/*
 * aml's unit tests of deferred receives: a handler that defers messages and lands them later
 * (aml_accept) or drops them (aml_reject), and adaptive eager's credits, which deferred
 * messages hold until they land.
 */
#include "at.h"

/* deferred rendezvous: the receiver's handler defers every message, then lands them in the
 * reverse order (aml_accept) except one it drops (aml_reject); every sender buffer is released */
#define NDEFER 6
static aml_handle_t deferred_msgs[NDEFER];
static int ndeferred, defer_compl;

static int defer_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (!info->msg || info->protocol != AML_PROTO_RNDV || ndeferred >= NDEFER)
        return 1;
    deferred_msgs[ndeferred++] = info->msg;
    recv->defer = 1;
    return 0;
}

static void defer_done(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    defer_compl++;
}

int t_defer(rank_ctx_t * c)
{
    const size_t n = 100000;
    aml_cntr_t org;
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_register_handler(c->aml, 4, defer_handler, NULL));
    test_barrier(c);
    if (c->rank == 0) {
        unsigned char *data = malloc(n * NDEFER);
        for (int i = 0; i < NDEFER; i++) {
            fill(data + i * n, n, 0, 500 + i);
            CHECK_OK(aml_amsend(c->aml, 1, 4, NULL, 0, data + i * n, n, NULL, &org, NULL));
        }
        CHECK_OK(aml_cntr_wait(c->aml, &org, NDEFER));        /* accepted or rejected */
        free(data);
    } else {
        unsigned char *buf = malloc(n * NDEFER);
        aml_recv_t r;
        while (ndeferred < NDEFER)
            aml_progress(c->aml);
        CHECK(aml_accept(c->aml, AML_HANDLE_NONE, NULL) == AML_ERR_INVAL, "accept NULL");
        CHECK_OK(aml_reject(c->aml, deferred_msgs[0]));
        CHECK(aml_reject(c->aml, deferred_msgs[0]) == AML_ERR_INVAL, "reject twice");
        for (int i = NDEFER - 1; i >= 1; i--) {
            memset(&r, 0, sizeof(r));
            r.buf = buf + i * n;
            r.compl_fn = defer_done;
            CHECK_OK(aml_accept(c->aml, deferred_msgs[i], &r));
        }
        while (defer_compl < NDEFER - 1)
            aml_progress(c->aml);
        for (int i = 1; i < NDEFER; i++)
            CHECK(first_bad(buf + i * n, n, 0, 500 + i) == (size_t) -1, "message %d corrupt", i);
        free(buf);
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* adaptive eager flow control: the receiver defers every adaptive message; the sender has
 * `credits` of them unconfirmed, so further messages to that receiver go by rendezvous (only
 * the scout waits there). Once the receiver lands them (one rejected) the credits are back
 * and adaptive eager is used again. */
#define ACREDITS 3
#define AMSGS (ACREDITS + 3)
static aml_handle_t adeferred[AMSGS];
static int adeferred_proto[AMSGS], nadeferred, acompl;

static int adefer_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (!info->msg || nadeferred >= AMSGS)
        return 1;
    adeferred_proto[nadeferred] = info->protocol;
    adeferred[nadeferred++] = info->msg;
    recv->defer = 1;
    return 0;
}

static void adefer_done(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    acompl++;
}

void adaptive_credits(aml_config_t * cfg)
{
    cfg->adaptive_credits = ACREDITS;
    cfg->lanes = 2;
    cfg->eager_limit = 65536;   /* 30000-byte messages are adaptive */
    cfg->vnode_eager_limit = 65536;     /* also through vnode (AML_TEST_VNODE) */
}

int t_adaptive_credits(rank_ctx_t * c)
{
    const size_t n = 30000;     /* above one packet, below the eager limit */
    aml_cntr_t org;
    int64_t a0 = AML_PROTO_ADAPTIVE, r0 = AML_PROTO_RNDV, a1, r1;
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_register_handler(c->aml, 4, adefer_handler, NULL));
    rx_setup(c, n);
    test_barrier(c);
    if (c->rank == 0) {
        unsigned char *data = malloc(n * AMSGS);
        msg_hdr_t h = { 0, 900, 0, 0 };
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &a0));
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &r0));
        for (int i = 0; i < AMSGS; i++) {
            fill(data + i * n, n, 0, 600 + i);
            CHECK_OK(aml_amsend(c->aml, 1, 4, NULL, 0, data + i * n, n, NULL, &org, NULL));
        }
        a1 = AML_PROTO_ADAPTIVE;
        r1 = AML_PROTO_RNDV;
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &a1));
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &r1));
        CHECK(a1 - a0 == ACREDITS && r1 - r0 == AMSGS - ACREDITS,
              "adaptive %lld rndv %lld, want %d and %d", (long long) (a1 - a0),
              (long long) (r1 - r0), ACREDITS, AMSGS - ACREDITS);
        CHECK_OK(aml_cntr_wait(c->aml, &org, AMSGS));   /* landed or rejected */
        /* the receiver confirmed everything: once the tokens are in, the next message is
         * adaptive again */
        test_barrier(c);
        while (c->aml->peers[1].adapt_out != 0)
            aml_progress(c->aml);
        fill(data, n, 0, 900);
        CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), data, n, NULL, &org, NULL));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        a1 = AML_PROTO_ADAPTIVE;
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &a1));
        CHECK(a1 - a0 == ACREDITS + 1, "credits did not come back (%lld adaptive)",
              (long long) (a1 - a0));
        free(data);
    } else {
        unsigned char *buf = malloc(n * AMSGS);
        aml_recv_t r;
        while (nadeferred < AMSGS)
            aml_progress(c->aml);
        for (int i = 0; i < AMSGS; i++)
            CHECK(adeferred_proto[i] == (i < ACREDITS ? AML_PROTO_ADAPTIVE : AML_PROTO_RNDV),
                  "message %d came by %s", i, aml_proto_name(adeferred_proto[i]));
        CHECK_OK(aml_reject(c->aml, adeferred[1]));
        CHECK(aml_reject(c->aml, adeferred[1]) == AML_ERR_INVAL, "reject twice");
        for (int i = AMSGS - 1; i >= 0; i--) {
            if (i == 1)
                continue;
            memset(&r, 0, sizeof(r));
            r.buf = buf + i * n;
            r.compl_fn = adefer_done;
            CHECK_OK(aml_accept(c->aml, adeferred[i], &r));
        }
        while (acompl < AMSGS - 1)
            aml_progress(c->aml);
        for (int i = 0; i < AMSGS; i++)
            CHECK(i == 1 || first_bad(buf + i * n, n, 0, 600 + i) == (size_t) -1,
                  "message %d corrupt", i);
        /* every token went back: the sender's next message lands through handler 3 */
        while (c->aml->peers[0].adapt_in != 0)
            aml_progress(c->aml);
        test_barrier(c);
        wait_done(c, 1);
        CHECK(rx.done_bad[0] == (size_t) -1 && rx.done_len[0] == n, "last message wrong");
        free(buf);
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* an empty adaptive message, deferred, is accepted without a landing (MPI: a 0-byte receive
 * with a NULL buffer matching an early arrival) and its credit comes back */
static aml_handle_t empty_msg;
static int empty_done;

static int empty_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) aml;
    (void) ctx;
    if (!info->msg || info->msg_len || info->protocol != AML_PROTO_ADAPTIVE)
        return 1;
    empty_msg = info->msg;
    recv->defer = 1;
    return 0;
}

static void empty_compl(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    empty_done++;
}

int t_adaptive_empty(rank_ctx_t * c)
{
    CHECK_OK(aml_register_handler(c->aml, 5, empty_handler, NULL));
    test_barrier(c);
    if (c->rank == 0) {
        CHECK_OK(aml_amsend(c->aml, 1, 5, NULL, 0, NULL, 0, NULL, NULL, NULL));
        while (c->aml->peers[1].adapt_out != 0)
            aml_progress(c->aml);
    } else {
        aml_recv_t r;
        while (!empty_msg)
            aml_progress(c->aml);
        memset(&r, 0, sizeof(r));
        r.compl_fn = empty_compl;
        CHECK_OK(aml_accept(c->aml, empty_msg, &r));
        CHECK(empty_done == 1, "completion handler ran %d times", empty_done);
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}
