/*
 * vnode unit tests: `vnode_tests --list`, `vnode_tests NAME...` (exit 0 pass, 1 fail, 77
 * skip), `vnode_tests --bench` (latency, not a test). Each test forks its local ranks; this
 * file has the packet tests, vt_setup_tests.c setup, errors and cleanup, vt_copy_tests.c
 * single copy.
 */
#define _GNU_SOURCE
#include "vt.h"
#include "vt_tests.h"
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* -- basic: 2 ranks, packets of many sizes both ways -- */
static int basic_body(vt_ctx_t * c)
{
    vt_traffic_t *t = vt_traffic_new(c, VT_MIX);
    int peer = 1 - c->rank;
    t->to_send[peer] = t->to_recv[peer] = 5000;
    vt_traffic(c, t);
    vnode_stats_t s;
    vnode_get_stats(c->v, &s);
    CHECK(s.pkts_sent == 5000 && s.pkts_recv == 5000, "stats say %llu sent, %llu received",
          (unsigned long long) s.pkts_sent, (unsigned long long) s.pkts_recv);
    vt_traffic_free(t);
    return 0;
}

int t_basic(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, basic_body, &o);
}

/* -- wrap: random record sizes force PAD records and wrap around, millions of units -- */
static int wrap_body(vt_ctx_t * c)
{
    vt_traffic_t *t = vt_traffic_new(c, VT_WRAP);
    int peer = 1 - c->rank;
    uint64_t npkt = 40000, seq, ncells, pads = 0, head = 0;
    t->to_send[peer] = t->to_recv[peer] = npkt;
    vnode_test_cell(c->v, peer, &seq, &ncells);
    vt_traffic(c, t);
    /* what the ring went through: the sender's positions, replayed */
    unsigned char *buf = malloc(c->cfg.max_pkt);
    for (uint64_t i = 0; i < npkt; i++) {
        size_t hl, l;
        vt_packet(&c->cfg, VT_WRAP, c->rank, peer, i, &hl, &l, buf);
        uint64_t k = vnode_rec_units(hl + l);
        if (head % ncells + k > ncells) {
            head += ncells - head % ncells;
            pads++;
        }
        head += k;
    }
    free(buf);
    CHECK(head > 2000000 && pads > 1000 && head / ncells > 1000, "%llu units, %llu PADs, "
          "%llu laps", (unsigned long long) head, (unsigned long long) pads,
          (unsigned long long) (head / ncells));
    CHECK(t->units_sent <= head, "units %llu > %llu", (unsigned long long) t->units_sent,
          (unsigned long long) head);
    vt_traffic_free(t);
    return 0;
}

int t_wrap(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, wrap_body, &o);
}

/* -- full_both_ways: both send 20+ rings' worth before reading, polling only on AGAIN -- */
typedef struct {
    vt_ctx_t *c;
    uint64_t next;
    unsigned char *buf;
} fb_arg_t;

static void fb_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                  size_t len)
{
    fb_arg_t *a = arg;
    size_t eh, el;
    vt_packet(&a->c->cfg, VT_BIG, src, a->c->rank, a->next, &eh, &el, a->buf);
    CHECK(src == 1 - a->c->rank && hlen == eh && len == el && !memcmp(hdr, a->buf, hlen) &&
          !memcmp(data, a->buf + hlen, len), "packet %llu from %d wrong (%zu+%zu bytes)",
          (unsigned long long) a->next, src, hlen, len);
    a->next++;
}

static void poll_or_sleep(vt_ctx_t * c, vnode_rx_fn_t fn, void *arg)
{
    int n = vnode_poll(c->v, fn, arg);
    CHECK(n >= 0, "vnode_poll: %s", vnode_error(c->v));
    if (n > 0)
        return;
    int rc = vnode_arm(c->v);
    CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "vnode_arm: %s", vnode_error(c->v));
    if (rc == VNODE_OK) {
        struct pollfd p = { vnode_doorbell_fd(c->v), POLLIN, 0 };
        CHECK(poll(&p, 1, 20000) > 0, "asleep 20 s: a lost wake-up");
    }
}

