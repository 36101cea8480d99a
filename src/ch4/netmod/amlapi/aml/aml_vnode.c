/*
 * The vnode transport (aml_tport.h): the peers on this node, through vnode's
 * shared-memory FIFOs (src/ch4/shm/vnode). A packet is one FIFO record, header then payload;
 * rendezvous data moves by single copy (the receiver's get is process_vm_readv from the
 * sender's buffer, the put variant process_vm_writev), so aml's get- and put-based rendezvous
 * run unchanged on it. Where the node forbids single copy the transport offers neither and
 * every message goes as packets through the FIFOs (aml_xfer.c). The only file of aml that
 * calls vnode.
 */
#include "aml_impl.h"
#include "vnode.h"
#include <stdlib.h>
#include <string.h>

/* A send the FIFO had no room for: it goes, in order, from progress. A small packet is
 * copied into the entry (op NULL) and its send is done at once: a flooding sender then holds
 * about 100 bytes per waiting message, not a send descriptor (a packet-size buffer, whose
 * touched page is 4 KiB of resident memory per waiting message). */
typedef struct vq {
    struct vq *next;
    aml_tport_op_t *op;
    const void *hdr;
    size_t hdr_len, len;
    const void *data;
    char copy[];
} vq_t;

/* packets up to this size (header and data) are copied when they must wait */
#define VQ_COPY_MAX 512

/* A single copy whose other end still copies a chunk (vnode_share_test): its op completes
 * from progress. */
typedef struct vshare {
    struct vshare *next;
    aml_tport_op_t *op;
    vnode_share_t s;
} vshare_t;

/* One local peer: the endpoint of every lane to it. */
typedef struct vpeer {
    int rank, local;
    vq_t *qhead, *qtail;        /* sends waiting for room, in order */
    struct vpeer *qnext;        /* in the list of peers with waiting sends */
    bool queued;
} vpeer_t;

struct aml_vnode {
    vnode_t *v;
    aml_tport_rx_fn_t rx;
    int *rank_of;               /* local index -> rank */
    vpeer_t *peers;             /* by rank (only local peers are used) */
    vpeer_t *waiting;           /* peers with waiting sends */
    vshare_t *shares;           /* single copies waiting for their other end */
    int nexports;               /* ranges exported for shared copies (vnode_help) */
    bool single_copy;
    uint64_t job_hash;
    char addr[24];              /* job hash, nlocal, local, local rank 0's key (vnode_key) */
};

/* This transport's state in aml (aml_tports.h): a load at a fixed offset, as a field was */
static inline struct aml_vnode *vn_of(const aml_t * aml)
{
    return aml->tport_state[AML_TPORT_VNODE];
}

/* The rkey of a buffer: vnode needs no registration; the receiver checks every access against
 * the range the owner advertised. key: the range's export (vnode_export, 0: none), so that the
 * owner's progress copies part of it (vnode_share.c). */
typedef struct vrange {
    uint64_t addr, len, key;
} vrange_t;

/* ---- setup ---------------------------------------------------------------------------- */

/* Configured by the embedder (vnode_job); alone on its node a rank needs no segment. */
static int vn_wanted(const aml_config_t * cfg)
{
    if (!cfg->vnode_job)
        return 0;
    if (cfg->vnode_nlocal < 1 || cfg->vnode_nlocal > cfg->size || cfg->vnode_local < 0 ||
        cfg->vnode_local >= cfg->vnode_nlocal)
        return -1;
    return cfg->vnode_nlocal > 1;
}

static void vn_fini(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    if (!n)
        return;
    vnode_finalize(n->v);
    for (vshare_t * q = n->shares, *next; q; q = next) {
        next = q->next;
        free(q);
    }
    if (n->peers)
        for (int i = 0; i < aml->size; i++)
            for (vq_t * q = n->peers[i].qhead, *next; q; q = next) {
                next = q->next;
                free(q);
            }
    free(n->peers);
    free(n->rank_of);
    free(n);
    aml->tport_state[AML_TPORT_VNODE] = NULL;
}

