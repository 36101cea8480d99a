/*
 * Single copy: process_vm_readv/process_vm_writev between local ranks (cross-memory attach,
 * no kernel module). The kernel may move fewer bytes than asked (it stops at a page it cannot
 * fault in): we continue from there, so the error, if any, is about the first bad byte.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

#define PROBE_KEY 0x5a3c96e1f00dbeefULL

/* The word peers read to probe single copy: static, so it lives as long as the process. */
static volatile uint64_t vnode_probe_word;

void vnode_cma_publish(vnode_t * v)
{
    vnode_probe_word = (uint64_t) getpid() ^ PROBE_KEY;
    vnode_rank(v, v->local)->probe_addr = (uint64_t) (uintptr_t) & vnode_probe_word;
}

/* The parent of pid from /proc/pid/stat (its fourth field; the second, the command, may hold
 * spaces and parentheses: the last ')' ends it), or 0. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    int ppid = 0;
    if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid < 0)
        return 0;
    return (pid_t) ppid;
}

#define CHAIN_MAX 64

/* The nearest process that is an ancestor of (or is) every one of pids[0..n) -- the launcher's
 * proxy (hydra_pmi_proxy, slurmstepd) when the ranks are its children -- or 0 when none is
 * found below init. */
pid_t vnode_common_ancestor(const uint64_t * pids, int n)
{
    pid_t chain[CHAIN_MAX];
    int depth = 0;
    /* the first rank's ancestors, itself first */
    for (pid_t p = (pid_t) pids[0]; p > 1 && depth < CHAIN_MAX; p = parent_of(p))
        chain[depth++] = p;
    int keep = 0;               /* chain[keep] is the lowest that may be common to all */
    for (int r = 1; r < n; r++) {
        /* walk up from this rank until a process of the chain at or above keep: what is
         * below that one is not common to all */
        pid_t p = (pid_t) pids[r];
        int found = -1;
        for (int hops = 0; p > 1 && hops < CHAIN_MAX && found < 0; hops++, p = parent_of(p))
            for (int i = keep; i < depth; i++)
                if (chain[i] == p) {
                    found = i;
                    break;
                }
        if (found < 0)
            return 0;
        if (found > keep)
            keep = found;
    }
    return keep < depth ? chain[keep] : 0;
}

/* Yama's ptrace_scope 1 lets only a process's ancestors, or the one it declares with
 * PR_SET_PTRACER and that one's descendants, ptrace it; process_vm_readv uses the ptrace
 * access check, so sibling ranks could not read each other. Each rank declares the nearest
 * common ancestor of the node's ranks (the launcher's proxy): the ranks, and whatever else
 * that proxy runs, may read it, no other process. Only when none is found below init does it
 * declare any process of its uid (PR_SET_PTRACER_ANY), and says so (vnode_ptracer_any).
 * Scope 0 needs nothing; 2 and 3 cannot be relaxed. After vnode_attach published every pid. */
void vnode_cma_allow(vnode_t * v)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;
    if (!f)
        return;
    if (fscanf(f, "%d", &scope) != 1)
        scope = -1;
    fclose(f);
    if (scope != 1)
        return;
    uint64_t *pids = malloc(v->nlocal * sizeof(uint64_t));
    pid_t a = 0;
    if (pids) {
        for (int r = 0; r < v->nlocal; r++)
            pids[r] = VNODE_LOAD(&vnode_rank(v, r)->pid, ACQUIRE);
        a = vnode_common_ancestor(pids, v->nlocal);
        free(pids);
    }
    if (a > 1 && prctl(PR_SET_PTRACER, (unsigned long) a, 0, 0, 0) == 0)
        return;
    v->ptracer_any = true;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

int vnode_ptracer_any(const vnode_t * v)
{
    return v->ptracer_any;
}

bool vnode_cma_probe(vnode_t * v)
{
    /* the next rank's word (our own when alone): pid ^ key, so a wrong process or address
     * does not pass */
    vnode_seg_rank_t *pr = vnode_rank(v, (v->local + 1) % v->nlocal);
    uint64_t pid = VNODE_LOAD(&pr->pid, ACQUIRE), expect = pid ^ PROBE_KEY, got = ~expect;
    struct iovec l = { &got, sizeof(got) };
    struct iovec r = { (void *) (uintptr_t) pr->probe_addr, sizeof(got) };
    return process_vm_readv((pid_t) pid, &l, 1, &r, 1, 0) == (ssize_t) sizeof(got) &&
        got == expect;
}

