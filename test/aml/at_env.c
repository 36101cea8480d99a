/*
 * aml's unit tests of the environment and setup: queries and argument checks, configurations
 * aml_init refuses, ranks whose settings disagree (refused at connect), and the UCX keepalive
 * watch.
 */
#include "at.h"
#include "aml_ucx_keepalive.h"     /* the keepalive test drives it directly */
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* environment queries and argument checking */
static int in_handler_wait_rc = -1;
static int blocking_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                            aml_recv_t * recv)
{
    aml_cntr_t *cnt = ctx;
    (void) info;
    (void) recv;
    in_handler_wait_rc = aml_cntr_wait(aml, cnt, 1);
    cnt->value = 1000;
    return 0;
}

int t_env(rank_ctx_t * c)
{
    int64_t v;
    aml_cntr_t cnt;
    char big[2048] = { 0 };
    CHECK_OK(aml_qenv(c->aml, AML_Q_RANK, &v));
    CHECK(v == c->rank, "rank");
    CHECK_OK(aml_qenv(c->aml, AML_Q_SIZE, &v));
    CHECK(v == c->size, "size");
    CHECK_OK(aml_qenv(c->aml, AML_Q_PACKET_SIZE, &v));
    CHECK(v == 8248, "packet size %lld", (long long) v);
    CHECK_OK(aml_qenv(c->aml, AML_Q_NET_PACKET_SIZE, &v));
    CHECK(v == 65592, "network packet size %lld", (long long) v);
    CHECK_OK(aml_qenv(c->aml, AML_Q_EAGER_LIMIT, &v));
    CHECK(v == 65536, "default eager limit %lld", (long long) v);
    CHECK_OK(aml_qenv(c->aml, AML_Q_ONEPACKET_LIMIT, &v));
    CHECK(v == 8248 - (int64_t) sizeof(aml_spkt_t), "one-packet limit %lld", (long long) v);
    CHECK_OK(aml_qenv(c->aml, AML_Q_INLINE_LIMIT, &v));
    CHECK(v == AML_COMPACT_MAX - (int64_t) sizeof(aml_spkt_t), "inline limit %lld",
          (long long) v);
    CHECK_OK(aml_qenv(c->aml, AML_Q_MAX_UHDR, &v));
    CHECK(v >= 256 && v <= AML_UHDR_LIMIT, "max uhdr %lld", (long long) v);
    CHECK_OK(aml_senv(c->aml, AML_Q_EAGER_LIMIT, 1234));
    CHECK_OK(aml_qenv(c->aml, AML_Q_EAGER_LIMIT, &v));
    CHECK(v == 1234, "eager limit");
    CHECK(aml_senv(c->aml, AML_Q_EAGER_LIMIT, -1) == AML_ERR_INVAL, "negative eager limit");
    CHECK(aml_senv(c->aml, AML_Q_PACKET_SIZE, 100) == AML_ERR_INVAL, "packet size read-only");
    CHECK(aml_senv(c->aml, AML_Q_PROTOCOL, 99) == AML_ERR_INVAL, "bad protocol");
    CHECK(aml_qenv(c->aml, 999, &v) == AML_ERR_INVAL, "bad query");
    v = 99;
    CHECK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &v) == AML_ERR_INVAL, "bad protocol stat");
    /* bad arguments are refused, nothing is sent */
    CHECK(aml_amsend(c->aml, c->size, 3, NULL, 0, NULL, 0, NULL, NULL, NULL) == AML_ERR_INVAL,
          "peer out of range");
    CHECK(aml_amsend(c->aml, -1, 3, NULL, 0, NULL, 0, NULL, NULL, NULL) == AML_ERR_INVAL,
          "negative peer");
    CHECK(aml_amsend(c->aml, 0, AML_MAX_HANDLERS, NULL, 0, NULL, 0, NULL, NULL, NULL) ==
          AML_ERR_INVAL, "internal handler id");
    CHECK(aml_amsend(c->aml, 0, 3, big, sizeof(big), NULL, 0, NULL, NULL, NULL) ==
          AML_ERR_INVAL, "oversized user header");
    CHECK(aml_amsend(c->aml, 0, 3, NULL, 0, NULL, 10, NULL, NULL, NULL) == AML_ERR_INVAL,
          "data length without data");
    CHECK(aml_register_handler(c->aml, AML_MAX_HANDLERS, test_handler, NULL) == AML_ERR_INVAL,
          "register out of range");
    CHECK(aml_register_handler(c->aml, 1, NULL, NULL) == AML_ERR_INVAL, "null handler");
    CHECK(aml_rmw(c->aml, 0, AML_RMW_FETCH_ADD, (int64_t *) 4, (int64_t[2]) {
                  1, 0}, NULL, NULL) == AML_ERR_INVAL, "unaligned rmw");
    CHECK(aml_rmw(c->aml, 0, 9, (int64_t *) 8, (int64_t[2]) {
                  1, 0}, NULL, NULL) == AML_ERR_INVAL, "bad rmw op");
    CHECK(aml_fence(c->aml, c->size) == AML_ERR_INVAL, "fence peer");
    CHECK(aml_connect(c->aml, "x", 1) == AML_ERR_STATE, "second connect");
    CHECK(strcmp(aml_proto_name(AML_PROTO_RNDV), "rndv") == 0, "proto name");
    /* a header handler may not block */
    CHECK_OK(aml_cntr_init(c->aml, &cnt, 0));
    CHECK_OK(aml_register_handler(c->aml, 4, blocking_handler, &cnt));
    CHECK_OK(aml_amsend(c->aml, c->rank, 4, NULL, 0, NULL, 0, NULL, NULL, NULL));
    while (cnt.value != 1000)
        aml_progress(c->aml);
    CHECK(in_handler_wait_rc == AML_ERR_STATE, "blocking in a handler returned %d",
          in_handler_wait_rc);
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* The keepalive watch (aml_ucx_keepalive.c): a socket accepted on a listener that appeared
 * between mark and listeners (as UCX's do) gets keepalive with the given idle time, interval
 * and probe count; one accepted on a listener that existed before, and the connecting ends,
 * are left alone. */
static int listener(uint16_t * port)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) || listen(fd, 4) ||
        getsockname(fd, (struct sockaddr *) &a, &l))
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int dial(uint16_t port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return fd >= 0 && connect(fd, (struct sockaddr *) &a, sizeof(a)) == 0 ? fd : -1;
}