static int vn_init(aml_t * aml, aml_tport_rx_fn_t rx, size_t * max_hdr)
{
    const aml_config_t *cfg = &aml->cfg;
    vnode_config_t vc;
    struct aml_vnode *n = calloc(1, sizeof(*n));
    int rc;

    if (!n)
        return AML_ERR_NOMEM;
    aml->tport_state[AML_TPORT_VNODE] = n;
    n->rx = rx;
    n->peers = calloc(aml->size, sizeof(vpeer_t));
    n->rank_of = calloc(cfg->vnode_nlocal, sizeof(int));
    if (!n->peers || !n->rank_of)
        return AML_ERR_NOMEM;
    for (int i = 0; i < cfg->vnode_nlocal; i++)
        n->rank_of[i] = -1;
    *max_hdr = aml_vnode_max_hdr();
    vnode_config_default(&vc);
    vc.nlocal = cfg->vnode_nlocal;
    vc.local = cfg->vnode_local;
    if (cfg->vnode_ring_bytes)
        vc.ring_bytes = cfg->vnode_ring_bytes;
    vc.max_pkt = *max_hdr + aml->packet_size;
    vc.shm_free = cfg->vnode_shm_free;
    vc.share_min = cfg->vnode_shared_copy;
    vc.fence_always = cfg->vnode_fence_always;
    rc = vnode_init(&vc, &n->v, cfg->errbuf, cfg->errlen);
    if (rc != VNODE_OK)
        return rc == VNODE_ERR_INVAL ? AML_ERR_INVAL : AML_ERR_SETUP;
    n->job_hash = vnode_fnv1a(cfg->vnode_job, strlen(cfg->vnode_job));
    {
        uint32_t nl = (uint32_t) cfg->vnode_nlocal, lo = (uint32_t) cfg->vnode_local;
        uint64_t key = vnode_key(n->v);
        memcpy(n->addr, &n->job_hash, 8);
        memcpy(n->addr + 8, &nl, 4);
        memcpy(n->addr + 12, &lo, 4);
        memcpy(n->addr + 16, &key, 8);
    }
    return AML_OK;
}

static int vn_address(aml_t * aml, const void **addr, size_t * len)
{
    struct aml_vnode *n = vn_of(aml);
    *addr = n->addr;
    *len = sizeof(n->addr);
    return AML_OK;
}

/* Whether the rank whose vnode address is a shares this rank's segment (1, with its index;
 * 0 not, or it has no vnode; -1 the same segment described differently: the embedder
 * erred). */
static int vn_local(const struct aml_vnode *n, const aml_tport_addr_t * a, int *local)
{
    uint64_t h;
    uint32_t nl, lo;
    if (a->len != sizeof(n->addr))
        return 0;
    memcpy(&h, a->addr, 8);
    memcpy(&nl, (const char *) a->addr + 8, 4);
    memcpy(&lo, (const char *) a->addr + 12, 4);
    if (h != n->job_hash)
        return 0;
    if (nl != (uint32_t) vnode_nlocal(n->v) || lo >= nl)
        return -1;
    *local = (int) lo;
    return 1;
}

/* Local rank 0's key (vnode_key) from its address among addrs; 0 on local rank 0. */
static uint64_t vn_key0(aml_t * aml, const aml_tport_addr_t * addrs)
{
    struct aml_vnode *n = vn_of(aml);
    uint64_t key = 0;
    int local;
    for (int i = 0; i < aml->size; i++)
        if (i != aml->rank && vn_local(n, &addrs[i], &local) == 1 && local == 0) {
            memcpy(&key, (const char *) addrs[i].addr + 16, 8);
            break;
        }
    return key;
}

/* The other ranks on this segment and their local indexes (their FIFOs), from addrs. */
static int vn_map_peers(aml_t * aml, const aml_tport_addr_t * addrs)
{
    struct aml_vnode *n = vn_of(aml);
    int local, me = vnode_local(n->v);
    for (int i = 0; i < aml->size; i++) {
        int r = i == aml->rank ? 0 : vn_local(n, &addrs[i], &local);
        if (r < 0) {
            snprintf(aml->errmsg, sizeof(aml->errmsg), "rank %d shares this rank's node "
                     "segment but describes it differently (node size or index)", i);
            return AML_ERR_SETUP;
        }
        if (r == 0)
            continue;
        if (local == me || n->rank_of[local] != -1) {
            snprintf(aml->errmsg, sizeof(aml->errmsg), "rank %d claims index %d on this "
                     "node, which rank %d has", i, local,
                     local == me ? aml->rank : n->rank_of[local]);
            return AML_ERR_SETUP;
        }
        n->rank_of[local] = i;
        n->peers[i].rank = i;
        n->peers[i].local = local;
    }
    return AML_OK;
}

