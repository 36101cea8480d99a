/*
 * The segment: its size, creation by local rank 0 (vnode_init) as an anonymous memfd, its
 * hand-off with the doorbells to the other local ranks over a socket both ends check, and
 * attachment by every rank (vnode_attach): nothing has a name in /dev/shm or anywhere else
 * a crash could leave; plus configuration, errors, accessors and counters.
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
#include <poll.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

void vnode_config_default(vnode_config_t * cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->nlocal = 1;
    cfg->ring_bytes = 0;        /* by the number of local ranks: vnode_auto_ring */
    cfg->max_pkt = 8248 + 1024;
    cfg->direct = 8;
    cfg->attach_timeout_ms = 60000;
    cfg->share_min = 65536;     /* MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY says why */
}

int vnode_fail(vnode_t * v, int rc, const char *fmt, ...)
{
    va_list ap;
    v->err_peer = -1;
    va_start(ap, fmt);
    vsnprintf(v->err, sizeof(v->err), fmt, ap);
    va_end(ap);
    return rc;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* The default ring: as large as VNODE_RING_AUTO_MAX while a rank's n - 1 inbound rings stay
 * within VNODE_RING_AUTO_BUDGET, never below VNODE_RING_AUTO_MIN. Measured on an Intel Xeon
 * VM, 2 ranks, against 64 KiB rings: 8-byte message rate 11.2-12.5 against 10.3-10.7 Mmsg/s
 * with 256 and 512 KiB rings (11.1-11.8 with 1 MiB), 4 KiB latency 1.27-1.32 against
 * 1.44-1.50 us, and 8 KiB streaming bandwidth 11.5-11.8 GB/s with 512 KiB against 5.6 (a
 * window of 64 such messages fits the ring). A two-thread model of the ring showed the same
 * from 128 KiB up: a sender that reuses lines the receiver read a few messages earlier waits
 * longer for each of them. The budget keeps a node's segment n * 2 MiB at most while that
 * allows 64 KiB rings (up to 33 ranks; larger nodes keep 64 KiB, as before). */
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

/* ---- handing the segment and the doorbells to the node's ranks ----
 * Local rank 0 listens on an abstract unix socket named by a random key, which the embedder
 * passes to the other local ranks with its address exchange. Each connects, and each end
 * checks the other's uid (SO_PEERCRED): a process of another user that reads the name in
 * /proc/net/unix is refused, and none can take the name first, not knowing it. Every rank
 * made its own doorbell (an eventfd) in vnode_init, so it can sleep on it from the start; each
 * sends it with its request, and once all have asked, rank 0 sends each the segment's
 * descriptor and every rank's doorbell, then closes the socket: after vnode_attach nothing of
 * the job has a name. */
#define HAND_MAGIC 0x766e6864u  /* "vnhd" */
#define HAND_FDS   200          /* descriptors per message (the kernel takes up to 253) */

typedef struct hand_msg {
    uint32_t magic, local;      /* request: the rank's local index */
    uint64_t nlocal, seg_bytes; /* reply: the segment's geometry, with its descriptor */
} hand_msg_t;

static socklen_t hand_addr(uint64_t key, unsigned uid, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "amlapi-vnode-%u-%016llx", uid,
                     (unsigned long long) key);
    return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Each rank holds every local rank's doorbell, and local rank 0 a connection per rank for a
 * moment: when that leaves fewer than 256 descriptors of the soft limit to the program (more
 * than 384 ranks under the usual 1024), the soft limit goes up by what they take. */
static void fd_room(int nlocal)
{
    struct rlimit r;
    rlim_t need = 2 * (rlim_t) nlocal, want;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
        r.rlim_cur < need + 256 && (want = r.rlim_cur + need) > r.rlim_cur) {
        r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max > want ? want : r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static int fd_limit_fail(vnode_t * v, const char *what)
{
    struct rlimit r;
    int e = errno;
    unsigned long long lim = getrlimit(RLIMIT_NOFILE, &r) == 0 ? (unsigned long long) r.rlim_cur
        : 0;
    return vnode_fail(v, VNODE_ERR_SYS, "vnode: local rank %d: %s: %s; each rank holds %d "
                      "doorbells, and the open-files limit (ulimit -n) is %llu", v->local, what,
                      strerror(e), v->nlocal, lim);
}

static bool peer_uid_ok(int s, unsigned uid, struct ucred *cr)
{
    socklen_t l = sizeof(*cr);
    memset(cr, 0, sizeof(*cr));
    return getsockopt(s, SOL_SOCKET, SO_PEERCRED, cr, &l) == 0 && l == sizeof(*cr) &&
        cr->uid == uid;
}

/* Every rank, in vnode_init: its doorbell; local rank 0 also the listening socket. */
static int hand_open(vnode_t * v)
{
    fd_room(v->nlocal);
    if ((v->bells[v->local] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return fd_limit_fail(v, "eventfd");
    if (v->nlocal == 1 || v->local != 0)
        return VNODE_OK;
    while (v->key == 0)
        if (getrandom(&v->key, sizeof(v->key), 0) != (ssize_t) sizeof(v->key))
            return vnode_fail(v, VNODE_ERR_SYS, "vnode: getrandom: %s", strerror(errno));
    struct sockaddr_un a;
    socklen_t alen = hand_addr(v->key, v->uid, &a);
    v->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (v->listen_fd < 0 || bind(v->listen_fd, (struct sockaddr *) &a, alen) < 0 ||
        listen(v->listen_fd, v->nlocal < 128 ? v->nlocal : 128) < 0)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: the socket that hands out the segment: %s",
                          strerror(errno));
    return VNODE_OK;
}

/* poll for one fd until the deadline: > 0 ready, 0 timed out */
static int wait_fd(int fd, short ev, double deadline)
{
    struct pollfd p = { fd, ev, 0 };
    double left = deadline - vnode_now_ms();
    int rc;
    while ((rc = poll(&p, 1, left < 0 ? 0 : (int) left + 1)) < 0 && errno == EINTR);
    return rc;
}

/* Sends hdr (or one byte) with the descriptors fds[0..n) over s. */
static bool send_fds(int s, const void *hdr, size_t hlen, const int *fds, int n)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * HAND_FDS)];
        struct cmsghdr align;
    } cb;
    char one = 0;
    struct iovec io = { hdr ? (void *) hdr : &one, hdr ? hlen : 1 };
    struct msghdr m = {.msg_iov = &io,.msg_iovlen = 1 };
    memset(&cb, 0, sizeof(cb));
    if (n > 0) {
        m.msg_control = cb.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    ssize_t rc;
    while ((rc = sendmsg(s, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR);
    return rc == (ssize_t) io.iov_len;
}

/* Receives exactly hlen bytes into hdr (or one byte) and exactly want descriptors into fds
 * before the deadline: want, or -1 with errno (EMFILE: the kernel could not give us all the
 * descriptors; EPROTO: the message was not what was expected). */
static int recv_fds(int s, void *hdr, size_t hlen, int *fds, int want, double deadline)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * HAND_FDS)];
        struct cmsghdr align;
    } cb;
    char one;
    struct iovec io = { hdr ? hdr : &one, hdr ? hlen : 1 };
    struct msghdr m = {.msg_iov = &io,.msg_iovlen = 1,.msg_control = cb.buf,
        .msg_controllen = sizeof(cb.buf)
    };
    ssize_t rc;
    if (wait_fd(s, POLLIN, deadline) <= 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    while ((rc = recvmsg(s, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR);
    if (rc <= 0) {
        if (rc == 0)
            errno = ECONNABORTED;       /* the other end closed: it gave up */
        return -1;
    }
    int got = 0;
    for (struct cmsghdr * c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < want)
                fds[got++] = fd;
            else
                close(fd);
        }
    }
    int e = m.msg_flags & MSG_CTRUNC ? EMFILE : (size_t) rc != io.iov_len ||
        (m.msg_flags & MSG_TRUNC) || got != want ? EPROTO : 0;
    if (e) {
        for (int i = 0; i < got; i++)
            close(fds[i]);
        errno = e;
        return -1;
    }
    return got;
}

