/*
 * aml's unit tests: the helpers (the data pattern every test sends and checks) and the receive
 * side several tests share (handler 3, test_handler, landing in rx).
 */
#include "at.h"

/* ---- helpers -------------------------------------------------------------------------- */

static unsigned char pattern(int src, size_t i, uint64_t salt)
{
    return (unsigned char) ((i * 131 + (size_t) src * 7 + salt * 13) & 0xff);
}

void fill(unsigned char *b, size_t n, int src, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(src, i, salt);
}

size_t first_bad(const unsigned char *b, size_t n, int src, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern(src, i, salt))
            return i;
    return (size_t) -1;
}

/* ---- receive side used by several tests ------------------------------------------------ */

rx_state_t rx;
/* the configuration moves partial rendezvous receives partly (aml's get or put rendezvous) */
int partial_moves_part;

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

int test_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
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

void rx_setup(rank_ctx_t * c, size_t cap)
{
    memset(&rx, 0, sizeof(rx));
    rx.cap = cap;
    rx.buf = malloc(cap ? cap : 1);
    CHECK(rx.buf, "malloc");
    CHECK_OK(aml_register_handler(c->aml, 3, test_handler, &rx));
}

void wait_done(rank_ctx_t * c, int n)
{
    while (rx.done < n)
        aml_progress(c->aml);
}