/* A rank of this node ended without finalizing (vnode_watch: from the watcher thread, as the
 * kernel releases its mutex, before its launcher notices): name it, and end this process
 * too, since its peers may wait for it forever. */
static void vn_died(void *arg, int n, const int *local, const int *pid)
{
    aml_t *aml = arg;
    char who[384] = "";
    size_t at = 0;
    for (int i = 0; i < n && at < sizeof(who) - 40; i++)
        at += (size_t) snprintf(who + at, sizeof(who) - at, "%srank %d (pid %d)",
                                i ? ", " : "", vn_of(aml)->rank_of[local[i]], pid[i]);
    aml_fatal(aml, "%s on %s ended without finalizing: killed, crashed or exited early", who,
              aml->host);
}

/* aml_fatal: this rank's own error message names what went wrong; the rank watching it
 * need not add that it died */
static void vn_ending(aml_t * aml)
{
    vnode_ending(vn_of(aml)->v);
}

/* Maps the segment once every local rank has created its part (the embedder's address
 * exchange was the barrier), with the key in local rank 0's address: after it, whether
 * single copy is allowed is known. Then the ranks on it, and (vnode_watch) the watch of
 * them, which names them. */
static int vn_attach(aml_t * aml, const aml_tport_addr_t * addrs)
{
    struct aml_vnode *n = vn_of(aml);
    int rc = vnode_attach(n->v, vn_key0(aml, addrs));
    if (rc != VNODE_OK) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "%s", vnode_error(n->v));
        return AML_ERR_SETUP;
    }
    n->single_copy = aml->cfg.vnode_single_copy && vnode_single_copy(n->v);
    if ((rc = vn_map_peers(aml, addrs)) != AML_OK)
        return rc;
    if (aml->cfg.vnode_watch) {
        if (vnode_watch(n->v, vn_died, aml) != VNODE_OK)
            return AML_ERR_SETUP;
        aml->fatal_hook = vn_ending;
    }
    return AML_OK;
}

/* The ranks attach found on this segment: not this rank, nor processes of other jobs. */
static bool vn_reaches(aml_t * aml, int peer, const aml_tport_addr_t * addr)
{
    struct aml_vnode *n = vn_of(aml);
    return peer >= 0 && peer < aml->size && n->rank_of[n->peers[peer].local] == peer;
}

/* What the transport offers its peers: get and put only with single copy. */
static unsigned vn_offers(aml_t * aml)
{
    return AML_TPORT_CAP_LOCAL |
        (vn_of(aml)->single_copy ? AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT : 0);
}

/* With single copy its peers' eager limit is vnode_eager_limit, where single copy starts to
 * beat the FIFOs (0: aml's at init); without, they follow aml's (above it their messages go
 * eagerly through the FIFOs: aml_xfer.c). */
static bool vn_eager_limit(aml_t * aml, size_t * limit)
{
    if (!vn_of(aml)->single_copy)
        return false;
    *limit = aml->cfg.vnode_eager_limit ? aml->cfg.vnode_eager_limit : aml->cfg.eager_limit;
    return true;
}

static int vn_connect(aml_t * aml, int peer, const void *addr, aml_tport_ep_t * eps, int neps,
                      unsigned flags)
{
    struct aml_vnode *n = vn_of(aml);
    vpeer_t *vp;
    /* processes of other jobs are outside this job's segment */
    if ((flags & AML_TPORT_CONN_DYNAMIC) || !vn_reaches(aml, peer, NULL))
        return AML_ERR_INVAL;
    vp = &n->peers[peer];
    /* one FIFO per pair: every lane is it (adaptive data needs no order) */
    for (int l = 0; l < neps; l++)
        eps[l] = vp;
    return AML_OK;
}

/* ---- packets -------------------------------------------------------------------------- */

