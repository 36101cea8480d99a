/*
 * Unit tests of the aml message layer, without MPI. `aml_tests NAME` runs one test and
 * exits 0 on success; `aml_tests --list` prints the names.
 */
#include "launch.h"
#include "aml_impl.h"
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <stdint.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* ---- helpers -------------------------------------------------------------------------- */

static unsigned char pattern(int src, size_t i, uint64_t salt)
{
    return (unsigned char) ((i * 131 + (size_t) src * 7 + salt * 13) & 0xff);
}

static void fill(unsigned char *b, size_t n, int src, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(src, i, salt);
}

static size_t first_bad(const unsigned char *b, size_t n, int src, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern(src, i, salt))
            return i;
    return (size_t) -1;
}

/* ---- receive side used by several tests ------------------------------------------------ */

typedef struct {
    int src;
    uint64_t salt;
    uint64_t seq;
    int use_unpack;             /* 1: unpack; 2: unpack wanting only a third (partial) */
} msg_hdr_t;

typedef struct rx_state {
    unsigned char *buf;
    size_t cap;
    size_t len;
    msg_hdr_t hdr;
    int got_src;
    int done;
    int handler_calls;
    int compl_calls;
    uint64_t next_seq[16];
    int order_errors;
    size_t bad_at;
    size_t slot;                /* >0: each source lands at buf + src * slot */
    int bad_count;
    int over_want;              /* partial receives whose unpack got bytes past `want` */
    /* per completion, in completion order: later messages may complete before a test
     * looks (one aml_progress call can handle several) */
    int checked;
    size_t done_len[256];
    size_t done_bad[256];
    /* the message being received from each source (several may be in flight) */
    struct rx_msg {
        struct rx_state *r;
        unsigned char *cur;
        size_t len;
        size_t want, hi;        /* partial: bytes wanted; highest byte unpack got */
        int rndv;
        msg_hdr_t hdr;
    } msg[16];
} rx_state_t;

static rx_state_t rx;
/* the configuration moves partial rendezvous receives partly (aml's get or put rendezvous) */
static int partial_moves_part;

static void unpack_fn(void *arg, size_t off, const void *data, size_t len)
{
    struct rx_msg *m = arg;
    if (off + len > m->hi)
        m->hi = off + len;
    if (m->hdr.use_unpack == 2) {       /* keep what is wanted, as a truncating receive */
        if (off >= m->want)
            return;
        if (len > m->want - off)
            len = m->want - off;
    }
    memcpy(m->cur + off, data, len);
}

static void compl_fn(aml_t * aml, void *arg)
{
    struct rx_msg *m = arg;
    rx_state_t *r = m->r;
    (void) aml;
    r->compl_calls++;
    r->len = m->len;
    r->bad_at = first_bad(m->cur, m->hdr.use_unpack == 2 ? m->want : m->len, m->hdr.src,
                          m->hdr.salt);
    if (m->hdr.use_unpack == 2 && m->hi > m->want && m->rndv && partial_moves_part)
        r->over_want++;
    if (r->bad_at != (size_t) -1)
        r->bad_count++;
    r->done_len[r->done % 256] = m->len;
    r->done_bad[r->done % 256] = r->bad_at;
    r->done++;
}

static int test_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    rx_state_t *r = ctx;
    (void) aml;
    r->handler_calls++;
    if (info->uhdr_len != sizeof(msg_hdr_t) || ((uintptr_t) info->uhdr & 7))
        return 1;
    memcpy(&r->hdr, info->uhdr, sizeof(msg_hdr_t));
    if (r->hdr.src != info->src || info->msg_len > r->cap)
        return 1;
    if (r->hdr.seq != r->next_seq[info->src]++)
        r->order_errors++;
    r->got_src = info->src;
    r->len = info->msg_len;
    struct rx_msg *m = &r->msg[info->src];
    m->r = r;
    m->cur = r->buf + (size_t) info->src * r->slot;
    m->len = info->msg_len;
    m->hdr = r->hdr;
    m->hi = 0;
    m->rndv = info->protocol == AML_PROTO_RNDV;   /* only a rendezvous moves part */
    m->want = info->msg_len / 3;
    if (r->hdr.use_unpack) {
        recv->unpack = unpack_fn;
        recv->unpack_arg = m;
        recv->partial = r->hdr.use_unpack == 2;
        recv->want = m->want;
    } else {
        recv->buf = m->cur;
    }
    recv->compl_fn = compl_fn;
    recv->compl_arg = m;
    return 0;
}

static void rx_setup(rank_ctx_t * c, size_t cap)
{
    memset(&rx, 0, sizeof(rx));
    rx.cap = cap;
    rx.buf = malloc(cap ? cap : 1);
    CHECK(rx.buf, "malloc");
    CHECK_OK(aml_register_handler(c->aml, 3, test_handler, &rx));
}

static void wait_done(rank_ctx_t * c, int n)
{
    while (rx.done < n)
        aml_progress(c->aml);
}

#define MAX_DYN 16

/* ---- tests ---------------------------------------------------------------------------- */

/* handlers, user headers, counters (target counter named remotely, origin, completion) */
static int t_handlers(rank_ctx_t * c)
{
    aml_cntr_t tgt, org, cmpl;
    uintptr_t tgt_addrs[16];
    unsigned char *data = malloc(100);
    rx_setup(c, 100);
    CHECK_OK(aml_cntr_init(c->aml, &tgt, 0));
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) & tgt, tgt_addrs));
    CHECK(tgt_addrs[c->rank] == (uintptr_t) & tgt, "own entry");
    fill(data, 100, c->rank, 1);
    for (int p = 0; p < c->size; p++) {
        msg_hdr_t h = { c->rank, 1, 0, 0 };
        if (p == c->rank)
            continue;
        CHECK_OK(aml_amsend(c->aml, p, 3, &h, sizeof(h), data, 100,
                            (aml_cntr_t *) tgt_addrs[p], &org, &cmpl));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
    }
    /* one message from every other rank, each complete and counted */
    CHECK_OK(aml_cntr_wait(c->aml, &tgt, c->size - 1));
    CHECK(rx.handler_calls == c->size - 1 && rx.compl_calls == c->size - 1,
          "handler %d compl %d", rx.handler_calls, rx.compl_calls);
    CHECK(aml_cntr_get(&tgt) == 0, "target counter left at %lld", (long long) aml_cntr_get(&tgt));
    aml_cntr_set(&org, 5);
    CHECK(aml_cntr_get(&org) == 5, "set/get");
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_cntr_destroy(c->aml, &tgt));
    free(data);
    return 0;
}

/* around every threshold with a 32-byte user header and the default 8248-byte packet:
 * inline compact 216, compact one-packet 8208 (no target counter), full-header one-packet
 * 8144 (t_sizes names one) */
/* around the limits with this test's 32-byte user header: inline (216), one packet (8144
 * full header, 8208 compact), eager's first and second packet (8144 and 16320 full, 8192 and
 * 16416 medium compact) */
static const size_t sizes[] = { 0, 1, 7, 8, 100, 215, 216, 217, 4000, 8143, 8144, 8145, 8191,
    8192, 8193, 8207, 8208, 8209, 16320, 16321, 16416, 16417, 20000, 65535, 65536, 65537,
    200000, 1 << 20, 4 << 20, 16 << 20
};

#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t max_size = 16 << 20;

