/*
 * What aml's unit tests (aml_tests.c and at_*.c) share: the data pattern, the receive side
 * several tests use, the malformed-packet cases, and every test body and configuration hook
 * the driver's tables name. CHECK and CHECK_OK are launch.h's.
 */
#ifndef AML_TEST_AT_H
#define AML_TEST_AT_H

#include "launch.h"
#include "aml_impl.h"
#include <string.h>
#include <stdint.h>

/* ---- helpers (at_util.c) -------------------------------------------------------------- */

/* the bytes of message `salt` from rank src: fill writes them, first_bad returns the offset
 * of the first that differs, (size_t) -1 if none */
void fill(unsigned char *b, size_t n, int src, uint64_t salt);
size_t first_bad(const unsigned char *b, size_t n, int src, uint64_t salt);

/* ---- receive side used by several tests (at_util.c) ------------------------------------ */

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

extern rx_state_t rx;
/* the configuration moves partial rendezvous receives partly (aml's get or put rendezvous) */
extern int partial_moves_part;

/* handler 3: lands each message from its user header (a msg_hdr_t) into rx */
int test_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv);
/* clears rx, gives it a landing of cap bytes and registers test_handler as handler 3 */
void rx_setup(rank_ctx_t * c, size_t cap);
/* progresses until n messages completed in rx */
void wait_done(rank_ctx_t * c, int n);

/* ---- malformed packets (at_bad.c) ----------------------------------------------------- */

typedef struct {
    const char *name;
    const char *expect;         /* part of the fatal message */
    void (*make) (aml_pkt_t * p, char *extra, size_t * hlen, size_t * dlen);
} bad_case_t;

extern const bad_case_t bad_cases[];
extern const size_t at_nbad_cases;      /* entries of bad_cases */
extern const bad_case_t *cur_bad;       /* the case t_bad sends */
void mk_claim(aml_pkt_t * p, char *x, size_t * h, size_t * d);

/* ---- test bodies and configuration hooks the driver names ----------------------------- */

/* at_proto.c: message delivery */
int t_handlers(rank_ctx_t * c);
int t_sizes(rank_ctx_t * c);
int t_order(rank_ctx_t * c);
int t_small_handler(rank_ctx_t * c);
int t_compact_burst(rank_ctx_t * c);
int t_interrupt(rank_ctx_t * c);
int t_no_fd(rank_ctx_t * c);
int t_burst_order(rank_ctx_t * c);
void force_eager(aml_config_t * cfg);
void force_rndv(aml_config_t * cfg);
void force_rndv_put(aml_config_t * cfg);
void force_rndv_ucx(aml_config_t * cfg);
void rndv_get(aml_config_t * cfg);
void rndv_put(aml_config_t * cfg);
void force_adaptive(aml_config_t * cfg);
void adaptive_reorder(aml_config_t * cfg);
void lanes_3(aml_config_t * cfg);
void no_adaptive(aml_config_t * cfg);
void interrupt_mode(aml_config_t * cfg);
void small_packets(aml_config_t * cfg);

/* at_rma.c: one-sided operations */
int t_rma(rank_ctx_t * c);
int t_direct(rank_ctx_t * c);

/* at_env.c: environment and setup (t_config and t_keepalive run without launch) */
int t_env(rank_ctx_t * c);
int t_config(void);
int t_keepalive(void);
int t_never(rank_ctx_t * c);
void credits_by_rank(aml_config_t * cfg);
int mismatch_check(aml_t * aml, int rank, int rc);

/* at_defer.c: deferred receives */
int t_defer(rank_ctx_t * c);
int t_adaptive_credits(rank_ctx_t * c);
int t_adaptive_empty(rank_ctx_t * c);
void adaptive_credits(aml_config_t * cfg);

/* at_bad.c: malformed packets */
int t_bad(rank_ctx_t * c);
int t_bad_adapt_dup(rank_ctx_t * c);
int t_bad_put_collide(rank_ctx_t * c);

/* at_hard.c: hardening */
int t_send_fail(rank_ctx_t * c);
int t_quiesce_crossed(rank_ctx_t * c);
int t_quiesce_late(rank_ctx_t * c);
int t_fence_defer(rank_ctx_t * c);
int t_reject_cmpl(rank_ctx_t * c);
int t_order_stash(rank_ctx_t * c);
int t_adapt_claim(rank_ctx_t * c);
void eager_only(aml_config_t * cfg);
void seq_reorder(aml_config_t * cfg);
void seq_reorder_put(aml_config_t * cfg);

/* at_dynamic.c: peers of other jobs */
int t_dynamic(rank_ctx_t * c);
int t_dynamic_map(rank_ctx_t * c);
int t_stranger(rank_ctx_t * c);

#endif
