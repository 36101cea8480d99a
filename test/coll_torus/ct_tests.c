/* coll_torus unit tests: no MPI. Every generator on many shapes and roots is run through a
 * symbolic execution of all ranks together (ct_engine_run, rendezvous semantics): each
 * element carries which rank's element it is, or for reductions which ranks were combined
 * (in order, for non-commutative operations) and a checksum of the contributions; at the end
 * every rank must hold exactly the right data. The execution also proves there is no deadlock
 * and that every send has its receive, and a check of the dependencies proves no two steps of
 * a rank that touch the same elements (one writing) can run at once.
 *
 *   ct_tests [--list] [NAME...]     run all tests or the named ones
 *   ct_tests --model SHAPE          link-model estimates of every collective on SHAPE */
#include "coll_torus.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- symbolic values --------------------------------------------------------------------- */
typedef struct sym {
    int32_t idx;                /* element index in the contributor's buffer */
    int32_t lo, hi;             /* contributors: a rank interval (ordered combination) */
    int32_t cnt;                /* how many contributions; 0: never written */
    uint64_t h;                 /* sum of the contributions' hashes */
} sym;

static uint64_t hash2(int r, int64_t i)
{
    uint64_t x = (uint64_t) r * 0x9E3779B97F4A7C15ull ^ (uint64_t) i * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return x;
}

static sym contrib(int r, int64_t i)
{
    return (sym) { (int32_t) i, r, r, 1, hash2(r, i) };
}

typedef struct world {
    const ct_topo *t;
    ct_sched **sc;
    sym *buf[CT_NBUFS];         /* per rank: buf[b] + base[b][r] */
    int64_t *base[CT_NBUFS], *size[CT_NBUFS];
    int commutative;
    char err[512];
    /* barrier: knowledge bitsets per rank and step */
    uint64_t **know;
    int words;
} world;

static int fails = 0;
static const char *cur_test;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL [%s] ", cur_test);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fails++;
}