static int full_body(vt_ctx_t * c)
{
    int peer = 1 - c->rank;
    uint64_t npkt = 600, bytes = 0, again = 0;
    unsigned char *sbuf = malloc(c->cfg.max_pkt);
    fb_arg_t a = { c, 0, malloc(c->cfg.max_pkt) };
    for (uint64_t i = 0; i < npkt; i++) {
        size_t hl, l;
        vt_packet(&c->cfg, VT_BIG, c->rank, peer, i, &hl, &l, sbuf);
        int rc;
        while ((rc = vnode_send(c->v, peer, sbuf, hl, sbuf + hl, l)) == VNODE_AGAIN) {
            again++;
            poll_or_sleep(c, fb_rx, &a);
        }
        CHECK_OK(c->v, rc);
        bytes += hl + l;
    }
    while (a.next < npkt)
        poll_or_sleep(c, fb_rx, &a);
    vnode_stats_t s;
    vnode_get_stats(c->v, &s);
    CHECK(bytes >= 20 * c->cfg.ring_bytes && again > 0 && s.ring_full == again,
          "%llu bytes sent, %llu AGAINs (stats %llu)", (unsigned long long) bytes,
          (unsigned long long) again, (unsigned long long) s.ring_full);
    free(sbuf);
    free(a.buf);
    return 0;
}

int t_full_both_ways(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, full_body, &o);
}

/* -- contention8: all-to-all among 8 ranks, sleeping when idle -- */
static int a2a_body(vt_ctx_t * c)
{
    vt_traffic_t *t = vt_traffic_new(c, VT_MIX);
    for (int p = 0; p < c->size; p++)
        if (p != c->rank)
            t->to_send[p] = t->to_recv[p] = 1500;
    t->sleep = 1;
    vt_traffic(c, t);
    vt_traffic_free(t);
    return 0;
}

static void direct2(vnode_config_t * cfg, void *arg)
{
    cfg->direct = 2;
}

int t_contention8(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(8, a2a_body, &o);
}

int t_contention8_summary(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.cfg_hook = direct2 };
    return vt_run(8, a2a_body, &o);
}

/* -- summary64: 64 ranks, 4 direct slots; rank 0 demotes everyone, then still finds all -- */
static void small_rings(vnode_config_t * cfg, void *arg)
{
    cfg->direct = 4;
    cfg->max_pkt = 1024;
    cfg->ring_bytes = 8192;
}

static int s64_body(vt_ctx_t * c)
{
    vt_traffic_t *t = vt_traffic_new(c, VT_SMALL);
    int me = c->rank, n = c->size;
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        uint64_t to_p = p == 0 ? 200 : (p == (me + 1) % n || p == (me + 5) % n) ? 20 : 0;
        uint64_t from_p = me == 0 ? 200 : (me == (p + 1) % n || me == (p + 5) % n) ? 20 : 0;
        if (me == 0)
            to_p = (p == 1 || p == 5) ? 20 : 0;
        if (p == 0)
            from_p = (me == 1 || me == 5) ? 20 : 0;
        t->to_send[p] = to_p;
        t->to_recv[p] = from_p;
    }
    t->sleep = 1;
    vt_traffic(c, t);
    vt_barrier(c);
    if (me == 0) {
        int nd = vnode_test_ndirect(c->v);
        CHECK(nd >= 1 && nd <= 4, "%d direct peers after phase 1", nd);
        for (int i = 0; i < VNODE_IDLE_POLLS; i++) {
            int rc = vt_poll(c, t);
            CHECK(rc == 0, "idle poll %d -> %d: %s", i, rc, vnode_error(c->v));
        }
        nd = vnode_test_ndirect(c->v);
        CHECK(nd == 0, "%d direct peers after %d idle polls", nd, VNODE_IDLE_POLLS);
    }
    vt_barrier(c);
    /* phase 2: everybody to rank 0 again, found through the summary */
    if (me)
        t->to_send[0] += 100;
    else
        for (int p = 1; p < n; p++)
            t->to_recv[p] += 100;
    vt_traffic(c, t);
    if (me == 0) {
        vnode_stats_t st;
        vnode_get_stats(c->v, &st);
        fprintf(stderr, "  (rank 0: %llu packets received, %llu sent, %llu AGAIN, %llu "
                "doorbells)\n", (unsigned long long) st.pkts_recv,
                (unsigned long long) st.pkts_sent, (unsigned long long) st.ring_full,
                (unsigned long long) st.doorbells);
    }
    vt_traffic_free(t);
    return 0;
}

int t_summary64(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.cfg_hook = small_rings,.nice = 10,
        .timeout_s = 300
    };
    return vt_run(64, s64_body, &o);
}

