/* The MPI entry points (PMPI interposition): what is converted, what completes our requests
 * first, what only passes through. docs/overlap.md has the full list and why.
 *
 * Converted to background requests (ov_page.c): MPI_Send, MPI_Recv, MPI_Sendrecv and
 * MPI_Sendrecv_replace, for any datatype MPI can describe (derived ones: their true-extent
 * span is protected, copies are packed, receives land packed and are unpacked), while the
 * application has none of its own nonblocking operations outstanding (MPI could write into a
 * page we protect while progressing them). A status the caller asks for is handed out at
 * once when the receive names its source and tag (ov_status.c: the count resolves through
 * MPI_Get_count and friends); with a wildcard and a status the receive stays blocking.
 * Anything else stays blocking ("passed through" in the report) after completing our
 * requests on its buffers.
 *
 * Not converted, deliberately: MPI_Ssend (its completion is the observable synchronisation),
 * MPI_Bsend (already returns after a copy), MPI_Rsend (its ready precondition is the
 * application's ordering): these complete everything first and pass through.
 *
 * Everything else that touches a buffer completes every request of ours first (a blocking
 * collective may read or write any of them; tracking their extents would cost more than it
 * saves in a program that mixes both). Calls that only make progress (barrier, probes,
 * communicator management) just mark "inside MPI" so a fault there is known as MPI's. */
#define _GNU_SOURCE
#include "ov_signal.h"
#include "ov_env.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern int ov_app_threads;
static int ov_inited;

/* A setting from the environment: a decimal integer from 0 to INT_MAX (every caller keeps it
 * in an int or less), else the program stops naming the variable. */
static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    long x;
    if (ov_parse_long(v, 0, INT_MAX, &x) != 0) {
        fprintf(stderr, "mpioverlap: %s=%s is not an integer from 0 to %d\n", name, v, INT_MAX);
        exit(1);
    }
    return x;
}

static int other_threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 1;
}

static void ov_init(int required, int threads_before)
{
    ov_inited = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &ov.rank);
    /* collective: every rank, whatever its settings */
    ov_local_init();
    ov.report = (int)env_long("MPIOVERLAP_REPORT", 0);
    if (env_long("MPIOVERLAP_DISABLE", 0))
        return;     /* enabled stays 0: pure pass-through, for comparison */
    ov.chain_enabled = (int)env_long("MPIOVERLAP_CHAIN", 1);
    ov.chain_gap_ns = env_long("MPIOVERLAP_CHAIN_GAP_NS", 2000);
    /* Natvig and Elster's chaining: no page-table updates for a recognised chain's requests. Off by
     * default: a program that leaves the chain early and touches a buffer before its next MPI
     * call would read or overwrite data in flight, silently (docs/overlap.md) */
    ov.chain_trust = (int)env_long("MPIOVERLAP_CHAIN_TRUST", 0);
    /* 0: a chain's last call completes what is done and leaves the rest to paging; 1: it
     * waits for the whole chain, giving up the overlap of what is still in flight. 0
     * recovered more of manual overlap's gain on a paced link
     * (docs/benchmarks/2026-11-25-overlap.md) */
    ov.chain_wait = (int)env_long("MPIOVERLAP_CHAIN_WAIT", 0);
    ov.at_once = (int)env_long("MPIOVERLAP_ATONCE", 1);
    ov.adapt = (int)env_long("MPIOVERLAP_ADAPT", 1);
    ov.adapt_ns = env_long("MPIOVERLAP_ADAPT_NS", 20000);
    /* A deferred receive costs two mprotect calls and maybe a fault
     * (docs/benchmarks/2026-11-25-overlap.md), more than a message within one page takes to
     * arrive on any network here. Such receives stay blocking unless MPIOVERLAP_RECV_MIN says
     * otherwise (0: every receive deferred, as in Natvig and Elster 2006). Small sends are
     * cheap (a copy) and are always deferred. */
    ov.recv_min = (size_t)env_long("MPIOVERLAP_RECV_MIN", (long)sysconf(_SC_PAGESIZE));
    /* Natvig and Elster copy sends within a page and defer them; but such a send is eager in
     * every MPI here and returns as soon as MPI has copied it, so our copy, slot and later
     * wait are pure cost (the SOR solver over Open MPI, docs/benchmarks/2026-11-25-overlap.md).
     * They stay blocking unless MPIOVERLAP_SEND_MIN=0. */
    ov.send_min = (size_t)env_long("MPIOVERLAP_SEND_MIN", (long)sysconf(_SC_PAGESIZE));
    /* From another node, even a few bytes take longer than two mprotect calls (the test
     * cluster's hosts; a real 1 Gbit/s link more): on the shaped test cluster the SOR
     * solver's 2 KiB borders recovered none of manual overlap's gain while they stayed
     * blocking, and deferred they did (docs/benchmarks/2026-11-25-overlap.md,
     * docs/benchmarks/2026-11-28-figures-from-the-code.md, docs/overlap.md). */
    ov.recv_min_net = (size_t)env_long("MPIOVERLAP_RECV_MIN_NET", 0);
    ov_page_init();
    ov_sys_init();
    ov.owner_tid = syscall(SYS_gettid);
    ov_is_owner = 1;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        void *lo;
        size_t sz;
        pthread_attr_getstack(&a, &lo, &sz);
        ov.stk_lo = (uintptr_t)lo;
        ov.stk_hi = (uintptr_t)lo + sz;
        pthread_attr_destroy(&a);
    }
    ov.enabled = 1;
    if (required > MPI_THREAD_FUNNELED)
        ov_disable("MPI_Init_thread asked for more than MPI_THREAD_FUNNELED (threads may touch "
                   "buffers while another is in MPI)");
    else if (ov_app_threads || threads_before)
        ov_disable("the application had started threads before MPI_Init");
    else {
        ov_signal_init();
        ov_owner_out = 1;   /* back in application code */
    }
}

