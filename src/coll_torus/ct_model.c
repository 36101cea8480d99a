/* The link-load model: routes as SimGrid's torus computes them, per-link bytes, and a time
 * estimate (the larger of the busiest link's time and the contention-free critical path),
 * plus the engine that runs all ranks' schedules together (used by the estimate and by the
 * tests' symbolic execution). */
#include "ct_sched_int.h"

#include <stdlib.h>
#include <string.h>

void ct_model_default(ct_model *m)
{
    m->link_bw = 175e6;
    m->hop_lat = 100e-9;
    m->msg_overhead = 0;
}

int ct_route(const ct_topo *t, int src, int dst, int *ids)
{
    const int *a = t->coords[src], *b = t->coords[dst];
    int cur[3] = { a[0], a[1], a[2] }, hops = 0;
    for (int d = 0; d < 3; d++) {
        int n = t->dims[d], my = a[d], tg = b[d];
        if (my == tg)
            continue;
        int up;
        if (t->wrap[d])         /* SimGrid's TorusZone rule, ties included */
            up = (tg > my && tg <= my + n / 2) || (my > n / 2 && (my + n / 2) % n >= tg);
        else
            up = tg > my;
        while (cur[d] != tg) {
            if (ids) {
                int node = cur[0] + t->dims[0] * (cur[1] + t->dims[1] * cur[2]);
                ids[hops] = (node * 3 + d) * 2 + !up;
            }
            hops++;
            cur[d] = up ? (cur[d] + 1) % n : (cur[d] - 1 + n) % n;
        }
    }
    return hops;
}

/* ---- the engine -------------------------------------------------------------------------- */
typedef struct msgkey {
    int peer, ord, step;        /* peer * CT_MAXCHAN + channel */
} msgkey;

static int cmp_key(const void *x, const void *y)
{
    const msgkey *a = x, *b = y;
    if (a->peer != b->peer)
        return a->peer < b->peer ? -1 : 1;
    return (a->ord > b->ord) - (a->ord < b->ord);
}

typedef struct rstate {
    int n;
    int *ord;                   /* ordinal among messages to/from the same peer */
    int *waiting;               /* unmet conditions: deps not complete + previous not posted */
    int *posted, *done;
    double *tpost, *tdone;
    int *dstart, *dlist;        /* dependents (CSR) */
    int *next_same;             /* the next message to/from the same peer */
    msgkey *sends, *recvs;      /* sorted by (peer, ord) */
    int nsends, nrecvs;
} rstate;

typedef struct qitem {
    int rank, step;
} qitem;