/* -- fairness: 4 direct peers with full rings do not starve a fifth: one poll delivers
 * from it too -- */
static void direct4(vnode_config_t * cfg, void *arg)
{
    cfg->direct = 4;
}

static int fair_body(vt_ctx_t * c)
{
    vt_traffic_t *t = vt_traffic_new(c, VT_SMALL);
    unsigned char buf[64];
    size_t hl, l;
    int rc;
    if (c->rank == 0) {
        for (int p = 1; p < c->size; p++)
            t->to_recv[p] = 1ULL << 40;
        vt_barrier(c);
        while (t->recvd[1] + t->recvd[2] + t->recvd[3] + t->recvd[4] < 4)
            vt_poll(c, t);
        CHECK(vnode_test_ndirect(c->v) == 4, "%d direct peers", vnode_test_ndirect(c->v));
        vt_barrier(c);
        vt_barrier(c);
        int n = vt_poll(c, t);
        CHECK(n >= 32 && t->recvd[5] > 0, "one poll: %d packets, %llu from the fifth peer", n,
              (unsigned long long) t->recvd[5]);
        while (t->recvd[5] < 100)
            vt_poll(c, t);
    } else {
        /* flooders: one packet (to be promoted), then fill the ring; rank 5: 100 packets */
        if (c->rank < 5) {
            vt_packet(&c->cfg, VT_SMALL, c->rank, 0, t->sent[0], &hl, &l, buf);
            CHECK_OK(c->v, vnode_send(c->v, 0, buf, hl, buf + hl, l));
            t->sent[0]++;
        }
        vt_barrier(c);
        vt_barrier(c);
        do {
            vt_packet(&c->cfg, VT_SMALL, c->rank, 0, t->sent[0], &hl, &l, buf);
            rc = vnode_send(c->v, 0, buf, hl, buf + hl, l);
            CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "send: %s", vnode_error(c->v));
            t->sent[0] += rc == VNODE_OK;
        } while (rc == VNODE_OK && (c->rank < 5 || t->sent[0] < 100));
        vt_barrier(c);
    }
    vt_barrier(c);
    vt_traffic_free(t);
    return 0;
}

int t_fairness(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.cfg_hook = direct4 };
    return vt_run(6, fair_body, &o);
}

/* -- doorbell: a sleeping receiver is woken by a packet, a sleeping sender by room -- */
typedef struct {
    int n;
    unsigned char *buf;
    vt_ctx_t *c;
} db_arg_t;

static void db_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                  size_t len)
{
    db_arg_t *a = arg;
    size_t eh, el;
    vt_packet(&a->c->cfg, VT_MIX, src, a->c->rank, a->n, &eh, &el, a->buf);
    CHECK(hlen == eh && len == el && !memcmp(hdr, a->buf, hlen) &&
          !memcmp(data, a->buf + hlen, len), "packet %d wrong", a->n);
    a->n++;
}

static int sleep_on_bell(vt_ctx_t * c)
{
    struct pollfd p = { vnode_doorbell_fd(c->v), POLLIN, 0 };
    return poll(&p, 1, 10000);
}

static int db_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    unsigned char *buf = malloc(c->cfg.max_pkt);
    db_arg_t a = { 0, malloc(c->cfg.max_pkt), c };
    int *count = (int *) c->scratch;
    size_t hl, l;
    if (c->rank == 1) {
        CHECK(vnode_arm(v) == VNODE_OK, "arm with nothing pending: %s", vnode_error(v));
        vt_barrier(c);
        int r = sleep_on_bell(c);
        CHECK(r == 1, "the packet did not wake rank 1 (poll -> %d)", r);
        CHECK(vnode_poll(v, db_rx, &a) == 1 && a.n == 1, "no packet after the wake (%d)", a.n);
        /* part 2: rank 0 fills our ring and sleeps; we drain it */
        vt_barrier(c);
        vt_barrier(c);
        vt_sleep_ms(100);
        while (a.n < 1 + *count) {
            int n = vnode_poll(v, db_rx, &a);
            CHECK(n >= 0, "poll: %s", vnode_error(v));
        }
        vt_barrier(c);
        while (a.n < 2 + *count)
            CHECK(vnode_poll(v, db_rx, &a) >= 0, "poll: %s", vnode_error(v));
    } else {
        vt_barrier(c);
        vt_sleep_ms(100);
        vt_packet(&c->cfg, VT_MIX, 0, 1, 0, &hl, &l, buf);
        CHECK_OK(v, vnode_send(v, 1, buf, hl, buf + hl, l));
        vnode_stats_t s;
        vnode_get_stats(v, &s);
        CHECK(s.doorbells == 1, "%llu doorbells rung", (unsigned long long) s.doorbells);
        vt_barrier(c);
        int n = 1, rc;
        for (;; n++) {
            vt_packet(&c->cfg, VT_MIX, 0, 1, n, &hl, &l, buf);
            if ((rc = vnode_send(v, 1, buf, hl, buf + hl, l)) != VNODE_OK)
                break;
        }
        CHECK(rc == VNODE_AGAIN, "send -> %d: %s", rc, vnode_error(v));
        *count = n - 1;
        CHECK(vnode_arm(v) == VNODE_OK, "arm with a full ring: %s", vnode_error(v));
        vt_barrier(c);
        int r = sleep_on_bell(c);
        CHECK(r == 1, "room in the ring did not wake rank 0 (poll -> %d)", r);
        CHECK(vnode_poll(v, db_rx, &a) == 0, "unexpected packet");
        CHECK_OK(v, vnode_send(v, 1, buf, hl, buf + hl, l));
        vt_barrier(c);
    }
    free(buf);
    free(a.buf);
    return 0;
}