int MPI_Init(int *argc, char ***argv)
{
    int before = other_threads_now();
    ov_in_lib++;
    int rc = PMPI_Init(argc, argv);
    ov_in_lib--;
    if (rc == MPI_SUCCESS)
        ov_init(MPI_THREAD_SINGLE, before);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int before = other_threads_now();
    ov_in_lib++;
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    ov_in_lib--;
    if (rc == MPI_SUCCESS)
        ov_init(required, before);
    return rc;
}

int MPI_Finalize(void)
{
    if (ov.enabled) {
        ov_enter();
        ov_deferred_run();
        ov_complete_all();
        ov_leave();
    }
    ov_owner_out = 0;
    if (ov_inited && ov.report) {
        struct ov_stats *s = &ov.st;
        fprintf(stderr,
                "mpioverlap: rank %d: %s; deferred %llu (send copied %llu, send protected %llu, "
                "recv %llu; complete at once %llu), passed through %llu (by site %llu), faults %llu (inside MPI %llu, "
                "owner parked %llu, not ours %llu), chains found %llu, chain runs %llu (%llu calls, left running %llu), bytes copied "
                "%llu, syscall flushes %llu, mprotect calls %llu\n",
                ov.rank, ov.enabled ? "enabled" : "pass-through", s->deferred, s->send_copied,
                s->send_protected, s->recv_deferred, s->done_at_once, s->passthrough, s->site_blocking, s->faults, s->faults_in_mpi,
                s->parks, s->faults_foreign, s->chains_found, s->chain_runs, s->chained_reqs, s->chain_left,
                s->bytes_copied, s->sys_flushes, s->mprotects);
    }
    ov.enabled = 0;
    ov_in_lib++;
    int rc = PMPI_Finalize();
    ov_in_lib--;
    return rc;
}

/* The memory (count, dt) covers from buf: data bytes, and the true-extent span MPI may
 * touch. 0 when nothing can be deferred (no data, or a type MPI cannot describe to us). */
static struct { MPI_Datatype dt; int size; } named[8];    /* predefined types seen */
static int nnamed;

static int type_span(const void *buf, MPI_Datatype dt, int count, struct ov_span *sp)
{
    int ni, na, nd, comb, sz;
    if (count <= 0)
        return 0;
    /* predefined types are never freed, so their sizes can be kept: two MPI queries less per
     * call on the path every blocking call takes (they showed in the cost of a pass-through
     * Sendrecv: docs/benchmarks/2026-11-28-figures-from-the-code.md) */
    for (int i = 0; i < nnamed; i++)
        if (named[i].dt == dt) {
            sp->len = (size_t)count * (size_t)named[i].size;
            sp->derived = 0;
            sp->first = 0;
            sp->span = sp->len;
            return 1;
        }
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        PMPI_Type_size(dt, &sz) != MPI_SUCCESS || sz <= 0)
        return 0;
    if (comb == MPI_COMBINER_NAMED && nnamed < 8) {
        named[nnamed].dt = dt;
        named[nnamed++].size = sz;
    }
    sp->len = (size_t)count * (size_t)sz;
    sp->derived = comb != MPI_COMBINER_NAMED;
    /* MPI_BOTTOM with absolute addresses: MPICH's MPI_Pack/Unpack refuse a null buffer,
     * and our copies and landings go through them */
    if (sp->derived && buf == MPI_BOTTOM)
        return 0;
    if (!sp->derived) {
        sp->first = 0;
        sp->span = sp->len;
        return 1;
    }
    MPI_Aint lb, ext, tlb, text;
    if (PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS || text <= 0)
        return 0;
    sp->first = (ptrdiff_t)(tlb + (ext < 0 ? (MPI_Aint)(count - 1) * ext : 0));
    sp->span = (size_t)(text + (MPI_Aint)(count - 1) * (ext < 0 ? -ext : ext));
    return 1;
}

