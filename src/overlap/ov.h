/* mpioverlap internals: shared by the MPI wrappers (ov_mpi.c), paging (ov_page.c), the fault
 * handler (ov_signal.c), chaining (ov_chain.c) and the system-call guards (ov_sys.c).
 *
 * Layers, lowest first (a file calls only those below it): ov.c; ov_adapt.c, ov_local.c,
 * ov_status.c; ov_page.c; ov_chain.c; ov_signal.c (entering and leaving the library:
 * ov_signal.h); ov_sys.c; ov_mpi.c.
 *
 * The library assumes one application thread makes MPI calls and touches the buffers (it
 * turns itself into a pass-through otherwise: ov_mpi.c, ov_sys.c). Its state is therefore
 * plain globals; the fault handler interrupts that thread only outside the library (in_lib
 * says when it is inside), so it sees the table consistent. */
#ifndef MPIOVERLAP_OV_H
#define MPIOVERLAP_OV_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* how many deferred requests may be in flight; the next one beyond completes all first */
#define OV_MAXREQ 64
/* longest chain of back-to-back calls remembered (ov_chain.c) */
#define OV_MAXCHAIN 16

enum ov_kind {
    OV_FREE = 0,
    OV_SEND_COPY,   /* small send: data copied to req->tmp, user memory untouched */
    OV_SEND_PROT,   /* large send: user pages read-only until complete */
    OV_RECV         /* receive: user pages inaccessible, data lands in req->tmp */
};

struct ov_req {
    MPI_Request mreq;
    enum ov_kind kind;
    char *ubuf;             /* user bytes [ubuf, ubuf + len) */
    size_t len;
    uintptr_t pg0, pg1;     /* page numbers [pg0, pg1) the request protects (none for SEND_COPY) */
    char *tmp;              /* copy of the send data, or where the receive lands */
    size_t tmpcap;          /* tmp's size (kept across uses of the slot: no malloc per call) */
    int chained;            /* started inside a recognised chain (ov_chain.c) */
    void *site;             /* the call's return address (ov_adapt.c) */
    long long t_ret;        /* when that call returned (ns, CLOCK_MONOTONIC) */
    int prot;               /* its pages were actually protected (not: the last of a chain,
                               waited for before the call returns) */
    /* a receive of a derived datatype lands packed (MPI_PACKED) in tmp and is unpacked into
     * the user's layout at completion: only the type's bytes are written, never its gaps */
    MPI_Datatype dt;        /* a duplicate of the user's type; MPI_DATATYPE_NULL: plain bytes */
    void *mbuf;             /* the buffer and count as the user passed them */
    int mcount;
    unsigned long long sseq;    /* provisional status handed out for it (ov_status.c); 0: none */
};

/* The memory a (buf, count, datatype) triple covers */
struct ov_span {
    size_t len;             /* data bytes (count * type size) */
    ptrdiff_t first;        /* MPI may touch [buf + first, buf + first + span) */
    size_t span;
    int derived;            /* not a contiguous predefined type: packed copies, unpacked receives */
};

struct ov_stats {
    unsigned long long deferred;       /* blocking calls' requests continued in the background */
    unsigned long long send_copied, send_protected, recv_deferred;
    unsigned long long passthrough;    /* intercepted blocking calls left blocking (see ov_mpi.c) */
    unsigned long long faults;         /* our faults: application touched protected memory */
    unsigned long long faults_in_mpi;  /* MPI (or another thread) touched a protected page */
    unsigned long long parks;          /* of those, on another thread with the owner parked */
    unsigned long long faults_foreign; /* faults handed to the application's handler / default */
    unsigned long long chains_found;   /* distinct chains recognised */
    unsigned long long chain_runs;     /* times a recognised chain ran to its end */
    unsigned long long chain_left;     /* chained requests still in flight at the chain's end,
                                          left to paging (MPIOVERLAP_CHAIN_WAIT=0) */
    unsigned long long chained_reqs;   /* requests that were part of those runs */
    unsigned long long site_blocking;  /* calls left blocking: their site's deferrals did not pay */
    unsigned long long done_at_once;   /* complete already when started: no protection needed */
    unsigned long long bytes_copied;   /* send copies, receive copy-ins, copy-outs around pages */
    unsigned long long sys_flushes;    /* system calls that had to complete requests first */
    unsigned long long mprotects;      /* mprotect calls made */
};