int t_doorbell(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, db_body, &o);
}

/* -- sleep_race: packets published without a fence while the receiver goes to sleep for
 * the first time (its membarrier, vnode_bell.c) or again (the fence): none may be slept
 * past. Rank 0 sends packet i a random 0-1.5 us after it saw the ack of i - 1, so that it
 * lands while rank 1, which acked and found nothing, sets its sleepy word and arms. -- */
#define SR_PACKETS 6000

static double sr_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void sr_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                  size_t len)
{
    uint32_t got;
    CHECK(hlen == sizeof(got), "a %zu-byte header", hlen);
    memcpy(&got, hdr, sizeof(got));
    CHECK(got == *(uint32_t *) arg, "packet %u, expected %u", got, *(uint32_t *) arg);
    ++*(uint32_t *) arg;
}

/* Polls until packet i is in; whenever nothing is there, arms and sleeps on the doorbell: a
 * packet slept past for 2 s fails the test. */
static void sr_sleep_until(vnode_t * v, uint32_t * next, uint32_t i)
{
    for (;;) {
        CHECK(vnode_poll(v, sr_rx, next) >= 0, "poll: %s", vnode_error(v));
        if (*next != i)
            return;
        int rc = vnode_arm(v);
        CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "arm: %s", vnode_error(v));
        struct pollfd p = { vnode_doorbell_fd(v), POLLIN, 0 };
        CHECK(rc == VNODE_AGAIN || poll(&p, 1, 2000) == 1,
              "packet %u was slept past (no doorbell in 2 s; %s in the ring)", i,
              vnode_poll(v, sr_rx, next) > 0 ? "it was" : "not");
    }
}

static void sr_spin(uint64_t * rnd)
{
    *rnd ^= *rnd << 13, *rnd ^= *rnd >> 7, *rnd ^= *rnd << 17;
    double until = sr_now_us() + (double) (*rnd % 1500) / 1000;
    while (sr_now_us() < until);
}

static int sr_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    uint32_t next = 0, firsts = 0;
    uint64_t rnd = c->rank ? 0x9e3779b97f4a7c15ULL : 88172645463325252ULL;
    vnode_stats_t s;
    if (!vnode_test_unsleepy(v)) {      /* the same answer on both ranks: the kernel's */
        fprintf(stderr, "  membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is not available: every "
                "packet is fenced\n");
        return VT_SKIP;
    }
    if (c->rank == 1) {
        for (uint32_t i = 0; i < SR_PACKETS; i++) {
            if (i % 2)
                firsts += vnode_test_unsleepy(v);       /* the next arm is a first sleep */
            sr_spin(&rnd);
            sr_sleep_until(v, &next, i);
            CHECK_OK(v, vnode_send(v, 0, &i, sizeof(i), NULL, 0));
        }
        vnode_get_stats(v, &s);
        fprintf(stderr, "  %llu membarriers (first sleeps), %llu of %llu acks unfenced\n",
                (unsigned long long) s.membarriers, (unsigned long long) s.unfenced,
                (unsigned long long) s.pkts_sent);
        CHECK(firsts == SR_PACKETS / 2 && s.membarriers > 0 && s.membarriers <= firsts + 1 &&
              s.unfenced == s.pkts_sent, "%llu membarriers for %u first sleeps, %llu of %llu "
              "acks unfenced", (unsigned long long) s.membarriers, firsts,
              (unsigned long long) s.unfenced, (unsigned long long) s.pkts_sent);
    } else {
        for (uint32_t i = 0; i < SR_PACKETS; i++) {
            sr_spin(&rnd);
            CHECK_OK(v, vnode_send(v, 1, &i, sizeof(i), NULL, 0));
            while (next == i)
                CHECK(vnode_poll(v, sr_rx, &next) >= 0, "poll: %s", vnode_error(v));
        }
        vnode_get_stats(v, &s);
        fprintf(stderr, "  %llu of %llu packets unfenced\n", (unsigned long long) s.unfenced,
                (unsigned long long) s.pkts_sent);
        CHECK(s.unfenced > 0 && s.unfenced < s.pkts_sent, "%llu of %llu packets unfenced",
              (unsigned long long) s.unfenced, (unsigned long long) s.pkts_sent);
    }
    vt_barrier(c);
    return 0;
}

