/*
 * The segment: its size, creation by local rank 0 (vnode_init) as an anonymous memfd, and
 * attachment by every rank (vnode_attach) once vnode_hand.c handed it out: nothing has a name
 * in /dev/shm or anywhere else a crash could leave; plus configuration, accessors and
 * counters.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/stat.h>

void vnode_config_default(vnode_config_t * cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->nlocal = 1;
    cfg->ring_bytes = 0;        /* by the number of local ranks: vnode_auto_ring */
    cfg->max_pkt = 8248 + 1024;
    cfg->direct = 8;
    cfg->attach_timeout_ms = 60000;
    cfg->share_min = 65536;     /* below this, splitting a copy costs more than it saves */
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* The default ring: as large as VNODE_RING_AUTO_MAX while a rank's n - 1 inbound rings stay
 * within VNODE_RING_AUTO_BUDGET, never below VNODE_RING_AUTO_MIN. Against the former fixed
 * 64 KiB rings, larger ones raised the 8-byte message rate, lowered 4 KiB latency and raised
 * 8 KiB streaming bandwidth (a window of 64 such messages fits a 512 KiB ring)
 * (docs/benchmarks/2026-11-27-defaults.md, MPIR_CVAR_AMLAPI_VNODE_RING_SIZE). A two-thread
 * model of the ring showed the same from 128 KiB up: a sender that reuses lines the receiver
 * read a few messages earlier waits longer for each of them. The budget keeps a node's
 * segment n * 2 MiB at most while that allows 64 KiB rings (up to 33 ranks; larger nodes
 * keep 64 KiB, as before). */
size_t vnode_auto_ring(int nlocal)
{
    size_t ring = VNODE_RING_AUTO_MAX;
    while (ring > VNODE_RING_AUTO_MIN && (size_t) (nlocal > 1 ? nlocal - 1 : 1) * ring >
           VNODE_RING_AUTO_BUDGET)
        ring >>= 1;
    return ring;
}

int vnode_layout(const vnode_config_t * cfg, vnode_layout_t * L, char *err, size_t errlen)
{
    if (cfg->nlocal < 1 || cfg->nlocal > VNODE_MAX_LOCAL || cfg->local < 0 ||
        cfg->local >= cfg->nlocal) {
        snprintf(err, errlen, "vnode: local rank %d of %d local ranks is out of range (at most "
                 "%d ranks)", cfg->local, cfg->nlocal, VNODE_MAX_LOCAL);
        return VNODE_ERR_INVAL;
    }
    if (cfg->direct < 0 || cfg->direct > VNODE_MAX_DIRECT) {
        snprintf(err, errlen, "vnode: direct = %d, must be 0..%d", cfg->direct,
                 VNODE_MAX_DIRECT);
        return VNODE_ERR_INVAL;
    }
    /* the record length is a uint32_t; hlen (uint16_t) is checked per packet */
    if (cfg->max_pkt < 1 || cfg->max_pkt > (1u << 30)) {
        snprintf(err, errlen, "vnode: max_pkt = %zu, must be 1..%u", cfg->max_pkt, 1u << 30);
        return VNODE_ERR_INVAL;
    }
    if (cfg->ring_bytes > ((size_t) 1 << 40)) {
        snprintf(err, errlen, "vnode: ring_bytes = %zu is too large", cfg->ring_bytes);
        return VNODE_ERR_INVAL;
    }
    size_t rec = round_up(VNODE_LONG_HDR + cfg->max_pkt, VNODE_UNIT);
    size_t rb = cfg->ring_bytes ? cfg->ring_bytes : vnode_auto_ring(cfg->nlocal);
    if (rb < 4 * rec)
        rb = 4 * rec;
    size_t p2 = VNODE_CELL;
    while (p2 < rb)
        p2 <<= 1;
    size_t n = cfg->nlocal;
    L->ring_bytes = p2;
    L->nunits = p2 / VNODE_UNIT;
    L->max_units = rec / VNODE_UNIT;
    L->off_ranks = round_up(sizeof(vnode_seg_hdr_t), VNODE_CELL);
    L->off_summary = L->off_ranks + n * sizeof(vnode_seg_rank_t);
    L->summary_stride = round_up((n + 63) / 64 * sizeof(uint64_t), VNODE_CELL);
    L->off_exports = L->off_summary + n * L->summary_stride;
    L->off_rings = L->off_exports + n * VNODE_EXPORTS * sizeof(vnode_xslot_t);
    L->ring_stride = sizeof(vnode_ring_ctl_t) + p2;
    L->total = round_up(L->off_rings + n * (n - 1) * L->ring_stride, 4096);
    return VNODE_OK;
}

