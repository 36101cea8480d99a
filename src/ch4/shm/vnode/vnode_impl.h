/*
 * vnode internals: the segment's layout, the process-local state and the prototypes the
 * files share. Not part of the API.
 *
 * The segment, every block aligned to a cache line:
 *   vnode_seg_hdr_t                    geometry, magic (stored last), counters
 *   vnode_seg_rank_t   [nlocal]        pid, single-copy probe, sleeping word
 *   summary            [nlocal]        one bitmap per receiver: bit s = "look at ring s->r"
 *   exports            [nlocal][VNODE_EXPORTS]
 *                                      shared single copy: ranges a rank lets a peer copy
 *                                      with its help (vnode_share.c)
 *   ring               [nlocal * (nlocal - 1)]
 *                                      vnode_ring_ctl_t then ring_bytes of 16-byte units
 * The ring from s to r is number r * (nlocal - 1) + (s < r ? s : s - 1): a receiver's
 * inbound rings are contiguous.
 *
 * Shared words are plain integers accessed with the __atomic builtins (the cells are raw
 * memory that memcpy also writes); who writes each word is said where it is declared.
 */
#ifndef VNODE_IMPL_H_INCLUDED
#define VNODE_IMPL_H_INCLUDED

#include "vnode.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#define VNODE_MAGIC_BASE   0x766e6f6465000000ULL        /* "vnode\0\0" then the version */
#define VNODE_VERSION      6
#define VNODE_PAD_HLEN     0xFFFF       /* hlen of a PAD record: skip to the ring's start */
#define VNODE_BATCH        64   /* packets per vnode_poll */
#define VNODE_PEER_BATCH   16   /* packets per peer per vnode_poll, for fairness */
#define VNODE_IDLE_DEMOTE  4096 /* empty polls before a direct peer gives up its slot */
#define VNODE_RING_AUTO_MAX    (512 * 1024)     /* vnode_auto_ring */
#define VNODE_RING_AUTO_MIN    (64 * 1024)
#define VNODE_RING_AUTO_BUDGET (2 * 1024 * 1024)        /* a rank's inbound rings */

/* Monotonic milliseconds: attach deadlines, and the claimer's wait for a helper's chunk. */
static inline double vnode_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#if defined(__x86_64__) || defined(__i386__)
#define VNODE_PAUSE() __builtin_ia32_pause()
#else
#define VNODE_PAUSE() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#endif
#define VNODE_LOAD(p, mo)      __atomic_load_n((p), __ATOMIC_##mo)
#define VNODE_STORE(p, x, mo)  __atomic_store_n((p), (x), __ATOMIC_##mo)
#define VNODE_FENCE()          __atomic_thread_fence(__ATOMIC_SEQ_CST)

typedef struct vnode_seg_hdr {
    uint64_t magic;             /* VNODE_MAGIC_BASE | VNODE_VERSION, creator, last (release) */
    uint64_t nlocal, ring_bytes, max_pkt, seg_bytes;    /* creator */
    _Alignas(64) uint32_t attached;     /* every rank adds 1 in vnode_attach */
    _Alignas(64) uint32_t allowed;      /* every rank adds 1 once it let its peers read it */
    _Alignas(64) uint32_t probed;       /* every rank adds 1 once its probe is published */
} vnode_seg_hdr_t;

typedef struct vnode_seg_rank {
    _Alignas(64) uint64_t pid;  /* the rank, at attach (0: not attached) */
    uint64_t probe_addr;        /* the rank: where its probe word lives */
    uint32_t probe;             /* the rank: 0 not yet, 1 it read its peer's word, 2 it could not */
    pthread_mutex_t alive;      /* the rank holds it (robust, process-shared) from attach to
                                 * vnode_finalize: its end wakes the watcher (vnode_watch.c) */
    _Alignas(64) uint32_t sleeping;     /* VNODE_AWAKE/ARMED (the rank), RUNG (a sender) */
    uint32_t done;              /* the rank: 1 once it called vnode_finalize, 2 when it ends
                                 * on an error it reported (vnode_ending) */
    uint32_t sleepy;            /* the rank: 0 while it never sleeps and can use membarrier,
                                 * so its senders need no fence (vnode_bell.c); else 1 */
    _Alignas(64) uint32_t copying;      /* the rank: nonzero while it makes a single copy of
                                         * its own (vnode_share.c); a hint only */
} vnode_seg_rank_t;

enum { VNODE_AWAKE = 0, VNODE_ARMED = 1, VNODE_RUNG = 2 };

/* One exported range (vnode_share.c). state = gen << 2 | phase; the exporter owns the slot
 * between export and unexport, a claimer (the peer copying) the copy fields once it moved the
 * phase from OPEN to CLAIMED. */