/* Appends q to vp's waiting sends. */
static void vq_append(struct aml_vnode *n, vpeer_t * vp, vq_t * q)
{
    q->next = NULL;
    if (vp->qtail)
        vp->qtail->next = q;
    else
        vp->qhead = q;
    vp->qtail = q;
    if (!vp->queued) {
        vp->queued = true;
        vp->qnext = n->waiting;
        n->waiting = vp;
    }
}

/* Queues a copy of a small packet (hdr_len + len <= VQ_COPY_MAX): its send is done. */
static void vq_copy(aml_t * aml, vpeer_t * vp, const void *hdr, size_t hdr_len,
                    const void *data, size_t len)
{
    vq_t *q = malloc(sizeof(*q) + hdr_len + len);
    if (!q)
        aml_fatal(aml, "out of memory queueing a packet to rank %d", vp->rank);
    memcpy(q->copy, hdr, hdr_len);
    if (len)
        memcpy(q->copy + hdr_len, data, len);
    q->op = NULL;
    q->hdr = q->copy;
    q->hdr_len = hdr_len;
    q->data = q->copy + hdr_len;
    q->len = len;
    vq_append(vn_of(aml), vp, q);
}

/* vnode_send, where anything but "sent" or "no room" is our bug, not a full ring to retry
 * forever */
static int vq_try(aml_t * aml, vpeer_t * vp, const void *hdr, size_t hdr_len, const void *data,
                  size_t len)
{
    int rc = vnode_send(vn_of(aml)->v, vp->local, hdr, hdr_len, data, len);
    if (AML_UNLIKELY(rc != VNODE_OK && rc != VNODE_AGAIN))
        aml_fatal(aml, "%s", vnode_error(vn_of(aml)->v));
    return rc;
}

static int vn_send_inline(aml_t * aml, aml_peer_t * p, const void *pkt, size_t len)
{
    vpeer_t *vp = p->ep;
    if (AML_LIKELY(vp->qhead == NULL) && vq_try(aml, vp, pkt, len, NULL, 0) == VNODE_OK)
        return AML_TPORT_DONE;
    if (len > VQ_COPY_MAX)
        return AML_TPORT_REFUSED;
    vq_copy(aml, vp, pkt, len, NULL, 0);        /* behind the waiting ones */
    return AML_TPORT_DONE;
}

static void *vn_reserve(aml_t * aml, aml_peer_t * p, size_t len)
{
    vpeer_t *vp = p->ep;
    void *at;
    int rc;
    if (AML_UNLIKELY(vp->qhead != NULL) || len > VNODE_SHORT_MAX)
        return NULL;    /* behind the waiting ones, or a long record: send_inline */
    rc = vnode_reserve(vn_of(aml)->v, vp->local, len, &at);
    if (AML_LIKELY(rc == VNODE_OK))
        return at;
    if (AML_UNLIKELY(rc != VNODE_AGAIN))
        aml_fatal(aml, "%s", vnode_error(vn_of(aml)->v));
    return NULL;
}

static void vn_commit(aml_t * aml, aml_peer_t * p)
{
    vpeer_t *vp = p->ep;
    if (AML_UNLIKELY(vnode_commit(vn_of(aml)->v, vp->local) != VNODE_OK))
        aml_fatal(aml, "%s", vnode_error(vn_of(aml)->v));
}

static int vn_send(aml_tport_ep_t ep, aml_tport_op_t * op, size_t hdr_len, const void *data,
                   size_t len, unsigned flags)
{
    aml_t *aml = op->aml;
    struct aml_vnode *n = vn_of(aml);
    vpeer_t *vp = ep;
    vq_t *q;

    if (AML_UNLIKELY(flags & AML_TPORT_SEND_RNDV))
        aml_fatal(aml, "vnode has no transport rendezvous (a send to rank %d asked for it)",
                  vp->rank);
    if (AML_LIKELY(vp->qhead == NULL) && vq_try(aml, vp, op->hdr, hdr_len, data, len) == VNODE_OK)
        return AML_TPORT_DONE;
    /* no room: it waits its turn, and progress drains the FIFOs both ways meanwhile */
    if (hdr_len + len <= VQ_COPY_MAX) {
        vq_copy(aml, vp, op->hdr, hdr_len, data, len);
        return AML_TPORT_DONE;
    }
    q = malloc(sizeof(*q));
    if (!q)
        aml_fatal(aml, "out of memory queueing a packet to rank %d", vp->rank);
    q->op = op;
    q->hdr = op->hdr;
    q->hdr_len = hdr_len;
    q->data = data;
    q->len = len;
    vq_append(n, vp, q);
    return AML_TPORT_PENDING;
}

