/* Walking a schedule (coll_torus.h): the dependency counts an executor needs, derived once
 * from the steps' dependency lists and the same-peer message order. */
#include "ct_sched_int.h"

#include <stdlib.h>

int ct_walk_init(ct_walk *w, const ct_sched *s)
{
    int n = s->nsteps;
    /* one allocation: waiting, dstart (n + 1), dlist (ndeps), next_same, ready, fill */
    int *mem = calloc((size_t) (5 * n + 1) + (size_t) s->ndeps + 1, sizeof(int));
    if (!mem)
        return ct_set_error(CT_ERR_NOMEM, "no memory to walk a schedule of %d steps", n);
    w->s = s;
    w->waiting = mem;
    w->dstart = mem + n;
    w->dlist = w->dstart + n + 1;
    w->next_same = w->dlist + s->ndeps;
    w->ready = w->next_same + n;
    int *fill = w->ready + n;
    w->nready = 0;
    w->ndone = 0;
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        w->next_same[i] = -1;
        w->waiting[i] = st->ndeps;
        for (int j = 0; j < st->ndeps; j++)
            w->dstart[s->deps[st->dep0 + j] + 1]++;
    }
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        if ((st->op == CT_SEND || st->op == CT_RECV) && st->prev_same_peer >= 0) {
            w->next_same[st->prev_same_peer] = i;
            w->waiting[i]++;
        }
    }
    for (int i = 0; i < n; i++)
        w->dstart[i + 1] += w->dstart[i];
    /* fill[] reuses the tail: it is only needed here, before any step is ready */
    for (int i = 0; i < n; i++)
        fill[i] = 0;
    for (int i = 0; i < n; i++) {
        const ct_step *st = &s->steps[i];
        for (int j = 0; j < st->ndeps; j++) {
            int d = s->deps[st->dep0 + j];
            w->dlist[w->dstart[d] + fill[d]++] = i;
        }
    }
    for (int i = n - 1; i >= 0; i--)   /* handed out last-in first-out: step 0 first */
        if (!w->waiting[i])
            w->ready[w->nready++] = i;
    return CT_OK;
}

void ct_walk_posted(ct_walk *w, int i)
{
    int nx = w->next_same[i];
    if (nx >= 0 && --w->waiting[nx] == 0)
        w->ready[w->nready++] = nx;
}

void ct_walk_done(ct_walk *w, int i)
{
    w->ndone++;
    for (int k = w->dstart[i]; k < w->dstart[i + 1]; k++)
        if (--w->waiting[w->dlist[k]] == 0)
            w->ready[w->nready++] = w->dlist[k];
}

void ct_walk_free(ct_walk *w)
{
    free(w->waiting);
    w->waiting = NULL;
}