static void werr(world *w, const char *fmt, ...)
{
    if (w->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

static sym *at(world *w, int r, int b, int64_t off, int64_t len, const char *what)
{
    if (off < 0 || off + len > w->size[b][r]) {
        werr(w, "rank %d %s: range [%lld, %lld) outside buffer %c of %lld elements", r, what,
             (long long) off, (long long) (off + len), "SRT"[b], (long long) w->size[b][r]);
        return NULL;
    }
    return w->buf[b] + w->base[b][r] + off;
}

static void combine(world *w, int r, sym *dst, const sym *a, const sym *b)
{
    if (!a->cnt || !b->cnt) {
        werr(w, "rank %d reduces an element never written", r);
        return;
    }
    if (a->idx != b->idx) {
        werr(w, "rank %d combines element %d with element %d", r, a->idx, b->idx);
        return;
    }
    sym o = *a;
    if (!w->commutative) {
        if (a->hi + 1 != b->lo) {
            werr(w, "rank %d combines ranks %d..%d with %d..%d: out of rank order", r, a->lo,
                 a->hi, b->lo, b->hi);
            return;
        }
        o.hi = b->hi;
    } else {
        o.lo = a->lo < b->lo ? a->lo : b->lo;
        o.hi = a->hi > b->hi ? a->hi : b->hi;
    }
    o.cnt = a->cnt + b->cnt;
    o.h = a->h + b->h;
    *dst = o;
}

static void exec_cb(void *ctx, int r, const ct_step *st, int pr, const ct_step *ps)
{
    world *w = ctx;
    if (w->err[0])
        return;
    switch (st->op) {
    case CT_SEND: {
        sym *s = at(w, r, st->buf, st->off, st->len, "send");
        sym *d = at(w, pr, ps->buf, ps->off, ps->len, "recv");
        if (!s || !d)
            return;
        for (int64_t i = 0; i < st->len; i++)
            if (!s[i].cnt) {
                werr(w, "rank %d sends element %lld of buffer %c, never written", r,
                     (long long) (st->off + i), "SRT"[st->buf]);
                return;
            }
        memmove(d, s, sizeof(sym) * (size_t) st->len);
        break;
    }
    case CT_COPY: {
        sym *s = at(w, r, st->sbuf, st->soff, st->len, "copy source");
        sym *d = at(w, r, st->buf, st->off, st->len, "copy");
        if (s && d)
            memmove(d, s, sizeof(sym) * (size_t) st->len);
        break;
    }
    case CT_REDUCE_LEFT:
    case CT_REDUCE_RIGHT: {
        sym *s = at(w, r, st->sbuf, st->soff, st->len, "reduce source");
        sym *d = at(w, r, st->buf, st->off, st->len, "reduce");
        if (!s || !d)
            return;
        for (int64_t i = 0; i < st->len; i++) {
            if (st->op == CT_REDUCE_LEFT)
                combine(w, r, &d[i], &s[i], &d[i]);
            else {
                combine(w, r, &d[i], &d[i], &s[i]);
                s[i].cnt = 0;   /* a right reduction may clobber its source */
            }
        }
        break;
    }
    default:
        werr(w, "rank %d: a %d step completed alone", r, st->op);
    }
}

/* ---- races: two steps of a rank touching overlapping elements, one writing, must be ordered
 * by the dependencies */
typedef struct acc {
    int64_t lo, hi;
    int buf, write, step;
} acc;

static int cmp_acc(const void *x, const void *y)
{
    const acc *a = x, *b = y;
    if (a->buf != b->buf)
        return a->buf - b->buf;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

static int check_races(const ct_sched *s, char *err, size_t elen)
{
    int n = s->nsteps;
    if (n == 0)
        return 0;
    int words = (n + 63) / 64;
    uint64_t *anc = calloc((size_t) n * (size_t) words, sizeof(uint64_t));
    acc *a = malloc(sizeof(acc) * (size_t) n * 2);
    if (!anc || !a) {
        free(anc);
        free(a);
        snprintf(err, elen, "out of memory");
        return -1;
    }
    int na = 0;
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        uint64_t *ai = anc + (size_t) i * words;
        for (int j = 0; j < st->ndeps; j++) {
            int d = s->deps[st->dep0 + j];
            uint64_t *ad = anc + (size_t) d * words;
            for (int k = 0; k < words; k++)
                ai[k] |= ad[k];
            ai[d / 64] |= 1ull << (d % 64);
        }
        if (st->len == 0)
            continue;
        switch (st->op) {
        case CT_SEND:
            a[na++] = (acc) { st->off, st->off + st->len, st->buf, 0, i };
            break;
        case CT_RECV:
            a[na++] = (acc) { st->off, st->off + st->len, st->buf, 1, i };
            break;
        default:
            a[na++] = (acc) { st->off, st->off + st->len, st->buf, 1, i };
            a[na++] = (acc) { st->soff, st->soff + st->len, st->sbuf, st->op == CT_REDUCE_RIGHT, i };
        }
    }
    qsort(a, (size_t) na, sizeof(acc), cmp_acc);
    int rc = 0;
    for (int i = 0; i < na && !rc; i++)
        for (int j = i + 1; j < na && a[j].buf == a[i].buf && a[j].lo < a[i].hi; j++) {
            if (!a[i].write && !a[j].write)
                continue;
            int x = a[i].step, y = a[j].step;
            if (x == y)
                continue;
            if (x > y) {
                int tmp = x;
                x = y;
                y = tmp;
            }
            if (!(anc[(size_t) y * words + x / 64] >> (x % 64) & 1)) {
                snprintf(err, elen, "rank %d: steps %d and %d touch buffer %c [%lld, %lld) and "
                         "[%lld, %lld) unordered", s->rank, x, y, "SRT"[a[i].buf],
                         (long long) a[i].lo, (long long) a[i].hi, (long long) a[j].lo,
                         (long long) a[j].hi);
                rc = -1;
                break;
            }
        }
    free(anc);
    free(a);
    return rc;
}

/* ---- running one collective ------------------------------------------------------------ */
enum { K_BCAST_TREES, K_BCAST_DIMTREE, K_ALLREDUCE_RSAG, K_ALLREDUCE_LINES, K_REDUCE,
       K_ALLGATHER, K_ALLGATHERV, K_ALLTOALL, K_BARRIER, K_SELECT_BCAST, K_SELECT_ALLREDUCE,
       K_ALLTOALL_DIMS };
static const char *kname[] = { "bcast_trees", "bcast_dimtree", "allreduce_rsag",
                               "allreduce_lines", "reduce_rsg", "allgather", "allgatherv",
                               "alltoall_shift", "barrier_lines", "select(bcast)",
                               "select(allreduce)", "alltoall_dims" };

static int gen(int kind, ct_sched *s, const ct_topo *t, int me, int root, int64_t count,
               const int64_t *vc, const int64_t *vd, const ct_params *p)
{
    switch (kind) {
    case K_BCAST_TREES:
        return ct_bcast_trees(s, t, me, root, count, 8, p);
    case K_BCAST_DIMTREE:
        return ct_bcast_dimtree(s, t, me, root, count, 8, p);
    case K_ALLREDUCE_RSAG:
        return ct_allreduce_rsag(s, t, me, count, 8, p);
    case K_ALLREDUCE_LINES:
        return ct_allreduce_lines(s, t, me, count, 8, p);
    case K_REDUCE:
        return ct_reduce_rsg(s, t, me, root, count, 8, p);
    case K_ALLGATHER:
        return ct_allgather(s, t, me, count, 8, p);
    case K_ALLGATHERV:
        return ct_allgatherv(s, t, me, vc, vd, 8, p);
    case K_ALLTOALL:
        return ct_alltoall_shift(s, t, me, count, 8, p);
    case K_BARRIER:
        return ct_barrier_lines(s, t, me, p);
    case K_SELECT_BCAST:
        return ct_select(s, CT_COLL_BCAST, t, me, root, count, 8, p);
    case K_SELECT_ALLREDUCE:
        return ct_select(s, CT_COLL_ALLREDUCE, t, me, root, count, 8, p);
    case K_ALLTOALL_DIMS:
        return ct_alltoall_dims(s, t, me, count, 8, p);
    }
    return CT_ERR_INVALID;
}

static void know_cb(void *ctx, int r, const ct_step *st, int pr, const ct_step *ps);

/* Generates the schedules of every rank and checks them. Returns 0 when all is right;
 * scheds_out (optional) keeps the schedules for the caller (who frees them). */
static int run_one(int kind, const ct_topo *t, int root, int64_t count, const ct_params *p,
                   const char *shape, ct_sched ***scheds_out)
{
    int P = t->nranks;
    char what[256];
    snprintf(what, sizeof what, "%s on %s, root %d, count %lld, chunk %lld, window %d, %s",
             kname[kind], shape, root, (long long) count, (long long) (p ? p->chunk_elems : 0),
             p ? p->window : 0, p && !p->commutative ? "non-commutative" : "commutative");
    int64_t *vc = malloc(sizeof(int64_t) * (size_t) P * 2), *vd = vc + P, vtot = 0;
    for (int r = 0; r < P; r++) {
        vc[r] = kind == K_ALLGATHERV ? (int64_t) ((r * 7 + count) % 5) : count;
        vd[r] = (int64_t) r * count;
    }
    vtot = (int64_t) P * count;
    if (kind == K_ALLGATHERV) {     /* blocks in reverse rank order, with gaps */
        vtot = 0;
        for (int r = P - 1; r >= 0; r--) {
            vd[r] = vtot;
            vtot += vc[r] + (r % 3 == 0);
        }
    }
    ct_sched **sc = calloc((size_t) P, sizeof *sc);
    int rc = 0, nfallback = 0;
    for (int r = 0; r < P && !rc; r++) {
        sc[r] = calloc(1, sizeof(ct_sched));
        int g = gen(kind, sc[r], t, r, root, count, vc, vd, p);
        /* ct_select declining is the executor's fallback to MPI's own collective */
        if (g == CT_ERR_NOT_APPLICABLE && (kind == K_SELECT_BCAST || kind == K_SELECT_ALLREDUCE))
            nfallback++;
        else if (g) {
            fail("%s: rank %d: generator: %s", what, r, ct_strerror());
            rc = -1;
        }
    }
    /* nothing to execute when all fall back; some ranks alone would deadlock */
    if (!rc && nfallback) {
        if (nfallback < P)
            fail("%s: %d of %d ranks fall back, the others run a schedule", what, nfallback, P);
        rc = nfallback < P ? -1 : 1;
    }
    world w = { .t = t, .sc = sc, .commutative = !p || p->commutative };
    int64_t tot[CT_NBUFS] = { 0, 0, 0 };
    for (int b = 0; b < CT_NBUFS && !rc; b++) {
        w.base[b] = calloc((size_t) P, sizeof(int64_t));
        w.size[b] = calloc((size_t) P, sizeof(int64_t));
        for (int r = 0; r < P; r++) {
            int64_t sz;
            if (b == CT_BUF_TMP)
                sz = sc[r]->tmp_elems;
            else if (kind == K_ALLGATHER || kind == K_ALLGATHERV)
                sz = b == CT_BUF_SEND ? vc[r] : vtot;
            else if (kind == K_ALLTOALL || kind == K_ALLTOALL_DIMS)
                sz = count * P;
            else if (kind == K_BARRIER)
                sz = 0;
            else
                sz = count;
            w.base[b][r] = tot[b];
            w.size[b][r] = sz;
            tot[b] += sz;
        }
        w.buf[b] = calloc((size_t) (tot[b] ? tot[b] : 1), sizeof(sym));
    }
    if (!rc) {
        /* initial contents */
        for (int r = 0; r < P; r++) {
            sym *sb = w.buf[CT_BUF_SEND] + w.base[CT_BUF_SEND][r];
            sym *rb = w.buf[CT_BUF_RECV] + w.base[CT_BUF_RECV][r];
            for (int64_t i = 0; i < w.size[CT_BUF_SEND][r]; i++)
                sb[i] = contrib(r, i);
            if ((kind == K_BCAST_TREES || kind == K_BCAST_DIMTREE || kind == K_SELECT_BCAST) &&
                r == root)
                for (int64_t i = 0; i < count; i++)
                    rb[i] = contrib(r, i);
        }
        char err[512];
        for (int r = 0; r < P && !rc; r++)
            if (check_races(sc[r], err, sizeof err)) {
                fail("%s: %s", what, err);
                rc = -1;
            }
    }
    if (!rc && kind == K_BARRIER) {
        w.words = (P + 63) / 64;
        w.know = calloc((size_t) P, sizeof(uint64_t *));
        for (int r = 0; r < P; r++)
            w.know[r] = calloc((size_t) (sc[r]->nsteps + 1) * (size_t) w.words, sizeof(uint64_t));
    }
    if (!rc && ct_engine_run(t, sc, NULL, kind == K_BARRIER ? know_cb : exec_cb, &w, NULL)) {
        fail("%s: %s", what, ct_strerror());
        rc = -1;
    }
    if (!rc && w.err[0]) {
        fail("%s: %s", what, w.err);
        rc = -1;
    }
    /* the final contents */
    uint64_t *hsum = NULL;
    if (!rc && (kind == K_ALLREDUCE_RSAG || kind == K_ALLREDUCE_LINES || kind == K_REDUCE ||
                kind == K_SELECT_ALLREDUCE)) {
        hsum = calloc((size_t) (count ? count : 1), sizeof(uint64_t));
        for (int64_t i = 0; i < count; i++)
            for (int r = 0; r < P; r++)
                hsum[i] += hash2(r, i);
    }
    for (int r = 0; r < P && !rc; r++) {
        sym *rb = w.buf[CT_BUF_RECV] + w.base[CT_BUF_RECV][r];
        switch (kind) {
        case K_BCAST_TREES:
        case K_BCAST_DIMTREE:
        case K_SELECT_BCAST:
            for (int64_t i = 0; i < count && !rc; i++)
                if (rb[i].cnt != 1 || rb[i].lo != root || rb[i].idx != i) {
                    fail("%s: rank %d element %lld is (rank %d, elem %d, cnt %d), not root's",
                         what, r, (long long) i, rb[i].lo, rb[i].idx, rb[i].cnt);
                    rc = -1;
                }
            break;
        case K_REDUCE:
            if (r != root)
                break;
            /* fall through */
        case K_ALLREDUCE_RSAG:
        case K_ALLREDUCE_LINES:
        case K_SELECT_ALLREDUCE:
            for (int64_t i = 0; i < count && !rc; i++)
                if (rb[i].cnt != P || rb[i].idx != i || rb[i].h != hsum[i] || rb[i].lo != 0 ||
                    rb[i].hi != P - 1) {
                    fail("%s: rank %d element %lld: %d contributions (ranks %d..%d, elem %d), "
                         "checksum %s", what, r, (long long) i, rb[i].cnt, rb[i].lo, rb[i].hi,
                         rb[i].idx, rb[i].h == hsum[i] ? "right" : "wrong");
                    rc = -1;
                }
            break;
        case K_ALLGATHER:
        case K_ALLGATHERV:
            for (int q = 0; q < P && !rc; q++)
                for (int64_t i = 0; i < vc[q] && !rc; i++) {
                    sym *e = &rb[vd[q] + i];
                    if (e->cnt != 1 || e->lo != q || e->idx != i) {
                        fail("%s: rank %d block %d element %lld is (rank %d, elem %d, cnt %d)",
                             what, r, q, (long long) i, e->lo, e->idx, e->cnt);
                        rc = -1;
                    }
                }
            break;
        case K_ALLTOALL:
        case K_ALLTOALL_DIMS:
            for (int q = 0; q < P && !rc; q++)
                for (int64_t i = 0; i < count && !rc; i++) {
                    sym *e = &rb[q * count + i];
                    if (e->cnt != 1 || e->lo != q || e->idx != r * count + i) {
                        fail("%s: rank %d block from %d element %lld is (rank %d, elem %d, cnt %d)",
                             what, r, q, (long long) i, e->lo, e->idx, e->cnt);
                        rc = -1;
                    }
                }
            break;
        case K_BARRIER: {
            uint64_t *all = calloc((size_t) w.words, sizeof(uint64_t));
            for (int i = 0; i < sc[r]->nsteps; i++)
                for (int k = 0; k < w.words; k++)
                    all[k] |= w.know[r][(size_t) i * w.words + k];
            all[r / 64] |= 1ull << (r % 64);
            for (int q = 0; q < P && !rc; q++)
                if (!(all[q / 64] >> (q % 64) & 1)) {
                    fail("%s: rank %d leaves without hearing from rank %d", what, r, q);
                    rc = -1;
                }
            free(all);
            break;
        }
        }
    }
    free(hsum);
    if (w.know) {
        for (int r = 0; r < P; r++)
            free(w.know[r]);
        free(w.know);
    }
    for (int b = 0; b < CT_NBUFS; b++) {
        free(w.buf[b]);
        free(w.base[b]);
        free(w.size[b]);
    }
    free(vc);
    if (scheds_out && !rc) {
        *scheds_out = sc;
        return 0;
    }
    for (int r = 0; r < P; r++)
        if (sc[r]) {
            ct_sched_free(sc[r]);
            free(sc[r]);
        }
    free(sc);
    return rc > 0 ? 0 : rc;
}

/* barrier knowledge: a step knows what its dependencies knew; a receive also what its send
 * knew; every step knows its own rank */
static void know_cb(void *ctx, int r, const ct_step *st, int pr, const ct_step *ps)
{
    world *w = ctx;
    int W = w->words;
    const ct_step *pair[2] = { st, ps };
    int ranks[2] = { r, pr };
    uint64_t *sendk = NULL;
    for (int k = 0; k < (ps ? 2 : 1); k++) {
        int rr = ranks[k];
        const ct_sched *s = w->sc[rr];
        int idx = (int) (pair[k] - s->steps);
        uint64_t *me = w->know[rr] + (size_t) idx * W;
        me[rr / 64] |= 1ull << (rr % 64);
        for (int j = 0; j < pair[k]->ndeps; j++) {
            uint64_t *d = w->know[rr] + (size_t) s->deps[pair[k]->dep0 + j] * W;
            for (int x = 0; x < W; x++)
                me[x] |= d[x];
        }
        if (k == 0)
            sendk = me;
        else
            for (int x = 0; x < W; x++)
                me[x] |= sendk[x];
    }
}

/* ---- the tests ------------------------------------------------------------------------- */
static const char *shapes[] = {
    "2", "5", "8", "3m", "6m", "4x4", "3x5", "2x3m", "4mx4m", "2x2x2", "3x3x3", "4x4x4",
    "2x3x4", "5x1x3", "4mx3x2", "4x4x1", "1x4x4", "3x3x2m", "3mx3mx3m", "2x2x2x2t",
    "3x2x1x3t", "4x3x1x2t", "1x1x1x4t",
};
#define NSHAPES (int) (sizeof shapes / sizeof shapes[0])

static int roots_of(int P, int *roots)
{
    int n = 0;
    roots[n++] = 0;
    if (P > 1)
        roots[n++] = P - 1;
    if (P > 2)
        roots[n++] = P / 2 + 1 < P ? P / 2 + 1 : 1;
    return n;
}

static void for_shapes(int kind, int use_root, const int64_t *counts, int ncounts,
                       const ct_params *ps, int nps)
{
    for (int si = 0; si < NSHAPES; si++) {
        ct_topo t;
        int dims[CT_MAXDIMS], wrap[CT_MAXDIMS];
        ct_shape_parse(shapes[si], dims, wrap);
        int P = dims[0] * dims[1] * dims[2] * dims[3];
        if (dims[3] > 1) {
            int *node = malloc(sizeof(int) * (size_t) P);
            for (int r = 0; r < P; r++)
                node[r] = r / dims[3];          /* consecutive ranks share a node */
            int rc = ct_topo_default(&t, P, node, shapes[si]);
            free(node);
            if (rc) {
                fail("topology %s: %s", shapes[si], ct_strerror());
                continue;
            }
        } else if (ct_topo_default(&t, P, NULL, shapes[si])) {
            fail("topology %s: %s", shapes[si], ct_strerror());
            continue;
        }
        int roots[3], nr = use_root ? roots_of(P, roots) : (roots[0] = 0, 1);
        for (int ri = 0; ri < nr; ri++)
            for (int ci = 0; ci < ncounts; ci++)
                for (int pi = 0; pi < nps; pi++) {
                    int64_t c = counts[ci] < 0 ? -counts[ci] * P + 1 : counts[ci];
                    run_one(kind, &t, roots[ri], c, &ps[pi], shapes[si], NULL);
                }
        ct_topo_free(&t);
    }
}

static const ct_params P_DEF = { 0, 1, 0 };

static void t_bcast_trees(void)
{
    int64_t counts[] = { 0, 1, 7, 100 };
    ct_params ps[] = { { 1, 1, 0 }, { 3, 1, 0 }, { 0, 1, 0 } };
    for_shapes(K_BCAST_TREES, 1, counts, 4, ps, 3);
}

static void t_bcast_dimtree(void)
{
    int64_t counts[] = { 0, 1, 33 };
    for_shapes(K_BCAST_DIMTREE, 1, counts, 3, &P_DEF, 1);
}

static void t_allreduce_rsag(void)
{
    int64_t counts[] = { 1, 5, 64, -3 };
    for_shapes(K_ALLREDUCE_RSAG, 0, counts, 4, &P_DEF, 1);
}

static void t_allreduce_lines(void)
{
    int64_t counts[] = { 1, 6 };
    ct_params ps[] = { { 0, 1, 0 }, { 0, 0, 0 } };
    for_shapes(K_ALLREDUCE_LINES, 0, counts, 2, ps, 2);
}

static void t_reduce(void)
{
    int64_t counts[] = { 1, 13, -2 };
    for_shapes(K_REDUCE, 1, counts, 3, &P_DEF, 1);
}

static void t_allgather(void)
{
    int64_t counts[] = { 0, 1, 5 };
    for_shapes(K_ALLGATHER, 0, counts, 3, &P_DEF, 1);
}

static void t_allgatherv(void)
{
    int64_t counts[] = { 0, 3 };
    for_shapes(K_ALLGATHERV, 0, counts, 2, &P_DEF, 1);
}

static void t_alltoall(void)
{
    int64_t counts[] = { 0, 1, 3 };
    ct_params ps[] = { { 0, 1, 1 }, { 0, 1, 2 }, { 0, 1, 5 } };
    for_shapes(K_ALLTOALL, 0, counts, 3, ps, 3);
}

static void t_alltoall_dims(void)
{
    int64_t counts[] = { 0, 1, 3, 7 };
    for_shapes(K_ALLTOALL_DIMS, 0, counts, 4, &P_DEF, 1);
}

static void t_barrier(void)
{
    int64_t counts[] = { 0 };
    for_shapes(K_BARRIER, 0, counts, 1, &P_DEF, 1);
}

static void t_select(void)
{
    int64_t counts[] = { 1, 2000, -2 };
    ct_params ps[] = { { 0, 1, 0 }, { 0, 0, 0 } };
    for_shapes(K_SELECT_BCAST, 1, counts, 3, ps, 1);
    for_shapes(K_SELECT_ALLREDUCE, 0, counts, 3, ps, 2);
}

/* ct_select's fallbacks to MPICH's own algorithm (where simulation found MPICH's choice
 * faster), decided alike at every rank; and the sizes around them that keep a schedule */
static void t_select_fallback(void)
{
    enum { OK = CT_OK, FB = CT_ERR_NOT_APPLICABLE };
    struct {
        const char *shape;
        int coll;
        int64_t bytes;
        int want;
    } c[] = {
        /* bcast: 6x6x6 takes 9 rounds of dimtree against 8 of a binomial over 216 ranks */
        { "6x6x6", CT_COLL_BCAST, 8, OK }, { "6x6x6", CT_COLL_BCAST, 1024, FB },
        { "6x6x6", CT_COLL_BCAST, 8192, OK }, { "3x5", CT_COLL_BCAST, 64, FB },
        { "4x4x4", CT_COLL_BCAST, 1024, OK }, { "8x8x8", CT_COLL_BCAST, 4096, OK },
        { "6x6", CT_COLL_BCAST, 1024, OK }, { "5x5mx4", CT_COLL_BCAST, 1024, FB },
        /* allreduce: 5x5x5, lines of 5 in [64, 250) elements; rsag from 250 */
        { "5x5x5", CT_COLL_ALLREDUCE, 256, OK }, { "5x5x5", CT_COLL_ALLREDUCE, 1024, FB },
        { "5x5x5", CT_COLL_ALLREDUCE, 2000, OK }, { "4x4x4", CT_COLL_ALLREDUCE, 512, FB },
        { "4x4x4", CT_COLL_ALLREDUCE, 1024, OK }, { "4x4x4", CT_COLL_ALLREDUCE, 8, OK },
        { "3x3x3", CT_COLL_ALLREDUCE, 256, OK }, { "3x17", CT_COLL_ALLREDUCE, 8, FB },
        { "16x16", CT_COLL_ALLREDUCE, 8, OK },
        /* alltoall: every message at once up to 32 ranks */
        { "3x3x3", CT_COLL_ALLTOALL, 8, OK }, { "3x3x3", CT_COLL_ALLTOALL, 1024, FB },
        { "3x3x3", CT_COLL_ALLTOALL, 65536, OK }, { "2x2x2", CT_COLL_ALLTOALL, 8, FB },
        { "4x4x4", CT_COLL_ALLTOALL, 1024, OK },
        { "5x5x5", CT_COLL_ALLGATHER, 1024, OK }, { "3x5", CT_COLL_BARRIER, 0, OK },
    };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        ct_topo t;
        int dims[CT_MAXDIMS], wrap[CT_MAXDIMS];
        ct_shape_parse(c[i].shape, dims, wrap);
        if (ct_topo_default(&t, dims[0] * dims[1] * dims[2] * dims[3], NULL, c[i].shape)) {
            fail("topology %s: %s", c[i].shape, ct_strerror());
            continue;
        }
        int nfb = 0;
        for (int r = 0; r < t.nranks; r++) {
            ct_sched s;
            int g = ct_select(&s, c[i].coll, &t, r, 0, c[i].bytes / 8, 8, &P_DEF);
            if (g == CT_OK)
                ct_sched_free(&s);
            else if (g == FB)
                nfb++;
            else
                fail("select %d on %s, %lld B: %s", c[i].coll, c[i].shape,
                     (long long) c[i].bytes, ct_strerror());
        }
        int got = nfb == t.nranks ? FB : OK;
        if ((nfb && nfb < t.nranks) || got != c[i].want)
            fail("select %d on %s, %lld B: %d of %d ranks fall back, expected %s", c[i].coll,
                 c[i].shape, (long long) c[i].bytes, nfb, t.nranks,
                 c[i].want == FB ? "all" : "none");
        ct_topo_free(&t);
    }
}

/* the rsag and reduce generators refuse a non-commutative operation */
static void t_noncommutative_refused(void)
{
    ct_topo t;
    ct_topo_default(&t, 8, NULL, "2x2x2");
    ct_params p = { 0, 0, 0 };
    ct_sched s;
    if (ct_allreduce_rsag(&s, &t, 0, 100, 8, &p) != CT_ERR_NOT_APPLICABLE)
        fail("allreduce_rsag accepted a non-commutative operation");
    if (ct_reduce_rsg(&s, &t, 0, 0, 100, 8, &p) != CT_ERR_NOT_APPLICABLE)
        fail("reduce_rsg accepted a non-commutative operation");
    ct_topo_free(&t);
    /* lines with a non-XYZT mapping and a non-commutative op: not applicable */
    char path[] = "/tmp/ct_tests_mapXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "1 0 0\n0 0 0\n");
    fclose(f);
    if (ct_topo_from_file(&t, path, 2, NULL))
        fail("mapping 1 0 0 / 0 0 0: %s", ct_strerror());
    else {
        if (ct_allreduce_lines(&s, &t, 0, 4, 8, &p) != CT_ERR_NOT_APPLICABLE)
            fail("allreduce_lines accepted a non-commutative op over a non-XYZT order");
        p.commutative = 1;
        run_one(K_ALLREDUCE_LINES, &t, 0, 4, &p, "mapped 2", NULL);
        run_one(K_ALLGATHER, &t, 0, 4, &p, "mapped 2", NULL);
        run_one(K_BCAST_TREES, &t, 1, 4, &p, "mapped 2", NULL);
        ct_topo_free(&t);
    }
    unlink(path);
}

/* bcast's colours are edge-disjoint: on a torus whose every ring is longer than 2 (or a full
 * mesh), no link carries more than one colour's share */
static void t_bcast_disjoint(void)
{
    const char *sh[] = { "8", "4x4", "3x5", "3x3x3", "4x4x4", "5x3x4", "4mx4mx4m", "3mx5m",
                         "6x6x6" };
    ct_model m;
    ct_model_default(&m);
    for (unsigned i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        ct_topo t;
        int dims[4], wrap[4];
        ct_shape_parse(sh[i], dims, wrap);
        ct_topo_default(&t, dims[0] * dims[1] * dims[2], NULL, sh[i]);
        int active = (dims[0] > 1) + (dims[1] > 1) + (dims[2] > 1);
        int ncol = wrap[0] ? 2 * active : active;
        int64_t count = 6000;
        int roots[3], nr = roots_of(t.nranks, roots);
        for (int ri = 0; ri < nr; ri++) {
            ct_params p = { 100, 1, 0 };
            ct_sched **sc;
            if (run_one(K_BCAST_TREES, &t, roots[ri], count, &p, sh[i], &sc))
                continue;
            ct_load l;
            if (ct_model_load(&m, &t, sc, &l))
                fail("model on %s: %s", sh[i], ct_strerror());
            else {
                double share = (double) ((count + ncol - 1) / ncol) * 8;
                if (l.max_bytes > share + 0.5)
                    fail("bcast_trees on %s root %d: a link carries %.0f bytes, more than one "
                         "colour's %.0f", sh[i], roots[ri], l.max_bytes, share);
                ct_load_free(&l);
            }
            for (int r = 0; r < t.nranks; r++) {
                ct_sched_free(sc[r]);
                free(sc[r]);
            }
            free(sc);
        }
        ct_topo_free(&t);
    }
}

/* routes: SimGrid's rule on a ring of 8 (ties go up except from the middle), hop counts */
static void t_routes(void)
{
    ct_topo t;
    ct_topo_default(&t, 8, NULL, "8");
    int ids[8];
    struct { int a, b, hops, up; } c[] = {
        { 0, 4, 4, 1 }, { 4, 0, 4, 0 }, { 6, 2, 4, 1 }, { 2, 6, 4, 1 }, { 5, 1, 4, 1 },
        { 7, 0, 1, 1 }, { 0, 7, 1, 0 }, { 1, 6, 3, 0 }, { 6, 1, 3, 1 },
    };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        int h = ct_route(&t, c[i].a, c[i].b, ids);
        if (h != c[i].hops || (ids[0] & 1) == c[i].up)
            fail("route %d -> %d on ring 8: %d hops %s, expected %d %s", c[i].a, c[i].b, h,
                 (ids[0] & 1) ? "down" : "up", c[i].hops, c[i].up ? "up" : "down");
    }
    ct_topo_free(&t);
    ct_topo_default(&t, 64, NULL, "4x4x4");
    /* rank 63 = (3,3,3) to rank 0: one hop up (wrap) in each dimension, x first */
    int h = ct_route(&t, 63, 0, ids);
    if (h != 3 || ids[0] != (63 * 3 + 0) * 2 || ids[1] != ((60) * 3 + 1) * 2 ||
        ids[2] != ((48) * 3 + 2) * 2)
        fail("route 63 -> 0 on 4x4x4: %d hops, links %d %d %d", h, ids[0], ids[1], ids[2]);
    ct_topo_free(&t);
    ct_topo_default(&t, 6, NULL, "6m");
    if (ct_route(&t, 5, 0, ids) != 5 || !(ids[0] & 1))
        fail("a mesh route goes the long way down");
    ct_topo_free(&t);
}