size_t vnode_segment_bytes(const vnode_config_t * cfg)
{
    vnode_layout_t L;
    char err[256];
    return vnode_layout(cfg, &L, err, sizeof(err)) == VNODE_OK ? L.total : 0;
}

/* The first number in a file, or UINT64_MAX (none, or "max") */
static uint64_t file_u64(const char *path, const char *fmt)
{
    char line[256];
    uint64_t x = UINT64_MAX, y;
    FILE *f = fopen(path, "r");
    if (!f)
        return UINT64_MAX;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, fmt, &y) == 1) {
            x = y;
            break;
        }
    fclose(f);
    return x;
}

/* The memory the node can give a shared segment: MemAvailable (the kernel's estimate of what
 * can be allocated without swapping), and no more than the room under this process's cgroup
 * v2 memory limit (a container's), which the segment's pages are charged to. */
uint64_t vnode_mem_available(void)
{
    uint64_t kb = file_u64("/proc/meminfo", "MemAvailable: %" SCNu64 " kB");
    uint64_t avail = kb < UINT64_MAX / 1024 ? kb * 1024 : UINT64_MAX;
    char cg[200], path[300];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        /* cgroup v2: one line "0::/path" */
        if (fgets(cg, sizeof(cg), f) && !strncmp(cg, "0::/", 4)) {
            cg[strcspn(cg, "\n")] = 0;
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", cg + 3);
            uint64_t max = file_u64(path, "%" SCNu64);
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", cg + 3);
            uint64_t cur = file_u64(path, "%" SCNu64);
            if (max != UINT64_MAX && cur != UINT64_MAX)
                avail = avail < (max > cur ? max - cur : 0) ? avail : (max > cur ? max - cur : 0);
        }
        fclose(f);
    }
    return avail;
}

/* ... or cfg.shm_free when a test sets it */
static uint64_t mem_available(vnode_t * v)
{
    return v->cfg.shm_free ? v->cfg.shm_free : vnode_mem_available();
}

/* Local rank 0: the segment, anonymous (memfd: no name anyone could take, open or leave
 * behind), its size sealed so that no rank can shrink it under the others, its pages reserved
 * (a full memory is an error here, never a SIGBUS later), and initialized. */
static int seg_create(vnode_t * v)
{
    size_t need = v->L.total;
    uint64_t avail = mem_available(v);
    if (avail < need)
        return vnode_fail(v, VNODE_ERR_NOSPACE, "vnode: the shared segment needs %zu bytes of "
                          "memory, and the node has %llu available: lower the ring size "
                          "(ring_bytes)", need, (unsigned long long) avail);
    int fd = memfd_create("amlapi-vnode", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: memfd_create: %s", strerror(errno));
    v->seg_fd = fd;
    if (ftruncate(fd, (off_t) need) < 0)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: sizing the segment to %zu bytes: %s", need,
                          strerror(errno));
    int e = posix_fallocate(fd, 0, (off_t) need);
    if (e == ENOSPC || e == ENOMEM)
        return vnode_fail(v, VNODE_ERR_NOSPACE, "vnode: memory ran out reserving the %zu-byte "
                          "shared segment: lower the ring size (ring_bytes)", need);
    if (e)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: posix_fallocate of %zu bytes: %s", need,
                          strerror(e));
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: sealing the segment: %s", strerror(errno));
    void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: mmap of the %zu-byte segment: %s", need,
                          strerror(errno));
    v->seg = p;
    v->seg_bytes = need;
    vnode_seg_hdr_t *h = vnode_hdr(v);
    h->nlocal = v->nlocal;
    h->ring_bytes = v->L.ring_bytes;
    h->max_pkt = v->cfg.max_pkt;
    h->seg_bytes = need;
    VNODE_STORE(&h->magic, VNODE_MAGIC_BASE | VNODE_VERSION, RELEASE);
    return VNODE_OK;
}

