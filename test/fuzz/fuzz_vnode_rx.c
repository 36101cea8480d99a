/*
 * libFuzzer target: what a rank reads out of vnode's shared segment that another rank of its
 * node wrote, and aml_vnode.c, which turns a ring record into an aml packet and runs single
 * copies against the peer's export slots. The victim is an aml_t (vnode transport, and a sink
 * in place of aml_ucx.c as in fuzz_aml_rx.c) on a node whose other ranks are vnode_t of this
 * process. The input, as those peers, writes the segment -- ring records, ring control words,
 * the victim's summary bitmap, the rank blocks, export slots -- and the victim polls
 * (aml_progress: vn_progress, vnode_poll, vn_rx, aml_rx; vnode_help,
 * vnode_copy_shared, vnode_share_test), sends, sleeps and copies.
 *
 * Every input starts from the same job: each node (2, 3 or 10 ranks; the victim first or last;
 * fences or not) is attached once, at start, by vnode's own code (vnode_init, the hand-off,
 * vnode_attach; each rank from a thread), and its segment and ranks are copied then and put
 * back before every input (a hand-off costs milliseconds). aml_vnode.c's calls of vnode_init,
 * vnode_attach and vnode_finalize are wrapped at link time (Makefile) to give it that job's
 * victim. Single copy goes through a stand-in for process_vm_readv/process_vm_writev (below):
 * a peer's address space is an arena of this process at PEER_VA(local), and an address
 * outside it fails with EFAULT, as the kernel's would; the attach probe uses the real calls.
 *
 * An input: 1 byte of configuration, then operations, each 1 byte (bits 0-2 the operation,
 * bits 3-7 its argument, mostly which peer) and its fields, little-endian, cut at the end:
 *   config   bits 0-1: 2, 3, 3 or 10 local ranks (10: more than the 8 polled directly, so
 *            the summary bitmap is used); bit 2: the victim is the last local rank, else
 *            local rank 0 (which made the segment); bit 3: rendezvous by put; bit 4: a fence
 *            after every packet (no membarrier); bit 5: interrupt mode
 *   0 SEND   u16 hlen, u16 len, the bytes: the peer sends a packet as vnode_send does
 *   1 REC    u8 flags, u32 word, u32 len, u16 hlen, u16 src, u16 n, n bytes: a record written
 *            by hand at the peer's next unit: flags bit 0: the word gets the right mark; bit
 *            1: the long header's len, hlen, src are written (and the bytes go after it);
 *            bits 2-3: the peer's head then moves by the record's units as the receiver
 *            reads them (0), not at all (1), flags >> 4 units (2), to the ring's end (3)
 *   2 POKE   arg bit 0: deferred; u8 region, u16 offset, u8 n, n bytes written by the peer
 *            into a region (below); deferred ones are written, one at each such moment, while
 *            the victim is inside a header handler or a single copy's system call (a peer's
 *            write racing with the victim's reads)
 *   3 POLL   aml_progress, arg % 8 + 1 times
 *   4 VSEND  u24 len, u8 uhdr_len, its bytes: the victim sends the peer a message (a large one
 *            by rendezvous: its buffer is exported, and vnode_help reads the victim's slot)
 *   5 DRAIN  the peer reads what the victim sent it: a malformed record there is the victim's
 *            bug (unless the peer wrote that ring's control words)
 *   6 MISC   arg & 3: 0 aml_arm; 1 accept, 2 reject the oldest deferred message; 3 u64 raddr,
 *            u16 len: aml_peer_read of the peer arg >> 2
 *   7 XKEY   arg bit 0: put; u64 addr, u64 len (the key's range), u64 addr, u64 len, u64 key
 *            (vnode's part of it), u64 raddr, u16 len: the victim opens a direct-access key the
 *            peer handed out and gets or puts
 * Regions: 0 the units of the ring peer -> victim, from the peer's next unit on (wrapping at
 * the ring's end); 1 that ring's control block; 2 the control block of the ring victim ->
 * peer; 3 the victim's summary bitmap; 4 the rank blocks (pid, probe words, sleeping, done,
 * sleepy: not the robust mutex, which the kernel's robust-futex list of its holder points
 * to); 5 the victim's export slots; 6 the peer's export slots.
 *
 * A malformed record, slot or packet must end in aml's fatal path (a process would end there):
 * the fatal callback jumps back here, and the victim is torn down. Bugs: anything
 * AddressSanitizer or UndefinedBehaviorSanitizer sees, a fatal message that names no rank
 * ("rank -1") where the peer is known, a fatal error outside an operation, and a record of the
 * victim that its peer cannot read.
 */
