/*
 * aml's unit tests of malformed packets: the mk_* builders and bad_cases[] (sent by t_bad, one
 * case per run), a duplicated adaptive chunk and a forged FIN. In each, the receiver must stop
 * in aml's fatal path with a message naming the peer and the packet type.
 */
#include "at.h"
#include <unistd.h>
#include <time.h>

/* ---- malformed packets: the receiver stops with a message naming peer and type ---------- */

static void mk_one(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->handler = 3;
    p->msg_len = 100;   /* but only 10 bytes follow */
    *d = 10;
}

static void mk_first(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_EAGER_FIRST;
    p->handler = 3;
    p->msg_len = 100;
    p->addr = 50;       /* first chunk must be at offset 0 */
    *d = 10;
}

static void mk_cont(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_EAGER_CONT;
    p->msg_id = 77;     /* nothing under assembly */
    p->msg_len = 100;
    *d = 10;
}

static void mk_scout(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RNDV_SCOUT;
    p->handler = 3;
    p->msg_len = 1 << 20;
    p->aux0 = 64;       /* rkey length disagrees with the payload */
    *d = 10;
}

static void mk_done(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RNDV_DONE;
    p->msg_id = 12345;
}

static void mk_cmpl(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_CMPL;
    p->msg_id = 999;
}

static void mk_get(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_GET_REQ;
    p->addr = 0x1000;   /* not registered */
    p->msg_len = 64;
}

static void mk_rmw(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RMW_REQ;
    p->handler = AML_RMW_FETCH_ADD;
    p->addr = 0x1003;   /* unaligned */
}

static void mk_rmw_reply(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RMW_REPLY;
    p->msg_id = 4242;
}

static void mk_fence_req(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_FENCE_REQ;
    *d = 16;            /* control packets carry no data */
}

static void mk_fence_ack(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_FENCE_ACK;        /* nobody asked */
}

static void mk_adapt_first(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ADAPT_FIRST;
    p->handler = 3;
    p->msg_len = 100;
    p->addr = 50;       /* first chunk must be at offset 0 */
    *d = 10;
}

static void mk_adapt_data(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ADAPT_DATA;
    p->msg_id = 5;
    p->msg_len = 100;
    p->addr = 95;       /* 10 bytes at 95 overrun the message */
    *d = 10;
}

static void mk_adapt_token(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ADAPT_TOKEN;
    p->aux0 = 31337;    /* the receiver has no unconfirmed adaptive message */
}

static void mk_rndv_rtr(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RNDV_RTR;
    p->msg_id = 4711;   /* no put-variant send awaits it */
    p->msg_len = 1 << 20;
    p->aux0 = 10;
    *d = 10;
}

static void mk_rndv_fin(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_RNDV_FIN;
    p->msg_id = 4712;   /* no landing was exposed for it */
}

static void mk_unknown(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = 99;
}

static void mk_handler(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->handler = 9;     /* never registered */
}

static void mk_uhdr(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->handler = 3;
    p->uhdr_len = 200;  /* header carries none */
}

static void mk_src(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->src = 77;
}

/* rank 0 names rank 1 as the sender: only a transport that knows the sender (vnode's
 * FIFOs) can tell, so this case runs over vnode in both passes */
void mk_claim(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->handler = 3;
    p->src = 1;
}

static void mk_cntr(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->handler = 3;
    p->uhdr_len = sizeof(msg_hdr_t);
    p->cntr = 0x12345678;       /* not a counter of the target */
    memset(x, 0, sizeof(msg_hdr_t));
    *h += sizeof(msg_hdr_t);
}

static void mk_seq(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    p->seq = (uint32_t) -5;     /* from the past */
}

/* a compact header in place of p (t_bad set p->src = 0 and p->seq) */
static void mk_spkt(aml_pkt_t * p, unsigned handler, uint16_t seq, size_t * h)
{
    aml_spkt_t s = { AML_PKT_ONE_SHORT, (uint8_t) handler, 0, 0, 0, seq };
    memset(p, 0, sizeof(*p));
    memcpy(p, &s, sizeof(s));
    *h = sizeof(s);
}

static void mk_short_handler(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_spkt(p, 9, (uint16_t) p->seq, h);        /* handler 9: never registered */
}