/* Sends what waited, in order, as far as the FIFOs take it. */
static int drain_waiting(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    vpeer_t **pp = &n->waiting;
    int events = 0;
    while (*pp) {
        vpeer_t *vp = *pp;
        vq_t *q;
        while ((q = vp->qhead) &&
               vq_try(aml, vp, q->hdr, q->hdr_len, q->data, q->len) == VNODE_OK) {
            aml_tport_op_t *op = q->op;
            vp->qhead = q->next;
            if (!vp->qhead)
                vp->qtail = NULL;
            free(q);
            if (op) {
                aml->in_dispatch++;
                op->done(op);
                aml->in_dispatch--;
            }
            events++;
        }
        if (!vp->qhead) {
            vp->queued = false;
            *pp = vp->qnext;
        } else {
            pp = &vp->qnext;
        }
    }
    return events;
}

/* Every packet: the FIFO knows its sender, so the header must name that sender (aml_rx
 * checks). */
static void vn_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data, size_t len)
{
    aml_t *aml = arg;
    struct aml_vnode *n = vn_of(aml);
    n->rx(aml, hdr, hlen, (void *) data, len, 0, n->rank_of[src]);
}

/* A failed single copy or export: which peer, and why. */
static void copy_failed(aml_t * aml, const char *what, int rc)
{
    struct aml_vnode *n = vn_of(aml);
    int lp = vnode_error_peer(n->v);
    int rank = lp >= 0 ? n->rank_of[lp] : -1;
    if (rc == VNODE_ERR_MALFORMED)
        aml_fatal(aml, "malformed single copy from rank %d (%s): %s", rank, what,
                  vnode_error(n->v));
    aml_fatal(aml, "%s with rank %d failed: %s", what, rank, vnode_error(n->v));
}

/* This rank's part of the shared copies of its exports. */
static int help(aml_t * aml)
{
    int rc = vnode_help(vn_of(aml)->v);
    if (AML_UNLIKELY(rc < 0))
        copy_failed(aml, "helping a single copy", rc);
    return rc;
}

/* Completes the single copies whose other end has finished its chunks. */
static int shares_test(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    int events = 0;
    for (vshare_t ** pp = &n->shares, *q; (q = *pp);) {
        if (vnode_share_test(n->v, &q->s) != VNODE_OK) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        aml->in_dispatch++;
        q->op->done(q->op);
        aml->in_dispatch--;
        free(q);
        events++;
    }
    return events;
}

/* Queued sends, this rank's part of shared copies, and finished shared copies: out of line,
 * so that an empty poll (a blocked receive's loop) needs no stack frame here. */
static __attribute__ ((noinline))
int pending_work(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    int events = 0;
    if (n->waiting != NULL)
        events = drain_waiting(aml);
    if (n->nexports != 0)
        events += help(aml);
    if (n->shares != NULL)
        events += shares_test(aml);
    return events;
}

static __attribute__ ((noinline, noreturn))
void poll_failed(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    int lp = vnode_error_peer(n->v);
    aml_fatal(aml, "vnode FIFO from rank %d: %s", lp >= 0 ? n->rank_of[lp] : -1,
              vnode_error(n->v));
}

static int vn_progress(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    int events = 0, got;
    if (AML_UNLIKELY(!aml->connected))
        return 0;       /* the segment is mapped at connect */
    if (AML_UNLIKELY(n->waiting != NULL || n->nexports != 0 || n->shares != NULL))
        events = pending_work(aml);
    got = vnode_poll(n->v, vn_rx, aml);
    if (AML_UNLIKELY(got < 0))
        poll_failed(aml);
    return events + got;
}

/* ---- single copy ---------------------------------------------------------------------- */