int t_sleep_race(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, sr_body, &o);
}

/* -- fence_always: with cfg.fence_always every packet is fenced, none waits for a
 * membarrier, and the receiver's sleeps still work -- */
static void fa_cfg(vnode_config_t * cfg, void *arg)
{
    cfg->fence_always = 1;
}

static int fa_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    uint32_t next = 0;
    vnode_stats_t s;
    CHECK(!vnode_test_unsleepy(v), "fence_always, yet the sleepy word could be cleared");
    for (uint32_t i = 0; i < 200; i++) {
        if (c->rank == 0) {
            CHECK_OK(v, vnode_send(v, 1, &i, sizeof(i), NULL, 0));
        } else {
            sr_sleep_until(v, &next, i);
        }
        vt_barrier(c);
    }
    vnode_get_stats(v, &s);
    CHECK(s.unfenced == 0 && s.membarriers == 0, "%llu packets unfenced, %llu membarriers",
          (unsigned long long) s.unfenced, (unsigned long long) s.membarriers);
    return 0;
}

int t_fence_always(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.cfg_hook = fa_cfg };
    return vt_run(2, fa_body, &o);
}

/* -- reserve: packets written in place (vnode_reserve/commit) between copied ones, in
 * order, through many laps of the ring (PADs included); bad reservations are errors -- */
typedef struct {
    vt_ctx_t *c;
    uint64_t next;
    unsigned char *buf;
} rs_arg_t;

/* packet seq: odd ones written in place (short, all header), even ones by vnode_send */
static void rs_packet(const vnode_config_t * cfg, uint64_t seq, size_t *hlen, size_t *len,
                      unsigned char *buf)
{
    size_t n = seq % 2 ? 1 + seq * 7 % VNODE_SHORT_MAX : 1 + seq * 13 % cfg->max_pkt;
    *hlen = seq % 2 ? n : (n < 8 ? n : 8);
    *len = n - *hlen;
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char) (seq * 31 + i);
}

static void rs_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                  size_t len)
{
    rs_arg_t *a = arg;
    size_t eh, el;
    rs_packet(&a->c->cfg, a->next, &eh, &el, a->buf);
    CHECK(src == 0 && hlen == eh && len == el && !memcmp(hdr, a->buf, hlen) &&
          !memcmp(data, a->buf + hlen, len), "packet %llu wrong (%zu+%zu bytes, expected "
          "%zu+%zu)", (unsigned long long) a->next, hlen, len, eh, el);
    a->next++;
}