static inline int can_defer(void)
{
    return ov.user_active == 0 && !ov.user_sticky;
}

/* A receive of len bytes from src worth deferring? Within one page from this node, no
 * (MPIOVERLAP_RECV_MIN); from another node a network's latency is worth hiding
 * (MPIOVERLAP_RECV_MIN_NET, default 0). MPI_ANY_SOURCE: the stricter of the two. */
static int recv_worth(size_t len, MPI_Comm comm, int src)
{
    size_t lo = ov.recv_min < ov.recv_min_net ? ov.recv_min : ov.recv_min_net;
    size_t hi = ov.recv_min < ov.recv_min_net ? ov.recv_min_net : ov.recv_min;
    if (len > hi)
        return 1;
    if (len <= lo || src == MPI_ANY_SOURCE)
        return 0;
    return len > (ov_peer_local(comm, src) ? ov.recv_min : ov.recv_min_net);
}

/* A status the caller wants can be handed out before completion only when its public
 * fields are known: a named source and tag (ov_status.c) */
static inline int status_ok(MPI_Status *status, int src, int tag)
{
    return status == MPI_STATUS_IGNORE || (src != MPI_ANY_SOURCE && tag != MPI_ANY_TAG);
}

/* bytes a pass-through call may touch: the true extent span, or nothing when unknown */
static void complete_for(const void *buf, int count, MPI_Datatype dt)
{
    if (!ov.nactive || !buf || count <= 0)
        return;
    MPI_Aint lb, ext, tlb, text;
    if (PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS) {
        ov_complete_all();
        return;
    }
    MPI_Aint first = tlb + (ext < 0 ? (count - 1) * ext : 0);
    MPI_Aint span = text + (MPI_Aint)(count - 1) * (ext < 0 ? -ext : ext);
    uintptr_t a = (uintptr_t)buf + (intptr_t)first;
    ov_complete_range(a, a + (uintptr_t)span);
}

#define ENTER() ov_enter(); if (ov_deferred_n) ov_deferred_run()
#define LEAVE() ov_leave()

/* One blocking send or receive to defer */
struct xfer {
    int send;
    void *buf;
    int count;
    MPI_Datatype dt;
    struct ov_span sp;
    int peer, tag;
    MPI_Comm comm;
    MPI_Status *status;
};

/* Does the last call of a running chain wait for all of it (then its own request is not
 * protected: ov.wait_now)? Unprotected (trusted) requests must be waited for. */
static int chain_end_waits(void)
{
    return ov.chain_wait || ov.chain_trust;
}

/* Every deferring call ends here, with the requests it started (NULL if none): the chain's
 * end if it was its last call (wait for it all, or complete what is done and leave the rest
 * to paging), and the call-site stamp of the requests that stay in flight (ov_adapt.c; after
 * ov_chain_exit, whose clock reading it uses). */
static void call_done(int last, int waits, struct ov_req *a, struct ov_req *b, void *site)
{
    if (waits)
        ov_complete_chained();
    ov_chain_exit();
    if (waits)
        return;
    ov_stamp(a, b, site);
    if (last)
        ov_settle_chained();
}

/* Starts x in the background within the current chain: 1 with *rc set when it was deferred
 * (or failed), 0 when it must run blocking after all. */