#define _GNU_SOURCE
#include "aml_impl.h"
#include "vnode_impl.h"
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define NLOCAL_MAX 10
#define NHANDLERS 4
#define NDEFER 16
#define NBUFS 32                /* victim's send and direct-access buffers per input */
#define NKEYS 8
#define NPOKES 8                /* deferred pokes waiting */
#define PACKET_SIZE 512         /* aml's smallest: records up to 1608 bytes */
#define RING_BYTES 8192         /* 512 units: wrap-around comes soon */
#define SHARE_MIN 4096          /* vnode_copy_shared shares copies from this size */
#define SINGLE_COPY_MIN 2048    /* messages above it by single copy */
#define VSEND_MAX (128 * 1024)
#define ARENA (256 * 1024)
#define PEER_VA(l) ((uint64_t) ((l) + 1) << 32)

/* ---- the job -------------------------------------------------------------------------- */

static aml_t *vic;                      /* the victim: rank == local index */
static vnode_t *pv[NLOCAL_MAX];         /* its peers (NULL at the victim's index) */
static int nloc, V;                     /* local ranks, the victim's index */
static bool tampered[NLOCAL_MAX];       /* the peer wrote its inbound ring's control words */
static bool fuzzing;                    /* single copy goes to the arenas */
static char arena[NLOCAL_MAX][ARENA];   /* each peer's memory, as single copy sees it */
static void *bufs[NBUFS];
static int nbufs;
static aml_xkey_t *keys[NKEYS];
static int nkeys;
static aml_handle_t deferred[NDEFER];
static size_t deferred_len[NDEFER];
static int ndeferred;
static char land[1 << 16];

static jmp_buf on_fatal;
static int in_input;

static void fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "fatal: %s\n", msg);
    /* the peer is known except when an export slot names a claimer that is no local rank */
    if (strstr(msg, "rank -1") && !strstr(msg, "claims to be local rank")) {
        fprintf(stderr, "a fatal error that names no rank: %s\n", msg);
        abort();
    }
    if (in_input)
        longjmp(on_fatal, 1);
    fprintf(stderr, "fatal error outside an operation: %s\n", msg);
    abort();
}

/* ---- the input ------------------------------------------------------------------------ */

static const uint8_t *in;
static size_t left;

static uint64_t get(int bytes)
{
    uint64_t x = 0;
    for (int i = 0; i < bytes && left; i++, left--)
        x |= (uint64_t) * in++ << (8 * i);
    return x;
}

/* n bytes of the input (fewer at its end) */
static size_t take(void *dst, size_t n)
{
    if (n > left)
        n = left;
    memcpy(dst, in, n);
    in += n;
    left -= n;
    return n;
}

static int peer_of(unsigned arg)
{
    int l = (int) (arg % (unsigned) (nloc - 1));
    return l >= V ? l + 1 : l;
}

/* ---- the regions a peer writes -------------------------------------------------------- */

enum { R_UNITS, R_IN_CTL, R_OUT_CTL, R_SUMMARY, R_RANKS, R_XSLOT_VICTIM, R_XSLOT_PEER, NREGIONS };

typedef struct poke {
    int region, peer;
    unsigned off, n;
    unsigned char b[64];
} poke_t;

static poke_t pokes[NPOKES];
static int npokes;