static void mk_short_payload(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_spkt(p, 3, (uint16_t) p->seq, h);
    *h += 4;            /* data after the user header inside UCX's header ... */
    *d = 4;             /* ... and as UCX payload: one of them, never both */
}

static void mk_short_seq(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_spkt(p, 3, (uint16_t) (p->seq - 5), h); /* from the past */
}

static void mk_tiny(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_ONE;
    *h = 6;             /* shorter than any header */
}

static void mk_short_full(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    p->type = AML_PKT_EAGER_FIRST;
    *h = 40;            /* a full-header type in fewer bytes than the full header */
}

/* a medium compact header in place of p */
static void mk_mpkt(aml_pkt_t * p, int type, unsigned handler, uint32_t len, uint32_t off,
                    uint64_t id, size_t * h)
{
    aml_mpkt_t m = { {(uint8_t) type, (uint8_t) handler, 0, 0, 0, (uint16_t) p->seq}, len, off,
        id
    };
    memset(p, 0, sizeof(*p));
    memcpy(p, &m, sizeof(m));
    *h = sizeof(m);
}

static void mk_eager_sfirst(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_EAGER_SFIRST, 3, 100, 50, 1, h);
    *d = 10;
}

static void mk_eager_scont(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_EAGER_SCONT, 0, 100, 10, 77, h);        /* none under assembly */
    *d = 10;
}

static void mk_eager_shdr(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_EAGER_SCONT, 3, 100, 10, 1, h);  /* continuations name no handler */
    *d = 10;
}

static void mk_eager_sshort(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_EAGER_SFIRST, 3, 100, 0, 1, h);
    *h = 20;            /* cut inside the medium compact header */
}

static void mk_adapt_sdata(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_ADAPT_SDATA, 0, 100, 95, 5, h); /* 10 bytes at 95 overrun it */
    *d = 10;
}

static void mk_rndv_sscout(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_RNDV_SSCOUT, 3, 100, 0, 9, h);  /* comes eagerly, not by UCX */
    *d = 10;
}

static void mk_adapt_sfirst(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_mpkt(p, AML_PKT_ADAPT_SFIRST, 3, 100, 50, 5, h);
    *d = 10;
}

/* a packet 40000 ahead of its sequence number (t_bad moves it) */
static void mk_far(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_one(p, x, h, d);
    p->msg_len = *d;
}

/* a malformed packet one ahead of its sequence: checked on arrival, not kept (t_bad moves it) */
static void mk_early_bad(aml_pkt_t * p, char *x, size_t * h, size_t * d)
{
    mk_handler(p, x, h, d);
}