struct ov_state {
    int enabled;            /* 0: pure pass-through (MPIOVERLAP_DISABLE, threads, not inited) */
    int report;             /* MPIOVERLAP_REPORT */
    int chain_enabled;      /* MPIOVERLAP_CHAIN (default on) */
    long chain_gap_ns;      /* MPIOVERLAP_CHAIN_GAP_NS: longest pause counted as "no computation" */
    size_t send_min;        /* MPIOVERLAP_SEND_MIN: sends of at most this many bytes stay
                               blocking (default one page: MPI's eager path returns at once) */
    size_t recv_min;        /* MPIOVERLAP_RECV_MIN: receives of at most this many bytes from a
                               rank on this node stay blocking (default one page; ov_mpi.c) */
    size_t recv_min_net;    /* MPIOVERLAP_RECV_MIN_NET: the same for ranks on other nodes
                               (default 0: a network's latency exceeds our costs) */
    int adapt;              /* MPIOVERLAP_ADAPT (default 1, ov_adapt.c) */
    long adapt_ns;          /* MPIOVERLAP_ADAPT_NS */
    int at_once;            /* MPIOVERLAP_ATONCE (default 1): test a request once when it starts */
    int wait_now;           /* the request being started is waited for before the call returns
                               (the last of a chain): no protection */
    int chain_trust;        /* MPIOVERLAP_CHAIN_TRUST: the paper's way, chained requests
                             * unprotected */
    int chain_wait;         /* MPIOVERLAP_CHAIN_WAIT: a chain's last call waits for all of it
                               (always so with chain_trust) */
    int noprot;             /* the request being started is inside a trusted chain: the chain's
                               last call waits for it, nothing protects it meanwhile */
    size_t page;            /* page size */
    int rank;
    int nactive;            /* requests in table[] */
    int user_active;        /* the application's own nonblocking requests outstanding */
    int user_sticky;        /* the application used something we cannot track (persistent, RMA..) */
    int status_any;         /* a provisional status was handed out (ov_status.c): status reads
                               look for one */
    uintptr_t stk_lo, stk_hi;   /* the main thread's stack: never protected */
    long owner_tid;         /* the thread that calls MPI */
    struct ov_req table[OV_MAXREQ];
    struct ov_stats st;
};

/* ov.c */
extern struct ov_state ov;
/* inside the library (wrappers, PMPI calls): a fault now is MPI's or ours, not the application's */
extern __thread int ov_in_lib;
/* this thread is the one that calls MPI (set at MPI_Init) */
extern __thread int ov_is_owner;
/* odd while the owner takes finished requests out of the table and has not yet opened
 * their pages (ov_page.c's complete_sel): pages protected then need not be ours any more */
extern volatile unsigned ov_tab_seq;
long long ov_now_ns(void);
/* len bytes of msg to stderr; async-signal-safe */
void ov_say(const char *msg, size_t len);

/* ov_page.c */
void ov_page_init(void);
/* start a deferred send/receive (buf, len bytes of a contiguous predefined type); 0 when it
 * cannot be deferred (caller passes through); *out gets the slot */
int ov_start_send(const void *buf, int count, MPI_Datatype dt, const struct ov_span *sp, int dest,
                  int tag, MPI_Comm comm, int force_copy, struct ov_req **out);
/* status: MPI_STATUS_IGNORE, or the caller's status, filled now (complete at once) or
 * provisionally (ov_status.c) */
int ov_start_recv(void *buf, int count, MPI_Datatype dt, const struct ov_span *sp, int src, int tag,
                  MPI_Comm comm, MPI_Status *status, struct ov_req **out);
/* complete the request that handed out provisional status seq, if still in flight */
void ov_complete_status(unsigned long long seq);
/* complete every request whose pages meet bytes [a, b); returns how many */
int ov_complete_range(uintptr_t a, uintptr_t b);
int ov_complete_range_read(uintptr_t a, uintptr_t b);   /* only what blocks reading */
int ov_complete_all(void);
int ov_complete_chained(void);
/* the end of a chain not waited for: complete what is done, leave the rest to paging */
int ov_settle_chained(void);
/* complete requests covering page pg (the fault handler) */
int ov_complete_page(uintptr_t pg);
/* is page pg protected by one of our requests */
int ov_page_ours(uintptr_t pg);
/* give page pg the protection the requests in the table want (a page MPI faulted on and
 * the fault handler opened) */
void ov_page_reprotect(uintptr_t pg);

/* ov_signal.c: in ov_signal.h, for the files above paging (leaving the library completes
 * requests) */

/* ov_chain.c */
/* called at each converted call: returns 1 if the call continues a recognised chain */
int ov_chain_enter(void *site);
/* after the request started: 1 if it was the last of a chain (caller waits for the chain) */
int ov_chain_is_last(void);
void ov_chain_exit(void);
void ov_chain_note_fault(void);

/* ov_adapt.c */
int ov_site_blocking(void *pc);
void ov_site_score(void *pc, long long touched_after_ns);
/* stamp the requests just started with their site and return time */
void ov_stamp(struct ov_req *a, struct ov_req *b, void *site);

/* ov_status.c: statuses of receives that complete after the call returned */
unsigned long long ov_status_provisional(MPI_Status *st, int src, int tag);
void ov_status_record(unsigned long long seq, const MPI_Status *real);
void ov_status_fill(MPI_Status *dst, const MPI_Status *real);
/* the provisional status st carries (its sequence number), or 0 */
unsigned long long ov_status_seq(const MPI_Status *st);
/* st, provisional status seq whose receive has completed, made real in *tmp */
const MPI_Status *ov_status_resolve(unsigned long long seq, const MPI_Status *st, MPI_Status *tmp);

/* ov_local.c: which peers share this node (a performance decision only) */
void ov_local_init(void);
int ov_peer_local(MPI_Comm comm, int rank);
void ov_local_forget(MPI_Comm comm);

/* ov_sys.c */
void ov_sys_init(void);
/* complete everything and pass through from now on, saying why on stderr */
void ov_disable(const char *why);

#endif