int ct_engine_run(const ct_topo *t, ct_sched *const *sc, const ct_model *m, ct_exec_fn *exec,
                  void *ctx, double *finish)
{
    int P = t->nranks, rc = CT_OK;
    rstate *rs = calloc((size_t) P, sizeof *rs);
    int64_t total = 0;
    if (!rs)
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < P; r++)
        total += sc[r]->nsteps;
    qitem *q = malloc(sizeof *q * (size_t) (total + 1));
    if (!q) {
        free(rs);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    int64_t qh = 0, qt = 0;
    for (int r = 0; r < P; r++) {
        const ct_sched *s = sc[r];
        rstate *x = &rs[r];
        int n = x->n = s->nsteps;
        size_t N = (size_t) (n ? n : 1);
        x->ord = calloc(N, sizeof(int));
        x->waiting = calloc(N, sizeof(int));
        x->posted = calloc(N, sizeof(int));
        x->done = calloc(N, sizeof(int));
        x->tpost = calloc(N, sizeof(double));
        x->tdone = calloc(N, sizeof(double));
        x->dstart = calloc(N + 1, sizeof(int));
        x->dlist = malloc(sizeof(int) * (size_t) (s->ndeps ? s->ndeps : 1));
        x->next_same = malloc(sizeof(int) * N);
        x->sends = malloc(sizeof(msgkey) * N);
        x->recvs = malloc(sizeof(msgkey) * N);
        if (!x->recvs || !x->ord || !x->waiting || !x->posted || !x->done || !x->tpost || !x->tdone ||
            !x->dstart || !x->dlist || !x->next_same || !x->sends) {
            rc = ct_set_error(CT_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < n; i++) {
            const ct_step *st = &s->steps[i];
            x->next_same[i] = -1;
            x->waiting[i] = st->ndeps;
            for (int j = 0; j < st->ndeps; j++) {
                int d = s->deps[st->dep0 + j];
                if (d < 0 || d >= i) {
                    rc = ct_set_error(CT_ERR_INVALID, "rank %d step %d depends on step %d (not an "
                                      "earlier step)", r, i, d);
                    goto out;
                }
                x->dstart[d + 1]++;
            }
            if (st->op == CT_SEND || st->op == CT_RECV) {
                if (st->peer < 0 || st->peer >= P || st->peer == r || st->chan < 0 ||
                    st->chan >= CT_MAXCHAN) {
                    rc = ct_set_error(CT_ERR_INVALID, "rank %d step %d: peer %d", r, i, st->peer);
                    goto out;
                }
                if (st->prev_same_peer >= 0) {
                    x->ord[i] = x->ord[st->prev_same_peer] + 1;
                    x->next_same[st->prev_same_peer] = i;
                    x->waiting[i]++;
                }
                if (st->op == CT_SEND)
                    x->sends[x->nsends++] = (msgkey) { st->peer * CT_MAXCHAN + st->chan, x->ord[i], i };
                else
                    x->recvs[x->nrecvs++] = (msgkey) { st->peer * CT_MAXCHAN + st->chan, x->ord[i], i };
            }
        }
        for (int i = 0; i < n; i++)
            x->dstart[i + 1] += x->dstart[i];
        int *fill = calloc(N, sizeof(int));
        if (!fill) {
            rc = ct_set_error(CT_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < n; i++) {
            const ct_step *st = &s->steps[i];
            for (int j = 0; j < st->ndeps; j++) {
                int d = s->deps[st->dep0 + j];
                x->dlist[x->dstart[d] + fill[d]++] = i;
            }
        }
        free(fill);
        qsort(x->sends, (size_t) x->nsends, sizeof(msgkey), cmp_key);
        qsort(x->recvs, (size_t) x->nrecvs, sizeof(msgkey), cmp_key);
        for (int i = 0; i < n; i++)
            if (!x->waiting[i])
                q[qt++] = (qitem) { r, i };
    }
    /* each recv's partner must exist with the same length; count sends matched */
    int64_t matched = 0;
    for (int r = 0; r < P && !rc; r++) {
        const ct_sched *s = sc[r];
        for (int i = 0; i < s->nsteps; i++) {
            const ct_step *st = &s->steps[i];
            if (st->op != CT_RECV)
                continue;
            rstate *y = &rs[st->peer];
            msgkey k = { r * CT_MAXCHAN + st->chan, rs[r].ord[i], 0 }, *f = bsearch(&k, y->sends, (size_t) y->nsends,
                                                             sizeof k, cmp_key);
            if (!f) {
                rc = ct_set_error(CT_ERR_INVALID, "rank %d step %d receives message %d from rank "
                                  "%d, which sends no such message", r, i, rs[r].ord[i], st->peer);
                break;
            }
            const ct_step *ss = &sc[st->peer]->steps[f->step];
            if (ss->len != st->len) {
                rc = ct_set_error(CT_ERR_INVALID, "rank %d step %d receives %lld elements from "
                                  "rank %d step %d, which sends %lld", r, i, (long long) st->len,
                                  st->peer, f->step, (long long) ss->len);
                break;
            }
            matched++;
        }
    }
    int64_t nsends = 0;
    for (int r = 0; r < P; r++)
        nsends += rs[r].nsends;
    if (!rc && matched != nsends)
        rc = ct_set_error(CT_ERR_INVALID, "%lld sends but %lld matching receives",
                          (long long) nsends, (long long) matched);
    if (rc)
        goto out;

    int64_t ndone = 0;
    /* complete (r, i) at time tm */
#define COMPLETE(r_, i_, tm_)                                                                  \
    do {                                                                                       \
        rstate *z_ = &rs[r_];                                                                  \
        z_->done[i_] = 1;                                                                      \
        z_->tdone[i_] = (tm_);                                                                 \
        ndone++;                                                                               \
        for (int k_ = z_->dstart[i_]; k_ < z_->dstart[(i_) + 1]; k_++) {                       \
            int dd_ = z_->dlist[k_];                                                           \
            if (z_->tpost[dd_] < (tm_))                                                        \
                z_->tpost[dd_] = (tm_);                                                        \
            if (--z_->waiting[dd_] == 0)                                                       \
                q[qt++] = (qitem) { r_, dd_ };                                                 \
        }                                                                                      \
    } while (0)
    while (qh < qt) {
        qitem it = q[qh++];
        int r = it.rank, i = it.step;
        rstate *x = &rs[r];
        const ct_step *st = &sc[r]->steps[i];
        x->posted[i] = 1;
        int ns = x->next_same[i];
        if (ns >= 0) {
            if (x->tpost[ns] < x->tpost[i])
                x->tpost[ns] = x->tpost[i];
            if (--x->waiting[ns] == 0)
                q[qt++] = (qitem) { r, ns };
        }
        if (st->op != CT_SEND && st->op != CT_RECV) {
            if (exec)
                exec(ctx, r, st, -1, NULL);
            COMPLETE(r, i, x->tpost[i]);
            continue;
        }
        /* find the partner; complete the pair if it is posted */
        int pr = st->peer, pi;
        if (st->op == CT_SEND) {
            msgkey k = { r * CT_MAXCHAN + st->chan, x->ord[i], 0 }, *f = bsearch(&k, rs[pr].recvs, (size_t) rs[pr].nrecvs,
                                                         sizeof k, cmp_key);
            pi = f ? f->step : -1;
        } else {
            msgkey k = { r * CT_MAXCHAN + st->chan, x->ord[i], 0 }, *f = bsearch(&k, rs[pr].sends, (size_t) rs[pr].nsends,
                                                         sizeof k, cmp_key);
            pi = f->step;
        }
        if (pi < 0 || !rs[pr].posted[pi])
            continue;
        const ct_step *ps = &sc[pr]->steps[pi];
        double tm = x->tpost[i] > rs[pr].tpost[pi] ? x->tpost[i] : rs[pr].tpost[pi];
        if (m) {
            int hops = ct_route(t, r, pr, NULL);
            tm += hops * m->hop_lat + (double) st->len * (double) sc[r]->elem_size / m->link_bw +
                  2 * m->msg_overhead;
        }
        if (exec) {
            if (st->op == CT_SEND)
                exec(ctx, r, st, pr, ps);
            else
                exec(ctx, pr, ps, r, st);
        }
        COMPLETE(r, i, tm);
        COMPLETE(pr, pi, tm);
    }
#undef COMPLETE
    if (ndone != total) {
        for (int r = 0; r < P; r++)
            for (int i = 0; i < rs[r].n; i++)
                if (!rs[r].done[i]) {
                    const ct_step *st = &sc[r]->steps[i];
                    rc = ct_set_error(CT_ERR_INVALID, "deadlock: %lld of %lld steps never "
                                      "complete; the first is rank %d step %d (%s peer %d, %s)",
                                      (long long) (total - ndone), (long long) total, r, i,
                                      st->op == CT_SEND ? "send to" : st->op == CT_RECV ?
                                      "receive from" : "local,", st->peer,
                                      rs[r].posted[i] ? "posted" : "never posted");
                    goto out;
                }
    }
    if (finish)
        for (int r = 0; r < P; r++) {
            double f = 0;
            for (int i = 0; i < rs[r].n; i++)
                if (rs[r].tdone[i] > f)
                    f = rs[r].tdone[i];
            finish[r] = f;
        }
  out:
    for (int r = 0; r < P; r++) {
        rstate *x = &rs[r];
        free(x->ord);
        free(x->waiting);
        free(x->posted);
        free(x->done);
        free(x->tpost);
        free(x->tdone);
        free(x->dstart);
        free(x->dlist);
        free(x->next_same);
        free(x->sends);
        free(x->recvs);
    }
    free(rs);
    free(q);
    return rc;
}

int ct_model_load(const ct_model *m, const ct_topo *t, ct_sched *const *sc, ct_load *out)
{
    memset(out, 0, sizeof *out);
    int nn = ct_topo_nnodes(t);
    out->nlinks = nn * 6;
    out->bytes = calloc((size_t) out->nlinks, sizeof(double));
    int *ids = malloc(sizeof(int) * (size_t) (t->dims[0] + t->dims[1] + t->dims[2] + 1));
    if (!out->bytes || !ids) {
        free(ids);
        ct_load_free(out);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < t->nranks; r++) {
        const ct_sched *s = sc[r];
        for (int i = 0; i < s->nsteps; i++) {
            const ct_step *st = &s->steps[i];
            if (st->op != CT_SEND)
                continue;
            out->messages++;
            int h = ct_route(t, r, st->peer, ids);
            for (int k = 0; k < h; k++)
                out->bytes[ids[k]] += (double) st->len * (double) s->elem_size;
        }
    }
    free(ids);
    for (int l = 0; l < out->nlinks; l++)
        if (out->bytes[l] > out->max_bytes)
            out->max_bytes = out->bytes[l];
    out->link_bound = out->max_bytes / m->link_bw;
    double *fin = malloc(sizeof(double) * (size_t) t->nranks);
    if (!fin) {
        ct_load_free(out);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    int rc = ct_engine_run(t, sc, m, NULL, NULL, fin);
    if (rc) {
        free(fin);
        ct_load_free(out);
        return rc;
    }
    for (int r = 0; r < t->nranks; r++)
        if (fin[r] > out->critical_path)
            out->critical_path = fin[r];
    free(fin);
    out->estimate = out->critical_path > out->link_bound ? out->critical_path : out->link_bound;
    return CT_OK;
}

void ct_load_free(ct_load *l)
{
    free(l->bytes);
    l->bytes = NULL;
}
