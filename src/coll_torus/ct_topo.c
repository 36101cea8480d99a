/* Topologies: shape strings, mapping files, the XYZT default, sub-boxes. */
#include "ct_sched_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nnodes_of(const int dims[CT_MAXDIMS])
{
    return dims[0] * dims[1] * dims[2];
}

int ct_topo_nnodes(const ct_topo *t)
{
    return nnodes_of(t->dims);
}

/* The number of positions of dims, or -1 above CT_MAX_CELLS. Every extent is at most 65536
 * (the parsers' bound), so no step of the product can overflow before the bound is seen;
 * with it, linear() of coordinates inside dims fits an int. */
#define CT_MAX_CELLS (INT_MAX / 2)
static long cells_of(const int dims[CT_MAXDIMS])
{
    long p = 1;
    for (int d = 0; d < CT_MAXDIMS; d++)
        if (dims[d] < 1 || __builtin_mul_overflow(p, (long) dims[d], &p) || p > CT_MAX_CELLS)
            return -1;
    return p;
}

static int linear(const int dims[CT_MAXDIMS], const int c[CT_MAXDIMS])
{
    return c[0] + dims[0] * (c[1] + dims[1] * (c[2] + dims[2] * c[3]));
}

int ct_topo_rank(const ct_topo *t, const int c[CT_MAXDIMS])
{
    return t->rank_at[linear(t->dims, c)];
}

void ct_topo_free(ct_topo *t)
{
    free(t->coords);
    free(t->rank_at);
    memset(t, 0, sizeof *t);
}

int ct_shape_parse(const char *s, int dims[CT_MAXDIMS], int wrap[CT_MAXDIMS])
{
    for (int d = 0; d < CT_MAXDIMS; d++)
        dims[d] = 1, wrap[d] = 0;
    if (!s || !*s)
        return ct_set_error(CT_ERR_INVALID, "shape: empty (expected e.g. 8x8x8, 4mx4x4, 4x4x4x2t)");
    const char *p = s;
    int nd = 0;
    for (;;) {
        if (!isdigit((unsigned char) *p))
            return ct_set_error(CT_ERR_INVALID, "shape '%s': expected a number at '%s' "
                                "(e.g. 8x8x8, 4mx4x4, 4x4x4x2t)", s, p);
        errno = 0;
        char *end;
        long v = strtol(p, &end, 10);
        if (errno || v < 1 || v > 65536)
            return ct_set_error(CT_ERR_INVALID, "shape '%s': extent %.*s is not in 1..65536",
                                s, (int) (end - p), p);
        p = end;
        if (*p == 't') {
            if (nd == 0)
                return ct_set_error(CT_ERR_INVALID, "shape '%s': the ranks-per-node extent "
                                    "('t') comes after x, y and z", s);
            dims[3] = (int) v;
            p++;
            if (*p)
                return ct_set_error(CT_ERR_INVALID, "shape '%s': nothing may follow the 't' "
                                    "extent", s);
            break;
        }
        if (nd == 3)
            return ct_set_error(CT_ERR_INVALID, "shape '%s': at most 3 torus dimensions "
                                "(and a last 'Nt' for ranks per node)", s);
        dims[nd] = (int) v;
        wrap[nd] = 1;
        if (*p == 'm') {
            wrap[nd] = 0;
            p++;
        }
        nd++;
        if (!*p)
            break;
        if (*p != 'x')
            return ct_set_error(CT_ERR_INVALID, "shape '%s': unexpected '%c' (dimensions are "
                                "joined by 'x'; 'm' marks a mesh dimension)", s, *p);
        p++;
    }
    if (cells_of(dims) < 0)
        return ct_set_error(CT_ERR_INVALID, "shape '%s': too many ranks", s);
    return CT_OK;
}

void ct_shape_format(const int dims[CT_MAXDIMS], const int wrap[CT_MAXDIMS], char *buf, size_t len)
{
    int nd = dims[2] > 1 ? 3 : dims[1] > 1 ? 2 : 1;
    size_t o = 0;
    buf[0] = 0;
    for (int d = 0; d < nd && o < len; d++)
        o += (size_t) snprintf(buf + o, len - o, "%s%d%s", d ? "x" : "", dims[d], wrap[d] ? "" : "m");
    if (dims[3] > 1 && o < len)
        snprintf(buf + o, len - o, "x%dt", dims[3]);
}