static int reserve_body(vt_ctx_t * c)
{
    uint64_t npkt = 60000, again = 0;
    rs_arg_t a = { c, 0, malloc(c->cfg.max_pkt) };
    unsigned char *sbuf = malloc(c->cfg.max_pkt);
    void *at;
    if (c->rank == 0) {
        CHECK(vnode_reserve(c->v, 1, 0, &at) == VNODE_ERR_INVAL &&
              strstr(vnode_error(c->v), "vnode_reserve"), "len 0: %s", vnode_error(c->v));
        CHECK(vnode_reserve(c->v, 1, VNODE_SHORT_MAX + 1, &at) == VNODE_ERR_INVAL,
              "len %d: %s", VNODE_SHORT_MAX + 1, vnode_error(c->v));
        CHECK(vnode_reserve(c->v, 0, 8, &at) == VNODE_ERR_INVAL, "to self: %s",
              vnode_error(c->v));
        CHECK(vnode_commit(c->v, 1) == VNODE_ERR_INVAL &&
              strstr(vnode_error(c->v), "vnode_commit"), "commit with no reservation: %s",
              vnode_error(c->v));
        for (uint64_t seq = 0; seq < npkt;) {
            size_t hl, l;
            int rc;
            rs_packet(&c->cfg, seq, &hl, &l, sbuf);
            if (seq % 2) {
                rc = vnode_reserve(c->v, 1, hl, &at);
                if (rc == VNODE_OK) {
                    memcpy(at, sbuf, hl);
                    CHECK_OK(c->v, vnode_commit(c->v, 1));
                }
            } else {
                rc = vnode_send(c->v, 1, sbuf, hl, sbuf + hl, l);
            }
            CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "packet %llu: %s",
                  (unsigned long long) seq, vnode_error(c->v));
            if (rc == VNODE_OK)
                seq++;
            else
                again++;
            CHECK(vnode_poll(c->v, rs_rx, &a) >= 0, "vnode_poll: %s", vnode_error(c->v));
        }
        CHECK(again > 0, "the ring never filled: the test did not cover VNODE_AGAIN");
    } else {
        while (a.next < npkt) {
            int n = vnode_poll(c->v, rs_rx, &a);
            CHECK(n >= 0, "vnode_poll: %s", vnode_error(c->v));
        }
    }
    vt_barrier(c);
    free(sbuf);
    free(a.buf);
    return 0;
}

int t_reserve(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, reserve_body, &o);
}

static const struct {
    const char *name;
    int (*fn)(void);
} tests[] = {
    {"reserve", t_reserve},
    {"basic", t_basic}, {"wrap", t_wrap}, {"full_both_ways", t_full_both_ways},
    {"contention8", t_contention8}, {"contention8_summary", t_contention8_summary},
    {"summary64", t_summary64}, {"fairness", t_fairness}, {"doorbell", t_doorbell},
    {"sleep_race", t_sleep_race}, {"fence_always", t_fence_always},
    {"malformed_src", t_malformed_src}, {"malformed_len0", t_malformed_len0},
    {"malformed_len_big", t_malformed_len_big}, {"malformed_hlen0", t_malformed_hlen0},
    {"malformed_hlen_gt_len", t_malformed_hlen_gt_len},
    {"malformed_overrun", t_malformed_overrun}, {"malformed_pad", t_malformed_pad},
    {"malformed_seq", t_malformed_seq}, {"malformed_long_small", t_malformed_long_small},
    {"stale_cells", t_stale_cells},
    {"cleanup_kill9", t_cleanup_kill9}, {"watch", t_watch}, {"two_jobs", t_two_jobs}, {"noshm", t_noshm},
    {"auto_ring", t_auto_ring},
    {"attach_timeout", t_attach_timeout}, {"mismatch", t_mismatch}, {"no_names", t_no_names},
    {"alone", t_alone},
    {"hand_foreign", t_hand_foreign}, {"shared_forged", t_shared_forged},
    {"watch_finalize", t_watch_finalize}, {"bell_nlocal", t_bell_nlocal}, {"ptracer", t_ptracer}, {"single_copy", t_single_copy},
    {"single_copy_refused", t_single_copy_refused}, {"shared_copy", t_shared_copy},
};

int main(int argc, char **argv)
{
    int n = sizeof(tests) / sizeof(tests[0]), result = 0;
    vt_shm_entries();           /* from now on, /dev/shm must get nothing */
    if (argc < 2) {
        fprintf(stderr, "usage: %s --list | --bench | TEST...\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "--list")) {
        for (int i = 0; i < n; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    if (!strcmp(argv[1], "--bench"))
        return vt_bench();
    for (int a = 1; a < argc; a++) {
        int i;
        for (i = 0; i < n && strcmp(tests[i].name, argv[a]); i++);
        if (i == n) {
            fprintf(stderr, "no test %s\n", argv[a]);
            return 2;
        }
        int rc = tests[i].fn();
        printf("%s: %s\n", argv[a], rc == 0 ? "pass" : rc == VT_SKIP ? "skip" : "FAIL");
        fflush(stdout);
        if (rc && (result == 0 || result == VT_SKIP))
            result = rc == VT_SKIP ? VT_SKIP : 1;
    }
    return result;
}