typedef struct vnode_xslot {
    _Alignas(64) uint64_t state;
    uint64_t addr, len;         /* exporter: the range */
    uint64_t raddr;             /* claimer: its side of the copy, in its own address space */
    uint64_t rlen;              /* claimer: bytes to copy, from the range's start */
    uint64_t chunk;             /* claimer: bytes per chunk */
    uint32_t claimer;           /* claimer: its local index */
    uint32_t write;             /* claimer: 1 = it writes into the range, 0 = it reads it */
    uint64_t xoff;              /* claimer: where in the range its copy starts */
    _Alignas(64) uint64_t next; /* both: the next chunk to copy (fetch_add) */
    uint64_t done;              /* both: bytes copied (fetch_add) */
} vnode_xslot_t;

enum { VNODE_X_FREE = 0, VNODE_X_OPEN = 1, VNODE_X_CLAIMED = 2, VNODE_X_BUSY = 3 };
#define VNODE_EXPORTS 64        /* exports per rank: a 64-bit mask of the used ones */

typedef struct vnode_ring_ctl {
    _Alignas(64) uint64_t tail; /* receiver: units before this index are free (lazily) */
    _Alignas(64) uint32_t direct;       /* receiver: 1 = it polls this ring, no summary bit */
    _Alignas(64) uint32_t tx_wait;      /* sender: 1 = it waits for room (it clears it too) */
} vnode_ring_ctl_t;

/* A record starts at a unit with a 32-bit word, stored last (release): bits 0-15 the mark
 * (VNODE_MARK of the record's index), bits 16-23 a short record's hlen + len (its bytes follow
 * the word) and bits 24-31 its hlen; 0 in bits 16-31: a long record, this header, then hdr
 * and data from byte 16. Both are padded to whole units. */
typedef struct vnode_long_hdr {
    uint32_t word;              /* mark only */
    uint32_t len;               /* hlen + len; PAD: the bytes it covers after this header */
    uint16_t hlen;              /* VNODE_PAD_HLEN: PAD */
    uint16_t src;               /* sender's local index */
    uint32_t spare;             /* not written */
} vnode_long_hdr_t;

/* Never 0 (an empty unit), and the low 15 bits of the index: a record out of place is caught */
#define VNODE_MARK(idx) ((uint32_t) (0x8000u | ((idx) & 0x7fff)))
#define VNODE_SHORT_WORD(idx, body, hlen) \
    (VNODE_MARK(idx) | (uint32_t) (body) << 16 | (uint32_t) (hlen) << 24)

_Static_assert(sizeof(vnode_long_hdr_t) == VNODE_LONG_HDR, "a long header is 16 bytes");
_Static_assert(VNODE_SHORT_MAX <= 255 && (VNODE_SHORT_HDR + VNODE_SHORT_MAX) % VNODE_UNIT == 0,
               "a short record's length fits its 8 bits and whole units");
_Static_assert(sizeof(vnode_seg_rank_t) == 3 * VNODE_CELL, "rank block is three lines");
_Static_assert(sizeof(vnode_ring_ctl_t) == 3 * VNODE_CELL, "ring control is three lines");
_Static_assert(sizeof(vnode_xslot_t) == 2 * VNODE_CELL, "export slot is two lines");

typedef struct vnode_layout {
    size_t ring_bytes;          /* effective: a power of two, >= 4 largest records */
    uint64_t nunits;
    uint32_t max_units;         /* units of the largest record */
    size_t off_ranks, off_summary, summary_stride, off_exports, off_rings, ring_stride, total;
} vnode_layout_t;

/* Sender's private view of one ring (process memory, never shared). */
typedef struct vnode_tx {
    char *units;
    vnode_ring_ctl_t *ctl;
    uint64_t head;              /* index of the next unit to write */
    uint64_t tail;              /* the receiver's tail, as last read */
    uint32_t want;              /* units the last VNODE_AGAIN needed */
    bool waiting;               /* tx_wait is set */
    bool touched;               /* the ring's lines were written once (vnode_send) */
    uint32_t rsv_word, rsv_k;   /* vnode_reserve: the record's word and units, */
    uint64_t rsv_pos;           /* and its unit, for vnode_commit */
    const uint32_t *sleepy;     /* the receiver's sleepy word when a 0 there lets a packet go
                                 * without a fence (vnode_bell.c), else NULL */
} vnode_tx_t;

/* Receiver's private view of one ring. */
typedef struct vnode_rx {
    char *units;
    vnode_ring_ctl_t *ctl;
    uint64_t tail;              /* index of the next unit to read */
    uint64_t pub;               /* the tail as last published */
    uint32_t idle;              /* polls since this direct peer last had a packet */
    int slot;                   /* index in direct[], or -1 */
} vnode_rx_t;

struct vnode {
    vnode_config_t cfg;
    unsigned uid;
    int local, nlocal;
    vnode_layout_t L;
    uint64_t mask;              /* nunits - 1 */

    char *seg;                  /* the mapping, or NULL */
    size_t seg_bytes;
    int seg_fd;                 /* the segment's memfd until every rank that maps it has it */
    int listen_fd;              /* local rank 0 until vnode_attach: where ranks fetch it */
    uint64_t key;               /* local rank 0: the random name of listen_fd (vnode_key) */
    bool attach_tried, attached;
    int single_copy;
    bool ptracer_any;           /* Yama: no common ancestor, any process of the uid may read us */