const bad_case_t bad_cases[] = {
    {"bad_far_ahead", "type ONE (1): sequence number 40000 is 40000 ahead of 0", mk_far},
    {"bad_early", "type ONE (1): handler 9 is not registered", mk_early_bad},
    {"bad_one", "type ONE (1): carries 10 data bytes, header says 100", mk_one},
    {"bad_eager_first", "type EAGER_FIRST (2): first chunk at offset 50", mk_first},
    {"bad_eager_cont", "type EAGER_CONT (3): continuation of message 77", mk_cont},
    {"bad_rndv_scout", "type RNDV_SCOUT (4): rkey of 10 bytes, header says 64", mk_scout},
    {"bad_rndv_done", "type RNDV_DONE (5): no rendezvous message 12345", mk_done},
    {"bad_cmpl", "type CMPL (6): completion for message 999", mk_cmpl},
    {"bad_get_req", "type GET_REQ (7): get of [0x1000, +64) outside registered", mk_get},
    {"bad_rmw_req", "type RMW_REQ (8): rmw on 0x1003", mk_rmw},
    {"bad_rmw_reply", "type RMW_REPLY (9): reply 4242 answers no outstanding rmw",
     mk_rmw_reply},
    {"bad_fence_req", "type FENCE_REQ (10): control packet carries 0 header and 16 data",
     mk_fence_req},
    {"bad_fence_ack", "type FENCE_ACK (11): fence acknowledgement nobody asked for",
     mk_fence_ack},
    {"bad_adapt_first", "type ADAPT_FIRST (12): first chunk at offset 50", mk_adapt_first},
    {"bad_adapt_data", "type ADAPT_DATA (13): chunk of 10 bytes at offset 95 overruns",
     mk_adapt_data},
    {"bad_adapt_token", "type ADAPT_TOKEN (14): token for 31337 adaptive messages, 0 unconfirmed",
     mk_adapt_token},
    {"bad_rndv_rtr", "type RNDV_RTR (15): ready-to-receive for message 4711", mk_rndv_rtr},
    {"bad_rndv_fin", "type RNDV_FIN (16): data put for message 4712", mk_rndv_fin},
    {"bad_type", "type UNKNOWN (99): unknown packet type", mk_unknown},
    {"bad_handler", "type ONE (1): handler 9 is not registered", mk_handler},
    {"bad_uhdr_len", "type ONE (1): header carries 0 user-header bytes, packet says 200",
     mk_uhdr},
    {"bad_src", "source 77 out of range", mk_src},
    {"bad_claim", "malformed packet from rank 0 (its transport knows the sender): type ONE (1) "
     "claims to come from rank 1", mk_claim},
    {"bad_cntr", "type ONE (1): target counter 0x12345678 is not a counter", mk_cntr},
    {"bad_seq", "type ONE (1): stale sequence number", mk_seq},
    {"bad_short_handler", "type ONE_SHORT (17): handler 9 is not registered", mk_short_handler},
    {"bad_short_payload", "type ONE_SHORT (17): 12-byte header with a 0-byte user header and 4 "
     "bytes of UCX payload: data in both", mk_short_payload},
    {"bad_short_seq", "type ONE_SHORT (17): stale sequence number", mk_short_seq},
    {"bad_tiny", "from an unknown rank: 6-byte header is shorter than the smallest aml packet "
     "header", mk_tiny},
    {"bad_short_full", "type EAGER_FIRST (2): 40-byte header is shorter than an aml packet "
     "header", mk_short_full},
    {"bad_eager_sfirst", "type EAGER_SFIRST (18): first chunk at offset 50", mk_eager_sfirst},
    {"bad_eager_scont", "type EAGER_SCONT (19): continuation of message 77, which is not under "
     "assembly", mk_eager_scont},
    {"bad_eager_shdr", "type EAGER_SCONT (19): continuation names handler 3", mk_eager_shdr},
    {"bad_eager_sshort", "type EAGER_SFIRST (18): 20-byte header is shorter than a medium "
     "compact header (24)", mk_eager_sshort},
    {"bad_rndv_sscout", "type RNDV_SSCOUT (22): UCX delivered it eagerly, the packet says "
     "otherwise", mk_rndv_sscout},
    {"bad_adapt_sfirst", "type ADAPT_SFIRST (20): first chunk at offset 50", mk_adapt_sfirst},
    {"bad_adapt_sdata", "type ADAPT_SDATA (21): chunk of 10 bytes at offset 95 overruns",
     mk_adapt_sdata},
};

const size_t at_nbad_cases = sizeof(bad_cases) / sizeof(bad_cases[0]);

const bad_case_t *cur_bad;

int t_bad(rank_ctx_t * c)
{
    rx_setup(c, 1 << 20);
    test_barrier(c);
    if (c->rank == 0) {
        char hdr[sizeof(aml_pkt_t) + 512], data[64];
        aml_pkt_t p;
        size_t hlen = sizeof(aml_pkt_t), dlen = 0;
        memset(&p, 0, sizeof(p));
        memset(data, 0, sizeof(data));
        p.src = 0;
        p.seq = aml_debug_next_seq(c->aml, 1);
        cur_bad->make(&p, hdr + sizeof(aml_pkt_t), &hlen, &dlen);
        if (cur_bad->make == mk_seq)
            p.seq += (uint32_t) -5;
        if (cur_bad->make == mk_far)
            p.seq += 40000;
        if (cur_bad->make == mk_early_bad)
            p.seq += 1;
        memcpy(hdr, &p, sizeof(p));
        CHECK_OK(aml_debug_send_raw(c->aml, 1, hdr, hlen, data, dlen));
    }
    for (;;)            /* rank 1 stops in aml's fatal path; the launcher ends rank 0 */
        aml_progress(c->aml);
    return 1;
}

