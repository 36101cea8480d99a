/* vnode tests: single copy (process_vm_readv/writev). */
#define _GNU_SOURCE
#include "vt.h"
#include "vt_tests.h"
#include "vnode_impl.h"     /* shared_forged writes an export slot by hand */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#define MIB (1 << 20)

typedef struct {
    uint64_t buf, wbuf, hole;   /* rank 1's: pattern, written by rank 0, a page then a hole */
    size_t page;
} sc_info_t;

static unsigned char pat(size_t i, int which)
{
    return (unsigned char) (i * 7 + (i >> 9) + which * 101);
}

static int sc_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    sc_info_t *info = (sc_info_t *) c->scratch;
    size_t page = sysconf(_SC_PAGESIZE);
    if (!vnode_single_copy(v)) {
        if (c->rank == 0)
            fprintf(stderr, "  single copy is not allowed here (%s): skipped\n",
                    "process_vm_readv refused between the ranks");
        return VT_SKIP;
    }
    if (c->rank == 1) {
        unsigned char *buf = malloc(MIB + 4096), *wbuf = calloc(1, MIB + 4096);
        for (size_t i = 0; i < MIB + 4096; i++)
            buf[i] = pat(i, 0);
        char *hole = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(hole != MAP_FAILED && munmap(hole + page, page) == 0, "mmap");
        for (size_t i = 0; i < page; i++)
            hole[i] = pat(i, 2);
        info->buf = (uintptr_t) buf;
        info->wbuf = (uintptr_t) wbuf;
        info->hole = (uintptr_t) hole;
        info->page = page;
        vt_barrier(c);
        vt_barrier(c);          /* rank 0 reads and writes */
        for (size_t i = 0; i < MIB + 4096; i++) {
            unsigned char want = i == 0 ? 0xA5 : (i >= 5 && i < 5 + MIB) ? pat(i, 1) :
                (i >= MIB + 100 && i < MIB + 100 + 777) ? pat(i, 3) : 0;
            CHECK(wbuf[i] == want, "written byte %zu is %#x, not %#x", i, wbuf[i], want);
        }
        vt_barrier(c);
        return 0;
    }
    vt_barrier(c);
    unsigned char *dst = malloc(MIB + 4096), *src = malloc(MIB + 4096);
    /* 1 byte, 1 MiB, an unaligned odd range */
    CHECK_OK(v, vnode_read(v, 1, dst, info->buf, 1));
    CHECK(dst[0] == pat(0, 0), "1-byte read");
    CHECK_OK(v, vnode_read(v, 1, dst, info->buf, MIB));
    for (size_t i = 0; i < MIB; i++)
        CHECK(dst[i] == pat(i, 0), "1 MiB read: byte %zu", i);
    CHECK_OK(v, vnode_read(v, 1, dst + 5, info->buf + 3, 100001));
    for (size_t i = 0; i < 100001; i++)
        CHECK(dst[5 + i] == pat(3 + i, 0), "unaligned read: byte %zu", i);
    /* readv: 3000 pieces (more than IOV_MAX), gaps between them locally */
    int n = 3000;
    struct iovec *iov = malloc(n * sizeof(*iov));
    size_t off = 0, total = 0;
    memset(dst, 0xEE, MIB);
    for (int i = 0; i < n; i++) {
        size_t l = (i * 37) % 301 + (i % 5 == 0 ? 0 : 1);       /* some empty pieces */
        iov[i].iov_base = dst + off;
        iov[i].iov_len = l;
        off += l + 3;
        total += l;
    }
    CHECK(off < MIB, "iov layout");
    CHECK_OK(v, vnode_readv(v, 1, iov, n, info->buf + 11, total));
    size_t r = 11;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < iov[i].iov_len; j++, r++)
            CHECK(((unsigned char *) iov[i].iov_base)[j] == pat(r, 0), "readv piece %d byte %zu",
                  i, j);
    CHECK(dst[iov[0].iov_len] == 0xEE, "readv wrote into a gap");
    CHECK_OK(v, vnode_readv(v, 1, iov + 1, 1, info->buf, iov[1].iov_len));
    CHECK(vnode_readv(v, 1, iov, n, info->buf, total + 1) == VNODE_ERR_INVAL,
          "readv with lengths that disagree");
    /* writes: 1 byte, 1 MiB unaligned, 777 bytes */
    unsigned char a5 = 0xA5;
    CHECK_OK(v, vnode_write(v, 1, &a5, info->wbuf, 1));
    for (size_t i = 0; i < MIB + 4096; i++)
        src[i] = pat(i, 1);
    CHECK_OK(v, vnode_write(v, 1, src + 5, info->wbuf + 5, MIB));
    for (size_t i = 0; i < MIB + 4096; i++)
        src[i] = pat(i, 3);
    CHECK_OK(v, vnode_write(v, 1, src + MIB + 100, info->wbuf + MIB + 100, 777));
    /* errors: an unmapped page, and a range running into it (partial, then the error) */
    int rc = vnode_read(v, 1, dst, info->hole + page, 100);
    CHECK(rc == VNODE_ERR_SYS && strstr(vnode_error(v), "local rank 1"), "read of a hole -> "
          "%d: %s", rc, vnode_error(v));
    fprintf(stderr, "  (%s)\n", vnode_error(v));
    memset(dst, 0, 100);
    rc = vnode_read(v, 1, dst, info->hole + page - 50, 100);
    CHECK(rc == VNODE_ERR_SYS && strstr(vnode_error(v), "after 50 bytes"), "read into a hole "
          "-> %d: %s", rc, vnode_error(v));
    for (size_t i = 0; i < 50; i++)
        CHECK(dst[i] == pat(page - 50 + i, 2), "the part before the hole: byte %zu", i);
    rc = vnode_write(v, 1, src, info->hole + page - 10, 20);
    CHECK(rc == VNODE_ERR_SYS && strstr(vnode_error(v), "process_vm_writev"), "write into a "
          "hole -> %d: %s", rc, vnode_error(v));
    rc = vnode_readv(v, 1, iov, 4, info->hole + page - 20, iov[0].iov_len + iov[1].iov_len +
                     iov[2].iov_len + iov[3].iov_len);
    CHECK(rc == VNODE_ERR_SYS, "readv into a hole -> %d", rc);
    vnode_stats_t s;
    vnode_get_stats(v, &s);
    CHECK(s.copy_bytes >= 2 * MIB + 100001 + total, "copy_bytes %llu",
          (unsigned long long) s.copy_bytes);
    vt_barrier(c);
    vt_barrier(c);
    free(iov);
    free(dst);
    free(src);
    return 0;
}

