/* Topology file parser (see topo.h). One declaration a line, words separated by blanks:
 *   process NAME [host=HOST] [cpu=N]
 *   link NAME END1 END2 medium=TYPE[:KEY=VALUE,...] bufsize=BYTES[K|M] bufcount=N
 * '#' starts a comment. Every error names file:line. */
#define _GNU_SOURCE
#include "topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the media a link may name; whether a back end provides one is decided at channel creation */
static const char *const known_media[] = {"mpi", "shm", "tcp", "ucx", NULL};

static int fail(char *err, size_t errlen, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    int n = line > 0 ? snprintf(err, errlen, "%s:%d: ", file, line) : snprintf(err, errlen, "%s: ", file);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - n, fmt, ap);
    va_end(ap);
    return -1;
}

static int valid_name(const char *s)
{
    if (!*s || strlen(s) >= MPS_MAX_NAME)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return 0;
    return 1;
}

/* decimal integer with optional K/M/G suffix (binary), > 0, fits in `max` */
static int parse_size(const char *s, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v <= 0)
        return -1;
    long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024L * 1024 * 1024, end++;
    if (*end || v > max / mul)
        return -1;
    *out = v * mul;
    return 0;
}

/* plain decimal integer in [min, max] */
static int parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || !isdigit((unsigned char)*s) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int mps_topo_find_process(const mps_topo *t, const char *name)
{
    for (int i = 0; i < t->nprocs; i++)
        if (!strcmp(t->procs[i].name, name))
            return i;
    return -1;
}

int mps_topo_find_link(const mps_topo *t, const char *name)
{
    for (int i = 0; i < t->nlinks; i++)
        if (!strcmp(t->links[i].name, name))
            return i;
    return -1;
}

void mps_topo_free(mps_topo *t)
{
    free(t->procs);
    free(t->links);
    memset(t, 0, sizeof(*t));
}

/* link ends are names, resolved once the whole file is read (a link may precede its
 * processes); kept here meanwhile */
typedef struct {
    char end[2][MPS_MAX_NAME];
} pending_ends;

#define MAXW 16

