/* Chaining (Natvig and Elster 2006, §2.6): runs of converted calls with no computation between
 * them.
 *
 * Recognition is at run time, by call site and time: a call that comes less than
 * MPIOVERLAP_CHAIN_GAP_NS (default 2000 ns) after the previous converted call returned, with
 * no fault on our pages in between, continues the current run. The return address of each
 * call identifies its site, so a run is a sequence of sites. A run of two or more calls seen
 * twice the same way is a chain (counted in "chains found"); when the first site of a known
 * chain starts a new run, the chain runs: its requests start as usual and, at the last one,
 * those already done are completed together, before the computation after the chain can
 * fault on their pages, while those still in flight stay paged requests
 * (MPIOVERLAP_CHAIN_WAIT=1: the last one waits for them all, as first built, which gives up
 * their overlap; ov_settle_chained in ov_page.c).
 *
 * Why the earlier requests of a running chain stay protected (Natvig and Elster skip the page-table
 * updates): a program may leave the chain after any call (a data-dependent branch), and its next
 * statement may touch the buffer; without protection that is silent corruption. What chaining saves
 * here is the faults and the separate waits of the requests done by the chain's end.
 * A chain whose run breaks off three times is forgotten. */
#define _GNU_SOURCE
#include "ov.h"

#define OV_NCHAINS 8

struct chain {
    void *sites[OV_MAXCHAIN];
    int len;
    int seen;           /* times the run was observed complete */
    int breaks;         /* times it ran and the program left it early */
    int dead;
};

static struct chain chains[OV_NCHAINS];
static int nchains;
static void *run_sites[OV_MAXCHAIN];
static int runlen, run_overflow;
static long long last_exit;
static int fault_since;
static int cur_chain = -1, cur_pos;    /* the chain running, and how many of its calls came */

void ov_chain_note_fault(void) { fault_since = 1; }

static void close_run(void)
{
    if (runlen < 2 || run_overflow)
        return;
    for (int i = 0; i < nchains; i++) {
        struct chain *c = &chains[i];
        if (c->len != runlen)
            continue;
        int same = 1;
        for (int k = 0; k < runlen && same; k++)
            same = c->sites[k] == run_sites[k];
        if (!same)
            continue;
        if (++c->seen == 2)
            ov.st.chains_found++;
        return;
    }
    if (nchains == OV_NCHAINS)
        return;
    struct chain *c = &chains[nchains++];
    for (int k = 0; k < runlen; k++)
        c->sites[k] = run_sites[k];
    c->len = runlen;
    c->seen = 1;
}

static void leave_chain(void)
{
    /* unprotected (MPIOVERLAP_CHAIN_TRUST): they cannot become paged requests now */
    if (ov.chain_trust)
        ov_complete_chained();
    for (int i = 0; i < OV_MAXREQ; i++)
        ov.table[i].chained = 0;        /* they remain ordinary paged requests */
    if (++chains[cur_chain].breaks >= 3)
        chains[cur_chain].dead = 1;
    cur_chain = -1;
}

int ov_chain_enter(void *site)
{
    if (!ov.chain_enabled)
        return 0;
    long long t = ov_now_ns();
    int contiguous = last_exit && t - last_exit < ov.chain_gap_ns && !fault_since;
    if (!contiguous) {
        close_run();
        runlen = 0;
        run_overflow = 0;
    }
    if (runlen < OV_MAXCHAIN)
        run_sites[runlen++] = site;
    else
        run_overflow = 1;

    if (cur_chain >= 0) {
        struct chain *c = &chains[cur_chain];
        if (contiguous && cur_pos < c->len && c->sites[cur_pos] == site) {
            cur_pos++;
            return 1;
        }
        leave_chain();
    }
    if (!contiguous) {
        for (int i = 0; i < nchains; i++)
            if (!chains[i].dead && chains[i].seen >= 2 && chains[i].sites[0] == site) {
                cur_chain = i;
                cur_pos = 1;
                return 1;
            }
    }
    return 0;
}

int ov_chain_is_last(void)
{
    if (cur_chain < 0 || cur_pos < chains[cur_chain].len)
        return 0;
    ov.st.chain_runs++;
    ov.st.chained_reqs += (unsigned long long)chains[cur_chain].len;
    cur_chain = -1;
    return 1;
}

void ov_chain_exit(void)
{
    if (!ov.chain_enabled)
        return;
    last_exit = ov_now_ns();
    fault_since = 0;
}

/* after ov_chain_exit: the same clock reading serves both */
void ov_stamp(struct ov_req *a, struct ov_req *b, void *site)
{
    if (!ov.adapt || (!a && !b))
        return;
    long long t = ov.chain_enabled ? last_exit : ov_now_ns();
    if (a) { a->site = site; a->t_ret = t; }
    if (b) { b->site = site; b->t_ret = t; }
}