/* every size class, both landing modes (buffer / unpack); rank 0 -> rank 1 */
static int t_sizes(rank_ctx_t * c)
{
    aml_cntr_t org, cmpl;
    unsigned char *data = malloc(max_size);
    uint64_t salt = 100;
    rx_setup(c, max_size);
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    /* mode 0: landing buffer; 1: unpack; 2: unpack wanting a third (a truncating receive) */
    for (int mode = 0; mode < 3; mode++) {
        for (size_t k = 0; k < NSIZES && sizes[k] <= max_size; k++, salt++) {
            size_t n = sizes[k];
            if (c->rank == 0) {
                msg_hdr_t h = { 0, salt, rx.next_seq[0]++, mode };
                fill(data, n, 0, salt);
                /* mode 0 names a completion counter (full header), mode 1 none (compact
                 * packets for one-packet sizes, sent from this buffer above the inline size) */
                CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), data, n, NULL, &org,
                                    mode ? NULL : &cmpl));
                CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
                /* reusable after the origin counter: scribble to catch late reads */
                memset(data, 0xee, n);
                if (!mode)
                    CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
            } else if (c->rank == 1) {
                int idx = rx.checked++;
                wait_done(c, idx + 1);
                CHECK(rx.done_len[idx % 256] == n, "size %zu: got %zu", n, rx.done_len[idx % 256]);
                CHECK(rx.done_bad[idx % 256] == (size_t) -1, "size %zu mode %d: byte %zu wrong",
                      n, mode, rx.done_bad[idx % 256]);
            }
        }
    }
    CHECK(rx.order_errors == 0, "order");
    CHECK(rx.over_want == 0, "%d partial rendezvous receives moved more than they wanted",
          rx.over_want);
    if (c->rank == 0) {
        int64_t v = AML_PROTO_ONEPACKET, e = AML_PROTO_EAGER, r = AML_PROTO_RNDV;
        int64_t a = AML_PROTO_ADAPTIVE, credits, proto;
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &v));
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &e));
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &r));
        CHECK_OK(aml_qenv(c->aml, AML_Q_MSGS_SENT, &a));
        CHECK_OK(aml_qenv(c->aml, AML_Q_ADAPTIVE_CREDITS, &credits));
        aml_qenv(c->aml, AML_Q_PROTOCOL, &proto);
        if (proto == AML_PROTO_AUTO)    /* between one packet and the eager limit: adaptive
                                         * eager, or ordered eager when it is off */
            CHECK(v > 0 && (credits ? a > 0 && e == 0 : e > 0 && a == 0) && r > 0,
                  "protocols used: one %lld eager %lld adaptive %lld rndv %lld", (long long) v,
                  (long long) e, (long long) a, (long long) r);
        else
            CHECK((proto == AML_PROTO_EAGER ? e : proto == AML_PROTO_ADAPTIVE ? a : r) > 0,
                  "forced protocol not used");
    }
    CHECK_OK(aml_barrier(c->aml));
    free(data);
    return 0;
}

static void force_eager(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_EAGER;
    max_size = 1 << 20;
}

static void force_rndv(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
    cfg->rndv_ucx = 0;  /* aml's own get-based rendezvous */
    partial_moves_part = 1;
}

static void force_rndv_put(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
    partial_moves_part = 1;
}

static void force_rndv_ucx(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
}

static void rndv_get(aml_config_t * cfg)
{
    cfg->rndv_ucx = 0;
    partial_moves_part = 1;
}

static void rndv_put(aml_config_t * cfg)
{
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
    partial_moves_part = 1;
}

static void force_adaptive(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_ADAPTIVE;
    max_size = 1 << 20;
}

/* adaptive data over 3 lanes, sent last to first ahead of its first packet, small packets */
static void adaptive_reorder(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_ADAPTIVE;
    cfg->debug_reorder = 1;
    cfg->lanes = 3;
    cfg->packet_size = 1024;
    cfg->net_packet_size = 1024;
    max_size = 1 << 20;
}

static void lanes_3(aml_config_t * cfg)
{
    cfg->lanes = 3;
}

static void no_adaptive(aml_config_t * cfg)
{
    cfg->adaptive_credits = 0;
}

static void interrupt_mode(aml_config_t * cfg)
{
    cfg->progress_mode = AML_PROGRESS_INTERRUPT;
}

/* packets through UCX (these tests' transport) of another size than the one-packet limit */
static void small_packets(aml_config_t * cfg)
{
    cfg->packet_size = 1024;
    cfg->net_packet_size = 1536;
    cfg->eager_limit = 4096;
    max_size = 1 << 20;
}

/* many senders, mixed sizes (all protocols): per-sender order is kept */
static int t_order(rank_ctx_t * c)
{
    const int nmsg = 150;
    aml_cntr_t org;
    unsigned char *data = malloc(100000);
    rx_setup(c, 100000 * (size_t) c->size);
    rx.slot = 100000;
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    if (c->rank != 0) {
        for (int i = 0; i < nmsg; i++) {
            size_t n = (size_t) ((i * 7919 + c->rank * 104729) % 100000);
            if (i % 3 == 0)
                n %= 200;
            msg_hdr_t h = { c->rank, (uint64_t) i, (uint64_t) i, i & 1 };
            fill(data, n, c->rank, (uint64_t) i);
            CHECK_OK(aml_amsend(c->aml, 0, 3, &h, sizeof(h), data, n, NULL, &org, NULL));
            CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        }
    } else {
        /* messages of different senders interleave: each lands in its sender's slot, and
         * the completion handler checks it while it is still there */
        wait_done(c, nmsg * (c->size - 1));
        CHECK(rx.bad_count == 0, "%d messages corrupted", rx.bad_count);
        CHECK(rx.order_errors == 0, "%d order errors", rx.order_errors);
    }
    CHECK_OK(aml_barrier(c->aml));
    free(data);
    return 0;
}

/* small-message handler: it comes first for compact one-packet messages, sees the user header
 * as it travelled (unaligned when the header is not a multiple of 8 bytes) and the data in
 * place; what it declines, and every other message, goes to the header handler, all in the
 * order sent. Bad registrations are refused. */
typedef struct {
    int small_seen, small_taken, hdr_seen, bad, order;
    uint32_t next;
} small_state_t;

static small_state_t sm;

/* user header: 4-byte index, then 9 bytes of pattern (13: never a multiple of 8) */
#define SMALL_UHDR 13

static int small_check(uint32_t i, const unsigned char *u, const void *data, size_t len)
{
    unsigned char want[SMALL_UHDR];
    memcpy(want, &i, 4);
    fill(want + 4, SMALL_UHDR - 4, 1, i);
    if (memcmp(u, want, SMALL_UHDR) != 0)
        return 1;
    if (len != (i * 29) % 220 || first_bad(data, len, 0, i) != (size_t) -1)
        return 1;
    return 0;
}

static int small_fn(aml_t * aml, void *ctx, int src, const void *uhdr, size_t uhdr_len,
                    const void *data, size_t len)
{
    uint32_t i;
    (void) aml;
    sm.small_seen++;
    if (ctx != &sm || src != 0 || uhdr_len != SMALL_UHDR) {
        sm.bad++;
        return 0;
    }
    memcpy(&i, uhdr, 4);
    if (i % 3 == 0)
        return 0;       /* declined: the header handler must see it, next */
    if (i != sm.next++)
        sm.order++;
    if (small_check(i, uhdr, data, len))
        sm.bad++;
    sm.small_taken++;
    return 1;
}