/* ---- topology ---------------------------------------------------------------------------- */
static void expect_err(int rc, const char *want, const char *ctx)
{
    if (rc == CT_OK)
        fail("%s: accepted", ctx);
    else if (!strstr(ct_strerror(), want))
        fail("%s: error '%s' does not say '%s'", ctx, ct_strerror(), want);
}

static void t_shapes(void)
{
    int d[4], w[4];
    char buf[64];
    struct { const char *s; int d0, d1, d2, d3, w0, w1, w2; } ok[] = {
        { "8x8x8", 8, 8, 8, 1, 1, 1, 1 }, { "4mx4x4", 4, 4, 4, 1, 0, 1, 1 },
        { "8", 8, 1, 1, 1, 1, 0, 0 }, { "4x4x4x2t", 4, 4, 4, 2, 1, 1, 1 },
        { "3mx5m", 3, 5, 1, 1, 0, 0, 0 }, { "8x8x16", 8, 8, 16, 1, 1, 1, 1 },
    };
    for (unsigned i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (ct_shape_parse(ok[i].s, d, w)) {
            fail("shape %s: %s", ok[i].s, ct_strerror());
            continue;
        }
        if (d[0] != ok[i].d0 || d[1] != ok[i].d1 || d[2] != ok[i].d2 || d[3] != ok[i].d3 ||
            w[0] != ok[i].w0 || (d[1] > 1 && w[1] != ok[i].w1) || (d[2] > 1 && w[2] != ok[i].w2))
            fail("shape %s parsed as %dx%dx%dx%d wrap %d%d%d", ok[i].s, d[0], d[1], d[2], d[3],
                 w[0], w[1], w[2]);
        ct_shape_format(d, w, buf, sizeof buf);
        if (strcmp(buf, ok[i].s))
            fail("shape %s formats as %s", ok[i].s, buf);
    }
    expect_err(ct_shape_parse("", d, w), "empty", "shape ''");
    expect_err(ct_shape_parse("8x", d, w), "expected a number", "shape '8x'");
    expect_err(ct_shape_parse("8y8", d, w), "unexpected 'y'", "shape '8y8'");
    expect_err(ct_shape_parse("0x4", d, w), "not in 1..65536", "shape '0x4'");
    expect_err(ct_shape_parse("2x2x2x2", d, w), "at most 3", "shape '2x2x2x2'");
    expect_err(ct_shape_parse("2tx2", d, w), "comes after", "shape '2tx2'");
    expect_err(ct_shape_parse("2x2tx2", d, w), "nothing may follow", "shape '2x2tx2'");
    expect_err(ct_shape_parse("65536x65536x65536x65536t", d, w), "too many ranks",
               "shape of 2^64 positions");
    expect_err(ct_shape_parse("2048x1024x512", d, w), "too many ranks", "shape of 2^30 positions");
    /* the default factorisation, like MPI_Dims_create */
    struct { int n; int a, b, c; } df[] = {
        { 512, 8, 8, 8 }, { 64, 4, 4, 4 }, { 1024, 16, 8, 8 }, { 12, 3, 2, 2 }, { 7, 7, 1, 1 },
        { 4096, 16, 16, 16 }, { 1, 1, 1, 1 }, { 18, 3, 3, 2 },
    };
    for (unsigned i = 0; i < sizeof df / sizeof df[0]; i++) {
        ct_topo t;
        if (ct_topo_default(&t, df[i].n, NULL, NULL)) {
            fail("default %d: %s", df[i].n, ct_strerror());
            continue;
        }
        if (t.dims[0] != df[i].a || t.dims[1] != df[i].b || t.dims[2] != df[i].c)
            fail("default dims of %d: %dx%dx%d, expected %dx%dx%d", df[i].n, t.dims[0],
                 t.dims[1], t.dims[2], df[i].a, df[i].b, df[i].c);
        if (!t.xyzt_order)
            fail("default of %d is not in XYZT order", df[i].n);
        ct_topo_free(&t);
    }
    /* nodes: t is the index on the node; rank 3 on node 1 with t 1 */
    ct_topo t;
    int node[8] = { 0, 0, 1, 1, 2, 2, 3, 3 };
    if (ct_topo_default(&t, 8, node, NULL))
        fail("default with nodes: %s", ct_strerror());
    else {
        if (t.dims[3] != 2 || t.coords[3][3] != 1 || t.coords[3][0] + t.coords[3][1] * t.dims[0] != 1)
            fail("rank 3 on node 1: coords %d %d %d %d", t.coords[3][0], t.coords[3][1],
                 t.coords[3][2], t.coords[3][3]);
        ct_topo_free(&t);
    }
    int uneven[4] = { 0, 0, 0, 1 };
    expect_err(ct_topo_default(&t, 4, uneven, NULL), "node 1 holds 1", "uneven nodes");
    expect_err(ct_topo_default(&t, 8, NULL, "3x3"), "holds 9 nodes", "8 ranks on 3x3");
}