static int defer_one(void *site, const struct xfer *x, int *rc)
{
    struct ov_req *r;
    int ch = ov_chain_enter(site);
    int last = ch && ov_chain_is_last();
    int waits = last && chain_end_waits();
    ov.wait_now = waits;
    ov.noprot = ch && !last && ov.chain_trust;
    int s = x->send ? ov_start_send(x->buf, x->count, x->dt, &x->sp, x->peer, x->tag, x->comm, 0, &r)
        : ov_start_recv(x->buf, x->count, x->dt, &x->sp, x->peer, x->tag, x->comm, x->status, &r);
    ov.wait_now = ov.noprot = 0;
    if (s > 0) {
        if (r)
            r->chained = ch;
        call_done(last, waits, r, NULL, site);
        *rc = MPI_SUCCESS;
        return 1;
    }
    call_done(last, waits, NULL, NULL, site);
    if (s < 0) {
        *rc = -s;
        return 1;
    }
    return 0;
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    if (!ov.enabled || ov_in_lib)
        return PMPI_Send(buf, count, dt, dest, tag, comm);
    ENTER();
    struct xfer x = { 1, (void *)buf, count, dt, { 0, 0, 0, 0 }, dest, tag, comm, MPI_STATUS_IGNORE };
    int rc;
    void *site = __builtin_return_address(0);
    if (dest != MPI_PROC_NULL && can_defer() && type_span(buf, dt, count, &x.sp) &&
        x.sp.len > ov.send_min && !(ov_site_blocking(site) && ++ov.st.site_blocking)) {
        if (defer_one(site, &x, &rc)) {
            LEAVE();
            return rc;
        }
    }
    ov.st.passthrough++;
    complete_for(buf, count, dt);
    rc = PMPI_Send(buf, count, dt, dest, tag, comm);
    LEAVE();
    return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    if (!ov.enabled || ov_in_lib)
        return PMPI_Recv(buf, count, dt, src, tag, comm, status);
    ENTER();
    void *site = __builtin_return_address(0);
    struct xfer x = { 0, buf, count, dt, { 0, 0, 0, 0 }, src, tag, comm, status };
    int rc;
    if (status_ok(status, src, tag) && src != MPI_PROC_NULL && can_defer() &&
        type_span(buf, dt, count, &x.sp) && recv_worth(x.sp.len, comm, src) &&
        !(ov_site_blocking(site) && ++ov.st.site_blocking)) {
        if (defer_one(site, &x, &rc)) {
            LEAVE();
            return rc;
        }
    }
    ov.st.passthrough++;
    complete_for(buf, count, dt);
    rc = PMPI_Recv(buf, count, dt, src, tag, comm, status);
    LEAVE();
    return rc;
}

/* The send and receive halves of MPI_Sendrecv / MPI_Sendrecv_replace, deferred together.
 * The receive starts first: a send sharing its pages is then copied out around it (Natvig
 * and Elster 2006, §2.5), where the other order would make the receive wait for the send. Sendrecv_replace
 * sends a copy (its buffer is about to receive) made before the receive protects it. */