static int small_hdr_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                             aml_recv_t * recv)
{
    uint32_t i;
    (void) aml;
    (void) recv;
    sm.hdr_seen++;
    if (ctx != &sm || info->uhdr_len != SMALL_UHDR || !info->data ||
        ((uintptr_t) info->uhdr & 7)) {
        sm.bad++;
        return 0;
    }
    memcpy(&i, info->uhdr, 4);
    if (i != sm.next++)
        sm.order++;
    if (i % 3 != 0 || small_check(i, info->uhdr, info->data, info->msg_len))
        sm.bad++;
    return 0;
}

static int t_small_handler(rank_ctx_t * c)
{
    const uint32_t nmsg = 3000;
    unsigned char u[SMALL_UHDR], d[256];
    memset(&sm, 0, sizeof(sm));
    CHECK(aml_register_small_handler(c->aml, 7, small_fn) == AML_ERR_INVAL,
          "small handler accepted for an id with no header handler");
    CHECK(aml_register_small_handler(c->aml, AML_MAX_HANDLERS, small_fn) == AML_ERR_INVAL,
          "small handler accepted for id %d", AML_MAX_HANDLERS);
    CHECK_OK(aml_register_handler(c->aml, 7, small_hdr_handler, &sm));
    CHECK_OK(aml_register_small_handler(c->aml, 7, small_fn));
    test_barrier(c);
    if (c->rank == 0) {
        aml_cntr_t org;
        CHECK_OK(aml_cntr_init(c->aml, &org, 0));
        for (uint32_t i = 0; i < nmsg; i++) {
            size_t n = (i * 29) % 220;
            memcpy(u, &i, 4);
            fill(u + 4, SMALL_UHDR - 4, 1, i);
            fill(d, n, 0, i);
            /* inline, and from the caller's buffer as a payload when longer than that */
            CHECK_OK(aml_amsend(c->aml, 1, 7, u, SMALL_UHDR, d, n, NULL, &org, NULL));
            CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        }
    } else {
        while (sm.small_taken + sm.hdr_seen < (int) nmsg && !sm.bad)
            aml_progress(c->aml);
        CHECK(sm.bad == 0 && sm.order == 0, "%d bad, %d out of order", sm.bad, sm.order);
        CHECK(sm.small_taken == (int) (nmsg - (nmsg + 2) / 3) &&
              sm.hdr_seen == (int) ((nmsg + 2) / 3), "small handler took %d, header handler "
              "saw %d", sm.small_taken, sm.hdr_seen);
    }
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_register_small_handler(c->aml, 7, NULL));
    return 0;
}

/* compact packets (no target counter) in a burst at a receiver that is not polling, so
 * UCX's FIFO fills: inline ones fall back to descriptors, larger ones (sent from the caller's
 * buffer) complete later; interleaved with full-header packets (target counter) and
 * aml_amsend_small: order and contents hold, and inline buffers are free at once */
static int t_compact_burst(rank_ctx_t * c)
{
    const int nmsg = 5000;
    const size_t maxn = 4000;
    aml_cntr_t org, tgt;
    uintptr_t tgts[2];
    int64_t inl = 0;
    unsigned char *data = malloc(nmsg * maxn), small[256];
    rx_setup(c, maxn);
    CHECK(data != NULL, "malloc");
    CHECK_OK(aml_qenv(c->aml, AML_Q_INLINE_LIMIT, &inl));
    CHECK(inl > (int64_t) sizeof(msg_hdr_t) && inl < 256, "inline limit %lld", (long long) inl);
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &tgt, 0));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) & tgt, tgts));
    CHECK_OK(aml_barrier(c->aml));
    if (c->rank == 0) {
        int norg = 0;
        for (int i = 0; i < nmsg; i++) {
            size_t n = (size_t) (i * 37) % (maxn + 1);
            unsigned char *buf = data + (size_t) i * maxn;
            msg_hdr_t h = { 0, (uint64_t) i, (uint64_t) i, 0 };
            if (i % 2 && sizeof(h) + n > (size_t) inl)
                n %= (size_t) inl - sizeof(h) + 1;      /* aml_amsend_small: inline only */
            fill(buf, n, 0, (uint64_t) i);
            if (i % 7 == 0) {
                CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), buf, n,
                                    (aml_cntr_t *) tgts[1], &org, NULL));
                norg++;
            } else if (i % 2) {
                memcpy(small, buf, n);
                CHECK_OK(aml_amsend_small(c->aml, 1, 3, &h, sizeof(h), small, n));
                memset(small, 0xee, sizeof(small));     /* free at once */
            } else {
                CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), buf, n, NULL, &org, NULL));
                norg++;
            }
        }
        CHECK_OK(aml_cntr_wait(c->aml, &org, norg));
    } else {
        usleep(200000);         /* let the sender fill the transport */
        wait_done(c, nmsg);
        CHECK(rx.bad_count == 0, "%d messages corrupted", rx.bad_count);
        CHECK(rx.order_errors == 0, "%d order errors", rx.order_errors);
        CHECK(aml_cntr_get(&tgt) == (nmsg + 6) / 7, "target counter %lld",
              (long long) aml_cntr_get(&tgt));
    }
    CHECK(aml_amsend_small(c->aml, 1 - c->rank, 3, NULL, 0, data, (size_t) inl + 1) ==
          AML_ERR_INVAL, "aml_amsend_small accepted more than the inline limit");
    CHECK(aml_amsend_small(c->aml, 5, 3, NULL, 0, data, 1) == AML_ERR_INVAL,
          "aml_amsend_small accepted peer 5 of 2");
    CHECK_OK(aml_barrier(c->aml));
    free(data);
    return 0;
}

static size_t fence_check_bad = 1;
static int fence_check_seen;
static int fence_check_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                               aml_recv_t * recv)
{
    (void) aml;
    (void) recv;
    fence_check_bad = first_bad(ctx, 1 << 20, info->src, 77);
    fence_check_seen = 1;
    return 0;
}

/* direct put/get: keys exchanged as active messages (handler 8), then puts and gets with no
 * message at the target, checked byte by byte; the range is checked at the origin */
static unsigned char dkeys[16][1024];
static size_t dkey_len[16];
static int dkeys_seen;

static void dkey_landed(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    dkeys_seen++;
}

static int dkey_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) ctx;
    if (info->src < 0 || info->src >= 16 || info->msg_len > sizeof(dkeys[0]))
        return -1;      /* not a key: the test fails waiting for it */
    dkey_len[info->src] = info->msg_len;
    recv->buf = dkeys[info->src];
    recv->compl_fn = dkey_landed;
    return 0;
}