static const char *write_map(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/ct_tests_mapXXXXXX");
    int fd = mkstemp(path);
    if (write(fd, text, strlen(text)) < 0)
        fail("write %s", path);
    close(fd);
    return path;
}

static void t_mapfile(void)
{
    ct_topo t;
    /* Almási et al. 2005's example: eight ranks on a 2x2x2 mesh, not in XYZT order */
    const char *p = write_map("# 2x2x2\n0 0 0\n1 0 0\n0 1 0\n1 1 0\n0 0 1\n1 0 1\n0 1 1  # r6\n\n1 1 1\n");
    if (ct_topo_from_file(&t, p, 8, "2mx2mx2m"))
        fail("Almasi et al.'s mapping: %s", ct_strerror());
    else {
        if (!t.xyzt_order || t.wrap[0])
            fail("Almasi et al.'s mapping: xyzt %d wrap %d", t.xyzt_order, t.wrap[0]);
        ct_topo_free(&t);
    }
    unlink(p);
    p = write_map("1 1 1\n0 0 0\n1 0 0\n0 1 0\n1 1 0\n0 0 1\n1 0 1\n0 1 1\n");
    if (ct_topo_from_file(&t, p, 8, NULL))
        fail("permuted mapping: %s", ct_strerror());
    else {
        if (t.xyzt_order || t.rank_at[7] != 0 || t.dims[0] != 2)
            fail("permuted mapping read wrong");
        run_one(K_ALLREDUCE_RSAG, &t, 0, 20, &P_DEF, "permuted 2x2x2", NULL);
        run_one(K_ALLGATHERV, &t, 0, 3, &P_DEF, "permuted 2x2x2", NULL);
        run_one(K_BCAST_TREES, &t, 5, 20, &P_DEF, "permuted 2x2x2", NULL);
        ct_topo_free(&t);
    }
    unlink(p);
    /* vnode-style 4 columns */
    p = write_map("0 0 0 0\n0 0 0 1\n1 0 0 0\n1 0 0 1\n");
    if (ct_topo_from_file(&t, p, 4, NULL))
        fail("xyzt mapping: %s", ct_strerror());
    else {
        if (t.dims[3] != 2 || t.dims[0] != 2 || t.xyzt_order)
            fail("xyzt mapping: dims %dx%dx%dx%d", t.dims[0], t.dims[1], t.dims[2], t.dims[3]);
        ct_topo_free(&t);
    }
    unlink(p);
    struct { const char *text; int n; const char *shape; const char *want; } bad[] = {
        { "0 0 0\n0 0 0\n", 2, NULL, ":2: (0,0,0,0) is already rank 0's (line 1)" },
        { "0 0 0\n1 0 x\n", 2, NULL, ":2: 'x' is not a coordinate" },
        { "0 0 0\n1 0\n", 2, NULL, ":2: 2 numbers" },
        { "0 0 0\n1 0 0 0 0\n", 2, NULL, ":2: more than 4 numbers" },
        { "0 0 0\n", 2, NULL, ":1: the file ends after 1 rank; there are 2" },
        { "0 0 0\n1 0 0\n0 1 0\n", 2, NULL, ":3: more lines than the 2 ranks" },
        { "0 0 0\n2 0 0\n", 2, NULL, "cannot be a bijection onto shape 3" },
        { "0 0 0\n1 0 0\n", 2, "4", "cannot be a bijection onto shape 4" },
        { "0 0 0\n4 0 0\n", 2, "4", ":2: x=4 is outside shape 4 (0..3)" },
        { "0 0 0\n1 0 0 0\n", 2, NULL, ":2: 4 coordinates where earlier lines have 3" },
        { "0 0 -1\n", 1, NULL, ":1: '-1' is not a coordinate" },
        { "0 0 0\n1 0 0\n", 2, "2y", "unexpected 'y'" },
        /* extents whose product overflows 64 bits, and one of 2^26 positions for 2 ranks:
         * refused without an allocation the size of the extents */
        { "65535 65535 65535 65535\n", 1, NULL, "cannot be a bijection" },
        { "0 0 0\n65535 1023 0\n", 2, NULL, "cannot be a bijection onto shape 65536x1024" },
        { "0 0 0 0\n1 0 0 0\n", 2, "65536x65536x65536x65536t", "too many ranks" },
        { "5 5 5\n0 0 0\n5 5 5\n", 3, NULL, ":3: (5,5,5,0) is already rank 0's (line 1)" },
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_map(bad[i].text);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "mapping file case %u", i);
        expect_err(ct_topo_from_file(&t, p, bad[i].n, bad[i].shape), bad[i].want, ctx);
        if (strstr(bad[i].want, ":") == bad[i].want && !strstr(ct_strerror(), p))
            fail("%s: error '%s' does not name the file", ctx, ct_strerror());
        unlink(p);
    }
    expect_err(ct_topo_from_file(&t, "/nonexistent/map", 2, NULL), "cannot open", "missing file");
}