/* Local rank 0, in vnode_attach: every other local rank's request (and doorbell) once, until
 * the deadline; then the segment and all the doorbells to each. */
static int hand_serve(vnode_t * v, double deadline)
{
    int *conn = malloc(v->nlocal * sizeof(int));
    int nserved = 0, refused = 0, rc = VNODE_OK;
    if (!conn)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: out of memory");
    for (int r = 0; r < v->nlocal; r++)
        conn[r] = -1;
    while (nserved < v->nlocal - 1) {
        if (wait_fd(v->listen_fd, POLLIN, deadline) <= 0)
            break;
        int s = accept4(v->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0 && (errno == EMFILE || errno == ENFILE)) {
            rc = fd_limit_fail(v, "accepting a local rank");
            break;
        }
        if (s < 0)
            continue;
        struct ucred cr;
        hand_msg_t q;
        int bell = -1, got = -1;
        bool mine = peer_uid_ok(s, v->uid, &cr);
        if (mine && (got = recv_fds(s, &q, sizeof(q), &bell, 1, vnode_now_ms() + 1000)) < 0 &&
            errno == EMFILE) {
            close(s);
            rc = fd_limit_fail(v, "receiving a local rank's doorbell");
            break;
        }
        /* another user, a malformed request, or an index asked for twice: refused */
        if (!mine || got != 1 || q.magic != HAND_MAGIC || q.local < 1 || q.local >= (uint32_t) v->nlocal ||
            conn[q.local] >= 0) {
            if (bell >= 0)
                close(bell);
            refused++;
            close(s);
            continue;
        }
        conn[q.local] = s;
        v->bells[q.local] = bell;
        nserved++;
    }
    if (rc == VNODE_OK && nserved < v->nlocal - 1) {
        char list[300] = "";
        size_t off = 0;
        int missing = 0;
        for (int r = 1; r < v->nlocal; r++)
            if (conn[r] < 0 && missing++ < 20 && off < sizeof(list))
                off += snprintf(list + off, sizeof(list) - off, "%s%d", missing > 1 ? ", " : "",
                                r);
        rc = vnode_fail(v, VNODE_ERR_TIMEOUT, "vnode: local rank 0: after %d ms, local ranks "
                        "%s%s (%d of %d) never attached (%d requests refused)",
                        v->cfg.attach_timeout_ms, list, missing > 20 ? ", ..." : "", missing,
                        v->nlocal, refused);
    }
    for (int r = 1; r < v->nlocal; r++) {
        if (conn[r] < 0)
            continue;
        /* on a timeout the others get nothing: their own deadline names what failed */
        hand_msg_t m = {.magic = HAND_MAGIC,.local = (uint32_t) r,.nlocal = (uint64_t) v->nlocal,
            .seg_bytes = v->seg_bytes
        };
        bool ok = rc == VNODE_OK && send_fds(conn[r], &m, sizeof(m), &v->seg_fd, 1);
        for (int at = 0; ok && at < v->nlocal; at += HAND_FDS)
            ok = send_fds(conn[r], NULL, 0, v->bells + at,
                          v->nlocal - at < HAND_FDS ? v->nlocal - at : HAND_FDS);
        close(conn[r]);
        if (rc == VNODE_OK && !ok)
            rc = vnode_fail(v, VNODE_ERR_SYS, "vnode: local rank 0: handing the segment to "
                            "local rank %d: %s", r, strerror(errno));
    }
    free(conn);
    close(v->listen_fd);
    v->listen_fd = -1;
    return rc;
}