/* byte i of a rank block that a peer may write: pid, probe_addr, probe; sleeping, done, sleepy */
static size_t rank_byte(unsigned i)
{
    i %= 20 + 12;
    return i < 20 ? i : 64 + (i - 20);
}

static void poke(const poke_t * k)
{
    vnode_t *p = pv[k->peer];
    for (unsigned i = 0; i < k->n; i++) {
        unsigned o = k->off + i;
        char *at;
        switch (k->region) {
            case R_UNITS:{
                    vnode_tx_t *t = &p->tx[V];
                    at = t->units + ((t->head & p->mask) * VNODE_UNIT + o) % p->L.ring_bytes;
                    break;
                }
            case R_IN_CTL:
                at = (char *) vnode_ring(p, k->peer, V) + o % sizeof(vnode_ring_ctl_t);
                break;
            case R_OUT_CTL:
                at = (char *) vnode_ring(p, V, k->peer) + o % sizeof(vnode_ring_ctl_t);
                tampered[k->peer] = true;
                break;
            case R_SUMMARY:
                at = (char *) vnode_summary_of(p, V) + o % p->L.summary_stride;
                break;
            case R_RANKS:{
                    unsigned r = (o / 32) % (unsigned) nloc;
                    at = (char *) vnode_rank(p, (int) r) + rank_byte(o);
                    break;
                }
            case R_XSLOT_VICTIM:
                at = (char *) vnode_xslot(p, V, 0) + o % (VNODE_EXPORTS * sizeof(vnode_xslot_t));
                break;
            default:
                at = (char *) vnode_xslot(p, k->peer, 0) +
                    o % (VNODE_EXPORTS * sizeof(vnode_xslot_t));
                break;
        }
        __atomic_store_n((unsigned char *) at, k->b[i], __ATOMIC_RELEASE);
    }
}

/* the oldest of the peers' writes that race with what the victim is doing now (one per such
 * moment: a header handler's call, a single copy's system call) */
static void apply_deferred(void)
{
    if (!npokes)
        return;
    poke(&pokes[0]);
    memmove(pokes, pokes + 1, --npokes * sizeof(pokes[0]));
}

/* ---- single copy: the stand-in for process_vm_readv / process_vm_writev ------------------ */

/* where a peer's address is in its arena, and the bytes from there to the arena's end */
static char *arena_at(uint64_t a, size_t * room)
{
    uint64_t l = (a >> 32) - 1, off = a & 0xffffffffULL;
    if ((a >> 32) == 0 || l >= (uint64_t) nloc || (int) l == V || off >= ARENA)
        return NULL;
    *room = ARENA - off;
    return arena[l] + off;
}

/* The kernel's semantics: the bytes moved up to the first that cannot be, or -1 and EFAULT
 * when that is the first. The local side is this process's memory, which AddressSanitizer
 * checks (memcpy). */
static ssize_t peer_copy(const struct iovec *l, unsigned long ln, const struct iovec *r,
                         unsigned long rn, bool write)
{
    size_t done = 0, loff = 0;
    unsigned long li = 0;
    apply_deferred();
    for (unsigned long ri = 0; ri < rn; ri++) {
        uint64_t ra = (uint64_t) (uintptr_t) r[ri].iov_base;
        size_t rl = r[ri].iov_len;
        while (rl) {
            size_t room, n;
            char *pa = arena_at(ra, &room);
            while (li < ln && loff == l[li].iov_len) {
                li++;
                loff = 0;
            }
            if (li == ln)
                return (ssize_t) done;
            if (!pa) {
                if (done)
                    return (ssize_t) done;
                errno = EFAULT;
                return -1;
            }
            n = rl < room ? rl : room;
            if (n > l[li].iov_len - loff)
                n = l[li].iov_len - loff;
            if (write)
                memcpy(pa, (char *) l[li].iov_base + loff, n);
            else
                memcpy((char *) l[li].iov_base + loff, pa, n);
            loff += n;
            ra += n;
            rl -= n;
            done += n;
        }
    }
    return (ssize_t) done;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long ln,
                         const struct iovec *r, unsigned long rn, unsigned long flags)
{
    if (!fuzzing)
        return syscall(SYS_process_vm_readv, pid, l, ln, r, rn, flags);
    return peer_copy(l, ln, r, rn, false);
}