static int defer_pair(void *site, const void *sbuf, int scount, MPI_Datatype sdt, const struct ov_span *ss,
                      int dest, int stag, void *rbuf, int rcount, MPI_Datatype rdt, const struct ov_span *rs,
                      int src, int rtag, MPI_Comm comm, MPI_Status *status, int replace, int *rcp)
{
    int ch = ov_chain_enter(site);
    struct ov_req *rr = NULL, *sr = NULL;
    int s = 1, rc;
    int last = ch && ov_chain_is_last();
    int waits = last && chain_end_waits();
    ov.wait_now = waits;
    ov.noprot = ch && !last && ov.chain_trust;
    if (replace && ss->len) {
        s = ov_start_send(sbuf, scount, sdt, ss, dest, stag, comm, 1, &sr);
        if (s == 0) {
            ov.wait_now = ov.noprot = 0;
            call_done(last, waits, NULL, NULL, site);
            return 0;
        }
    }
    if (s > 0 && rs->len) {
        s = ov_start_recv(rbuf, rcount, rdt, rs, src, rtag, comm, status, &rr);
        if (s == 0) {
            /* on the stack: this receive cannot be deferred */
            ov.wait_now = ov.noprot = 0;
            if (replace) {
                /* the copy is on its way: receive blocking (after our requests on it) */
                ov.st.passthrough++;
                complete_for(rbuf, rcount, rdt);
                rc = PMPI_Recv(rbuf, rcount, rdt, src, rtag, comm, status);
                if (sr) sr->chained = ch;
                call_done(last, waits, NULL, NULL, site);
                *rcp = rc;
                return 1;
            }
            call_done(last, waits, NULL, NULL, site);
            return 0;
        }
    }
    if (s > 0 && ss->len && !replace)
        s = ov_start_send(sbuf, scount, sdt, ss, dest, stag, comm, 0, &sr);
    if (s == 0) {
        /* the send could not start (no memory for the copy): its receive is posted,
         * so send blocking now and keep the receive deferred */
        s = 1;
        ov.st.passthrough++;
        complete_for(sbuf, scount, sdt);
        rc = PMPI_Send(sbuf, scount, sdt, dest, stag, comm);
        if (rc != MPI_SUCCESS)
            s = -rc;
    }
    ov.wait_now = ov.noprot = 0;
    if (rr) rr->chained = ch;
    if (sr) sr->chained = ch;
    call_done(last, waits, s > 0 ? rr : NULL, s > 0 ? sr : NULL, site);
    *rcp = s > 0 ? MPI_SUCCESS : -s;
    return 1;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rdt, int src, int rtag, MPI_Comm comm,
                 MPI_Status *status)
{
    if (!ov.enabled || ov_in_lib)
        return PMPI_Sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, status);
    ENTER();
    int rc;
    if (dest == MPI_PROC_NULL && src == MPI_PROC_NULL) {
        /* nothing to move (a grid's edge): no need to complete anything either */
        rc = PMPI_Sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, status);
        LEAVE();
        return rc;
    }
    struct ov_span ss = { 0, 0, 0, 0 }, rs = { 0, 0, 0, 0 };
    int sok = dest == MPI_PROC_NULL || type_span(sbuf, sdt, scount, &ss);
    int rok = src == MPI_PROC_NULL || type_span(rbuf, rdt, rcount, &rs);
    if (rs.len && !recv_worth(rs.len, comm, src))
        rok = 0;    /* see recv_worth */
    if (ss.len && ss.len <= ov.send_min && !rs.len)
        sok = 0;    /* a small send alone: see send_min */
    /* a status: only for a receive whose source and tag are named */
    int stok = status == MPI_STATUS_IGNORE || (rs.len && status_ok(status, src, rtag));
    void *site = __builtin_return_address(0);
    if (stok && sok && rok && can_defer() && (ss.len || rs.len) &&
        !(ov_site_blocking(site) && ++ov.st.site_blocking) &&
        defer_pair(site, sbuf, scount, sdt, &ss, dest, stag, rbuf, rcount, rdt, &rs, src, rtag, comm,
                   status, 0, &rc)) {
        LEAVE();
        return rc;
    }
    ov.st.passthrough++;
    if (ov.nactive) {
        complete_for(sbuf, scount, sdt);
        complete_for(rbuf, rcount, rdt);
    }
    rc = PMPI_Sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, status);
    LEAVE();
    return rc;
}

/* One buffer sent, then received into: its send goes from a copy (packed for a derived
 * type), its receive is deferred as MPI_Recv's would be. */
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int src,
                         int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (!ov.enabled || ov_in_lib)
        return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, status);
    ENTER();
    int rc;
    struct ov_span sp = { 0, 0, 0, 0 };
    struct ov_span none = { 0, 0, 0, 0 };
    void *site = __builtin_return_address(0);
    if (src != MPI_PROC_NULL && status_ok(status, src, rtag) && can_defer() &&
        type_span(buf, dt, count, &sp) && recv_worth(sp.len, comm, src) &&
        !(ov_site_blocking(site) && ++ov.st.site_blocking) &&
        defer_pair(site, buf, count, dt, dest == MPI_PROC_NULL ? &none : &sp, dest, stag, buf, count,
                   dt, &sp, src, rtag, comm, status, 1, &rc)) {
        LEAVE();
        return rc;
    }
    ov.st.passthrough++;
    complete_for(buf, count, dt);
    rc = PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, status);
    LEAVE();
    return rc;
}

/* Calls that read a status's hidden fields: a provisional one (ov_status.c) is made real, its
 * receive completed first if still in flight (as a touch of its buffer would) */
static const MPI_Status *real_status(const MPI_Status *st, MPI_Status *tmp)
{
    unsigned long long seq = ov_status_seq(st);
    if (!seq)
        return st;
    ov_complete_status(seq);
    return ov_status_resolve(seq, st, tmp);
}

int MPI_Get_count(const MPI_Status *st, MPI_Datatype dt, int *c)
{
    if (!ov.status_any)
        return PMPI_Get_count(st, dt, c);
    MPI_Status tmp;
    ENTER();
    int rc = PMPI_Get_count(real_status(st, &tmp), dt, c);
    LEAVE();
    return rc;
}