    int *bells;                 /* [nlocal] every local rank's doorbell (an eventfd) */
    bool armed;                 /* this rank stored VNODE_ARMED and has not polled since */
    bool asym;                  /* registered for membarrier(GLOBAL_EXPEDITED) (vnode_bell.c) */
    bool sleepy;                /* our sleepy word is 1 */

    vnode_tx_t *tx;             /* [nlocal], by destination */
    vnode_rx_t *rx;             /* [nlocal], by source */
    uint64_t *summary;          /* this rank's bitmap in the segment */
    int nwords;                 /* words in a summary */
    bool all_direct;            /* nlocal - 1 <= cfg.direct: no summary at all */
    int ndirect, direct[VNODE_MAX_DIRECT];
    unsigned rr_direct;         /* fairness: where the next poll starts */
    int rr_summary;
    int nwait;                  /* rings with tx.waiting set */

    uint64_t xused;             /* exports: the slots in use (bit i = slot i) */
    uint32_t xgen[VNODE_EXPORTS];       /* exports: each slot's generation */
    uint64_t xaddr[VNODE_EXPORTS], xlen[VNODE_EXPORTS]; /* and its range: the slot's copy is
                                                         * for claimers, any local rank can
                                                         * write it */

    vnode_stats_t stats;
    char err[512];
    int err_peer;               /* local index the last error concerns, or -1 */
    bool holds_alive;           /* this rank locked its alive mutex (attach) */
    struct vnode_watcher *watcher;      /* vnode_watch's thread, or NULL */
};

/* vnode_fail.c: records the failure's message in v (err_peer -1) and returns rc */
int vnode_fail(vnode_t * v, int rc, const char *fmt, ...) __attribute__ ((format(printf, 3, 4)));

/* vnode_seg.c */
int vnode_layout(const vnode_config_t * cfg, vnode_layout_t * L, char *err, size_t errlen);

static inline vnode_seg_hdr_t *vnode_hdr(const vnode_t * v)
{
    return (vnode_seg_hdr_t *) v->seg;
}

static inline vnode_seg_rank_t *vnode_rank(const vnode_t * v, int r)
{
    return (vnode_seg_rank_t *) (v->seg + v->L.off_ranks) + r;
}

static inline vnode_ring_ctl_t *vnode_ring(const vnode_t * v, int src, int dst)
{
    size_t i = (size_t) dst * (v->nlocal - 1) + (src < dst ? src : src - 1);
    return (vnode_ring_ctl_t *) (v->seg + v->L.off_rings + i * v->L.ring_stride);
}

static inline uint64_t *vnode_summary_of(const vnode_t * v, int r)
{
    return (uint64_t *) (v->seg + v->L.off_summary + (size_t) r * v->L.summary_stride);
}

static inline vnode_xslot_t *vnode_xslot(const vnode_t * v, int r, unsigned i)
{
    return (vnode_xslot_t *) (v->seg + v->L.off_exports) + (size_t) r * VNODE_EXPORTS + i;
}

/* vnode_hand.c: local rank 0's listening socket and every rank's doorbell (vnode_init);
 * rank 0 serving the segment and the doorbells, the others fetching them (vnode_attach) */
int vnode_hand_open(vnode_t * v);
int vnode_hand_serve(vnode_t * v, double deadline);
int vnode_hand_fetch(vnode_t * v, uint64_t key, double deadline);

/* vnode_ring.c */
int vnode_ring_setup(vnode_t * v);      /* after mapping, before publishing the attach */

/* vnode_bell.c */
void vnode_bell_close(vnode_t * v);
void vnode_bell_ring(vnode_t * v, int peer);
void vnode_bell_drain(vnode_t * v);
/* vnode_arm's first half: ARMED stored and fenced, the look for work is the caller's; 0 when
 * it must poll once more instead */
int vnode_arm_bell(vnode_t * v);
void vnode_disarm(vnode_t * v);         /* ends a sleep: AWAKE, drain the doorbell if rung */
void vnode_fence_setup(vnode_t * v);    /* vnode_ring_setup: membarrier, our sleepy word */

/* vnode_watch.c */
int vnode_alive_hold(vnode_t * v);      /* at attach, before publishing it */
bool vnode_watch_end(vnode_t * v);      /* at finalize: true when the segment must stay mapped */

/* vnode_cma.c */
int vnode_cma_xfer(vnode_t * v, int peer, const struct iovec *iov, int iovcnt, uint64_t raddr,
                   size_t len, bool write);
void vnode_cma_publish(vnode_t * v);    /* at attach: publish the probe word */
void vnode_cma_allow(vnode_t * v);      /* after all attached: Yama's scope 1 relaxed for them */
pid_t vnode_common_ancestor(const uint64_t * pids, int n);      /* vnode_cma_allow's ptracer */
bool vnode_cma_probe(vnode_t * v);      /* after all attached: can we read the next rank? */

#endif /* VNODE_IMPL_H_INCLUDED */