int t_single_copy(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, sc_body, &o);
}

/* -- single_copy_refused: ranks run as nobody, rank 1 not dumpable, so rank 0 may not read
 * it (the kernel's ptrace access check): the node must turn single copy off. -- */
static int refuse_pre(vt_ctx_t * c)
{
    uid_t nobody = 65534;
    if (geteuid() != 0) {
        if (c->rank == 0)
            fprintf(stderr, "  needs root to switch the ranks to uid %u: skipped\n",
                    (unsigned) nobody);
        return VT_SKIP;
    }
    if (setgroups(0, NULL) < 0 || setresgid(nobody, nobody, nobody) < 0 ||
        setresuid(nobody, nobody, nobody) < 0) {
        if (c->rank == 0)
            fprintf(stderr, "  cannot switch to uid %u (%s): skipped\n", (unsigned) nobody,
                    strerror(errno));
        return VT_SKIP;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a credential change cleared it */
    CHECK(prctl(PR_SET_DUMPABLE, c->rank == 1 ? 0 : 1) == 0, "PR_SET_DUMPABLE");
    return 0;
}

static int refuse_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    uint64_t x = 0;
    CHECK(vnode_single_copy(v) == 0, "single copy is on although rank 1 is not dumpable");
    int rc = vnode_read(v, 1 - c->rank, &x, (uintptr_t) & x, 8);
    CHECK(rc == VNODE_ERR_NOTSUP, "read -> %d: %s", rc, vnode_error(v));
    rc = vnode_write(v, 1 - c->rank, &x, (uintptr_t) & x, 8);
    CHECK(rc == VNODE_ERR_NOTSUP, "write -> %d: %s", rc, vnode_error(v));
    /* packets still flow */
    vt_traffic_t *t = vt_traffic_new(c, VT_MIX);
    t->to_send[1 - c->rank] = t->to_recv[1 - c->rank] = 100;
    vt_traffic(c, t);
    vt_traffic_free(t);
    return 0;
}

