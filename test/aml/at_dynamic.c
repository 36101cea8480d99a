/*
 * aml's unit tests of peers of other jobs: two jobs of two (launch_split) connected by
 * aml_add_peer and aml_add_peer_async, and a process of another job that nobody expects
 * (aml_listen).
 */
#include "at.h"
#include <time.h>

#define MAX_DYN 16

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

int t_dynamic(rank_ctx_t * c)
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

int t_dynamic_map(rank_ctx_t * c)
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

int t_stranger(rank_ctx_t * c)
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