/* allocate coords/rank_at for dims, all unset */
static int topo_alloc(ct_topo *t, const int dims[CT_MAXDIMS], const int wrap[CT_MAXDIMS])
{
    memset(t, 0, sizeof *t);
    memcpy(t->dims, dims, sizeof t->dims);
    memcpy(t->wrap, wrap, sizeof t->wrap);
    t->wrap[3] = 0;
    for (int d = 0; d < 3; d++)     /* a ring of one or two has no use for wrap */
        if (t->dims[d] <= 2)
            t->wrap[d] = t->dims[d] == 2 ? t->wrap[d] : 0;
    long cells = cells_of(dims);
    if (cells < 0)
        return ct_set_error(CT_ERR_INVALID, "topology %dx%dx%dx%d: too many ranks", dims[0],
                            dims[1], dims[2], dims[3]);
    t->nranks = (int) cells;
    t->coords = malloc(sizeof *t->coords * (size_t) t->nranks);
    t->rank_at = malloc(sizeof(int) * (size_t) t->nranks);
    if (!t->coords || !t->rank_at) {
        ct_topo_free(t);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->nranks; i++)
        t->rank_at[i] = -1;
    return CT_OK;
}

static void finish_order(ct_topo *t)
{
    t->xyzt_order = 1;
    for (int r = 0; r < t->nranks; r++)
        if (linear(t->dims, t->coords[r]) != r)
            t->xyzt_order = 0;
    /* try the 24 dimension orders (XYZT first) */
    t->lex_order[0] = -1;
    for (int perm = 0; perm < 24; perm++) {
        int o[CT_MAXDIMS], used = 0, x = perm;
        for (int i = 0; i < CT_MAXDIMS; i++) {
            int k = x % (CT_MAXDIMS - i);
            x /= CT_MAXDIMS - i;
            for (int d = 0; d < CT_MAXDIMS; d++)
                if (!(used >> d & 1) && k-- == 0) {
                    o[i] = d;
                    used |= 1 << d;
                    break;
                }
        }
        int ok = 1;
        for (int r = 0; r < t->nranks && ok; r++) {
            long idx = 0, stride = 1;
            for (int i = 0; i < CT_MAXDIMS; i++) {
                idx += t->coords[r][o[i]] * stride;
                stride *= t->dims[o[i]];
            }
            ok = idx == r;
        }
        if (ok) {
            memcpy(t->lex_order, o, sizeof o);
            return;
        }
    }
}

/* dims like MPI_Dims_create(n, 3): as equal as possible, non-increasing */
static void dims_create(int n, int out[3])
{
    int best[3] = { n, 1, 1 };
    long bestscore = LONG_MAX;
    for (int a = 1; a <= n; a++) {
        if (n % a)
            continue;
        for (int b = 1; b <= a; b++) {
            if ((n / a) % b)
                continue;
            int c = n / a / b;
            if (c > b)
                continue;
            long score = (long) (a - c);    /* spread between the largest and smallest */
            if (score < bestscore) {
                bestscore = score;
                best[0] = a, best[1] = b, best[2] = c;
            }
        }
    }
    memcpy(out, best, sizeof best);
}