int MPI_Get_elements(const MPI_Status *st, MPI_Datatype dt, int *c)
{
    if (!ov.status_any)
        return PMPI_Get_elements(st, dt, c);
    MPI_Status tmp;
    ENTER();
    int rc = PMPI_Get_elements(real_status(st, &tmp), dt, c);
    LEAVE();
    return rc;
}

int MPI_Get_elements_x(const MPI_Status *st, MPI_Datatype dt, MPI_Count *c)
{
    if (!ov.status_any)
        return PMPI_Get_elements_x(st, dt, c);
    MPI_Status tmp;
    ENTER();
    int rc = PMPI_Get_elements_x(real_status(st, &tmp), dt, c);
    LEAVE();
    return rc;
}

int MPI_Test_cancelled(const MPI_Status *st, int *f)
{
    if (!ov.status_any)
        return PMPI_Test_cancelled(st, f);
    MPI_Status tmp;
    ENTER();
    int rc = PMPI_Test_cancelled(real_status(st, &tmp), f);
    LEAVE();
    return rc;
}

/* ---- pass-through calls ---------------------------------------------------------------
 * FLUSH: completes all our requests, then calls MPI.
 * ASYNC: FLUSH, and the application now has a nonblocking operation outstanding.
 * STICKY: FLUSH, and the application uses something whose end we cannot see (persistent
 *         requests, RMA windows, files): no more conversion in this process.
 * PROGRESS: only marks the call as inside MPI. */
#define P(...) (__VA_ARGS__)
#define GEN(kind, name, params, args)                                   \
    int MPI_##name params                                               \
    {                                                                   \
        if (!ov.enabled || ov_in_lib)                                   \
            return PMPI_##name args;                                    \
        ENTER();                                                        \
        if (kind != 3) ov_complete_all();                               \
        int rc_ = PMPI_##name args;                                     \
        if (kind == 1 && rc_ == MPI_SUCCESS) ov.user_active++;          \
        if (kind == 2) ov.user_sticky = 1;                              \
        LEAVE();                                                        \
        return rc_;                                                     \
    }
#define FLUSH(n, p, a) GEN(0, n, p, a)
#define ASYNC(n, p, a) GEN(1, n, p, a)
#define STICKY(n, p, a) GEN(2, n, p, a)
#define PROGRESS(n, p, a) GEN(3, n, p, a)

#define SENDP P(const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm m)
#define SENDA P(b, c, t, d, g, m)
#define ISENDP P(const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm m, MPI_Request *q)
#define ISENDA P(b, c, t, d, g, m, q)
FLUSH(Ssend, SENDP, SENDA)
FLUSH(Bsend, SENDP, SENDA)
FLUSH(Rsend, SENDP, SENDA)
FLUSH(Mrecv, P(void *b, int c, MPI_Datatype t, MPI_Message *mg, MPI_Status *st), P(b, c, t, mg, st))
ASYNC(Isend, ISENDP, ISENDA)
ASYNC(Issend, ISENDP, ISENDA)
ASYNC(Ibsend, ISENDP, ISENDA)
ASYNC(Irsend, ISENDP, ISENDA)
ASYNC(Irecv, P(void *b, int c, MPI_Datatype t, int s, int g, MPI_Comm m, MPI_Request *q), P(b, c, t, s, g, m, q))
ASYNC(Imrecv, P(void *b, int c, MPI_Datatype t, MPI_Message *mg, MPI_Request *q), P(b, c, t, mg, q))
STICKY(Send_init, ISENDP, ISENDA)
STICKY(Ssend_init, ISENDP, ISENDA)
STICKY(Bsend_init, ISENDP, ISENDA)
STICKY(Rsend_init, ISENDP, ISENDA)
STICKY(Recv_init, P(void *b, int c, MPI_Datatype t, int s, int g, MPI_Comm m, MPI_Request *q), P(b, c, t, s, g, m, q))
STICKY(Grequest_start, P(MPI_Grequest_query_function *qf, MPI_Grequest_free_function *ff,
                         MPI_Grequest_cancel_function *cf, void *x, MPI_Request *q), P(qf, ff, cf, x, q))