int vnode_init(const vnode_config_t * cfg, vnode_t ** out, char *err, size_t errlen)
{
    *out = NULL;
    vnode_t *v = calloc(1, sizeof(*v));
    if (!v) {
        if (err && errlen)
            snprintf(err, errlen, "vnode: out of memory");
        return VNODE_ERR_SYS;
    }
    v->seg_fd = v->listen_fd = -1;
    int rc = vnode_layout(cfg, &v->L, v->err, sizeof(v->err));
    if (rc == VNODE_OK) {
        v->cfg = *cfg;
        v->cfg.ring_bytes = v->L.ring_bytes;
        if (v->cfg.attach_timeout_ms <= 0)
            v->cfg.attach_timeout_ms = 60000;
        v->uid = (unsigned) geteuid();
        v->local = cfg->local;
        v->nlocal = cfg->nlocal;
        v->mask = v->L.nunits - 1;
        v->tx = calloc(v->nlocal, sizeof(*v->tx));
        v->rx = calloc(v->nlocal, sizeof(*v->rx));
        v->bells = malloc(v->nlocal * sizeof(int));
        if (!v->tx || !v->rx || !v->bells)
            rc = vnode_fail(v, VNODE_ERR_SYS, "vnode: out of memory");
        else
            for (int r = 0; r < v->nlocal; r++)
                v->bells[r] = -1;
    }
    if (rc == VNODE_OK && v->local == 0)
        rc = seg_create(v);
    if (rc == VNODE_OK)
        rc = vnode_hand_open(v);
    if (rc != VNODE_OK) {
        if (err && errlen)
            snprintf(err, errlen, "%s", v->err);
        vnode_finalize(v);
        return rc;
    }
    *out = v;
    return VNODE_OK;
}

/* Maps and checks the segment local rank 0 handed out (ranks other than 0). */
static int seg_map(vnode_t * v)
{
    struct stat st;
    int seals = fcntl(v->seg_fd, F_GET_SEALS);
    if (fstat(v->seg_fd, &st) < 0 || (size_t) st.st_size < sizeof(vnode_seg_hdr_t) ||
        seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL))
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: the segment from local "
                          "rank 0 is too small or not sealed (%lld bytes, seals %#x)", v->local,
                          (long long) st.st_size, (unsigned) seals);
    void *p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->seg_fd, 0);
    if (p == MAP_FAILED)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: local rank %d: mmap of the segment: %s",
                          v->local, strerror(errno));
    v->seg = p;
    v->seg_bytes = st.st_size;
    vnode_seg_hdr_t *h = vnode_hdr(v);
    uint64_t magic = VNODE_LOAD(&h->magic, ACQUIRE);
    const char *what = NULL;
    unsigned long long theirs = 0, mine = 0;
    if ((magic & ~0xffffULL) != VNODE_MAGIC_BASE)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: the segment is not an "
                          "initialized vnode segment (magic %#llx)", v->local,
                          (unsigned long long) magic);
    if ((magic & 0xffff) != VNODE_VERSION)
        what = "version", theirs = magic & 0xffff, mine = VNODE_VERSION;
    else if (h->nlocal != (uint64_t) v->nlocal)
        what = "nlocal", theirs = h->nlocal, mine = v->nlocal;
    else if (h->ring_bytes != v->L.ring_bytes)
        what = "ring_bytes", theirs = h->ring_bytes, mine = v->L.ring_bytes;
    else if (h->max_pkt != v->cfg.max_pkt)
        what = "max_pkt", theirs = h->max_pkt, mine = v->cfg.max_pkt;
    else if (h->seg_bytes != v->L.total || v->seg_bytes != v->L.total)
        what = "segment size", theirs = v->seg_bytes, mine = v->L.total;
    if (what)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: %s differs from local rank "
                          "0's: %llu there, %llu here", v->local, what, theirs, mine);
    return VNODE_OK;
}