/* The other local ranks, in vnode_attach: the segment and the doorbells from local rank 0. */
static int hand_fetch(vnode_t * v, uint64_t key, double deadline)
{
    struct sockaddr_un a;
    socklen_t alen = hand_addr(key, v->uid, &a);
    struct ucred cr;
    int s = -1, rc;
    if (key == 0)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: no key of local rank 0 "
                          "to attach with", v->local);
    fd_room(v->nlocal);
    for (;;) {
        s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (s < 0)
            return fd_limit_fail(v, "socket");
        if (connect(s, (struct sockaddr *) &a, alen) == 0)
            break;
        int e = errno;
        close(s);
        /* its backlog is full (the ranks of a large node at once): again, until the deadline */
        if (e != EAGAIN || vnode_now_ms() > deadline)
            return vnode_fail(v, e == EAGAIN ? VNODE_ERR_TIMEOUT : VNODE_ERR_SYS,
                              "vnode: local rank %d: connecting to local rank 0 (@%s): %s%s",
                              v->local, a.sun_path + 1, strerror(e), e == ECONNREFUSED ?
                              " (did local rank 0 end, or give another key?)" : "");
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    if (!peer_uid_ok(s, v->uid, &cr)) {
        close(s);
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: @%s is held by uid %u "
                          "(pid %d), not by this job's uid %u: refused", v->local,
                          a.sun_path + 1, (unsigned) cr.uid, (int) cr.pid, v->uid);
    }
    hand_msg_t q = {.magic = HAND_MAGIC,.local = (uint32_t) v->local }, r;
    int segfd = -1, own = v->bells[v->local];
    if (!send_fds(s, &q, sizeof(q), &own, 1) ||
        recv_fds(s, &r, sizeof(r), &segfd, 1, deadline) != 1) {
        int e = errno;
        close(s);
        errno = e;
        if (e == EMFILE)
            return fd_limit_fail(v, "receiving the segment");
        return vnode_fail(v, e == ETIMEDOUT ? VNODE_ERR_TIMEOUT : VNODE_ERR_SYS,
                          "vnode: local rank %d: local rank 0 did not hand out the segment: %s%s",
                          v->local, strerror(e), e == ECONNABORTED || e == ECONNRESET ?
                          " (it gave up: its own error says why)" : "");
    }
    v->seg_fd = segfd;
    if (r.magic != HAND_MAGIC || r.local != (uint32_t) v->local ||
        r.nlocal != (uint64_t) v->nlocal) {
        close(s);
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: local rank %d: local rank 0 has %llu "
                          "local ranks, this rank %d", v->local, (unsigned long long) r.nlocal,
                          v->nlocal);
    }
    rc = VNODE_OK;
    for (int at = 0; rc == VNODE_OK && at < v->nlocal; at += HAND_FDS) {
        int n = v->nlocal - at < HAND_FDS ? v->nlocal - at : HAND_FDS;
        if (recv_fds(s, NULL, 0, v->bells + at, n, deadline) != n) {
            for (int r = at; r < at + n; r++)
                v->bells[r] = -1;
            rc = errno == EMFILE ? fd_limit_fail(v, "receiving the doorbells") :
                vnode_fail(v, VNODE_ERR_SYS, "vnode: local rank %d: receiving the doorbells: "
                           "%s", v->local, strerror(errno));
        }
    }
    /* this rank's own came back as a second descriptor: it sleeps on the first */
    if (v->bells[v->local] != own && v->bells[v->local] >= 0)
        close(v->bells[v->local]);
    v->bells[v->local] = own;
    close(s);
    return rc;
}

uint64_t vnode_key(const vnode_t * v)
{
    return v ? v->key : 0;
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
        rc = hand_open(v);
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
        rc = hand_serve(v, deadline);
    else if (v->local > 0 && (rc = hand_fetch(v, key, deadline)) == VNODE_OK)
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

int vnode_error_peer(const vnode_t * v)
{
    return v ? v->err_peer : -1;
}

const char *vnode_error(const vnode_t * v)
{
    return v ? v->err : "vnode: no vnode";
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