STICKY(Win_create, P(void *b, MPI_Aint s, int u, MPI_Info i, MPI_Comm m, MPI_Win *w), P(b, s, u, i, m, w))
STICKY(Win_allocate, P(MPI_Aint s, int u, MPI_Info i, MPI_Comm m, void *b, MPI_Win *w), P(s, u, i, m, b, w))
STICKY(Win_allocate_shared, P(MPI_Aint s, int u, MPI_Info i, MPI_Comm m, void *b, MPI_Win *w), P(s, u, i, m, b, w))
STICKY(Win_create_dynamic, P(MPI_Info i, MPI_Comm m, MPI_Win *w), P(i, m, w))
STICKY(File_open, P(MPI_Comm m, const char *f, int a, MPI_Info i, MPI_File *fh), P(m, f, a, i, fh))
FLUSH(Buffer_attach, P(void *b, int s), P(b, s))
FLUSH(Start, P(MPI_Request *q), P(q))
FLUSH(Startall, P(int n, MPI_Request q[]), P(n, q))
FLUSH(Pack, P(const void *i, int c, MPI_Datatype t, void *o, int os, int *p, MPI_Comm m), P(i, c, t, o, os, p, m))
FLUSH(Unpack, P(const void *i, int is, int *p, void *o, int c, MPI_Datatype t, MPI_Comm m), P(i, is, p, o, c, t, m))
FLUSH(Bcast, P(void *b, int c, MPI_Datatype t, int r, MPI_Comm m), P(b, c, t, r, m))
FLUSH(Reduce, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int rt, MPI_Comm m), P(s, r, c, t, o, rt, m))
FLUSH(Allreduce, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m), P(s, r, c, t, o, m))
FLUSH(Reduce_local, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o), P(s, r, c, t, o))
FLUSH(Scan, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m), P(s, r, c, t, o, m))
FLUSH(Exscan, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m), P(s, r, c, t, o, m))
FLUSH(Reduce_scatter, P(const void *s, void *r, const int rc[], MPI_Datatype t, MPI_Op o, MPI_Comm m), P(s, r, rc, t, o, m))
FLUSH(Reduce_scatter_block, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m), P(s, r, c, t, o, m))
#define GATHP P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int ro, MPI_Comm m)
#define GATHA P(s, sc, st, r, rc, rt, ro, m)
#define AGATHP P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm m)
#define AGATHA P(s, sc, st, r, rc, rt, m)
FLUSH(Gather, GATHP, GATHA)
FLUSH(Scatter, GATHP, GATHA)
FLUSH(Allgather, AGATHP, AGATHA)
FLUSH(Alltoall, AGATHP, AGATHA)
FLUSH(Gatherv, P(const void *s, int sc, MPI_Datatype st, void *r, const int rc[], const int d[], MPI_Datatype rt, int ro, MPI_Comm m),
      P(s, sc, st, r, rc, d, rt, ro, m))
FLUSH(Scatterv, P(const void *s, const int sc[], const int d[], MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int ro, MPI_Comm m),
      P(s, sc, d, st, r, rc, rt, ro, m))
FLUSH(Allgatherv, P(const void *s, int sc, MPI_Datatype st, void *r, const int rc[], const int d[], MPI_Datatype rt, MPI_Comm m),
      P(s, sc, st, r, rc, d, rt, m))
FLUSH(Alltoallv, P(const void *s, const int sc[], const int sd[], MPI_Datatype st, void *r, const int rc[], const int rd[], MPI_Datatype rt, MPI_Comm m),
      P(s, sc, sd, st, r, rc, rd, rt, m))
FLUSH(Alltoallw, P(const void *s, const int sc[], const int sd[], const MPI_Datatype st[], void *r, const int rc[], const int rd[], const MPI_Datatype rt[], MPI_Comm m),
      P(s, sc, sd, st, r, rc, rd, rt, m))