int mps_topo_load(const char *path, mps_topo *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->file, sizeof(t->file), "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, errlen, path, 0, "cannot open: %s", strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, capp = 0, capl = 0, rc = -1;
    pending_ends *ends = NULL;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *w[MAXW];
        int nw = 0;
        for (char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save); tok;
             tok = strtok_r(NULL, " \t\r\n", &save)) {
            if (nw == MAXW) {
                fail(err, errlen, path, lineno, "too many words (at most %d)", MAXW);
                goto out;
            }
            w[nw++] = tok;
        }
        if (nw == 0)
            continue;
        if (!strcmp(w[0], "process")) {
            if (nw < 2) {
                fail(err, errlen, path, lineno, "'process' needs a name: process NAME [host=HOST] [cpu=N]");
                goto out;
            }
            if (!valid_name(w[1])) {
                fail(err, errlen, path, lineno, "bad process name '%s' (letters, digits, _ - ., at most %d characters)",
                     w[1], MPS_MAX_NAME - 1);
                goto out;
            }
            if (mps_topo_find_process(t, w[1]) >= 0) {
                fail(err, errlen, path, lineno, "process '%s' is already declared on line %d", w[1],
                     t->procs[mps_topo_find_process(t, w[1])].line);
                goto out;
            }
            if (t->nprocs == capp) {
                capp = capp ? 2 * capp : 8;
                void *p = realloc(t->procs, capp * sizeof(*t->procs));
                if (!p) {
                    fail(err, errlen, path, lineno, "out of memory");
                    goto out;
                }
                t->procs = p;
            }
            mps_topo_process *p = &t->procs[t->nprocs];
            memset(p, 0, sizeof(*p));
            snprintf(p->name, sizeof(p->name), "%s", w[1]);
            snprintf(p->host, sizeof(p->host), "localhost");
            p->cpu = -1;
            p->line = lineno;
            for (int i = 2; i < nw; i++) {
                long v;
                if (!strncmp(w[i], "host=", 5) && w[i][5] && strlen(w[i] + 5) < sizeof(p->host)) {
                    snprintf(p->host, sizeof(p->host), "%s", w[i] + 5);
                } else if (!strncmp(w[i], "cpu=", 4)) {
                    if (parse_int(w[i] + 4, 0, 1 << 20, &v) == 0)
                        p->cpu = (int)v;
                    else {
                        fail(err, errlen, path, lineno, "process '%s': bad cpu '%s' (a core number)", p->name, w[i] + 4);
                        goto out;
                    }
                } else {
                    fail(err, errlen, path, lineno, "process '%s': unknown attribute '%s' (host=HOST, cpu=N)",
                         p->name, w[i]);
                    goto out;
                }
            }
            t->nprocs++;
        } else if (!strcmp(w[0], "link")) {
            if (nw < 4) {
                fail(err, errlen, path, lineno,
                     "'link' needs a name and two ends: link NAME END1 END2 medium=TYPE bufsize=BYTES bufcount=N");
                goto out;
            }
            if (!valid_name(w[1])) {
                fail(err, errlen, path, lineno, "bad link name '%s' (letters, digits, _ - ., at most %d characters)",
                     w[1], MPS_MAX_NAME - 1);
                goto out;
            }
            if (mps_topo_find_link(t, w[1]) >= 0) {
                fail(err, errlen, path, lineno, "link '%s' is already declared on line %d", w[1],
                     t->links[mps_topo_find_link(t, w[1])].line);
                goto out;
            }
            if (!strcmp(w[2], w[3])) {
                fail(err, errlen, path, lineno, "link '%s' has both ends at '%s'", w[1], w[2]);
                goto out;
            }
            if (t->nlinks == capl) {
                capl = capl ? 2 * capl : 8;
                void *p = realloc(t->links, capl * sizeof(*t->links));
                void *q = p ? realloc(ends, capl * sizeof(*ends)) : NULL;
                if (p)
                    t->links = p;
                if (q)
                    ends = q;
                if (!p || !q) {
                    fail(err, errlen, path, lineno, "out of memory");
                    goto out;
                }
            }
            mps_topo_link *l = &t->links[t->nlinks];
            memset(l, 0, sizeof(*l));
            snprintf(l->name, sizeof(l->name), "%s", w[1]);
            l->line = lineno;
            for (int e = 0; e < 2; e++) {
                if (!valid_name(w[2 + e])) {
                    fail(err, errlen, path, lineno, "link '%s': bad process name '%s'", l->name, w[2 + e]);
                    goto out;
                }
                snprintf(ends[t->nlinks].end[e], MPS_MAX_NAME, "%s", w[2 + e]);
            }
            for (int i = 4; i < nw; i++) {
                long v;
                if (!strncmp(w[i], "medium=", 7)) {
                    char *m = w[i] + 7, *colon = strchr(m, ':');
                    if (colon) {
                        *colon = 0;
                        if (strlen(colon + 1) >= sizeof(l->params) || !strchr(colon + 1, '=')) {
                            fail(err, errlen, path, lineno, "link '%s': bad medium parameters '%s' (KEY=VALUE,...)",
                                 l->name, colon + 1);
                            goto out;
                        }
                        snprintf(l->params, sizeof(l->params), "%s", colon + 1);
                    }
                    int k = 0;
                    while (known_media[k] && strcmp(known_media[k], m))
                        k++;
                    if (!known_media[k]) {
                        fail(err, errlen, path, lineno, "link '%s': unknown medium '%s' (mpi, shm, tcp or ucx)",
                             l->name, m);
                        goto out;
                    }
                    snprintf(l->medium, sizeof(l->medium), "%s", m);
                } else if (!strncmp(w[i], "bufsize=", 8)) {
                    if (parse_size(w[i] + 8, 1L << 30, &v)) {
                        fail(err, errlen, path, lineno,
                             "link '%s': bad bufsize '%s' (bytes > 0, optional K/M/G, at most 1G)", l->name, w[i] + 8);
                        goto out;
                    }
                    l->bufsize = v;
                } else if (!strncmp(w[i], "bufcount=", 9)) {
                    if (parse_int(w[i] + 9, 1, 1 << 16, &v)) {
                        fail(err, errlen, path, lineno, "link '%s': bad bufcount '%s' (1 to 65536)", l->name, w[i] + 9);
                        goto out;
                    }
                    l->bufcount = (int)v;
                } else {
                    fail(err, errlen, path, lineno,
                         "link '%s': unknown attribute '%s' (medium=TYPE[:K=V,...], bufsize=BYTES, bufcount=N)",
                         l->name, w[i]);
                    goto out;
                }
            }
            const char *missing = !l->medium[0] ? "medium=" : !l->bufsize ? "bufsize=" : !l->bufcount ? "bufcount=" : NULL;
            if (missing) {
                fail(err, errlen, path, lineno, "link '%s': no %s", l->name, missing);
                goto out;
            }
            t->nlinks++;
        } else {
            fail(err, errlen, path, lineno, "unknown declaration '%s' (process or link)", w[0]);
            goto out;
        }
    }
    if (ferror(f)) {
        fail(err, errlen, path, 0, "read error: %s", strerror(errno));
        goto out;
    }
    if (t->nprocs == 0) {
        fail(err, errlen, path, 0, "declares no process");
        goto out;
    }
    for (int i = 0; i < t->nlinks; i++)
        for (int e = 0; e < 2; e++) {
            t->links[i].end[e] = mps_topo_find_process(t, ends[i].end[e]);
            if (t->links[i].end[e] < 0) {
                fail(err, errlen, path, t->links[i].line, "link '%s': no process '%s' is declared",
                     t->links[i].name, ends[i].end[e]);
                goto out;
            }
        }
    rc = 0;
out:
    free(line);
    free(ends);
    fclose(f);
    if (rc)
        mps_topo_free(t);
    return rc;
}