ssize_t process_vm_writev(pid_t pid, const struct iovec *l, unsigned long ln,
                          const struct iovec *r, unsigned long rn, unsigned long flags)
{
    if (!fuzzing)
        return syscall(SYS_process_vm_writev, pid, l, ln, r, rn, flags);
    return peer_copy(l, ln, r, rn, true);
}


/* ---- the victim's receiver ---------------------------------------------------------------- */

static void unpack_drop(void *arg, size_t offset, const void *data, size_t len)
{
    /* touch every byte handed over: a piece outside its packet shows */
    volatile unsigned char x = 0;
    for (size_t i = 0; i < len; i++)
        x ^= ((const unsigned char *) data)[i];
    (void) x;
}

static void landing(const aml_msg_info_t * info, aml_recv_t * recv)
{
    if (info->msg_len <= sizeof(land)) {
        recv->buf = land;
    } else {
        /* as MPI's receive into a datatype: only as many bytes as the receive holds */
        recv->unpack = unpack_drop;
        recv->partial = 1;
        recv->want = sizeof(land);
    }
}

static int handler(aml_t * a, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    /* the record this packet came in may change under the victim now */
    apply_deferred();
    if (info->data || !info->msg_len)
        return 0;
    if (info->msg != AML_HANDLE_NONE && (info->msg_len & 1) && ndeferred < NDEFER) {
        recv->defer = 1;
        deferred_len[ndeferred] = info->msg_len;
        deferred[ndeferred++] = info->msg;
        return 0;
    }
    landing(info, recv);
    return 0;
}

/* ---- the jobs ------------------------------------------------------------------------- */

/* A size no allocation can satisfy gets NULL, as from malloc, not a report: aml must then stop
 * in its fatal path. No leak checks: a job torn down in its fatal path leaves what it held. */
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:detect_leaks=0";
}

/* One node's ranks, attached by vnode's own code (vnode_init, the hand-off, vnode_attach), each
 * from a thread as from its process, then kept: every input starts from the copy taken then
 * (the segment, and each vnode_t with its rings' private state). One per node size, victim's
 * index and fence setting, made at start (LLVMFuzzerInitialize). */
typedef struct job {
    int nloc, victim, fence;
    vnode_t *v[NLOCAL_MAX];             /* every local rank, the victim's included */
    vnode_t snap[NLOCAL_MAX];
    vnode_tx_t *snap_tx[NLOCAL_MAX];
    vnode_rx_t *snap_rx[NLOCAL_MAX];
    char *snap_seg;
    size_t seg_bytes;
} job_t;

static job_t jobs[3][2][2];
static job_t *cur;                      /* the job aml's vnode transport gets (vnode_init) */

/* vnode.h's functions as vnode's own files define them */
int __real_vnode_init(const vnode_config_t * cfg, vnode_t ** out, char *err, size_t errlen);
int __real_vnode_attach(vnode_t * v, uint64_t key);
void __real_vnode_finalize(vnode_t * v);

/* What aml_vnode.c calls (the link wraps its calls, -Wl,--wrap): the current job's victim,
 * attached already, as vn_init and vn_attach would have made it; vn_fini leaves it to
 * the next input. */
int __wrap_vnode_init(const vnode_config_t * cfg, vnode_t ** out, char *err, size_t errlen)
{
    vnode_t *v = cur ? cur->v[cur->victim] : NULL;
    if (!v || cfg->nlocal != v->cfg.nlocal || cfg->local != v->cfg.local ||
        cfg->max_pkt != v->cfg.max_pkt || cfg->ring_bytes != v->cfg.ring_bytes ||
        cfg->share_min != v->cfg.share_min || cfg->fence_always != v->cfg.fence_always ||
        cfg->direct != v->cfg.direct) {
        fprintf(stderr, "aml configures vnode unlike the job made for it\n");
        abort();
    }
    *out = v;
    return VNODE_OK;
}