int t_single_copy_refused(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.pre_init = refuse_pre };
    return vt_run(2, refuse_body, &o);
}

/* -- shared_copy: rank 1 exports ranges; rank 0 copies them with vnode_copy_shared while rank
 * 1 helps from the other end (vnode_help), reading and writing, whole and partial; a key
 * serves a second copy once the first is over (an RMA window is copied into many times,
 * each with the same help, checked byte for byte with a new pattern and range each time),
 * and copies complete with no help from an exporter that makes no call;
 * stale and mismatched keys are malformed. -- */
#define SH_N 200
#define SH_REPEAT 300
typedef struct {
    uint64_t src, dst;          /* rank 1's: pattern to read, buffer rank 0 writes */
    uint64_t key_r[SH_N], key_w[SH_N];
    size_t last_off, last_len;  /* rank 0's last repeated write into dst */
    int last_j;
    volatile unsigned delay_us; /* rank 0 sets rank 1's vnode_test_help_delay_us */
    volatile int stop;          /* rank 0 finished: rank 1 stops helping */
    volatile uint64_t helped;
} sh_info_t;

static int sh_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    sh_info_t *info = (sh_info_t *) c->scratch;
    if (!vnode_single_copy(v)) {
        if (c->rank == 0)
            fprintf(stderr, "  single copy is not allowed here: skipped\n");
        return VT_SKIP;
    }
    if (c->rank == 1) {
        unsigned char *src = malloc(MIB), *dst = calloc(1, MIB);
        for (size_t i = 0; i < MIB; i++)
            src[i] = pat(i, 4);
        info->src = (uintptr_t) src;
        info->dst = (uintptr_t) dst;
        /* one export per copy: a rendezvous exports each message */
        for (int i = 0; i < SH_N; i++) {
            CHECK_OK(v, vnode_export(v, src, MIB, &info->key_r[i]));
            CHECK(info->key_r[i] != 0 || i >= 64, "export %d got no key", i);
            if (i >= 32) {      /* give slots back: at most 64 exist */
                vnode_unexport(v, info->key_r[i - 32]);
                info->key_r[i - 32] = 0;
            }
        }
        CHECK_OK(v, vnode_export(v, dst, MIB, &info->key_w[0]));
        vt_barrier(c);
        vt_barrier(c);          /* rank 0 copies while this rank makes no vnode call */
        vnode_stats_t s0;
        vnode_get_stats(v, &s0);
        CHECK(s0.helped_bytes == 0, "helped %llu bytes without a vnode call",
              (unsigned long long) s0.helped_bytes);
        while (!info->stop) {
            vnode_test_help_delay_us = info->delay_us;
            CHECK(vnode_help(v) >= 0, "help: %s", vnode_error(v));
        }
        vnode_stats_t s;
        vnode_get_stats(v, &s);
        info->helped = s.helped_bytes;
        vt_barrier(c);
        /* writes: rank 0's last repeated write is in dst[last_off, last_off + last_len) */
        vnode_unexport(v, info->key_w[0]);
        for (size_t i = info->last_off; i < info->last_off + info->last_len; i++) {
            unsigned char want = pat(i - info->last_off + (size_t) info->last_j, 6);
            CHECK(dst[i] == want, "written byte %zu is %#x, not %#x", i, dst[i], want);
        }
        for (int i = 0; i < SH_N; i++)
            vnode_unexport(v, info->key_r[i]);
        vt_barrier(c);
        return 0;
    }
    vt_barrier(c);
    unsigned char *dst = malloc(MIB), *src = malloc(MIB);
    vnode_share_t s;
    int copies = 0, rc;
    /* an exporter that makes no call (a target computing outside MPI): the claimer copies
     * every chunk itself, and every copy completes at once and reopens the range */
    for (int j = 0; j < 3; j++) {
        for (size_t i = 0; i < MIB; i++)
            src[i] = pat(i + (size_t) j, 7);
        rc = vnode_copy_shared(v, 1, info->key_w[0], 1, src, info->dst, MIB, &s);
        CHECK(rc == VNODE_OK, "write %d with no help -> %d: %s", j, rc, vnode_error(v));
        CHECK_OK(v, vnode_read(v, 1, dst, info->dst, MIB));
        CHECK(memcmp(dst, src, MIB) == 0, "write %d with no help: wrong bytes", j);
    }
    vt_barrier(c);
    for (int i = SH_N - 32; i < SH_N; i++) {
        uint64_t key = info->key_r[i];
        if (!key)
            continue;
        memset(dst, 0, MIB);
        /* the whole range, or from offset 4096 on (a truncated receive reads less) */
        size_t off = i % 2 ? 4096 : 0, len = MIB - off - (i % 3) * 1000;
        int rc = vnode_copy_shared(v, 1, key, 0, dst, info->src + off, len, &s);
        while (rc == VNODE_AGAIN)
            rc = vnode_share_test(v, &s);
        CHECK(rc == VNODE_OK, "copy %d -> %d: %s", i, rc, vnode_error(v));
        for (size_t j = 0; j < len; j++)
            CHECK(dst[j] == pat(off + j, 4), "copy %d byte %zu", i, j);
        copies++;
    }
    CHECK(copies == 32, "%d copies", copies);
    /* a second copy of a key shares again */
    memset(dst, 0, MIB);
    rc = vnode_copy_shared(v, 1, info->key_r[SH_N - 1], 0, dst, info->src, MIB, &s);
    while (rc == VNODE_AGAIN)
        rc = vnode_share_test(v, &s);
    CHECK(rc == VNODE_OK && dst[MIB - 1] == pat(MIB - 1, 4), "second copy -> %d", rc);
    /* a range the key does not describe, a stale key */
    rc = vnode_copy_shared(v, 1, info->key_r[SH_N - 2], 0, dst, info->src + 8, MIB, &s);
    CHECK(rc == VNODE_ERR_MALFORMED && vnode_error_peer(v) == 1 &&
          strstr(vnode_error(v), "does not describe"), "out of range -> %d: %s", rc,
          vnode_error(v));
    rc = vnode_copy_shared(v, 1, info->key_r[SH_N - 3] + 0x100, 0, dst, info->src, MIB, &s);
    CHECK(rc == VNODE_ERR_MALFORMED, "stale key -> %d: %s", rc, vnode_error(v));
    rc = vnode_copy_shared(v, 1, (info->key_r[SH_N - 3] & ~0x7fULL) | 100, 0, dst, info->src,
                           MIB, &s);
    CHECK(rc == VNODE_ERR_MALFORMED, "key naming slot 100 -> %d: %s", rc, vnode_error(v));
    /* a write into rank 1's range */
    for (size_t i = 0; i < MIB; i++)
        src[i] = pat(i, 5);
    rc = vnode_copy_shared(v, 1, info->key_w[0], 1, src + 100, info->dst + 100, MIB - 200, &s);
    while (rc == VNODE_AGAIN)
        rc = vnode_share_test(v, &s);
    CHECK(rc == VNODE_OK, "write -> %d: %s", rc, vnode_error(v));
    /* the same key again and again, as puts into a window: every copy shares, and a helper
     * still on one copy's chunks never writes them into the next (each copy has its own
     * pattern and range; rank 1 checks the last, rank 0 reads each one back) */
    for (int j = 0; j < SH_REPEAT; j++) {
        /* in the last 40 rank 1 dawdles between reading a copy and taking its chunk:
         * copies end and begin meanwhile */
        info->delay_us = j >= SH_REPEAT - 40 ? 2000 + (unsigned) (j % 5) * 500 : 0;
        size_t off = 100 + (size_t) (j * 4099) % 65536, len =
            MIB - 100 - 65536 - (size_t) (j * 7919) % 262144;
        for (size_t i = 0; i < len; i++)
            src[i] = pat(i + (size_t) j, 6);
        rc = vnode_copy_shared(v, 1, info->key_w[0], 1, src, info->dst + off, len, &s);
        while (rc == VNODE_AGAIN)
            rc = vnode_share_test(v, &s);
        CHECK(rc == VNODE_OK, "repeated write %d -> %d: %s", j, rc, vnode_error(v));
        memset(dst, 0, len);
        CHECK_OK(v, vnode_read(v, 1, dst, info->dst + off, len));
        size_t bad = 0;
        while (bad < len && dst[bad] == pat(bad + (size_t) j, 6))
            bad++;
        CHECK(bad == len, "repeated write %d: byte %zu of %zu is %#x, not %#x", j, bad, len,
              bad < len ? dst[bad] : 0, bad < len ? pat(bad + (size_t) j, 6) : 0);
        info->last_off = off;
        info->last_len = len;
        info->last_j = j;
    }
    vnode_stats_t st;
    vnode_get_stats(v, &st);
    CHECK(st.shared_copies == 37 + SH_REPEAT, "shared_copies %llu",
          (unsigned long long) st.shared_copies);
    info->stop = 1;
    vt_barrier(c);
    /* helping happened: rank 1 spun in vnode_help through 32 copies of 1 MiB */
    CHECK(info->helped > 0, "the exporter copied nothing");
    fprintf(stderr, "  exporter copied %.0f%% of the bytes\n",
            100.0 * info->helped / ((37.0 + SH_REPEAT) * MIB));
    vt_barrier(c);
    free(dst);
    free(src);
    return 0;
}