static int cma_check(vnode_t * v, int peer, const char *op)
{
    if (!v->attached || peer < 0 || peer >= v->nlocal)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: %s from local rank %d of %d%s", op, peer,
                          v->nlocal, v->attached ? "" : " before vnode_attach");
    if (!v->single_copy)
        return vnode_fail(v, VNODE_ERR_NOTSUP, "vnode: %s from local rank %d: single copy "
                          "(process_vm_readv) is not allowed between this node's ranks", op,
                          peer);
    return VNODE_OK;
}

static int cma_fail(vnode_t * v, int peer, const char *op, uint64_t raddr, size_t len,
                    size_t done, ssize_t n)
{
    vnode_fail(v, VNODE_ERR_SYS, "vnode: %s with local rank %d (pid %llu) at remote "
               "address %#llx, %zu bytes: failed after %zu bytes: %s", op, peer,
               (unsigned long long) VNODE_LOAD(&vnode_rank(v, peer)->pid, RELAXED),
               (unsigned long long) raddr, len, done,
               n < 0 ? strerror(errno) : "no progress");
    v->err_peer = peer;         /* the copy's peer (vnode_error_peer): aml names its rank */
    return VNODE_ERR_SYS;
}

/* The local buffers iov (len bytes in all) against the remote range [raddr, raddr + len),
 * looping over partial transfers: the one copy loop of vnode_read, vnode_write, vnode_readv
 * and the shared copies' chunks (vnode_share.c). */
int vnode_cma_xfer(vnode_t * v, int peer, const struct iovec *iov, int iovcnt, uint64_t raddr,
                   size_t len, bool write)
{
    const char *op = write ? "process_vm_writev" : "process_vm_readv";
    int rc = cma_check(v, peer, op);
    if (rc != VNODE_OK)
        return rc;
    size_t sum = 0;
    for (int i = 0; i < iovcnt; i++)
        sum += iov[i].iov_len;
    if (iovcnt < 0 || sum != len)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: %s of %zu bytes with %d local buffers "
                          "of %zu bytes", op, len, iovcnt, sum);
    pid_t pid = (pid_t) VNODE_LOAD(&vnode_rank(v, peer)->pid, RELAXED);
    struct iovec l[IOV_MAX < 1024 ? IOV_MAX : 1024];
    int nmax = (int) (sizeof(l) / sizeof(l[0]));
    int idx = 0;                /* first local buffer not yet done */
    size_t off = 0;             /* bytes of it already done */
    size_t done = 0;
    while (done < len) {
        /* up to nmax local pieces from (idx, off), against the matching remote range */
        int cnt = 0;
        size_t chunk = 0;
        for (int i = idx; i < iovcnt && cnt < nmax; i++) {
            size_t skip = i == idx ? off : 0;
            if (iov[i].iov_len == skip)
                continue;
            l[cnt].iov_base = (char *) iov[i].iov_base + skip;
            l[cnt].iov_len = iov[i].iov_len - skip;
            chunk += l[cnt++].iov_len;
        }
        struct iovec r = { (void *) (uintptr_t) (raddr + done), chunk };
        ssize_t n = write ? process_vm_writev(pid, l, cnt, &r, 1, 0)
            : process_vm_readv(pid, l, cnt, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return cma_fail(v, peer, op, raddr, len, done, n);
        done += n;
        v->stats.copy_bytes += n;
        /* advance (idx, off) by n bytes */
        size_t adv = n;
        while (adv && idx < iovcnt) {
            size_t room = iov[idx].iov_len - off;
            if (adv < room) {
                off += adv;
                adv = 0;
            } else {
                adv -= room;
                idx++;
                off = 0;
            }
        }
    }
    return VNODE_OK;
}

int vnode_read(vnode_t * v, int peer, void *dst, uint64_t raddr, size_t len)
{
    struct iovec l = { dst, len };
    return vnode_cma_xfer(v, peer, &l, 1, raddr, len, false);
}

int vnode_write(vnode_t * v, int peer, const void *src, uint64_t raddr, size_t len)
{
    struct iovec l = { (void *) src, len };
    return vnode_cma_xfer(v, peer, &l, 1, raddr, len, true);
}

int vnode_readv(vnode_t * v, int peer, const struct iovec *iov, int iovcnt, uint64_t raddr,
                size_t len)
{
    return vnode_cma_xfer(v, peer, iov, iovcnt, raddr, len, false);
}
