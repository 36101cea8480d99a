/*
 * aml's unit tests of message delivery: handlers, user headers and counters, every size class
 * through every protocol (and the configuration hooks that force them), per-sender order,
 * the small-message handler, compact-packet bursts, interrupt mode.
 */
#include "at.h"
#include <poll.h>
#include <unistd.h>

/* ---- tests ---------------------------------------------------------------------------- */

/* handlers, user headers, counters (target counter named remotely, origin, completion) */
int t_handlers(rank_ctx_t * c)
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
int t_sizes(rank_ctx_t * c)
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

void force_eager(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_EAGER;
    max_size = 1 << 20;
}

void force_rndv(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
    cfg->rndv_ucx = 0;  /* aml's own get-based rendezvous */
    partial_moves_part = 1;
}

void force_rndv_put(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
    partial_moves_part = 1;
}

void force_rndv_ucx(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_RNDV;
}

void rndv_get(aml_config_t * cfg)
{
    cfg->rndv_ucx = 0;
    partial_moves_part = 1;
}

void rndv_put(aml_config_t * cfg)
{
    cfg->rndv_ucx = 0;
    cfg->rndv_put = 1;
    partial_moves_part = 1;
}

void force_adaptive(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_ADAPTIVE;
    max_size = 1 << 20;
}

/* adaptive data over 3 lanes, sent last to first ahead of its first packet, small packets */
void adaptive_reorder(aml_config_t * cfg)
{
    cfg->protocol = AML_PROTO_ADAPTIVE;
    cfg->debug_reorder = 1;
    cfg->lanes = 3;
    cfg->packet_size = 1024;
    cfg->net_packet_size = 1024;
    max_size = 1 << 20;
}

void lanes_3(aml_config_t * cfg)
{
    cfg->lanes = 3;
}

void no_adaptive(aml_config_t * cfg)
{
    cfg->adaptive_credits = 0;
}

void interrupt_mode(aml_config_t * cfg)
{
    cfg->progress_mode = AML_PROGRESS_INTERRUPT;
}

/* packets through UCX (these tests' transport) of another size than the one-packet limit */
void small_packets(aml_config_t * cfg)
{
    cfg->packet_size = 1024;
    cfg->net_packet_size = 1536;
    cfg->eager_limit = 4096;
    max_size = 1 << 20;
}

/* many senders, mixed sizes (all protocols): per-sender order is kept */
int t_order(rank_ctx_t * c)
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

int t_small_handler(rank_ctx_t * c)
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
int t_compact_burst(rank_ctx_t * c)
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

/* interrupt mode: a receiver that armed the worker sleeps in poll() on the event fd and is
 * woken by the arrival (the sender waits 300 ms first); polling-mode workers have no fd */
int t_interrupt(rank_ctx_t * c)
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

int t_no_fd(rank_ctx_t * c)
{
    int fd;
    CHECK(aml_event_fd(c->aml, &fd) == AML_ERR_STATE, "polling mode has an event fd");
    CHECK(aml_arm(c->aml) == AML_ERR_STATE, "polling mode arms");
    CHECK_OK(aml_barrier(c->aml));
    return 0;
}

/* A burst of small messages right behind a rendezvous, as an MPI program's Isend loop makes:
 * the transports keep each endpoint's order (UCX sends a rendezvous' RTS on the same lane, in
 * the same order, as its eager packets; vnode's rings are FIFOs), so no packet ever waits in
 * the early-packet stash and a correct sender can never reach its limit. Fails if a transport
 * starts to reorder. The handler checks the order; the landings overlap (one slot per
 * source), so their contents are not checked here. */
int t_burst_order(rank_ctx_t * c)
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
