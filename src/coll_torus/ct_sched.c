/* Schedule storage and the builder's dependency tracking (see ct_sched_int.h). */
#include "ct_sched_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char ct_errbuf[512];

const char *ct_strerror(void)
{
    return ct_errbuf;
}

int ct_set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ct_errbuf, sizeof ct_errbuf, fmt, ap);
    va_end(ap);
    return code;
}

/* A buffer's elements as disjoint segments, each with the step that last wrote it and the
 * steps that read it since. */
typedef struct seg {
    int64_t lo, hi;
    int writer;
    int nrd, caprd;
    int *rd;
} seg;

typedef struct segmap {
    int n, cap;
    seg *v;
} segmap;

typedef struct builder {
    segmap bufs[CT_NBUFS];
    int *last_send, *last_recv;   /* [peer * CT_MAXCHAN + chan] */
    int chan;
    int *pend;                  /* dependencies of the step being created */
    int npend, cappend;
    int *extra;                 /* ct_next_dep */
    int nextra, capextra;
    int nomem;
} builder;

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, (size_t) nc * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

int ct_sched_init(ct_sched *s, int rank, int nranks, size_t elem_size)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->nranks = nranks;
    s->elem_size = elem_size;
    builder *b = calloc(1, sizeof *b);
    if (!b)
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    b->last_send = malloc(sizeof(int) * (size_t) nranks * CT_MAXCHAN);
    b->last_recv = malloc(sizeof(int) * (size_t) nranks * CT_MAXCHAN);
    if (!b->last_send || !b->last_recv) {
        free(b->last_send);
        free(b->last_recv);
        free(b);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nranks * CT_MAXCHAN; i++)
        b->last_send[i] = b->last_recv[i] = -1;
    for (int i = 0; i < CT_NBUFS; i++) {
        segmap *m = &b->bufs[i];
        if (grow((void **) &m->v, &m->cap, 1, sizeof(seg))) {
            b->nomem = 1;
            continue;
        }
        m->n = 1;
        m->v[0] = (seg) { 0, INT64_MAX, -1, 0, 0, NULL };
    }
    s->priv = b;
    return CT_OK;
}

static void builder_free(builder *b)
{
    if (!b)
        return;
    for (int i = 0; i < CT_NBUFS; i++) {
        for (int j = 0; j < b->bufs[i].n; j++)
            free(b->bufs[i].v[j].rd);
        free(b->bufs[i].v);
    }
    free(b->last_send);
    free(b->last_recv);
    free(b->pend);
    free(b->extra);
    free(b);
}

int ct_sched_finish(ct_sched *s)
{
    builder *b = s->priv;
    int nomem = b ? b->nomem : 0;
    builder_free(b);
    s->priv = NULL;
    if (nomem) {
        ct_sched_free(s);
        return ct_set_error(CT_ERR_NOMEM, "out of memory building a schedule");
    }
    return CT_OK;
}

void ct_sched_free(ct_sched *s)
{
    builder_free(s->priv);
    free(s->steps);
    free(s->deps);
    memset(s, 0, sizeof *s);
}