int ct_topo_default(ct_topo *t, int nranks, const int *node_of_rank, const char *shape)
{
    memset(t, 0, sizeof *t);
    if (nranks < 1)
        return ct_set_error(CT_ERR_INVALID, "topology: %d ranks", nranks);
    int nnodes = nranks, per = 1;
    int *tidx = NULL;
    if (node_of_rank) {
        nnodes = 0;
        for (int r = 0; r < nranks; r++) {
            if (node_of_rank[r] < 0 || node_of_rank[r] >= nranks)
                return ct_set_error(CT_ERR_INVALID, "topology: rank %d has node id %d, not in "
                                    "0..%d", r, node_of_rank[r], nranks - 1);
            if (node_of_rank[r] + 1 > nnodes)
                nnodes = node_of_rank[r] + 1;
        }
        int *cnt = calloc((size_t) nnodes, sizeof(int));
        tidx = malloc(sizeof(int) * (size_t) nranks);
        if (!cnt || !tidx) {
            free(cnt);
            free(tidx);
            return ct_set_error(CT_ERR_NOMEM, "out of memory");
        }
        for (int r = 0; r < nranks; r++)
            tidx[r] = cnt[node_of_rank[r]]++;
        per = cnt[0];
        for (int n = 0; n < nnodes; n++)
            if (cnt[n] != per) {
                int c = cnt[n];
                free(cnt);
                free(tidx);
                return ct_set_error(CT_ERR_NOT_APPLICABLE, "topology: node 0 holds %d ranks and "
                                    "node %d holds %d: no XYZT shape", per, n, c);
            }
        free(cnt);
    }
    int dims[CT_MAXDIMS], wrap[CT_MAXDIMS];
    if (shape) {
        int rc = ct_shape_parse(shape, dims, wrap);
        if (rc) {
            free(tidx);
            return rc;
        }
        if (dims[3] == 1)
            dims[3] = per;
        if (nnodes_of(dims) != nnodes || dims[3] != per) {
            free(tidx);
            return ct_set_error(CT_ERR_INVALID, "shape '%s' holds %d nodes of %d ranks, but "
                                "there are %d nodes of %d ranks", shape, nnodes_of(dims),
                                dims[3], nnodes, per);
        }
    } else {
        dims_create(nnodes, dims);
        dims[3] = per;
        for (int d = 0; d < 3; d++)
            wrap[d] = 1;
    }
    int rc = topo_alloc(t, dims, wrap);
    if (rc) {
        free(tidx);
        return rc;
    }
    for (int r = 0; r < nranks; r++) {
        int node = node_of_rank ? node_of_rank[r] : r;
        int *c = t->coords[r];
        c[0] = node % dims[0];
        c[1] = node / dims[0] % dims[1];
        c[2] = node / dims[0] / dims[1];
        c[3] = tidx ? tidx[r] : 0;
        t->rank_at[linear(dims, c)] = r;
    }
    free(tidx);
    finish_order(t);
    return CT_OK;
}

static int pos_cmp(const void *a, const void *b)
{
    const int *x = a, *y = b;
    for (int d = 0; d < CT_MAXDIMS; d++)
        if (x[d] != y[d])
            return x[d] < y[d] ? -1 : 1;
    return x[CT_MAXDIMS] < y[CT_MAXDIMS] ? -1 : x[CT_MAXDIMS] > y[CT_MAXDIMS];
}

/* the first line (in file order) whose position an earlier line holds */
static int find_duplicate(const char *path, int (*c)[CT_MAXDIMS], const int *lineof, int n)
{
    int (*key)[CT_MAXDIMS + 1] = malloc(sizeof *key * (size_t) (n > 0 ? n : 1));
    int dup = -1, first = -1;
    if (!key)
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    for (int r = 0; r < n; r++) {
        memcpy(key[r], c[r], sizeof c[r]);
        key[r][CT_MAXDIMS] = r;
    }
    qsort(key, (size_t) n, sizeof *key, pos_cmp);
    /* in a run of equal positions (ranks ascending), the run's first rank holds it */
    for (int i = 1, run = 0; i < n; i++) {
        if (memcmp(key[i], key[i - 1], sizeof c[0])) {
            run = i;
            continue;
        }
        if (dup < 0 || key[i][CT_MAXDIMS] < dup) {
            dup = key[i][CT_MAXDIMS];
            first = key[run][CT_MAXDIMS];
        }
    }
    free(key);
    if (dup < 0)
        return CT_OK;
    return ct_set_error(CT_ERR_INVALID, "%s:%d: (%d,%d,%d,%d) is already rank %d's (line %d): "
                        "the mapping must be a bijection", path, lineof[dup], c[dup][0],
                        c[dup][1], c[dup][2], c[dup][3], first, lineof[first]);
}

int ct_topo_from_file(ct_topo *t, const char *path, int nranks, const char *shape)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f)
        return ct_set_error(CT_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
    int rc = ct_topo_from_stream(t, f, path, nranks, shape);
    fclose(f);
    return rc;
}