int __wrap_vnode_attach(vnode_t * v, uint64_t key)
{
    return cur && v == cur->v[cur->victim] ? VNODE_OK : __real_vnode_attach(v, key);
}

void __wrap_vnode_finalize(vnode_t * v)
{
    if (!cur || v != cur->v[cur->victim])
        __real_vnode_finalize(v);
}

static void rank_config(vnode_config_t * vc, int nlocal, int local, int fence_always)
{
    /* vn_init's, with aml's settings of setup() */
    vnode_config_default(vc);
    vc->nlocal = nlocal;
    vc->local = local;
    vc->ring_bytes = RING_BYTES;
    vc->max_pkt = aml_vnode_max_hdr() + PACKET_SIZE;
    vc->shm_free = (uint64_t) 1 << 32;
    vc->share_min = SHARE_MIN;
    vc->fence_always = fence_always;
}

typedef struct attach {
    pthread_t t;
    vnode_t *v;
    int rc;
    uint64_t key;
} attach_t;

static void *attach_main(void *arg)
{
    attach_t *a = arg;
    a->rc = __real_vnode_attach(a->v, a->key);
    return NULL;
}

/* Attaches the ranks v[0..n) (v[0] made the segment), each from a thread: their results in rc[] */
static void attach_all(vnode_t ** v, int n, int *rc)
{
    attach_t at[NLOCAL_MAX];
    for (int l = 0; l < n; l++) {
        at[l].v = v[l];
        at[l].key = vnode_key(v[0]);
        if (pthread_create(&at[l].t, NULL, attach_main, &at[l]))
            abort();
    }
    for (int l = 0; l < n; l++) {
        pthread_join(at[l].t, NULL);
        rc[l] = at[l].rc;
    }
}

static job_t *job_get(int size_ix, int last, int fence)
{
    static const int sizes[3] = { 2, 3, 10 };
    job_t *j = &jobs[size_ix][last][fence];
    vnode_config_t vc;
    int rc[NLOCAL_MAX];
    if (j->nloc)
        return j;
    j->nloc = sizes[size_ix];
    j->victim = last ? j->nloc - 1 : 0;
    j->fence = fence;
    for (int l = 0; l < j->nloc; l++) {
        rank_config(&vc, j->nloc, l, fence);
        if (__real_vnode_init(&vc, &j->v[l], NULL, 0) != VNODE_OK)
            abort();
    }
    attach_all(j->v, j->nloc, rc);
    for (int l = 0; l < j->nloc; l++)
        if (rc[l] != VNODE_OK || !vnode_single_copy(j->v[l])) {
            fprintf(stderr, "local rank %d of the job did not attach with single copy: %s\n",
                    l, vnode_error(j->v[l]));
            abort();
        }
    j->seg_bytes = j->v[0]->seg_bytes;
    if (!(j->snap_seg = malloc(j->seg_bytes)))
        abort();
    memcpy(j->snap_seg, j->v[0]->seg, j->seg_bytes);
    for (int l = 0; l < j->nloc; l++) {
        j->snap[l] = *j->v[l];
        j->snap_tx[l] = malloc(j->nloc * sizeof(vnode_tx_t));
        j->snap_rx[l] = malloc(j->nloc * sizeof(vnode_rx_t));
        if (!j->snap_tx[l] || !j->snap_rx[l])
            abort();
        memcpy(j->snap_tx[l], j->v[l]->tx, j->nloc * sizeof(vnode_tx_t));
        memcpy(j->snap_rx[l], j->v[l]->rx, j->nloc * sizeof(vnode_rx_t));
    }
    return j;
}

/* The job as it was when made: the segment (the robust mutexes in it as their attaching
 * threads left them), every rank's state, no doorbell rung. */