static int ka_opt(int fd, int level, int opt)
{
    int v = -1;
    socklen_t l = sizeof(v);
    return getsockopt(fd, level, opt, &v, &l) ? -1 : v;
}

int t_keepalive(void)
{
    uint16_t p_app, p_ucx;
    int app = listener(&p_app), ucx, c1, c2, a1, a2, rc = 0;
    struct aml_ucx_ka *k = aml_ucx_ka_mark(7);
    if (app < 0 || !k)
        return 1;
    ucx = listener(&p_ucx);             /* "the worker's" listener */
    aml_ucx_ka_listeners(k);
    c1 = dial(p_app);
    c2 = dial(p_ucx);
    a1 = accept(app, NULL, NULL);
    a2 = accept(ucx, NULL, NULL);
    if (ucx < 0 || c1 < 0 || c2 < 0 || a1 < 0 || a2 < 0)
        return 1;
    aml_ucx_ka_sweep(k);
    if (ka_opt(a2, SOL_SOCKET, SO_KEEPALIVE) != 1 || ka_opt(a2, IPPROTO_TCP, TCP_KEEPIDLE) != 7 ||
        ka_opt(a2, IPPROTO_TCP, TCP_KEEPINTVL) != 7 ||
        ka_opt(a2, IPPROTO_TCP, TCP_KEEPCNT) != AML_KEEPALIVE_PROBES) {
        fprintf(stderr, "keepalive: the socket accepted on the worker's listener is not armed\n");
        rc = 1;
    }
    if (ka_opt(a1, SOL_SOCKET, SO_KEEPALIVE) != 0 || ka_opt(c1, SOL_SOCKET, SO_KEEPALIVE) != 0 ||
        ka_opt(c2, SOL_SOCKET, SO_KEEPALIVE) != 0 || ka_opt(ucx, SOL_SOCKET, SO_KEEPALIVE) != 0) {
        fprintf(stderr, "keepalive: a socket that is not an accepted one of the worker's was "
                "armed\n");
        rc = 1;
    }
    if (aml_ucx_ka_count(k) != 1) {
        fprintf(stderr, "keepalive: %lu sockets armed, expected 1\n", aml_ucx_ka_count(k));
        rc = 1;
    }
    /* the watch thread arms a socket accepted later, within its period (1 s) */
    aml_ucx_ka_start(k);
    int c3 = dial(p_ucx), a3 = accept(ucx, NULL, NULL), armed = 0;
    for (int i = 0; i < 30 && !(armed = ka_opt(a3, SOL_SOCKET, SO_KEEPALIVE) == 1); i++)
        usleep(100000);
    if (!armed) {
        fprintf(stderr, "keepalive: the watch did not arm a socket accepted after it started\n");
        rc = 1;
    }
    aml_ucx_ka_free(k);
    close(c3);
    close(a3);
    close(a1);
    close(a2);
    close(c1);
    close(c2);
    close(ucx);
    close(app);
    if (!rc)
        printf("keepalive: the worker's accepted sockets armed, nothing else\n");
    return rc;
}