static int vn_mem_map(aml_t * aml, void *addr, size_t len, aml_tport_memh_t * memh)
{
    struct aml_vnode *n = vn_of(aml);
    vrange_t *r = malloc(sizeof(*r));
    if (!r)
        return AML_ERR_NOMEM;
    r->addr = (uintptr_t) addr;
    r->len = len;
    /* the peer copying it (a rendezvous pull, or a put into this landing) shares the work
     * with this rank's progress */
    (void) vnode_export(n->v, addr, len, &r->key);
    if (r->key)
        n->nexports++;
    *memh = r;
    return AML_OK;
}

static void vn_mem_unmap(aml_t * aml, aml_tport_memh_t memh)
{
    vrange_t *r = memh;
    if (r->key) {
        struct aml_vnode *n = vn_of(aml);
        vnode_unexport(n->v, r->key);
        n->nexports--;
    }
    free(r);
}

static int vn_rkey_pack(aml_t * aml, aml_tport_memh_t memh, void **buf, size_t * len)
{
    *buf = memh;
    *len = sizeof(vrange_t);
    return AML_OK;
}

static void vn_rkey_buf_release(aml_t * aml, void *buf)
{
    /* the memh itself */
}

static int vn_rkey_unpack(aml_tport_ep_t ep, const void *buf, size_t len,
                          aml_tport_rkey_t * rkey)
{
    vrange_t *r;
    if (len != sizeof(vrange_t))
        return AML_ERR_INVAL;
    r = malloc(sizeof(*r));
    if (!r)
        return AML_ERR_NOMEM;
    memcpy(r, buf, sizeof(*r));
    *rkey = r;
    return AML_OK;
}

static void vn_rkey_destroy(aml_t * aml, aml_tport_rkey_t rkey)
{
    free(rkey);
}

/* Only the advertised range is ever touched (remote addresses are validated). */
static void check_range(aml_tport_op_t * op, uint64_t raddr, const vrange_t * r,
                        const char *what)
{
    if (raddr < r->addr || op->len > r->len || raddr - r->addr > r->len - op->len)
        aml_fatal(op->aml, "single-copy %s of %zu bytes at 0x%llx of rank %d is outside the "
                  "%llu bytes at 0x%llx it advertised", what, op->len,
                  (unsigned long long) raddr, op->peer, (unsigned long long) r->len,
                  (unsigned long long) r->addr);
}

/* A single copy with the peer's range: shared with the peer when it exported the range, and
 * complete later if the peer is still copying its last chunk. */
static int vn_copy(aml_tport_ep_t ep, void *local, uint64_t raddr, aml_tport_rkey_t rkey,
                   aml_tport_op_t * op, int write)
{
    aml_t *aml = op->aml;
    struct aml_vnode *n = vn_of(aml);
    vpeer_t *vp = ep;
    const vrange_t *r = rkey;
    vnode_share_t s;
    check_range(op, raddr, r, write ? "put" : "pull");
    int rc = vnode_copy_shared(n->v, vp->local, r->key, write, local, raddr, op->len, &s);
    if (rc == VNODE_OK)
        return AML_TPORT_DONE;
    if (rc != VNODE_AGAIN)
        copy_failed(aml, write ? "single-copy put" : "single-copy pull", rc);
    vshare_t *q = malloc(sizeof(*q));
    if (!q)
        aml_fatal(aml, "out of memory for a single copy with rank %d", vp->rank);
    q->op = op;
    q->s = s;
    q->next = n->shares;
    n->shares = q;
    return AML_TPORT_PENDING;
}

static int vn_get(aml_tport_ep_t ep, void *dst, uint64_t raddr, aml_tport_rkey_t rkey,
                  aml_tport_op_t * op)
{
    return vn_copy(ep, dst, raddr, rkey, op, 0);
}

static int vn_put(aml_tport_ep_t ep, const void *src, uint64_t raddr, aml_tport_rkey_t rkey,
                  aml_tport_op_t * op)
{
    return vn_copy(ep, (void *) src, raddr, rkey, op, 1);
}

/* ---- sleeping ------------------------------------------------------------------------- */

static int vn_arm(aml_t * aml)
{
    struct aml_vnode *n = vn_of(aml);
    if (n->shares)
        return AML_ERR_STATE;   /* the peer finishes a chunk: microseconds, not worth a sleep */
    return vnode_arm(n->v) == VNODE_OK ? AML_OK : AML_ERR_STATE;
}

