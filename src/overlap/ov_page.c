/* Paging (Natvig and Elster 2006, §2.3-§2.5): start a blocking call's request in the background and
 * guard its memory with page protection until it completes.
 *
 *  - send of at most one page: copied, sent from the copy; the user's memory stays untouched.
 *  - larger send: the pages it occupies become read-only (MPI reads them in the background).
 *  - receive: lands in a separate buffer; the user's pages become inaccessible (no hardware
 *    has write-only pages) and the data is copied in at completion, only the bytes received.
 *
 * Overlap rules (§2.5), checked when a request starts:
 *  - elements shared with a receive in flight: that receive completes first (a receive orders
 *    everything touching its area); a new receive also waits for sends on its elements.
 *    Sends on the same elements run concurrently.
 *  - a page shared with a receive in flight (inaccessible) that a send must read: the send is
 *    copied out around it (the page is made readable for the copy and inaccessible again).
 *  - a page shared with a protected send in flight (read-only, MPI reading it) that a new
 *    receive needs inaccessible: those sends complete first (MPI would fault otherwise).
 * A page's protection is always recomputed from the requests covering it: any receive ->
 * none, else any protected send -> read, else read/write.
 *
 * The table is scanned linearly: a blocking-call program has a handful of requests in
 * flight, and a scan of a few cache lines costs less than any index would to keep. */
#define _GNU_SOURCE
#include "ov.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static inline char *pg_addr(uintptr_t pg) { return (char *)(pg * ov.page); }

void ov_page_init(void)
{
    ov.page = (size_t)sysconf(_SC_PAGESIZE);
}

static void ov_fatal(const char *what, int err)
{
    char msg[200];
    int n = snprintf(msg, sizeof msg, "mpioverlap: %s failed: %s\n", what, strerror(err));
    ov_say(msg, (size_t)n);
    abort();
}

static int prot_of_page(uintptr_t pg)
{
    int prot = PROT_READ | PROT_WRITE;
    for (int i = 0; i < OV_MAXREQ; i++) {
        struct ov_req *r = &ov.table[i];
        if (r->kind == OV_FREE || r->kind == OV_SEND_COPY || !r->prot || pg < r->pg0 || pg >= r->pg1)
            continue;
        if (r->kind == OV_RECV)
            return PROT_NONE;
        prot = PROT_READ;
    }
    return prot;
}

static void set_prot(uintptr_t pg0, uintptr_t pg1, int prot)
{
    if (pg0 >= pg1)
        return;
    ov.st.mprotects++;
    if (mprotect(pg_addr(pg0), (pg1 - pg0) * ov.page, prot) != 0)
        ov_fatal("mprotect", errno);
}

/* recompute [pg0, pg1) from the table, one mprotect per run of equal protection */
static void apply_prot(uintptr_t pg0, uintptr_t pg1)
{
    uintptr_t run = pg0;
    int prot = -1;
    for (uintptr_t pg = pg0; pg < pg1; pg++) {
        int p = prot_of_page(pg);
        if (p != prot) {
            if (prot != -1)
                set_prot(run, pg, prot);
            run = pg;
            prot = p;
        }
    }
    if (prot != -1)
        set_prot(run, pg1, prot);
}

int ov_page_ours(uintptr_t pg)
{
    for (int i = 0; i < OV_MAXREQ; i++) {
        struct ov_req *r = &ov.table[i];
        if ((r->kind == OV_SEND_PROT || r->kind == OV_RECV) && r->prot && pg >= r->pg0 && pg < r->pg1)
            return 1;
    }
    return 0;
}

void ov_page_reprotect(uintptr_t pg)
{
    apply_prot(pg, pg + 1);
}

/* does a request still in the table protect a page of [pg0, pg1) */
static int covered(uintptr_t pg0, uintptr_t pg1)
{
    for (int i = 0; i < OV_MAXREQ; i++) {
        struct ov_req *q = &ov.table[i];
        if ((q->kind == OV_SEND_PROT || q->kind == OV_RECV) && q->prot && q->pg0 < pg1 && pg0 < q->pg1)
            return 1;
    }
    return 0;
}

static void fail_request(int rc)
{
    /* the call that started it returned MPI_SUCCESS long ago: nothing to report it to,
     * and the data is not there; say so instead of continuing silently */
    char msg[120];
    int l = snprintf(msg, sizeof msg, "mpioverlap: a deferred request failed (MPI error %d)\n", rc);
    ov_say(msg, (size_t)l);
    PMPI_Abort(MPI_COMM_WORLD, rc);
}