/* invalid configuration is refused by aml_init */
int t_config(void)
{
    aml_config_t cfg;
    aml_t *a;
    aml_config_default(&cfg);
    cfg.size = 1;
    cfg.packet_size = 100;
    if (aml_init(&cfg, &a) != AML_ERR_INVAL)
        return 1;
    aml_config_default(&cfg);
    cfg.size = 1;
    cfg.rank = 1;
    if (aml_init(&cfg, &a) != AML_ERR_INVAL)
        return 1;
    aml_config_default(&cfg);
    cfg.size = 1;
    cfg.progress_mode = 7;
    if (aml_init(&cfg, &a) != AML_ERR_INVAL)
        return 1;
    aml_config_default(&cfg);
    cfg.size = 1;
    cfg.lanes = 9;
    if (aml_init(&cfg, &a) != AML_ERR_INVAL)
        return 1;
    aml_config_default(&cfg);
    cfg.size = 1;
    cfg.adaptive_credits = 0;
    cfg.protocol = AML_PROTO_ADAPTIVE;  /* adaptive without credits */
    if (aml_init(&cfg, &a) != AML_ERR_INVAL)
        return 1;
    aml_config_default(&cfg);
    cfg.size = 1;
    if (aml_init(&cfg, &a) != AML_OK)
        return 1;
    if (aml_xfer(a, &(aml_xfer_t) {
                 0}) != AML_ERR_STATE)        /* not connected */
        return 1;
    return aml_finalize(a) == AML_OK ? 0 : 1;
}

/* aml's default number of adaptive credits */
static int default_credits(void)
{
    aml_config_t d;
    aml_config_default(&d);
    return d.adaptive_credits;
}

/* Ranks that disagree on a setting receivers check are refused at connect, naming the
 * setting and both values; before, a correct sender was killed as "malformed" when rank 1
 * ran with fewer adaptive credits. Rank 1 uses 8 credits, rank 0 the default (64). */
void credits_by_rank(aml_config_t * cfg)
{
    if (cfg->rank == 1)
        cfg->adaptive_credits = 8;
}

int mismatch_check(aml_t * aml, int rank, int rc)
{
    const char *setting;
    int peer;
    int64_t mine, theirs;
    if (rc != AML_ERR_CONFIG || aml_connect_mismatch(aml, &setting, &peer, &mine, &theirs)) {
        fprintf(stderr, "rank %d: aml_connect returned %s\n", rank, aml_strerror(rc));
        return 1;
    }
    if (strcmp(setting, "adaptive_credits") || peer != 1 - rank ||
        mine != (rank == 1 ? 8 : default_credits()) ||
        theirs != (rank == 1 ? default_credits() : 8)) {
        fprintf(stderr, "rank %d: mismatch reported as %s with rank %d: %lld / %lld\n", rank,
                setting, peer, (long long) mine, (long long) theirs);
        return 1;
    }
    aml_finalize(aml);
    return 0;
}

int t_never(rank_ctx_t * c)
{
    (void) c;
    return 1;
}