int ct_topo_from_stream(ct_topo *t, FILE *f, const char *path, int nranks, const char *shape)
{
    memset(t, 0, sizeof *t);
    int (*c)[CT_MAXDIMS] = calloc((size_t) (nranks > 0 ? nranks : 1), sizeof *c);
    int *lineof = calloc((size_t) (nranks > 0 ? nranks : 1), sizeof(int));
    if (!c || !lineof) {
        free(c);
        free(lineof);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    char line[1024];
    int lineno = 0, n = 0, rc = CT_OK, ncol = -1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = ct_set_error(CT_ERR_INVALID, "%s:%d: line longer than %zu characters", path,
                              lineno, sizeof line - 2);
            goto out;
        }
        char *h = strchr(line, '#');
        if (h)
            *h = 0;
        char *p = line;
        while (isspace((unsigned char) *p))
            p++;
        if (!*p)
            continue;
        if (n == nranks) {
            rc = ct_set_error(CT_ERR_INVALID, "%s:%d: more lines than the %d ranks", path,
                              lineno, nranks);
            goto out;
        }
        int v[5], k = 0;
        while (*p) {
            char *end;
            errno = 0;
            long x = strtol(p, &end, 10);
            if (end == p || errno || x < 0 || x > 65535 || (*end && !isspace((unsigned char) *end))) {
                char tok[32];
                sscanf(p, "%31s", tok);
                rc = ct_set_error(CT_ERR_INVALID, "%s:%d: '%s' is not a coordinate (a number "
                                  "0..65535)", path, lineno, tok);
                goto out;
            }
            if (k == 4) {
                rc = ct_set_error(CT_ERR_INVALID, "%s:%d: more than 4 numbers (expected "
                                  "\"x y z [t]\")", path, lineno);
                goto out;
            }
            v[k++] = (int) x;
            p = end;
            while (isspace((unsigned char) *p))
                p++;
        }
        if (k < 3) {
            rc = ct_set_error(CT_ERR_INVALID, "%s:%d: %d number%s, expected \"x y z [t]\"",
                              path, lineno, k, k == 1 ? "" : "s");
            goto out;
        }
        if (ncol < 0)
            ncol = k;
        else if (k != ncol) {
            rc = ct_set_error(CT_ERR_INVALID, "%s:%d: %d coordinates where earlier lines have "
                              "%d", path, lineno, k, ncol);
            goto out;
        }
        c[n][0] = v[0], c[n][1] = v[1], c[n][2] = v[2], c[n][3] = k == 4 ? v[3] : 0;
        lineof[n] = lineno;
        n++;
    }
    if (ferror(f)) {
        rc = ct_set_error(CT_ERR_INVALID, "%s: read error", path);
        goto out;
    }
    if (n < nranks) {
        rc = ct_set_error(CT_ERR_INVALID, "%s:%d: the file ends after %d rank%s; there are %d",
                          path, lineno, n, n == 1 ? "" : "s", nranks);
        goto out;
    }
    int dims[CT_MAXDIMS] = { 1, 1, 1, 1 }, wrap[CT_MAXDIMS] = { 1, 1, 1, 0 };
    if (shape) {
        if ((rc = ct_shape_parse(shape, dims, wrap)))
            goto out;
        for (int r = 0; r < n; r++)
            for (int d = 0; d < CT_MAXDIMS; d++)
                if (c[r][d] >= dims[d]) {
                    rc = ct_set_error(CT_ERR_INVALID, "%s:%d: %c=%d is outside shape %s (0..%d)",
                                      path, lineof[r], "xyzt"[d], c[r][d], shape, dims[d] - 1);
                    goto out;
                }
    } else {
        for (int r = 0; r < n; r++)
            for (int d = 0; d < CT_MAXDIMS; d++)
                if (c[r][d] + 1 > dims[d])
                    dims[d] = c[r][d] + 1;
    }
    /* a position given twice says more than a count that does not match; found by sorting
     * the n positions, so memory follows the file's length, not the extents it names */
    if ((rc = find_duplicate(path, c, lineof, n)))
        goto out;
    long cells = cells_of(dims);
    if (cells != nranks) {
        char sh[64];
        ct_shape_format(dims, wrap, sh, sizeof sh);
        rc = ct_set_error(CT_ERR_INVALID, "%s: %d ranks cannot be a bijection onto shape %s "
                          "(%ld positions)", path, nranks, sh, cells);
        goto out;
    }
    if ((rc = topo_alloc(t, dims, wrap)))
        goto out;
    for (int r = 0; r < n; r++) {
        int li = linear(t->dims, c[r]);
        t->rank_at[li] = r;
        memcpy(t->coords[r], c[r], sizeof c[r]);
    }
    finish_order(t);
  out:
    free(c);
    free(lineof);
    return rc;
}