/* A duplicated adaptive data chunk: with the first chunk [0, 40) it would make the byte total
 * of a 100-byte message while [70, 100) never came. Before, only the total was checked. */
int t_bad_adapt_dup(rank_ctx_t * c)
{
    rx_setup(c, 1 << 20);
    test_barrier(c);
    if (c->rank == 0) {
        aml_pkt_t p;
        char data[30];
        memset(&p, 0, sizeof(p));
        memset(data, 1, sizeof(data));
        p.type = AML_PKT_ADAPT_DATA;
        p.proto = AML_PROTO_ADAPTIVE;
        p.src = 0;
        p.msg_len = 100;
        p.msg_id = 5;
        p.addr = 40;
        CHECK_OK(aml_debug_send_raw(c->aml, 1, &p, sizeof(p), data, sizeof(data)));
        CHECK_OK(aml_debug_send_raw(c->aml, 1, &p, sizeof(p), data, sizeof(data)));
    }
    for (;;)
        aml_progress(c->aml);
    return 1;
}

/* A FIN forged by rank 2 for the id that shares rank 1's put-rendezvous key under the old keying
 * msg_id * peers_cap + src: rank 0 must refuse it, not complete rank 1's message. Rank 1 stops
 * progressing once its scout is in, so its landing waits in put_rx with no FIN of its own. */
typedef struct {
    volatile int deferred, quiet, forge;
    volatile uint64_t fid;
} forge_board_t;
static aml_handle_t forge_msg;

static int forge_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    if (!info->msg || info->protocol != AML_PROTO_RNDV)
        return 1;
    forge_msg = info->msg;
    recv->defer = 1;
    return 0;
}

static void forge_compl(aml_t * aml, void *arg)
{
    rank_ctx_t *c = arg;
    CHECK(0, "rank 1's message completed: rank 2's forged FIN was taken for rank 1's");
}

int t_bad_put_collide(rank_ctx_t * c)
{
    forge_board_t *b = test_board(0);
    static unsigned char buf[65536];
    CHECK_OK(aml_register_handler(c->aml, 10, forge_handler, NULL));
    test_barrier(c);
    if (c->rank == 1) {
        CHECK_OK(aml_amsend(c->aml, 0, 10, NULL, 0, buf, sizeof(buf), NULL, NULL, NULL));
        while (!b->deferred)
            aml_progress(c->aml);
        b->quiet = 1;
        for (;;)        /* no progress: rank 0's RTR stays unread, so no put and no FIN */
            usleep(1000);
    } else if (c->rank == 0) {
        uint64_t cap = (uint64_t) c->aml->peers_cap, inv = cap, m;
        aml_recv_t r = { .buf = buf, .compl_fn = forge_compl, .compl_arg = c };
        struct timespec t0, t;
        while (!forge_msg)
            aml_progress(c->aml);
        m = AML_CONTAINER(aml_htab_get(&c->aml->deferred, forge_msg), aml_rmsg_t, dh)->msg_id;
        b->deferred = 1;
        while (!b->quiet)
            usleep(1000);
        CHECK_OK(aml_accept(c->aml, forge_msg, &r));  /* the landing enters put_rx */
        /* fid * cap + 2 == m * cap + 1 (mod 2^64): solvable as cap is odd, so invertible */
        CHECK(cap & 1, "peers_cap %llu is even: no id collides", (unsigned long long) cap);
        for (int i = 0; i < 6; i++)     /* Newton: inverse of cap mod 2^64 */
            inv *= 2 - cap * inv;
        b->fid = m - inv;
        b->forge = 1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {            /* aml's fatal path ends this rank */
            aml_progress(c->aml);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (t.tv_sec - t0.tv_sec < 5);
        CHECK(0, "rank 2's FIN for message %llu was not refused", (unsigned long long) b->fid);
    } else {
        aml_pkt_t p;
        while (!b->forge)
            aml_progress(c->aml);
        memset(&p, 0, sizeof(p));
        p.type = AML_PKT_RNDV_FIN;
        p.src = 2;
        p.seq = aml_debug_next_seq(c->aml, 0);
        p.msg_id = b->fid;
        CHECK_OK(aml_debug_send_raw(c->aml, 0, &p, sizeof(p), NULL, 0));
        for (;;)
            aml_progress(c->aml);
    }
    return 1;
}