ASYNC(Ibcast, P(void *b, int c, MPI_Datatype t, int r, MPI_Comm m, MPI_Request *q), P(b, c, t, r, m, q))
ASYNC(Ireduce, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, int rt, MPI_Comm m, MPI_Request *q), P(s, r, c, t, o, rt, m, q))
ASYNC(Iallreduce, P(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m, MPI_Request *q), P(s, r, c, t, o, m, q))
ASYNC(Igather, P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int ro, MPI_Comm m, MPI_Request *q), P(s, sc, st, r, rc, rt, ro, m, q))
ASYNC(Iscatter, P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int ro, MPI_Comm m, MPI_Request *q), P(s, sc, st, r, rc, rt, ro, m, q))
ASYNC(Iallgather, P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm m, MPI_Request *q), P(s, sc, st, r, rc, rt, m, q))
ASYNC(Ialltoall, P(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm m, MPI_Request *q), P(s, sc, st, r, rc, rt, m, q))
ASYNC(Ibarrier, P(MPI_Comm m, MPI_Request *q), P(m, q))
PROGRESS(Barrier, P(MPI_Comm m), P(m))
PROGRESS(Probe, P(int s, int g, MPI_Comm m, MPI_Status *st), P(s, g, m, st))
PROGRESS(Iprobe, P(int s, int g, MPI_Comm m, int *f, MPI_Status *st), P(s, g, m, f, st))
PROGRESS(Mprobe, P(int s, int g, MPI_Comm m, MPI_Message *mg, MPI_Status *st), P(s, g, m, mg, st))
PROGRESS(Improbe, P(int s, int g, MPI_Comm m, int *f, MPI_Message *mg, MPI_Status *st), P(s, g, m, f, mg, st))
PROGRESS(Comm_dup, P(MPI_Comm m, MPI_Comm *n), P(m, n))
PROGRESS(Comm_split, P(MPI_Comm m, int c, int k, MPI_Comm *n), P(m, c, k, n))
PROGRESS(Comm_create, P(MPI_Comm m, MPI_Group g, MPI_Comm *n), P(m, g, n))
int MPI_Comm_free(MPI_Comm *m)
{
    if (ov.enabled && m)
        ov_local_forget(*m);
    if (!ov.enabled || ov_in_lib)
        return PMPI_Comm_free(m);
    ENTER();
    int rc = PMPI_Comm_free(m);
    LEAVE();
    return rc;
}
PROGRESS(Cancel, P(MPI_Request *q), P(q))

/* ---- completion of the application's own requests: count what finished ------------------
 * A request set to MPI_REQUEST_NULL by the call was a nonblocking one that completed
 * (persistent ones never become null, and already made the process sticky). */
static int nonnull(int n, const MPI_Request *q)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += q[i] != MPI_REQUEST_NULL;
    return k;
}

static void finished(int before, int after)
{
    ov.user_active -= before - after;
    if (ov.user_active < 0)
        ov.user_active = 0;     /* requests started before MPI_Init's wrapper saw them */
}

#define WAITGEN(name, params, args, n, q)                               \
    int MPI_##name params                                               \
    {                                                                   \
        if (!ov.enabled || ov_in_lib)                                   \
            return PMPI_##name args;                                    \
        ENTER();                                                        \
        int before = nonnull(n, q);                                     \
        int rc_ = PMPI_##name args;                                     \
        finished(before, nonnull(n, q));                                \
        LEAVE();                                                        \
        return rc_;                                                     \
    }
WAITGEN(Wait, P(MPI_Request *q, MPI_Status *st), P(q, st), 1, q)
WAITGEN(Test, P(MPI_Request *q, int *f, MPI_Status *st), P(q, f, st), 1, q)
WAITGEN(Waitall, P(int n, MPI_Request q[], MPI_Status st[]), P(n, q, st), n, q)
WAITGEN(Testall, P(int n, MPI_Request q[], int *f, MPI_Status st[]), P(n, q, f, st), n, q)
WAITGEN(Waitany, P(int n, MPI_Request q[], int *i, MPI_Status *st), P(n, q, i, st), n, q)
WAITGEN(Testany, P(int n, MPI_Request q[], int *i, int *f, MPI_Status *st), P(n, q, i, f, st), n, q)
WAITGEN(Waitsome, P(int n, MPI_Request q[], int *o, int i[], MPI_Status st[]), P(n, q, o, i, st), n, q)
WAITGEN(Testsome, P(int n, MPI_Request q[], int *o, int i[], MPI_Status st[]), P(n, q, o, i, st), n, q)
/* a freed active request ends unseen: the count can never come back to zero, on purpose */
PROGRESS(Request_free, P(MPI_Request *q), P(q))

/* compile-time injection (mpioverlap.h) calls these names; they are the same entry points */
int mpioverlap_Send(const void *b, int c, MPI_Datatype t, int d, int g, MPI_Comm m)
    __attribute__((alias("MPI_Send")));
int mpioverlap_Recv(void *b, int c, MPI_Datatype t, int s, int g, MPI_Comm m, MPI_Status *st)
    __attribute__((alias("MPI_Recv")));
int mpioverlap_Sendrecv(const void *sb, int sc, MPI_Datatype st, int d, int sg, void *rb, int rc,
                        MPI_Datatype rt, int s, int rg, MPI_Comm m, MPI_Status *sta)
    __attribute__((alias("MPI_Sendrecv")));