static void t_subbox(void)
{
    ct_topo t, s;
    ct_topo_default(&t, 64, NULL, "4x4x4");
    /* the x=1..2, y=3,0 (wrapping), z=0..3 box: 2x2x4, z keeps its wrap */
    int m[16], n = 0;
    for (int z = 0; z < 4; z++)
        for (int y = 3; y < 5; y++)
            for (int x = 1; x < 3; x++)
                m[n++] = x + 4 * (y % 4) + 16 * z;
    if (ct_topo_sub(&s, &t, m, n))
        fail("sub-box: %s", ct_strerror());
    else {
        if (s.dims[0] != 2 || s.dims[1] != 2 || s.dims[2] != 4 || !s.wrap[2] || s.wrap[0])
            fail("sub-box shape %dx%dx%d wrap %d%d%d", s.dims[0], s.dims[1], s.dims[2],
                 s.wrap[0], s.wrap[1], s.wrap[2]);
        run_one(K_ALLREDUCE_RSAG, &s, 0, 40, &P_DEF, "sub-box 2x2x4", NULL);
        run_one(K_BCAST_TREES, &s, 3, 40, &P_DEF, "sub-box 2x2x4", NULL);
        ct_topo_free(&s);
    }
    /* a plane with a hole is not a box */
    n = 0;
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++)
            if (!(x == 1 && y == 1) && !(x == 2))
                m[n++] = x + 4 * y;
    /* x in {3, 0, 1} is an interval of the ring, but the hole leaves 11 of 12 nodes */
    expect_err(ct_topo_sub(&s, &t, m, n), "11 members on a box of 12", "sub-box with a hole");
    int m3[3] = { 0, 1, 4 };
    expect_err(ct_topo_sub(&s, &t, m3, 3), "on a box of 4", "L-shaped members");
    /* a line of every other node */
    int m2[2] = { 0, 2 };
    expect_err(ct_topo_sub(&s, &t, m2, 2), "not one interval", "every other node");
    ct_topo_free(&t);
}