static void job_restore(job_t * j)
{
    memcpy(j->v[0]->seg, j->snap_seg, j->seg_bytes);
    for (int l = 0; l < j->nloc; l++) {
        uint64_t x;
        *j->v[l] = j->snap[l];
        memcpy(j->v[l]->tx, j->snap_tx[l], j->nloc * sizeof(vnode_tx_t));
        memcpy(j->v[l]->rx, j->snap_rx[l], j->nloc * sizeof(vnode_rx_t));
        while (read(j->v[l]->bells[l], &x, sizeof(x)) > 0);
    }
}

/* The victim of configuration byte c: an aml_t on the restored job. */
static void setup(unsigned c)
{
    aml_config_t cfg;
    const void *a;
    size_t alen;
    char *table;
    uint32_t lens[4];

    cur = job_get((c & 3) == 3 ? 2 : (c & 3) == 0 ? 0 : 1, (c >> 2) & 1, (c >> 4) & 1);
    job_restore(cur);
    nloc = cur->nloc;
    V = cur->victim;
    for (int l = 0; l < NLOCAL_MAX; l++)
        pv[l] = l < nloc && l != V ? cur->v[l] : NULL;
    memset(tampered, 0, sizeof(tampered));
    aml_config_default(&cfg);
    cfg.rank = V;
    cfg.size = nloc;
    cfg.packet_size = PACKET_SIZE;
    cfg.fatal = fatal_cb;
    cfg.keepalive_ms = 0;
    cfg.dyn_peers_max = 0;
    cfg.vnode_job = "fuzz";
    cfg.vnode_nlocal = nloc;
    cfg.vnode_local = V;
    cfg.vnode_ring_bytes = RING_BYTES;
    cfg.vnode_eager_limit = SINGLE_COPY_MIN;
    cfg.vnode_shared_copy = SHARE_MIN;
    cfg.vnode_shm_free = (uint64_t) 1 << 32;
    cfg.rndv_ucx = 0;
    cfg.rndv_put = (c >> 3) & 1;
    cfg.vnode_fence_always = cur->fence;
    cfg.progress_mode = (c >> 5) & 1 ? AML_PROGRESS_INTERRUPT : AML_PROGRESS_POLLING;
    if (aml_init(&cfg, &vic) != AML_OK || aml_local_address(vic, &a, &alen) != AML_OK)
        abort();
    /* every rank's address: the victim's, with its vnode part (job hash, nlocal, local index,
     * local rank 0's key) made each rank's; aml_context.c's layout: aml_addr_hdr_t, the
     * lengths of the UCX, vnode, network and host parts, then the parts */
    memcpy(lens, (const char *) a + sizeof(aml_addr_hdr_t), sizeof(lens));
    size_t voff = sizeof(aml_addr_hdr_t) + sizeof(lens) + lens[0];
    if (lens[1] != 24 || voff + 24 > alen || !(table = malloc((size_t) nloc * alen)))
        abort();
    for (int r = 0; r < nloc; r++) {
        uint32_t lo = (uint32_t) r;
        memcpy(table + (size_t) r * alen, a, alen);
        memcpy(table + (size_t) r * alen + voff + 12, &lo, 4);
    }
    if (aml_connect(vic, table, alen) != AML_OK) {
        fprintf(stderr, "the victim did not connect: %s\n", aml_error(vic));
        abort();
    }
    free(table);
    for (unsigned h = 0; h < NHANDLERS; h++)
        if (aml_register_handler(vic, h, handler, NULL) != AML_OK)
            abort();
}