static int t_direct(rank_ctx_t * c)
{
    const size_t region = 4 << 20;
    unsigned char *win = calloc(1, region), *local = malloc(region);
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    static const size_t psz[] = { 8, 5000, 70000, 3 << 20 };
    aml_xmem_t *m;
    aml_xkey_t *k;
    aml_cntr_t done;
    const void *key;
    size_t key_len;
    uintptr_t bases[16];
    int rc;

    CHECK(c->size <= 16, "at most 16 ranks");
    CHECK_OK(aml_cntr_init(c->aml, &done, 0));
    CHECK_OK(aml_register_handler(c->aml, 8, dkey_handler, NULL));
    CHECK(aml_xmem_expose(c->aml, win, 0, &m) == AML_ERR_INVAL, "exposing 0 bytes");
    CHECK_OK(aml_xmem_expose(c->aml, win, region, &m));
    CHECK_OK(aml_xmem_key(c->aml, m, &key, &key_len));
    CHECK(key_len <= sizeof(dkeys[0]), "a %zu-byte key", key_len);
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) win, bases));
    /* a keyless read of an address the peer published (aml_peer_read): on a node with single
     * copy, from every vnode peer; refused to a UCX peer, and refused alike for 0 bytes */
    fill(win + 8192, 70000, c->rank, 77);
    CHECK_OK(aml_barrier(c->aml));
    rc = aml_peer_read(c->aml, left, local, bases[left] + 8192, 70000);
    CHECK(rc == AML_OK || rc == AML_ERR_NOT_SUPPORTED, "aml_peer_read: %d", rc);
    CHECK(aml_peer_read(c->aml, left, NULL, 0, 0) == rc, "a 0-byte read answers otherwise");
    CHECK(rc == AML_ERR_NOT_SUPPORTED || getenv("AML_TEST_VNODE") != NULL,
          "a UCX peer read by single copy");
    if (rc == AML_OK)
        CHECK(first_bad(local, 70000, left, 77) == (size_t) -1, "aml_peer_read: byte %zu",
              first_bad(local, 70000, left, 77));
    CHECK(aml_peer_read(c->aml, c->size, local, bases[left], 8) == AML_ERR_INVAL,
          "a read from a peer that does not exist");
    CHECK_OK(aml_barrier(c->aml));
    memset(win, 0, 8192 + 70000);
    dkeys_seen = 0;
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_amsend(c->aml, right, 8, NULL, 0, key, key_len, NULL, NULL, NULL));
    while (dkeys_seen < 1)
        aml_progress(c->aml);
    CHECK_OK(aml_barrier(c->aml));
    CHECK(aml_xkey_open(c->aml, left, dkeys[left], 3, &k) == AML_ERR_INVAL, "a short key");
    rc = aml_xkey_open(c->aml, left, dkeys[left], dkey_len[left], &k);
    if (rc == AML_ERR_NOT_SUPPORTED) {
        /* a vnode peer on a node without single copy: aml_put/aml_get are the way there */
        CHECK(getenv("AML_TEST_VNODE") != NULL, "direct access refused to a UCX peer");
        CHECK_OK(aml_barrier(c->aml));
        CHECK_OK(aml_xmem_withdraw(c->aml, m));
        free(win);
        free(local);
        return 0;
    }
    CHECK_OK(rc);
    /* single copy is the kernel's, RMA over UCX's tcp the peer's progress; UCX picks shared
     * memory and cma between processes of one node unless told tcp only */
    {
        const char *tls = getenv("UCX_TLS");
        int want = getenv("AML_TEST_VNODE") == NULL && tls && !strcmp(tls, "tcp");
        CHECK(aml_xkey_soft(c->aml, k) == want, "aml_xkey_soft says %d, want %d (UCX_TLS %s)",
              aml_xkey_soft(c->aml, k), want, tls ? tls : "unset");
        CHECK(aml_xkey_soft(c->aml, k) == want, "asked again, aml_xkey_soft changed its answer");
    }

    /* we write into our left neighbour's memory and read it back; our right neighbour
     * writes ours */
    for (size_t i = 0; i < sizeof(psz) / sizeof(psz[0]); i++) {
        size_t n = psz[i], off = 64 * i;
        fill(local, n, c->rank, i);
        CHECK_OK(aml_put_direct(c->aml, k, bases[left] + off, local, n, &done, NULL, NULL));
        CHECK_OK(aml_cntr_wait(c->aml, &done, 1));
        CHECK_OK(aml_barrier(c->aml));
        CHECK(first_bad(win + off, n, right, i) == (size_t) -1, "direct put of %zu bytes from "
              "%d: byte %zu", n, right, first_bad(win + off, n, right, i));
        memset(local, 0, n);
        CHECK_OK(aml_get_direct(c->aml, k, bases[left] + off, local, n, &done, NULL, NULL));
        CHECK_OK(aml_cntr_wait(c->aml, &done, 1));
        CHECK(first_bad(local, n, c->rank, i) == (size_t) -1, "direct get of %zu bytes", n);
        CHECK_OK(aml_barrier(c->aml));
    }
    /* many at once, then a fence: every one is in place when it returns */
    for (int i = 0; i < 64; i++) {
        fill(local + 4096 * i, 4096, c->rank, 100 + i);
        CHECK_OK(aml_put_direct(c->aml, k, bases[left] + 4096 * i, local + 4096 * i, 4096,
                                NULL, NULL, NULL));
    }
    CHECK_OK(aml_fence(c->aml, left));
    CHECK_OK(aml_barrier(c->aml));
    for (int i = 0; i < 64; i++)
        CHECK(first_bad(win + 4096 * i, 4096, right, 100 + i) == (size_t) -1,
              "put %d of 64 from %d not in place after the fence", i, right);
    /* outside the exposed memory: refused at the origin */
    CHECK(aml_put_direct(c->aml, k, bases[left] + region - 4, local, 8, NULL, NULL, NULL) ==
          AML_ERR_RANGE, "a put past the end");
    CHECK(aml_get_direct(c->aml, k, bases[left] - 8, local, 8, NULL, NULL, NULL) ==
          AML_ERR_RANGE, "a get before the start");
    CHECK_OK(aml_barrier(c->aml));
    aml_xkey_close(c->aml, k);
    CHECK_OK(aml_xmem_withdraw(c->aml, m));
    free(win);
    free(local);
    return 0;
}