/* index of the segment holding element x */
static int seg_find(const segmap *m, int64_t x)
{
    int lo = 0, hi = m->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->v[mid].lo <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* make x a segment boundary */
static int seg_split(builder *b, segmap *m, int64_t x)
{
    int i = seg_find(m, x);
    if (m->v[i].lo == x)
        return 0;
    if (grow((void **) &m->v, &m->cap, m->n + 1, sizeof(seg)))
        return b->nomem = 1, -1;
    memmove(&m->v[i + 2], &m->v[i + 1], sizeof(seg) * (size_t) (m->n - i - 1));
    m->n++;
    seg *a = &m->v[i], *c = &m->v[i + 1];
    *c = *a;
    c->lo = x;
    a->hi = x;
    c->rd = NULL;
    c->caprd = 0;
    if (a->nrd) {
        if (grow((void **) &c->rd, &c->caprd, a->nrd, sizeof(int)))
            return b->nomem = 1, c->nrd = 0, -1;
        memcpy(c->rd, a->rd, sizeof(int) * (size_t) a->nrd);
    }
    return 0;
}

static void pend_add(builder *b, int d)
{
    if (d < 0)
        return;
    if (grow((void **) &b->pend, &b->cappend, b->npend + 1, sizeof(int))) {
        b->nomem = 1;
        return;
    }
    b->pend[b->npend++] = d;
}

/* record that step `id` reads or writes [lo, hi) of buf, collecting its dependencies */
static void access_range(builder *b, int buf, int64_t lo, int64_t hi, int write, int id)
{
    segmap *m = &b->bufs[buf];
    if (seg_split(b, m, lo) || seg_split(b, m, hi))
        return;
    for (int i = seg_find(m, lo); i < m->n && m->v[i].lo < hi; i++) {
        seg *g = &m->v[i];
        pend_add(b, g->writer);
        if (write) {
            for (int j = 0; j < g->nrd; j++)
                pend_add(b, g->rd[j]);
            g->writer = id;
            g->nrd = 0;
        } else if (g->nrd == 0 || g->rd[g->nrd - 1] != id) {
            if (grow((void **) &g->rd, &g->caprd, g->nrd + 1, sizeof(int))) {
                b->nomem = 1;
                return;
            }
            g->rd[g->nrd++] = id;
        }
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *) a, y = *(const int *) b;
    return (x > y) - (x < y);
}

/* create a step: accesses[] lists (buf, off, write) of its ranges, all of length len */
static int add_step(ct_sched *s, ct_step st, int nacc, const int *abuf, const int64_t *aoff,
                    const int *awrite)
{
    builder *b = s->priv;
    /* only a message may be empty (a barrier's): it carries order, not data */
    if (!b || b->nomem || st.len < 0 || (st.len == 0 && st.op != CT_SEND && st.op != CT_RECV))
        return -1;
    if (grow((void **) &s->steps, &s->cap, s->nsteps + 1, sizeof(ct_step)))
        return b->nomem = 1, -1;
    int id = s->nsteps;
    b->npend = 0;
    for (int i = 0; i < b->nextra; i++)
        pend_add(b, b->extra[i]);
    b->nextra = 0;
    for (int i = 0; i < nacc; i++) {
        access_range(b, abuf[i], aoff[i], aoff[i] + st.len, awrite[i], id);
        if (abuf[i] == CT_BUF_TMP && aoff[i] + st.len > s->tmp_elems)
            s->tmp_elems = aoff[i] + st.len;
    }
    if (b->nomem)
        return -1;
    if (b->npend > 1)           /* pend is NULL before the first dependence */
        qsort(b->pend, (size_t) b->npend, sizeof(int), cmp_int);
    int nd = 0;
    for (int i = 0; i < b->npend; i++)
        if (b->pend[i] != id && (nd == 0 || b->pend[nd - 1] != b->pend[i]))
            b->pend[nd++] = b->pend[i];
    if (grow((void **) &s->deps, &s->depcap, s->ndeps + nd, sizeof(int32_t)))
        return b->nomem = 1, -1;
    st.dep0 = s->ndeps;
    st.ndeps = nd;
    for (int i = 0; i < nd; i++)
        s->deps[s->ndeps++] = b->pend[i];
    st.prev_same_peer = -1;
    st.chan = 0;
    if (st.op == CT_SEND || st.op == CT_RECV) {
        int *last = st.op == CT_SEND ? b->last_send : b->last_recv;
        int k = st.peer * CT_MAXCHAN + b->chan;
        st.chan = b->chan;
        st.prev_same_peer = last[k];
        last[k] = id;
    }
    s->steps[s->nsteps++] = st;
    return id;
}

int ct_send(ct_sched *s, int buf, int64_t off, int64_t len, int peer)
{
    ct_step st = { .op = CT_SEND, .buf = (uint8_t) buf, .peer = peer, .off = off, .len = len };
    int w = 0;
    return add_step(s, st, 1, &buf, &off, &w);
}

int ct_recv(ct_sched *s, int buf, int64_t off, int64_t len, int peer)
{
    ct_step st = { .op = CT_RECV, .buf = (uint8_t) buf, .peer = peer, .off = off, .len = len };
    int w = 1;
    return add_step(s, st, 1, &buf, &off, &w);
}

int ct_copy(ct_sched *s, int dbuf, int64_t doff, int sbuf, int64_t soff, int64_t len)
{
    ct_step st = { .op = CT_COPY, .buf = (uint8_t) dbuf, .sbuf = (uint8_t) sbuf, .off = doff,
                   .soff = soff, .len = len, .peer = -1 };
    int bufs[2] = { sbuf, dbuf }, w[2] = { 0, 1 };
    int64_t offs[2] = { soff, doff };
    return add_step(s, st, 2, bufs, offs, w);
}

int ct_reduce(ct_sched *s, int right, int dbuf, int64_t doff, int sbuf, int64_t soff, int64_t len)
{
    ct_step st = { .op = right ? CT_REDUCE_RIGHT : CT_REDUCE_LEFT, .buf = (uint8_t) dbuf,
                   .sbuf = (uint8_t) sbuf, .off = doff, .soff = soff, .len = len, .peer = -1 };
    /* a right reduction may use its source as scratch: it writes it */
    int bufs[2] = { sbuf, dbuf }, w[2] = { right, 1 };
    int64_t offs[2] = { soff, doff };
    return add_step(s, st, 2, bufs, offs, w);
}

void ct_set_chan(ct_sched *s, int chan)
{
    builder *b = s->priv;
    if (b)
        b->chan = chan % CT_MAXCHAN;
}

void ct_next_dep(ct_sched *s, int d)
{
    builder *b = s->priv;
    if (!b || d < 0)
        return;
    if (grow((void **) &b->extra, &b->capextra, b->nextra + 1, sizeof(int))) {
        b->nomem = 1;
        return;
    }
    b->extra[b->nextra++] = d;
}

void ct_sched_print(const ct_sched *s, void *fp)
{
    static const char *names[] = { "?", "send", "recv", "redL", "redR", "copy" };
    static const char *bn[] = { "S", "R", "T" };
    FILE *f = fp;
    fprintf(f, "rank %d: %d steps, tmp %lld elems\n", s->rank, s->nsteps, (long long) s->tmp_elems);
    for (int i = 0; i < s->nsteps; i++) {
        const ct_step *st = &s->steps[i];
        fprintf(f, "  %4d %s ", i, names[st->op]);
        if (st->op == CT_SEND || st->op == CT_RECV)
            fprintf(f, "%s[%lld+%lld] peer %d chan %d", bn[st->buf], (long long) st->off,
                    (long long) st->len, st->peer, st->chan);
        else
            fprintf(f, "%s[%lld+%lld] <- %s[%lld]", bn[st->buf], (long long) st->off,
                    (long long) st->len, bn[st->sbuf], (long long) st->soff);
        fprintf(f, " deps");
        for (int j = 0; j < st->ndeps; j++)
            fprintf(f, " %d", s->deps[st->dep0 + j]);
        fprintf(f, "\n");
    }
}