static void teardown(void)
{
    if (vic && getenv("FUZZ_VERBOSE")) {
        const vnode_stats_t *st = &cur->v[V]->stats;
        fprintf(stderr, "victim: %llu packets in, %llu out, %llu ring full, %llu doorbells, "
                "%llu copied, %llu shared copies, %llu helped\n",
                (unsigned long long) st->pkts_recv, (unsigned long long) st->pkts_sent,
                (unsigned long long) st->ring_full, (unsigned long long) st->doorbells,
                (unsigned long long) st->copy_bytes, (unsigned long long) st->shared_copies,
                (unsigned long long) st->helped_bytes);
    }
    fuzzing = false;
    npokes = 0;
    ndeferred = 0;
    if (vic) {
        for (int i = 0; i < nkeys; i++)
            aml_xkey_close(vic, keys[i]);
        vic->in_dispatch = 0;
        vic->connected = false;         /* no finalize rounds with peers that are not there */
        aml_finalize(vic);
        vic = NULL;
    }
    nkeys = 0;
    for (int i = 0; i < nbufs; i++)
        free(bufs[i]);
    nbufs = 0;
}

/* ---- the operations ------------------------------------------------------------------- */

static void drain_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                     size_t len)
{
    if (src != V)
        abort();
}

static void op_send(int p)
{
    static unsigned char hdr[1 << 16], data[1 << 16];
    size_t max = pv[p]->cfg.max_pkt;
    size_t hlen = (size_t) get(2) % (max + 1), len = (size_t) get(2) % (max + 1);
    hlen = take(hdr, hlen);
    len = take(data, len);
    if (!hlen)
        return;
    if (hlen + len > max)
        len = max - hlen;
    if (vnode_send(pv[p], V, hdr, hlen, data, len) < 0)
        abort();
}

static void op_rec(int p)
{
    vnode_t *v = pv[p];
    vnode_tx_t *t = &v->tx[V];
    unsigned fl = (unsigned) get(1);
    uint32_t word = (uint32_t) get(4), len = (uint32_t) get(4);
    uint16_t hlen = (uint16_t) get(2), src = (uint16_t) get(2);
    size_t n = (size_t) get(2) % 2048;
    uint64_t pos = t->head & v->mask, end = v->L.nunits - pos, k;
    char *u = t->units + pos * VNODE_UNIT;
    size_t at = fl & 2 ? VNODE_LONG_HDR : VNODE_SHORT_HDR, room = end * VNODE_UNIT - at;
    if (fl & 1)
        word = (word & ~0xffffu) | VNODE_MARK(t->head);
    if (fl & 2) {
        vnode_long_hdr_t *h = (vnode_long_hdr_t *) u;
        h->len = len;
        h->hlen = hlen;
        h->src = src;
    }
    take(u + at, n < room ? n : room);
    __atomic_store_n((uint32_t *) u, word, __ATOMIC_RELEASE);
    switch ((fl >> 2) & 3) {
        case 0:
            if ((word >> 16) & 0xff)
                k = vnode_rec_units((word >> 16) & 0xff);
            else if (hlen == VNODE_PAD_HLEN)
                k = end;
            else
                k = len <= v->cfg.max_pkt ? vnode_rec_units(len) : 1;
            break;
        case 1:
            k = 0;
            break;
        case 2:
            k = fl >> 4;
            break;
        default:
            k = end;
            break;
    }
    t->head += k;
}

static void op_poke(unsigned arg)
{
    poke_t k;
    k.peer = peer_of(arg >> 1);
    k.region = (int) (get(1) % NREGIONS);
    k.off = (unsigned) get(2);
    k.n = take(k.b, (size_t) get(1) % (sizeof(k.b) + 1));
    if (!(arg & 1))
        poke(&k);
    else if (npokes < NPOKES)
        pokes[npokes++] = k;
}

static void *buffer(size_t len)
{
    void *b;
    if (nbufs == NBUFS || !(b = malloc(len ? len : 1)))
        return NULL;
    bufs[nbufs++] = b;
    return b;
}

static void op_vsend(int p)
{
    unsigned char uhdr[64];
    size_t len = (size_t) get(3) % (VSEND_MAX + 1), ulen;
    void *b;
    ulen = take(uhdr, (size_t) get(1) % (sizeof(uhdr) + 1));
    if (!(b = buffer(len)))
        return;
    aml_amsend(vic, p, 0, uhdr, ulen, b, len, NULL, NULL, NULL);
}