/* ---- model mode ------------------------------------------------------------------------ */
static int model_mode(const char *shape)
{
    ct_topo t;
    int d[4], w[4];
    if (ct_shape_parse(shape, d, w)) {
        fprintf(stderr, "%s\n", ct_strerror());
        return 2;
    }
    if (ct_topo_default(&t, d[0] * d[1] * d[2] * d[3], NULL, shape)) {
        fprintf(stderr, "%s\n", ct_strerror());
        return 2;
    }
    ct_model m;
    ct_model_default(&m);
    printf("%-18s %10s %12s %12s %12s %10s\n", "collective", "bytes", "link bound", "crit path",
           "estimate", "messages");
    struct { int coll; int64_t bytes; } c[] = {
        { CT_COLL_BCAST, 8 }, { CT_COLL_BCAST, 65536 }, { CT_COLL_BCAST, 1 << 20 },
        { CT_COLL_ALLREDUCE, 8 }, { CT_COLL_ALLREDUCE, 1 << 20 }, { CT_COLL_ALLGATHER, 1024 },
        { CT_COLL_ALLTOALL, 1024 }, { CT_COLL_BARRIER, 0 },
    };
    static const char *cn[] = { "bcast", "allreduce", "reduce", "allgather", "alltoall", "barrier" };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        ct_sched **sc = calloc((size_t) t.nranks, sizeof *sc);
        int64_t count = c[i].bytes / 8;
        int fb = 0;
        for (int r = 0; r < t.nranks && !fb; r++) {
            sc[r] = calloc(1, sizeof(ct_sched));
            int g = ct_select(sc[r], c[i].coll, &t, r, 0, count, 8, &P_DEF);
            if (g == CT_ERR_NOT_APPLICABLE)
                fb = 1;
            else if (g) {
                fprintf(stderr, "%s\n", ct_strerror());
                return 1;
            }
        }
        if (fb) {
            printf("%-18s %10lld   falls back to MPI's own algorithm\n", cn[c[i].coll],
                   (long long) c[i].bytes);
            for (int r = 0; r < t.nranks; r++)
                if (sc[r]) {
                    ct_sched_free(sc[r]);
                    free(sc[r]);
                }
            free(sc);
            continue;
        }
        ct_load l;
        if (ct_model_load(&m, &t, sc, &l)) {
            fprintf(stderr, "%s\n", ct_strerror());
            return 1;
        }
        printf("%-18s %10lld %10.1fus %10.1fus %10.1fus %10lld\n", cn[c[i].coll],
               (long long) c[i].bytes, l.link_bound * 1e6, l.critical_path * 1e6,
               l.estimate * 1e6, (long long) l.messages);
        ct_load_free(&l);
        for (int r = 0; r < t.nranks; r++) {
            ct_sched_free(sc[r]);
            free(sc[r]);
        }
        free(sc);
    }
    ct_topo_free(&t);
    return 0;
}

static struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
    { "shapes", t_shapes }, { "mapfile", t_mapfile }, { "subbox", t_subbox },
    { "routes", t_routes }, { "bcast_trees", t_bcast_trees }, { "bcast_dimtree", t_bcast_dimtree },
    { "bcast_disjoint", t_bcast_disjoint }, { "allreduce_rsag", t_allreduce_rsag },
    { "allreduce_lines", t_allreduce_lines }, { "reduce_rsg", t_reduce },
    { "allgather", t_allgather }, { "allgatherv", t_allgatherv }, { "alltoall", t_alltoall },
    { "alltoall_dims", t_alltoall_dims },
    { "barrier", t_barrier }, { "select", t_select }, { "select_fallback", t_select_fallback },
    { "noncommutative", t_noncommutative_refused },
};
#define NTESTS (int) (sizeof tests / sizeof tests[0])

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--model"))
        return model_mode(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < NTESTS; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    int ran = 0;
    for (int i = 0; i < NTESTS; i++) {
        int want = argc == 1;
        for (int a = 1; a < argc; a++)
            want |= !strcmp(argv[a], tests[i].name);
        if (!want)
            continue;
        cur_test = tests[i].name;
        int f0 = fails;
        tests[i].fn();
        printf("%s %s\n", fails == f0 ? "ok  " : "FAIL", tests[i].name);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "no such test (--list lists them)\n");
        return 2;
    }
    return fails ? 1 : 0;
}