/* Waits until *cnt == target or the deadline; false on timeout. */
static bool wait_count(uint32_t * cnt, uint32_t target, double deadline)
{
    for (unsigned i = 0; VNODE_LOAD(cnt, ACQUIRE) < target; i++) {
        if (vnode_now_ms() > deadline)
            return false;
        if (i < 64) {
            sched_yield();
        } else {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
    return true;
}

/* Timeout message: the ranks whose word (pid or probe) is still 0. */
static int fail_missing(vnode_t * v, const char *what, bool probe)
{
    char list[300] = "";
    size_t off = 0;
    int missing = 0;
    for (int r = 0; r < v->nlocal; r++) {
        vnode_seg_rank_t *rk = vnode_rank(v, r);
        if (probe ? VNODE_LOAD(&rk->probe, ACQUIRE) : VNODE_LOAD(&rk->pid, ACQUIRE))
            continue;
        if (missing++ < 20 && off < sizeof(list))
            off += snprintf(list + off, sizeof(list) - off, "%s%d", missing > 1 ? ", " : "", r);
    }
    return vnode_fail(v, VNODE_ERR_TIMEOUT, "vnode: local rank %d: after %d ms, local ranks %s%s "
                      "(%d of %d) never %s", v->local, v->cfg.attach_timeout_ms, list,
                      missing > 20 ? ", ..." : "", missing, v->nlocal, what);
}

int vnode_attach(vnode_t * v, uint64_t key)
{
    if (!v)
        return VNODE_ERR_INVAL;
    if (v->attach_tried)        /* the counts in the segment are taken once */
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_attach called twice");
    v->attach_tried = true;
    double deadline = vnode_now_ms() + v->cfg.attach_timeout_ms;
    int rc = VNODE_OK;
    if (v->local == 0 && v->nlocal > 1)
        rc = vnode_hand_serve(v, deadline);
    else if (v->local > 0 && (rc = vnode_hand_fetch(v, key, deadline)) == VNODE_OK)
        rc = seg_map(v);
    if (v->seg_fd >= 0) {       /* every rank that will map it has it now */
        close(v->seg_fd);
        v->seg_fd = -1;
    }
    if (rc != VNODE_OK)
        return rc;
    vnode_seg_hdr_t *h = vnode_hdr(v);
    vnode_seg_rank_t *me = vnode_rank(v, v->local);

    vnode_cma_publish(v);
    rc = vnode_ring_setup(v);
    if (rc != VNODE_OK)
        return rc;
    rc = vnode_alive_hold(v);
    if (rc != VNODE_OK)
        return rc;
    VNODE_STORE(&me->pid, (uint64_t) getpid(), RELEASE);
    __atomic_add_fetch(&h->attached, 1, __ATOMIC_SEQ_CST);
    if (!wait_count(&h->attached, v->nlocal, deadline))
        return fail_missing(v, "attached", false);
    /* every pid is known: let the node's ranks read this one, then probe once all did */
    vnode_cma_allow(v);
    __atomic_add_fetch(&h->allowed, 1, __ATOMIC_SEQ_CST);
    if (!wait_count(&h->allowed, v->nlocal, deadline))
        return vnode_fail(v, VNODE_ERR_TIMEOUT, "vnode: local rank %d: after %d ms, %u of %d "
                          "local ranks had let the others read them (single copy)", v->local,
                          v->cfg.attach_timeout_ms, VNODE_LOAD(&h->allowed, ACQUIRE),
                          v->nlocal);

    int ok = vnode_cma_probe(v);
    VNODE_STORE(&me->probe, ok ? 1 : 2, RELEASE);
    __atomic_add_fetch(&h->probed, 1, __ATOMIC_SEQ_CST);
    if (!wait_count(&h->probed, v->nlocal, deadline))
        return fail_missing(v, "probed single copy", true);
    v->single_copy = 1;
    for (int r = 0; r < v->nlocal; r++)
        if (VNODE_LOAD(&vnode_rank(v, r)->probe, ACQUIRE) != 1)
            v->single_copy = 0;
    v->attached = true;
    return VNODE_OK;
}

void vnode_finalize(vnode_t * v)
{
    if (!v)
        return;
    if (v->seg) {
        /* a watcher thread may still wake on the segment: it stays mapped until exit */
        if (!vnode_watch_end(v))
            munmap(v->seg, v->seg_bytes);
    }
    if (v->seg_fd >= 0)
        close(v->seg_fd);
    if (v->listen_fd >= 0)
        close(v->listen_fd);
    vnode_bell_close(v);
    free(v->bells);
    free(v->tx);
    free(v->rx);
    free(v);
}

int vnode_local(const vnode_t * v)
{
    return v->local;
}

int vnode_nlocal(const vnode_t * v)
{
    return v->nlocal;
}

int vnode_single_copy(const vnode_t * v)
{
    return v->single_copy;
}

void vnode_get_stats(const vnode_t * v, vnode_stats_t * s)
{
    *s = v->stats;
}