int t_shared_copy(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, sh_body, &o);
}

/* -- shared_forged: a local rank that rewrites an export slot (the range, or a copy's fields)
 * cannot make the exporter's help copy outside the range it exported: rank 1 exports the first
 * MiB of 2, rank 0 widens the slot to 2 MiB and posts a copy of 2 MiB into it; rank 1's help
 * must refuse it, naming rank 0, and leave the second MiB untouched -- */
typedef struct {
    uint64_t key;
    int helped;                 /* rank 1: vnode_help's result */
    char err[256];
} forged_info_t;

static int forged_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    forged_info_t *info = (forged_info_t *) c->scratch;
    if (c->rank == 1) {
        unsigned char *buf = malloc(2 * MIB);
        CHECK(buf, "malloc");
        memset(buf, 0xaa, 2 * MIB);
        CHECK_OK(v, vnode_export(v, buf, MIB, &info->key));
        CHECK(info->key, "1 MiB not exported");
        vt_barrier(c);          /* rank 0 forges the slot */
        vt_barrier(c);
        info->helped = vnode_help(v);
        snprintf(info->err, sizeof(info->err), "%s", vnode_error(v));
        for (size_t i = MIB; i < 2 * MIB; i++)
            CHECK(buf[i] == 0xaa, "byte %zu past the exported range was written", i - MIB);
        vt_barrier(c);
        vnode_unexport(v, info->key);
        free(buf);
        return 0;
    }
    vt_barrier(c);
    unsigned char *src = malloc(2 * MIB);
    CHECK(src, "malloc");
    memset(src, 0x55, 2 * MIB);
    unsigned i = info->key & 0x7f;
    vnode_xslot_t *x = vnode_xslot(v, 1, i);
    uint64_t gen = VNODE_LOAD(&x->state, ACQUIRE) >> 2;
    x->len = 2 * MIB;           /* the attack: a wider range than exported */
    x->raddr = (uint64_t) (uintptr_t) src;
    x->rlen = 2 * MIB;
    x->chunk = MIB;
    x->claimer = 0;
    x->write = 1;               /* the exporter reads from us into its range */
    x->xoff = 0;
    x->done = 0;
    VNODE_STORE(&x->next, 1ULL << 32, RELEASE);
    VNODE_STORE(&x->state, gen << 2 | VNODE_X_BUSY, RELEASE);
    vt_barrier(c);
    vt_barrier(c);              /* rank 1 helped */
    fprintf(stderr, "  (rank 1: help -> %d: %s)\n", info->helped, info->err);
    CHECK(info->helped < 0 && strstr(info->err, "local rank 0's copy of export"),
          "help -> %d: %s", info->helped, info->err);
    free(src);
    return 0;
}

int t_shared_forged(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, forged_body, &o);
}