static void op_drain(int p)
{
    for (int i = 0; i < 4; i++) {
        int n = vnode_poll(pv[p], drain_rx, NULL);
        if (n < 0 && !tampered[p]) {
            fprintf(stderr, "local rank %d cannot read what local rank %d sent it: %s\n", p, V,
                    vnode_error(pv[p]));
            abort();
        }
        if (n <= 0)
            return;
    }
}

static void op_misc(unsigned arg)
{
    aml_recv_t recv;
    aml_msg_info_t info;
    switch (arg & 3) {
        case 1:
        case 2:
            if (!ndeferred)
                return;
            if ((arg & 3) == 2) {
                aml_reject(vic, deferred[0]);
            } else {
                memset(&recv, 0, sizeof(recv));
                memset(&info, 0, sizeof(info));
                info.msg_len = deferred_len[0];
                landing(&info, &recv);
                aml_accept(vic, deferred[0], &recv);
            }
            ndeferred--;
            memmove(deferred, deferred + 1, ndeferred * sizeof(deferred[0]));
            memmove(deferred_len, deferred_len + 1, ndeferred * sizeof(deferred_len[0]));
            return;
        case 3:{
                /* an address the peer published (in a collective's segment, say) */
                int p = peer_of(arg >> 2);
                uint64_t raddr = get(8);
                size_t len = (size_t) get(2);
                void *b = buffer(len);
                if (b)
                    aml_peer_read(vic, p, b, raddr, len);
                return;
            }
        default:
            aml_arm(vic);
            return;
    }
}

static void op_xkey(unsigned arg)
{
    struct {
        uint64_t addr, len;
        uint32_t ucx_len, vn_len;
        uint64_t vaddr, vlen, vkey;
    } key;
    aml_xkey_t *k;
    int p = peer_of(arg >> 1);
    key.addr = get(8);
    key.len = get(8);
    key.ucx_len = 0;
    key.vn_len = 24;
    key.vaddr = get(8);
    key.vlen = get(8);
    key.vkey = get(8);
    uint64_t raddr = get(8);
    size_t len = (size_t) get(2);
    void *b;
    if (nkeys == NKEYS || !(b = buffer(len)))
        return;
    if (aml_xkey_open(vic, p, &key, sizeof(key), &k) != AML_OK)
        return;
    keys[nkeys++] = k;
    if (arg & 1)
        aml_put_direct(vic, k, raddr, b, len, NULL, NULL, NULL);
    else
        aml_get_direct(vic, k, raddr, b, len, NULL, NULL, NULL);
}

/* every job, before any input: the coverage of making one belongs to no input */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int size = 0; size < 3; size++)
        for (int last = 0; last < 2; last++)
            for (int fence = 0; fence < 2; fence++)
                job_get(size, last, fence);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t * b, size_t n)
{
    if (n < 1)
        return 0;
    in = b + 1;
    left = n - 1;
    if (setjmp(on_fatal)) {
        /* a malformed record, slot or packet: the process would have ended here */
        in_input = 0;
        teardown();
        return 0;
    }
    setup(b[0]);
    fuzzing = true;
    in_input = 1;
    while (left) {
        unsigned c = (unsigned) get(1), arg = c >> 3;
        switch (c & 7) {
            case 0:
                op_send(peer_of(arg));
                break;
            case 1:
                op_rec(peer_of(arg));
                break;
            case 2:
                op_poke(arg);
                break;
            case 3:
                for (unsigned i = 0; i <= arg % 8; i++)
                    aml_progress(vic);
                break;
            case 4:
                op_vsend(peer_of(arg));
                break;
            case 5:
                op_drain(peer_of(arg));
                break;
            case 6:
                op_misc(arg);
                break;
            default:
                op_xkey(arg);
                break;
        }
    }
    /* what the input left in the rings */
    aml_progress(vic);
    aml_progress(vic);
    in_input = 0;
    teardown();
    return 0;
}
