/*
 * Handing the segment and the doorbells to the node's ranks. Local rank 0 listens on an
 * abstract unix socket named by a random key, which the embedder passes to the other local
 * ranks with its address exchange. Each connects, and each end checks the other's uid
 * (SO_PEERCRED): a process of another user that reads the name in /proc/net/unix is refused,
 * and none can take the name first, not knowing it. Every rank made its own doorbell (an
 * eventfd) in vnode_init, so it can sleep on it from the start; each sends it with its
 * request, and once all have asked, rank 0 sends each the segment's descriptor and every
 * rank's doorbell, then closes the socket: after vnode_attach nothing of the job has a name.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

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
int vnode_hand_open(vnode_t * v)
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
int vnode_hand_serve(vnode_t * v, double deadline)
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
int vnode_hand_fetch(vnode_t * v, uint64_t key, double deadline)
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