/* put/get/rmw on registered memory, fences, gfence, address_init */
static int t_rma(rank_ctx_t * c)
{
    const size_t region = 4 << 20;
    unsigned char *win = calloc(1, region), *local = malloc(region);
    int64_t *atom = calloc(4, sizeof(int64_t));
    uintptr_t bases[16], atoms[16];
    aml_cntr_t org, tgt, cmpl;
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    static const size_t psz[] = { 0, 8, 5000, 70000, 3 << 20 };

    CHECK_OK(aml_mem_register(c->aml, win, region));
    CHECK_OK(aml_mem_register(c->aml, atom, 4 * sizeof(int64_t)));
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &tgt, 0));
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) win, bases));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) atom, atoms));

    for (size_t k = 0; k < sizeof(psz) / sizeof(psz[0]); k++) {
        size_t n = psz[k];
        fill(local, n, c->rank, k);
        CHECK_OK(aml_put(c->aml, right, (void *) bases[right], local, n, NULL, &org, &cmpl));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
        CHECK_OK(aml_gfence(c->aml));
        CHECK(first_bad(win, n, left, k) == (size_t) -1, "put of %zu bytes from %d", n, left);
        /* read back what our right neighbour got from us */
        memset(local, 0, n);
        CHECK_OK(aml_get(c->aml, right, (void *) bases[right], local, n, NULL, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(first_bad(local, n, c->rank, k) == (size_t) -1, "get of %zu bytes", n);
        CHECK_OK(aml_gfence(c->aml));
    }

    /* put + fence: once aml_fence returns the data is at the target. Checked by the target
     * itself, in the handler of a message sent after the fence (no gfence, no barrier, which
     * would hide a fence that does nothing): the 1 MiB put is a rendezvous still moving when
     * a no-op fence returns. */
    fill(local, 1 << 20, c->rank, 77);
    CHECK_OK(aml_register_handler(c->aml, 5, fence_check_handler, (void *) (win + 8)));
    CHECK_OK(aml_barrier(c->aml));      /* not test_barrier: debug_reorder may hold a packet
                                         * that only aml_progress sends */
    CHECK_OK(aml_put(c->aml, right, (char *) bases[right] + 8, local, 1 << 20, NULL, NULL, NULL));
    CHECK_OK(aml_fence(c->aml, right));
    CHECK_OK(aml_amsend(c->aml, right, 5, NULL, 0, NULL, 0, NULL, NULL, NULL));
    while (!fence_check_seen)
        aml_progress(c->aml);
    CHECK(fence_check_bad == (size_t) -1, "after the fence, byte %zu of the put from %d was "
          "not there", fence_check_bad, left);
    CHECK_OK(aml_gfence(c->aml));

    /* rmw: every rank adds 1..10 to rank 0's atom[0] (contended: the sum is exact), and
     * 1..10 to its right neighbour's atom[3], which only it touches: each previous value is
     * exact, the sum of the earlier operands */
    for (int i = 1; i <= 10; i++) {
        int64_t in[2] = { i, 0 }, prev = -1;
        CHECK_OK(aml_rmw(c->aml, 0, AML_RMW_FETCH_ADD, (int64_t *) atoms[0], in, &prev, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev >= 0 && prev <= 55 * c->size - i, "fetch-add returned %lld", (long long) prev);
        prev = -1;
        CHECK_OK(aml_rmw(c->aml, right, AML_RMW_FETCH_ADD, (int64_t *) atoms[right] + 3, in,
                         &prev, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev == (int64_t) (i - 1) * i / 2, "fetch-add %d returned %lld, want %d", i,
              (long long) prev, (i - 1) * i / 2);
    }
    CHECK_OK(aml_gfence(c->aml));
    if (c->rank == 0)
        CHECK(atom[0] == 55 * c->size, "sum %lld, want %d", (long long) atom[0], 55 * c->size);
    CHECK(atom[3] == 55, "uncontended sum %lld, want 55", (long long) atom[3]);
    /* compare-and-swap: exactly one rank wins */
    {
        int64_t in[2] = { 0, c->rank + 1 }, prev = -1;
        CHECK_OK(aml_rmw(c->aml, 0, AML_RMW_CMP_SWAP, (int64_t *) atoms[0] + 1, in, &prev,
                         &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        int64_t won = prev == 0, wins[16];
        CHECK_OK(aml_address_init(c->aml, (uintptr_t) won, (uintptr_t *) wins));
        int64_t total = 0;
        for (int i = 0; i < c->size; i++)
            total += wins[i];
        CHECK(total == 1, "%lld ranks won the compare-and-swap", (long long) total);
    }
    /* swap */
    {
        int64_t in[2] = { 1000 + c->rank, 0 }, prev = -5;
        CHECK_OK(aml_rmw(c->aml, right, AML_RMW_SWAP, (int64_t *) atoms[right] + 2, in, &prev,
                         &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev == 0, "swap saw %lld", (long long) prev);
        CHECK_OK(aml_gfence(c->aml));
        CHECK(atom[2] == 1000 + left, "swap result %lld", (long long) atom[2]);
    }
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_mem_deregister(c->aml, win));
    CHECK(aml_mem_deregister(c->aml, win) == AML_ERR_RANGE, "double deregister");
    free(win);
    free(local);
    return 0;
}

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

static int t_env(rank_ctx_t * c)
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

/* invalid configuration is refused by aml_init */
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

static int t_keepalive(void)
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
        fprintf(stderr, "keepalive: a socket that is not an accepted one of the worker's was armed\n");
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

static int t_config(void)
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

/* ---- malformed packets: the receiver stops with a message naming peer and type ---------- */

typedef struct {
    const char *name;
    const char *expect;         /* part of the fatal message */
    void (*make) (aml_pkt_t * p, char *extra, size_t * hlen, size_t * dlen);
} bad_case_t;

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
static void mk_claim(aml_pkt_t * p, char *x, size_t * h, size_t * d)
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

static const bad_case_t bad_cases[] = {
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

static const bad_case_t *cur_bad;

static int t_bad(rank_ctx_t * c)
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

static int t_defer(rank_ctx_t * c)
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

static void adaptive_credits(aml_config_t * cfg)
{
    cfg->adaptive_credits = ACREDITS;
    cfg->lanes = 2;
    cfg->eager_limit = 65536;   /* 30000-byte messages are adaptive */
    cfg->vnode_eager_limit = 65536;     /* also through vnode (AML_TEST_VNODE) */
}

static int t_adaptive_credits(rank_ctx_t * c)
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

static int t_adaptive_empty(rank_ctx_t * c)
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

/* interrupt mode: a receiver that armed the worker sleeps in poll() on the event fd and is
 * woken by the arrival (the sender waits 300 ms first); polling-mode workers have no fd */
static int t_interrupt(rank_ctx_t * c)
{
    int fd, armed = 0, woke = 0;
    rx_setup(c, 64);
    CHECK_OK(aml_event_fd(c->aml, &fd));
    test_barrier(c);
    if (c->rank == 0) {
        msg_hdr_t h = { 0, 9, 0, 0 };
        unsigned char d[64];
        fill(d, 64, 0, 9);
        usleep(300000);
        CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), d, 64, NULL, NULL, NULL));
    } else {
        while (rx.done < 1) {
            int rc = aml_arm(c->aml);
            if (rc == AML_ERR_STATE) {
                aml_progress(c->aml);
                continue;
            }
            CHECK_OK(rc);
            armed++;
            struct pollfd p = { fd, POLLIN, 0 };
            int n = poll(&p, 1, 10000);
            CHECK(n == 1, "poll returned %d: not woken by the arrival", n);
            woke++;
            aml_progress(c->aml);
        }
        CHECK(armed >= 1 && woke >= 1, "never slept (armed %d)", armed);
        CHECK(rx.bad_count == 0, "data wrong");
    }
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

static int t_no_fd(rank_ctx_t * c)
{
    int fd;
    CHECK(aml_event_fd(c->aml, &fd) == AML_ERR_STATE, "polling mode has an event fd");
    CHECK(aml_arm(c->aml) == AML_ERR_STATE, "polling mode arms");
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* ---- driver --------------------------------------------------------------------------- */

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
static void credits_by_rank(aml_config_t * cfg)
{
    if (cfg->rank == 1)
        cfg->adaptive_credits = 8;
}

static int mismatch_check(aml_t * aml, int rank, int rc)
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

static int t_never(rank_ctx_t * c)
{
    (void) c;
    return 1;
}
/* ---- hardening: each of these failed or hung before its fix ------------------ */

/* A transport error on a send is fatal and names the peer; before, aml_send_desc returned an
 * error after taking the sequence number, the receiver stashed every later packet and quiesce
 * hung. Rank 0 sends a two-packet eager message whose second packet fails. */
static void eager_only(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_EAGER;
}

static int t_send_fail(rank_ctx_t * c)
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

static int t_quiesce_crossed(rank_ctx_t * c)
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

static int t_quiesce_late(rank_ctx_t * c)
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

static int t_fence_defer(rank_ctx_t * c)
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

static int t_reject_cmpl(rank_ctx_t * c)
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
static int t_order_stash(rank_ctx_t * c)
{
    int64_t stashed = 0;
    int rc = t_order(c);
    CHECK_OK(aml_qenv(c->aml, AML_Q_STASHED, &stashed));
    if (c->rank == 0)
        CHECK(stashed > 0, "no packet arrived ahead of its sequence number");
    return rc;
}

static void seq_reorder(aml_config_t * cfg)
{
    cfg->debug_reorder = 1;
}

static void seq_reorder_put(aml_config_t * cfg)
{
    cfg->debug_reorder = 1;
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
}

/* ---- peers of other jobs (aml_add_peer) ------------------------------------------------ */

/* Two jobs of two ranks: every rank connects to every rank of the other job at once (so
 * CONNECTs cross), then each sends one-packet, eager and rendezvous messages to each of them
 * and fences; a receiver checks that a message's source is the index aml_add_peer gave for
 * its sender, and every byte. */
struct dyn_hdr {
    int32_t grank;
    int32_t seq;
    uint64_t len;
};

static struct {
    int peer_of[MAX_DYN];       /* index of global rank g at this process */
    int got;
    int dones;                  /* "done" messages: their sender's fences completed */
    int bad;
} dyn;

static void dyn_compl(aml_t * aml, void *arg)
{
    uint64_t *m = arg;          /* len, grank, then the data */
    const unsigned char *d = (const unsigned char *) (m + 2);
    (void) aml;
    for (uint64_t i = 0; i < m[0]; i++)
        if (d[i] != (unsigned char) (m[1] * 31 + i))
            dyn.bad++;
    free(m);
    dyn.got++;
}

static int dyn_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    struct dyn_hdr h;
    uint64_t *m;
    (void) aml;
    (void) ctx;
    memcpy(&h, info->uhdr, sizeof(h));
    if (h.seq == -1) {
        dyn.dones++;
        return 0;
    }
    if (h.grank < 0 || h.grank >= MAX_DYN || dyn.peer_of[h.grank] != info->src ||
        h.len != info->msg_len)
        dyn.bad++;
    m = malloc(2 * sizeof(uint64_t) + info->msg_len + 1);
    m[0] = info->msg_len;
    m[1] = (uint64_t) h.grank;
    if (info->data) {
        memcpy(m + 2, info->data, info->msg_len);
        dyn_compl(aml, m);
        return 0;
    }
    recv->buf = m + 2;
    recv->compl_fn = dyn_compl;
    recv->compl_arg = m;
    return 0;
}

static int t_dynamic(rank_ctx_t * c)
{
    static const size_t sizes[] = { 8, 3000, 10000, 1 << 20 };
    const int nsz = sizeof(sizes) / sizeof(sizes[0]);
    int other0 = c->job ? 0 : launch_split, nother = 2, nall = launch_split + 2;
    const void *up;
    size_t ul;
    unsigned char *buf = malloc(1 << 20);
    int64_t npeers;

    CHECK(buf, "malloc");
    memset(&dyn, 0, sizeof(dyn));
    CHECK_OK(aml_register_handler(c->aml, 5, dyn_handler, NULL));
    CHECK_OK(aml_upid(c->aml, -1, &up, &ul));
    CHECK(ul > 8 && ul + sizeof(size_t) <= BOARD_MAX, "upid of %zu bytes", ul);
    memcpy(test_board(c->grank), &ul, sizeof(ul));
    memcpy((char *) test_board(c->grank) + sizeof(ul), up, ul);
    test_barrier(c);

    /* every rank of the other job, all at once; own job's ranks and self by their upid too */
    for (int g = 0; g < nall; g++) {
        size_t l;
        memcpy(&l, test_board(g), sizeof(l));
        CHECK_OK(aml_add_peer(c->aml, (char *) test_board(g) + sizeof(l), l, 30000,
                              &dyn.peer_of[g]));
        if (g >= other0 && g < other0 + nother)
            CHECK(dyn.peer_of[g] >= c->size, "peer of another job got index %d", dyn.peer_of[g]);
        else
            CHECK(dyn.peer_of[g] == g - (c->job ? launch_split : 0), "rank of this job: %d",
                  dyn.peer_of[g]);
    }
    /* asking again gives the same index; the upid of the index is the one asked for */
    for (int g = other0; g < other0 + nother; g++) {
        size_t l;
        int again;
        memcpy(&l, test_board(g), sizeof(l));
        CHECK_OK(aml_add_peer(c->aml, (char *) test_board(g) + sizeof(l), l, 0, &again));
        CHECK(again == dyn.peer_of[g], "second add_peer: %d, first %d", again, dyn.peer_of[g]);
        CHECK_OK(aml_upid(c->aml, again, &up, &ul));
        CHECK(ul == l && !memcmp(up, (char *) test_board(g) + sizeof(l), l), "upid differs");
    }
    CHECK_OK(aml_qenv(c->aml, AML_Q_PEERS, &npeers));
    CHECK(npeers == c->size + nother, "%lld peers", (long long) npeers);
    test_barrier(c);

    for (int i = 0; i < (1 << 20); i++)
        buf[i] = (unsigned char) (c->grank * 31 + i);
    for (int g = other0; g < other0 + nother; g++) {
        for (int k = 0; k < nsz; k++) {
            struct dyn_hdr h = { c->grank, k, sizes[k] };
            aml_cntr_t org;
            CHECK_OK(aml_cntr_init(c->aml, &org, 0));
            CHECK_OK(aml_amsend(c->aml, dyn.peer_of[g], 5, &h, sizeof(h), buf, sizes[k], NULL,
                                &org, NULL));
            CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
            CHECK_OK(aml_cntr_destroy(c->aml, &org));
        }
        CHECK_OK(aml_fence(c->aml, dyn.peer_of[g]));
    }
    /* a fence needs its target's progress: nobody stops progressing before every peer's
     * fences completed */
    for (int g = other0; g < other0 + nother; g++) {
        struct dyn_hdr h = { c->grank, -1, 0 };
        CHECK_OK(aml_amsend_small(c->aml, dyn.peer_of[g], 5, &h, sizeof(h), NULL, 0));
    }
    while (dyn.got < nother * nsz || dyn.dones < nother)
        aml_progress(c->aml);
    CHECK(dyn.bad == 0, "%d bad messages or bytes", dyn.bad);
    test_barrier(c);
    free(buf);
    return 0;
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

static int t_adapt_claim(rank_ctx_t * c)
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

/* As MPI's intercommunicator map exchange connects two jobs: each job's rank 0 adds every
 * process of the other job before its own ranks know of them (they wait for it, progressing,
 * as in a broadcast), then sends to each. A rank 0 that waited for each connection would wait
 * for ranks that wait for it: aml_add_peer_async connects from progress, and the first send to
 * a peer waits for it. */
static int map_msgs;

static int map_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    map_msgs++;
    return 0;
}

static int t_dynamic_map(rank_ctx_t * c)
{
    volatile int *told = (volatile int *) ((char *) test_board(c->job ? launch_split : 0) + 520);
    int other0 = c->job ? 0 : launch_split, nother = c->job ? launch_split : 2;
    int peer[4];
    const void *up;
    size_t ul;

    CHECK_OK(aml_register_handler(c->aml, 5, map_handler, NULL));
    CHECK_OK(aml_upid(c->aml, -1, &up, &ul));
    memcpy(test_board(c->grank), &ul, sizeof(ul));
    memcpy((char *) test_board(c->grank) + sizeof(ul), up, ul);
    test_barrier(c);
    if (c->rank == 0) {
        for (int k = 0; k < nother; k++) {
            size_t l;
            memcpy(&l, test_board(other0 + k), sizeof(l));
            CHECK_OK(aml_add_peer_async(c->aml, (char *) test_board(other0 + k) + sizeof(l), l,
                                        30000, &peer[k]));
        }
        *told = 1;
        for (int k = 0; k < nother; k++)
            CHECK_OK(aml_amsend_small(c->aml, peer[k], 5, "map", 3, NULL, 0));
    } else {
        while (!*told)
            aml_progress(c->aml);
        for (int k = 0; k < nother; k++) {
            size_t l;
            memcpy(&l, test_board(other0 + k), sizeof(l));
            CHECK_OK(aml_add_peer(c->aml, (char *) test_board(other0 + k) + sizeof(l), l, 30000,
                                  &peer[k]));
        }
    }
    /* every rank 0 sends one message to each process of the other job */
    while (map_msgs < 1)
        aml_progress(c->aml);
    test_barrier(c);
    return 0;
}

/* ---- a process of another job that nobody expects (aml_listen) -------------------------- */
/* Two jobs of two. Process 2 (job 1) knows the upid of rank 0 of job 0, which does not listen:
 * its CONNECT requests are refused and aml_add_peer times out; a packet it sends claiming to
 * be rank 1 of job 0 is refused too (it carries no token of rank 0). Rank 0 runs no handler,
 * has no new peer, and counts what it refused. Then rank 0 listens: process 2 connects, and
 * its message arrives from its own index, not from a rank of job 0. */
static int stranger_hits, stranger_src = -1;

static int stranger_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                            aml_recv_t * recv)
{
    stranger_hits++;
    stranger_src = info->src;
    return 0;
}

static int t_stranger(rank_ctx_t * c)
{
    volatile int *phase = (volatile int *) ((char *) test_board(2) + 512);
    const void *up;
    size_t ul;

    CHECK_OK(aml_register_handler(c->aml, 5, stranger_handler, NULL));
    CHECK_OK(aml_upid(c->aml, -1, &up, &ul));
    memcpy(test_board(c->grank), &ul, sizeof(ul));
    memcpy((char *) test_board(c->grank) + sizeof(ul), up, ul);
    test_barrier(c);
    if (c->grank == 2) {
        const char *vu = (const char *) test_board(0) + sizeof(size_t);
        size_t vl;
        int64_t np;
        int v, again, rc;
        aml_pkt_t p;
        memcpy(&vl, test_board(0), sizeof(vl));
        rc = aml_add_peer(c->aml, vu, vl, 1000, &v);
        CHECK(rc == AML_ERR_TIMEOUT, "connecting to a process that does not listen: %s",
              aml_strerror(rc));
        CHECK_OK(aml_qenv(c->aml, AML_Q_PEERS, &np));
        v = (int) np - 1;       /* the record made for it */
        memset(&p, 0, sizeof(p));
        p.type = AML_PKT_ONE;
        p.src = 1;              /* rank 1 of job 0 */
        p.handler = 5;
        p.msg_len = 4;
        CHECK_OK(aml_debug_send_raw(c->aml, v, &p, sizeof(p), "abcd", 4));
        c->aml->peers[v].tx_seq--;      /* it was never ours to count */
        *phase = 1;
        while (*phase != 2)
            aml_progress(c->aml);
        CHECK_OK(aml_add_peer(c->aml, vu, vl, 30000, &again));
        CHECK(again == v, "index %d, then %d", v, again);
        CHECK_OK(aml_amsend_small(c->aml, v, 5, "hi", 2, NULL, 0));
        while (*phase != 3)
            aml_progress(c->aml);
    } else if (c->grank == 0) {
        int64_t refused, np;
        struct timespec t0, t;
        while (*phase != 1)
            aml_progress(c->aml);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {            /* the forged packet may still be on its way */
            aml_progress(c->aml);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 300);
        CHECK_OK(aml_qenv(c->aml, AML_Q_REFUSED, &refused));
        CHECK_OK(aml_qenv(c->aml, AML_Q_PEERS, &np));
        CHECK(refused >= 2, "%lld packets refused (a CONNECT request and a forged packet "
              "at least)", (long long) refused);
        CHECK(stranger_hits == 0, "a handler ran for a packet from outside the job");
        CHECK(np == c->size, "%lld peers", (long long) np);
        CHECK_OK(aml_listen(c->aml, 1));
        *phase = 2;
        while (!stranger_hits)
            aml_progress(c->aml);
        CHECK(stranger_src >= c->size, "the message of the process of another job came from "
              "peer %d", stranger_src);
        CHECK_OK(aml_listen(c->aml, 0));
        CHECK(aml_listen(c->aml, 0) == AML_ERR_INVAL, "aml_listen(0) without a listen");
        *phase = 3;
    }
    test_barrier(c);
    return 0;
}

typedef struct {
    const char *name;
    int nprocs;
    rank_body_t body;
    void (*hook) (aml_config_t *);
} test_t;


/* A burst of small messages right behind a rendezvous, as an MPI program's Isend loop makes:
 * the transports keep each endpoint's order (UCX sends a rendezvous' RTS on the same lane, in
 * the same order, as its eager packets; vnode's rings are FIFOs), so no packet ever waits in
 * the early-packet stash and a correct sender can never reach its limit. Fails if a transport
 * starts to reorder. The handler checks the order; the landings overlap (one slot per
 * source), so their contents are not checked here. */
static int t_burst_order(rank_ctx_t * c)
{
    const int nmsg = 3 * AML_STASH_MAX, rounds = 3;
    const size_t big = (size_t) 4 << 20;
    aml_cntr_t org;
    int64_t stashed = -1;
    unsigned char *data = calloc(1, big), small[8] = { 0 };
    CHECK(data != NULL, "malloc");
    rx_setup(c, big);
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_barrier(c->aml));
    for (int r = 0; r < rounds; r++) {
        uint64_t first = (uint64_t) r * (uint64_t) (nmsg + 1);
        if (c->rank == 0) {
            msg_hdr_t h = { 0, first, first, 0 };
            CHECK_OK(aml_amsend(c->aml, 1, 3, &h, sizeof(h), data, big, NULL, &org, NULL));
            for (int i = 1; i <= nmsg; i++) {
                h.salt = h.seq = first + (uint64_t) i;
                CHECK_OK(aml_amsend_small(c->aml, 1, 3, &h, sizeof(h), small, sizeof(small)));
            }
            CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        } else {
            wait_done(c, (int) first + nmsg + 1);
        }
        CHECK_OK(aml_barrier(c->aml));
    }
    if (c->rank == 1) {
        CHECK(rx.order_errors == 0, "%d order errors", rx.order_errors);
        CHECK_OK(aml_qenv(c->aml, AML_Q_STASHED, &stashed));
        CHECK(stashed == 0, "%lld packets waited in the stash", (long long) stashed);
    }
    free(data);
    return 0;
}

static const test_t tests[] = {
    {"handlers", 3, t_handlers, NULL},
    {"small_handler", 2, t_small_handler, NULL},
    {"sizes", 2, t_sizes, NULL},
    {"sizes_eager", 2, t_sizes, force_eager},
    {"sizes_rndv", 2, t_sizes, force_rndv},
    {"sizes_small_packets", 2, t_sizes, small_packets},
    {"order", 4, t_order, NULL},
    {"rma", 3, t_rma, NULL},
    {"direct", 3, t_direct, NULL},
    {"env", 2, t_env, NULL},
    {"defer", 2, t_defer, force_rndv},
    {"sizes_rndv_put", 2, t_sizes, force_rndv_put},
    {"sizes_rndv_ucx", 2, t_sizes, force_rndv_ucx},
    {"sizes_get", 2, t_sizes, rndv_get},
    {"defer_ucx", 2, t_defer, force_rndv_ucx},
    {"handlers_ucx", 3, t_handlers, force_rndv_ucx},
    {"order_get", 4, t_order, rndv_get},
    {"sizes_put", 2, t_sizes, rndv_put},
    {"defer_put", 2, t_defer, force_rndv_put},
    {"handlers_put", 3, t_handlers, force_rndv_put},
    {"sizes_adaptive", 2, t_sizes, force_adaptive},
    {"sizes_adaptive_reorder", 2, t_sizes, adaptive_reorder},
    {"sizes_lanes", 2, t_sizes, lanes_3},
    {"sizes_no_adaptive", 2, t_sizes, no_adaptive},
    {"order_adaptive_reorder", 4, t_order, adaptive_reorder},
    {"adaptive_credits", 2, t_adaptive_credits, adaptive_credits},
    {"adaptive_empty", 2, t_adaptive_empty, force_adaptive},
    {"interrupt", 2, t_interrupt, interrupt_mode},
    {"sizes_interrupt", 2, t_sizes, interrupt_mode},
    {"no_fd", 2, t_no_fd, NULL},
    {"compact_burst", 2, t_compact_burst, NULL},
    {"burst_order", 2, t_burst_order, NULL},
    {"quiesce_crossed", 2, t_quiesce_crossed, NULL},
    {"quiesce_crossed_get", 2, t_quiesce_crossed, rndv_get},
    {"quiesce_crossed_put", 2, t_quiesce_crossed, rndv_put},
    {"quiesce_crossed_adaptive", 2, t_quiesce_crossed, force_adaptive},
    {"quiesce_late", 2, t_quiesce_late, NULL},
    {"fence_defer", 2, t_fence_defer, NULL},
    {"fence_defer_get", 2, t_fence_defer, rndv_get},
    {"fence_defer_put", 2, t_fence_defer, rndv_put},
    {"reject_cmpl", 2, t_reject_cmpl, NULL},
    {"reject_cmpl_get", 2, t_reject_cmpl, rndv_get},
    {"reject_cmpl_put", 2, t_reject_cmpl, rndv_put},
    {"order_stash", 4, t_order_stash, seq_reorder},
    {"adapt_claim", 2, t_adapt_claim, NULL},
    {"order_stash_put", 4, t_order_stash, seq_reorder_put},
    {"sizes_stash", 2, t_sizes, seq_reorder},
    {"rma_stash", 3, t_rma, seq_reorder},
};


/* A duplicated adaptive data chunk: with the first chunk [0, 40) it would make the byte total
 * of a 100-byte message while [70, 100) never came. Before, only the total was checked. */
static int t_bad_adapt_dup(rank_ctx_t * c)
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

static int t_bad_put_collide(rank_ctx_t * c)
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

/* tests in which one rank must stop in aml's fatal path with this message */
static const struct {
    const char *name;
    int nprocs;
    rank_body_t body;
    void (*hook) (aml_config_t *);
    int rank;
    const char *msg;
} fatal_tests[] = {
    {"send_fail", 2, t_send_fail, eager_only, 0, "sending a EAGER_SCONT packet to rank 1 failed: "
     "injected"},
    {"bad_adapt_dup", 2, t_bad_adapt_dup, NULL, 1, "from rank 0: type ADAPT_DATA (13): chunk "
     "[40, 70) of adaptive message 5 overlaps bytes [40, 70) received before"},
    {"bad_put_collide", 3, t_bad_put_collide, force_rndv_put, 0, "malformed packet from rank 2: "
     "type RNDV_FIN (16): data put for message"},
};

int main(int argc, char **argv)
{
    size_t nt = sizeof(tests) / sizeof(tests[0]), nb = sizeof(bad_cases) / sizeof(bad_cases[0]);
    if (argc < 2) {
        fprintf(stderr, "usage: aml_tests NAME | --list\n");
        return 2;
    }
    if (!strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < nt; i++)
            printf("%s\n", tests[i].name);
        for (size_t i = 0; i < sizeof(fatal_tests) / sizeof(fatal_tests[0]); i++)
            printf("%s\n", fatal_tests[i].name);
        printf("config\nconfig_mismatch\ndynamic\ndynamic_map\nstranger\nkeepalive\n");
        for (size_t i = 0; i < nb; i++)
            printf("%s\n", bad_cases[i].name);
        return 0;
    }
    if (!strcmp(argv[1], "config"))
        return t_config();
    if (!strcmp(argv[1], "keepalive"))
        return t_keepalive();
    if (!strcmp(argv[1], "dynamic")) {
        launch_split = 2;
        return launch(4, t_dynamic, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "dynamic_map")) {
        launch_split = 2;
        return launch(4, t_dynamic_map, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "stranger")) {
        launch_split = 2;
        return launch(4, t_stranger, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "config_mismatch")) {
        launch_connect_fails = mismatch_check;
        return launch(2, t_never, credits_by_rank, 60, -1, NULL);
    }
    for (size_t i = 0; i < nt; i++)
        if (!strcmp(argv[1], tests[i].name))
            return launch(tests[i].nprocs, tests[i].body, tests[i].hook, 120, -1, NULL);
    for (size_t i = 0; i < sizeof(fatal_tests) / sizeof(fatal_tests[0]); i++)
        if (!strcmp(argv[1], fatal_tests[i].name))
            return launch(fatal_tests[i].nprocs, fatal_tests[i].body, fatal_tests[i].hook, 60,
                          fatal_tests[i].rank, fatal_tests[i].msg);
    for (size_t i = 0; i < nb; i++) {
        if (!strcmp(argv[1], bad_cases[i].name)) {
            char expect[300];
            cur_bad = &bad_cases[i];
            /* the message names the sending peer and the packet type */
            if (cur_bad->make == mk_claim)
                setenv("AML_TEST_VNODE", "1", 1);
            if (strstr(cur_bad->expect, "source") || strstr(cur_bad->expect, "unknown rank") ||
                cur_bad->make == mk_claim)
                snprintf(expect, sizeof(expect), "%s", cur_bad->expect);
            else
                snprintf(expect, sizeof(expect), "from rank 0: %s", cur_bad->expect);
            /* messages name the transport that delivered the packet */
            if (getenv("AML_TEST_VNODE") && atoi(getenv("AML_TEST_VNODE"))) {
                char *u = strstr(expect, "UCX");
                if (u) {
                    char rest[300];
                    snprintf(rest, sizeof(rest), "%s", u + 3);
                    snprintf(u, sizeof(expect) - (size_t) (u - expect), "vnode%s", rest);
                }
            }
            return launch(2, t_bad, NULL, 60, 1, expect);
        }
    }
    fprintf(stderr, "aml_tests: unknown test %s\n", argv[1]);
    return 2;
}