static int vn_event_fd(aml_t * aml, int *fd)
{
    *fd = vnode_doorbell_fd(vn_of(aml)->v);
    return *fd >= 0 ? AML_OK : AML_ERR_STATE;
}

/* aml_peer_read's copy: on a node that allows single copy */
static int vn_read(aml_t * aml, aml_peer_t * p, void *dst, uint64_t raddr, size_t len)
{
    struct aml_vnode *n = vn_of(aml);
    if (!n->single_copy)
        return AML_ERR_NOT_SUPPORTED;
    if (len == 0)
        return AML_OK;
    int rc = vnode_read(n->v, n->peers[p - aml->peers].local, dst, raddr, len);
    if (rc != VNODE_OK)
        copy_failed(aml, "single-copy read", rc);
    return AML_OK;
}

/* vnode's counters, for aml_qenv (0 while it is not in use) */
static int64_t vn_stat(aml_t * aml, int q)
{
    struct aml_vnode *n = vn_of(aml);
    vnode_stats_t vs;
    if (!n || !n->v)
        return 0;
    vnode_get_stats(n->v, &vs);
    switch (q) {
        case AML_Q_VNODE_PKTS:
            return (int64_t) vs.pkts_sent;
        case AML_Q_VNODE_RING_FULL:
            return (int64_t) vs.ring_full;
        case AML_Q_VNODE_DOORBELLS:
            return (int64_t) vs.doorbells;
        case AML_Q_VNODE_COPY_BYTES:
            return (int64_t) vs.copy_bytes;
        case AML_Q_VNODE_SINGLE_COPY:
            return n->single_copy;
        case AML_Q_VNODE_PTRACER_ANY:
            return vnode_ptracer_any(n->v);
        case AML_Q_VNODE_SHARED_COPIES:
            return (int64_t) vs.shared_copies;
        case AML_Q_VNODE_HELPED_BYTES:
            return (int64_t) vs.helped_bytes;
        default:
            return 0;
    }
}

static int vn_query(aml_t * aml, int q, int64_t * val)
{
    switch (q) {
        case AML_Q_VNODE_PEERS:
            *val = 0;
            for (int i = 0; i < aml->size; i++)
                *val += aml->peers[i].tport == &aml_vnode_tport;
            return AML_OK;
        case AML_Q_VNODE_PKTS:
        case AML_Q_VNODE_RING_FULL:
        case AML_Q_VNODE_DOORBELLS:
        case AML_Q_VNODE_COPY_BYTES:
        case AML_Q_VNODE_SINGLE_COPY:
        case AML_Q_VNODE_SHARED_COPIES:
        case AML_Q_VNODE_HELPED_BYTES:
        case AML_Q_VNODE_PTRACER_ANY:
            *val = vn_stat(aml, q);
            return AML_OK;
        default:
            return AML_ERR_INVAL;
    }
}

const aml_tport_t aml_vnode_tport = {
    .name = "vnode",
    .slot = AML_TPORT_VNODE,
    /* get and put only with single copy (vn_offers) */
    .caps = AML_TPORT_CAP_LOCAL | AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT,
    .wanted = vn_wanted,
    .init = vn_init,
    .address = vn_address,
    .reaches = vn_reaches,
    .attach = vn_attach,
    .abandon = vn_fini,         /* the segment's creator removes its name */
    .offers = vn_offers,
    .eager_limit = vn_eager_limit,
    .connect = vn_connect,
    .fini = vn_fini,
    .send_inline = vn_send_inline,
    .reserve = vn_reserve,
    .commit = vn_commit,
    .send = vn_send,
    .mem_map = vn_mem_map,
    .mem_unmap = vn_mem_unmap,
    .rkey_pack = vn_rkey_pack,
    .rkey_buf_release = vn_rkey_buf_release,
    .rkey_unpack = vn_rkey_unpack,
    .rkey_destroy = vn_rkey_destroy,
    .get = vn_get,
    .put = vn_put,
    .read = vn_read,
    .progress = vn_progress,
    .arm = vn_arm,
    .event_fd = vn_event_fd,
    .query = vn_query,
};

uint64_t aml_node_memory(void)
{
    return vnode_mem_available();
}