/* A finished receive's data into the user's memory: only the bytes that arrived (a shorter
 * message leaves the rest as it was), unpacked into a derived type's layout (its gaps are
 * not written); its status recorded for a provisional status handed out (ov_status.c). */
static void copy_in(struct ov_req *r, const MPI_Status *st)
{
    int cnt = 0;
    PMPI_Get_count(st, MPI_BYTE, &cnt);
    if (r->sseq)
        ov_status_record(r->sseq, st);
    if (r->dt == MPI_DATATYPE_NULL) {
        size_t got = cnt < 0 ? r->len : (size_t)cnt;
        if (got > r->len)
            got = r->len;
        memcpy(r->ubuf, r->tmp, got);
        ov.st.bytes_copied += got;
        return;
    }
    int tsz = 0, pos = 0;
    PMPI_Type_size(r->dt, &tsz);
    if (cnt < 0 || tsz <= 0 || cnt % tsz) {
        /* a message ending inside an element: MPI_Unpack cannot place a partial element */
        static const char m[] = "mpioverlap: a deferred receive of a derived datatype got a message "
                                "ending inside an element; not supported (MPIOVERLAP_DISABLE=1)\n";
        ov_say(m, sizeof m - 1);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (cnt && PMPI_Unpack(r->tmp, cnt, &pos, r->mbuf, cnt / tsz, r->dt, MPI_COMM_SELF) != MPI_SUCCESS)
        fail_request(MPI_ERR_OTHER);
    ov.st.bytes_copied += (size_t)cnt;
    PMPI_Type_free(&r->dt);
    r->dt = MPI_DATATYPE_NULL;
}

/* Complete the requests flagged in sel[] with one Waitall, copy receives in, and restore
 * their pages with as few mprotect calls as the sharing allows (each one is a system call
 * and, with MPI's threads running, a TLB shootdown): one per protected request when no
 * other request shares its pages, none for an unprotected one. Called from the fault
 * handler too: no allocation, no stdio. */
static int complete_sel(const unsigned char *sel)
{
    MPI_Request reqs[OV_MAXREQ];
    MPI_Status sts[OV_MAXREQ];
    struct ov_req done[OV_MAXREQ];
    int n = 0;
    for (int i = 0; i < OV_MAXREQ; i++)
        if (sel[i] && ov.table[i].kind != OV_FREE) {
            done[n] = ov.table[i];
            reqs[n++] = ov.table[i].mreq;
        }
    if (n == 0)
        return 0;
    /* when the memory was wanted (not when the wait ended), for the sites' scores */
    long long t = ov.adapt ? ov_now_ns() : 0;
    int rc = PMPI_Waitall(n, reqs, sts);
    if (rc != MPI_SUCCESS)
        fail_request(rc);
    /* how long each protected request was in flight after its call returned, for the
     * call site's score (ov_adapt.c); a chain's requests are waited for on purpose */
    if (ov.adapt) {
        for (int k = 0; k < n; k++)
            if (done[k].prot && !done[k].chained)
                ov_site_score(done[k].site, t - done[k].t_ret);
    }
    /* out of the table first, so "covered" below sees only what stays in flight. Until the
     * pages are open, a fault by another thread finds them protected but not ours: the odd
     * ov_tab_seq tells its handler to wait and retry (ov_signal.c) */
    __atomic_add_fetch(&ov_tab_seq, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < OV_MAXREQ; i++)
        if (sel[i] && ov.table[i].kind != OV_FREE) {
            ov.table[i].kind = OV_FREE;
            ov.table[i].chained = 0;
            ov.table[i].dt = MPI_DATATYPE_NULL;     /* done[] frees it after the unpack */
            ov.table[i].sseq = 0;
            ov.nactive--;
        }
    unsigned char fix[OV_MAXREQ];
    for (int k = 0; k < n; k++) {
        struct ov_req *r = &done[k];
        fix[k] = 0;
        if (r->kind == OV_SEND_COPY)
            continue;
        int shared = covered(r->pg0, r->pg1);
        /* open what we protected, or what others protect under a receive's copy-in */
        if (r->prot || (shared && r->kind == OV_RECV))
            set_prot(r->pg0, r->pg1, PROT_READ | PROT_WRITE);
        fix[k] = (unsigned char)shared;
    }
    __atomic_add_fetch(&ov_tab_seq, 1, __ATOMIC_SEQ_CST);
    for (int k = 0; k < n; k++) {
        struct ov_req *r = &done[k];
        if (r->kind != OV_RECV)
            continue;
        copy_in(r, &sts[k]);
    }
    /* pages shared with requests still in flight get their protection back */
    for (int k = 0; k < n; k++)
        if (fix[k])
            apply_prot(done[k].pg0, done[k].pg1);
    return n;
}

static int complete_where(int (*match)(const struct ov_req *, uintptr_t, uintptr_t, int),
                          uintptr_t a, uintptr_t b, int arg)
{
    unsigned char sel[OV_MAXREQ];
    int any = 0;
    for (int i = 0; i < OV_MAXREQ; i++) {
        sel[i] = ov.table[i].kind != OV_FREE && match(&ov.table[i], a, b, arg);
        any |= sel[i];
    }
    return any ? complete_sel(sel) : 0;
}

static int m_all(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    (void)r; (void)a; (void)b; (void)arg;
    return 1;
}
static int m_chained(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    (void)a; (void)b; (void)arg;
    return r->chained;
}
/* pages [a, b) met; arg = 1: only requests that make pages unreadable (receives) */
static int m_pages(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    if (r->kind == OV_SEND_COPY || (arg && r->kind != OV_RECV))
        return 0;
    return r->pg0 < b && a < r->pg1;
}
/* protected sends on pages [a, b) (receives there may stay: their pages are already none) */
static int m_sendpages(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    (void)arg;
    return r->kind == OV_SEND_PROT && r->pg0 < b && a < r->pg1;
}
/* elements [a, b) met, by requests of kind arg (0 = any that references user memory) */
static int m_elems(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    if (r->kind == OV_SEND_COPY || (arg && (int)r->kind != arg))
        return 0;
    return (uintptr_t)r->ubuf < b && a < (uintptr_t)r->ubuf + r->len;
}

static int m_sseq(const struct ov_req *r, uintptr_t a, uintptr_t b, int arg)
{
    (void)b; (void)arg;
    return r->sseq == (unsigned long long)a;
}
void ov_complete_status(unsigned long long seq)
{
    if (ov.nactive)
        complete_where(m_sseq, (uintptr_t)seq, 0, 0);
}

int ov_complete_all(void) { return ov.nactive ? complete_where(m_all, 0, 0, 0) : 0; }
int ov_complete_chained(void) { return complete_where(m_chained, 0, 0, 0); }

/* The end of a running chain that is not waited for (MPIOVERLAP_CHAIN_WAIT=0): its requests
 * already done are completed now, restoring their pages before the computation after the
 * chain can fault on them; the others go on as ordinary paged requests, waited for only when
 * the computation touches their pages. Waiting for them all here (MPIOVERLAP_CHAIN_WAIT=1)
 * gives up the overlap of whatever is still in flight: on a paced link that was most of it
 * (docs/benchmarks/2026-11-25-overlap.md). MPI_Request_get_status tests without freeing, so
 * complete_sel's Waitall still gets each receive's status for its copy-in. */
int ov_settle_chained(void)
{
    unsigned char sel[OV_MAXREQ];
    int any = 0;
    for (int i = 0; i < OV_MAXREQ; i++) {
        struct ov_req *r = &ov.table[i];
        int flag = 0;
        sel[i] = 0;
        if (r->kind == OV_FREE || !r->chained)
            continue;
        if (PMPI_Request_get_status(r->mreq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            flag = 1;       /* complete_sel's Waitall reports the error */
        if (flag) {
            sel[i] = 1;
            any = 1;
        } else {
            r->chained = 0;
            ov.st.chain_left++;
        }
    }
    return any ? complete_sel(sel) : 0;
}
int ov_complete_page(uintptr_t pg) { return complete_where(m_pages, pg, pg + 1, 0); }

int ov_complete_range(uintptr_t a, uintptr_t b)
{
    if (!ov.nactive || a >= b)
        return 0;
    return complete_where(m_pages, a / ov.page, (b - 1) / ov.page + 1, 0);
}

/* a system call will only read [a, b): only receives (inaccessible pages) are in its way */
int ov_complete_range_read(uintptr_t a, uintptr_t b)
{
    if (!ov.nactive || a >= b)
        return 0;
    return complete_where(m_pages, a / ov.page, (b - 1) / ov.page + 1, 1);
}

static struct ov_req *slot_get(size_t need)
{
    if (ov.nactive == OV_MAXREQ)
        ov_complete_all();
    for (int i = 0; i < OV_MAXREQ; i++) {
        struct ov_req *r = &ov.table[i];
        if (r->kind != OV_FREE)
            continue;
        if (r->tmpcap < need) {
            /* Pages of their own (mmap, not the heap): a landing buffer on a heap page shared
             * with an inaccessible user buffer would make MPI fault writing into it. Grows
             * only: a program reuses its sizes, so this settles after the first iterations. */
            size_t cap = (need + ov.page - 1) / ov.page * ov.page;
            void *t = r->tmp ? mremap(r->tmp, r->tmpcap, cap, MREMAP_MAYMOVE)
                             : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (t == MAP_FAILED)
                return NULL;
            r->tmp = t;
            r->tmpcap = cap;
        }
        r->chained = 0;
        r->dt = MPI_DATATYPE_NULL;
        r->sseq = 0;
        return r;
    }
    return NULL;
}

static int on_stack(uintptr_t a, uintptr_t b)
{
    return a < ov.stk_hi && ov.stk_lo < b;
}

/* A request MPI completed as it started: its slot goes back, nothing was protected */
static void slot_done_at_once(struct ov_req *r, struct ov_req **out)
{
    r->kind = OV_FREE;
    ov.nactive--;
    ov.st.done_at_once++;
    *out = NULL;
}

int ov_start_send(const void *buf, int count, MPI_Datatype dt, const struct ov_span *sp, int dest,
                  int tag, MPI_Comm comm, int force_copy, struct ov_req **out)
{
    uintptr_t a = (uintptr_t)buf + (uintptr_t)sp->first, b = a + sp->span;
    /* a receive in flight on these elements orders this send after it */
    if (ov.nactive)
        complete_where(m_elems, a, b, OV_RECV);
    uintptr_t pg0 = a / ov.page, pg1 = (b - 1) / ov.page + 1;
    int copy = force_copy || sp->span <= ov.page || on_stack(a, b);
    if (!copy && ov.nactive)
        for (uintptr_t pg = pg0; pg < pg1 && !copy; pg++)
            copy = prot_of_page(pg) == PROT_NONE;   /* shares a page with a receive */
    /* a derived type's copy is packed: only its bytes, sent as MPI_PACKED (which any
     * receive whose type signature matches accepts) */
    int psz = 0;
    if (copy && sp->derived && PMPI_Pack_size(count, dt, MPI_COMM_SELF, &psz) != MPI_SUCCESS)
        return 0;
    struct ov_req *r = slot_get(copy ? (sp->derived ? (size_t)psz : sp->len) : 0);
    if (!r)
        return 0;
    int rc;
    if (copy) {
        /* copy out around receives in flight on shared pages: readable for the copy only */
        int opened = 0;
        if (ov.nactive)
            for (uintptr_t pg = pg0; pg < pg1; pg++)
                if (prot_of_page(pg) == PROT_NONE) {
                    set_prot(pg, pg + 1, PROT_READ);
                    opened = 1;
                }
        int pos = 0;
        if (sp->derived)
            rc = PMPI_Pack(buf, count, dt, r->tmp, psz, &pos, MPI_COMM_SELF);
        else
            memcpy(r->tmp, buf, sp->len), rc = MPI_SUCCESS;
        if (opened)
            apply_prot(pg0, pg1);
        if (rc != MPI_SUCCESS)
            return 0;   /* MPI would not pack it: the call goes blocking, MPI says why */
        ov.st.bytes_copied += sp->len;
        rc = sp->derived ? PMPI_Isend(r->tmp, pos, MPI_PACKED, dest, tag, comm, &r->mreq)
                         : PMPI_Isend(r->tmp, count, dt, dest, tag, comm, &r->mreq);
        r->kind = OV_SEND_COPY;
        r->pg0 = r->pg1 = 0;
        ov.st.send_copied++;
    } else {
        /* MPI reads the type's bytes in place: the pages of its whole span become read-only
         * (a gap's bytes on them too: a write there waits for the send, conservatively) */
        rc = PMPI_Isend(buf, count, dt, dest, tag, comm, &r->mreq);
        r->kind = OV_SEND_PROT;
        r->pg0 = pg0;
        r->pg1 = pg1;
        ov.st.send_protected++;
    }
    if (rc != MPI_SUCCESS) {
        r->kind = OV_FREE;
        *out = NULL;
        return -rc;
    }
    r->ubuf = (char *)a;
    r->len = sp->span;
    ov.nactive++;
    r->prot = 0;
    ov.st.deferred++;
    *out = r;
    if (r->kind == OV_SEND_COPY && ov.at_once && !ov.wait_now) {
        /* a small eager send is usually done already: free its slot now, so the table stays
         * short (every later call scans it) and MPI's request goes back at once */
        int flag = 0;
        PMPI_Test(&r->mreq, &flag, MPI_STATUS_IGNORE);
        if (flag)
            slot_done_at_once(r, out);
        return 1;
    }
    if (r->kind == OV_SEND_PROT && !ov.wait_now) {
        /* already gone (eager, or the receiver was waiting): nothing to protect */
        int flag = 0;
        if (ov.at_once)
            PMPI_Test(&r->mreq, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            slot_done_at_once(r, out);
            return 1;
        }
        if (ov.noprot)
            return 1;
        r->prot = 1;
        /* pages already read-only or inaccessible keep that (prot_of_page) */
        apply_prot(pg0, pg1);
    }
    return 1;
}

int ov_start_recv(void *buf, int count, MPI_Datatype dt, const struct ov_span *sp, int src, int tag,
                  MPI_Comm comm, MPI_Status *status, struct ov_req **out)
{
    uintptr_t a = (uintptr_t)buf + (uintptr_t)sp->first, b = a + sp->span;
    if (on_stack(a, b))
        return 0;       /* our own frames may share those pages: stays blocking */
    uintptr_t pg0 = a / ov.page, pg1 = (b - 1) / ov.page + 1;
    if (ov.nactive) {
        /* anything on these elements completes first; sends on shared pages too, since MPI
         * reads those pages and they are about to become inaccessible */
        complete_where(m_elems, a, b, 0);
        complete_where(m_sendpages, pg0, pg1, 0);
    }
    /* a derived type lands packed: any message can be received as MPI_PACKED, and the
     * unpack at completion writes only the type's bytes */
    int psz = 0;
    if (sp->derived && PMPI_Pack_size(count, dt, MPI_COMM_SELF, &psz) != MPI_SUCCESS)
        return 0;
    MPI_Datatype mine = MPI_DATATYPE_NULL;
    /* the application may free its type once the call returned; the unpack needs it later */
    if (sp->derived && PMPI_Type_dup(dt, &mine) != MPI_SUCCESS)
        return 0;
    struct ov_req *r = slot_get(sp->derived ? (size_t)psz : sp->len);
    if (!r) {
        if (mine != MPI_DATATYPE_NULL)
            PMPI_Type_free(&mine);
        return 0;
    }
    int rc = sp->derived ? PMPI_Irecv(r->tmp, psz, MPI_PACKED, src, tag, comm, &r->mreq)
                         : PMPI_Irecv(r->tmp, count, dt, src, tag, comm, &r->mreq);
    if (rc != MPI_SUCCESS) {
        if (mine != MPI_DATATYPE_NULL)
            PMPI_Type_free(&mine);
        *out = NULL;
        return -rc;
    }
    r->kind = OV_RECV;
    r->ubuf = (char *)a;
    r->len = sp->span;
    r->dt = mine;
    r->mbuf = buf;
    r->mcount = count;
    r->pg0 = pg0;
    r->pg1 = pg1;
    r->prot = 0;
    ov.nactive++;
    ov.st.recv_deferred++;
    ov.st.deferred++;
    *out = r;
    if (ov.wait_now) {
        if (status != MPI_STATUS_IGNORE)
            r->sseq = ov_status_provisional(status, src, tag);
        return 1;
    }
    /* the message may be here already (the peer sent first): then no protection at all,
     * one PMPI_Test instead of two mprotect calls and maybe a fault */
    int flag = 0;
    MPI_Status st;
    if (ov.at_once)
        PMPI_Test(&r->mreq, &flag, &st);
    if (flag) {
        /* on pages other requests in flight protect, open them for the copy */
        int shared = covered(pg0, pg1);
        struct ov_req mine_r = *r;
        r->dt = MPI_DATATYPE_NULL;
        slot_done_at_once(r, out);
        if (shared)
            set_prot(pg0, pg1, PROT_READ | PROT_WRITE);
        copy_in(&mine_r, &st);
        if (shared)
            apply_prot(pg0, pg1);
        if (status != MPI_STATUS_IGNORE)
            ov_status_fill(status, &st);    /* the real one, as the blocking call writes it */
        return 1;
    }
    if (status != MPI_STATUS_IGNORE)
        r->sseq = ov_status_provisional(status, src, tag);
    if (ov.noprot)
        return 1;
    r->prot = 1;
    set_prot(pg0, pg1, PROT_NONE);
    return 1;
}