/* Along dimension d, the positions present in `have` (n bits) must form one interval of a
 * ring (or of a line without wrap): its start and length. */
static int interval_of(const char *have, int n, int wrap, int *start, int *len)
{
    int cnt = 0;
    for (int i = 0; i < n; i++)
        cnt += have[i];
    if (cnt == n) {
        *start = 0, *len = n;
        return 0;
    }
    /* the start: present, with its predecessor absent (around the ring when wrapped) */
    int s = -1;
    for (int i = 0; i < n; i++) {
        int prev = i - 1;
        if (prev < 0)
            prev = wrap ? n - 1 : -1;
        if (have[i] && (prev < 0 || !have[prev])) {
            if (s >= 0)
                return -1;      /* two runs */
            s = i;
        }
    }
    *start = s, *len = cnt;
    for (int k = 0; k < cnt; k++)
        if (!have[(s + k) % n])
            return -1;
    return 0;
}

int ct_topo_sub(ct_topo *sub, const ct_topo *pt, const int *members, int nm)
{
    memset(sub, 0, sizeof *sub);
    if (nm < 1)
        return ct_set_error(CT_ERR_INVALID, "sub-topology of %d members", nm);
    int start[3], len[3];
    for (int d = 0; d < 3; d++) {
        char *have = calloc((size_t) pt->dims[d], 1);
        if (!have)
            return ct_set_error(CT_ERR_NOMEM, "out of memory");
        for (int i = 0; i < nm; i++) {
            if (members[i] < 0 || members[i] >= pt->nranks) {
                free(have);
                return ct_set_error(CT_ERR_INVALID, "sub-topology: member %d is rank %d of %d",
                                    i, members[i], pt->nranks);
            }
            have[pt->coords[members[i]][d]] = 1;
        }
        int bad = interval_of(have, pt->dims[d], pt->wrap[d], &start[d], &len[d]);
        free(have);
        if (bad)
            return ct_set_error(CT_ERR_NOT_APPLICABLE, "sub-topology: the members' %c "
                                "coordinates are not one interval", "xyz"[d]);
    }
    int nodes = len[0] * len[1] * len[2];
    if (nm % nodes)
        return ct_set_error(CT_ERR_NOT_APPLICABLE, "sub-topology: %d members on a box of %d "
                            "nodes", nm, nodes);
    int dims[CT_MAXDIMS] = { len[0], len[1], len[2], nm / nodes };
    int wrap[CT_MAXDIMS] = { 0, 0, 0, 0 };
    for (int d = 0; d < 3; d++)
        wrap[d] = pt->wrap[d] && len[d] == pt->dims[d];
    int rc = topo_alloc(sub, dims, wrap);
    if (rc)
        return rc;
    /* t: the member's index among the members on its node, in member order */
    int *cnt = calloc((size_t) nodes, sizeof(int));
    if (!cnt) {
        ct_topo_free(sub);
        return ct_set_error(CT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nm; i++) {
        const int *pc = pt->coords[members[i]];
        int c[CT_MAXDIMS];
        for (int d = 0; d < 3; d++)
            c[d] = (pc[d] - start[d] + pt->dims[d]) % pt->dims[d];
        int node = c[0] + dims[0] * (c[1] + dims[1] * c[2]);
        c[3] = cnt[node]++;
        if (c[3] >= dims[3]) {
            free(cnt);
            ct_topo_free(sub);
            return ct_set_error(CT_ERR_NOT_APPLICABLE, "sub-topology: nodes hold different "
                                "numbers of members");
        }
        memcpy(sub->coords[i], c, sizeof c);
        sub->rank_at[linear(dims, c)] = i;
    }
    free(cnt);
    finish_order(sub);
    return CT_OK;
}
