/* Test harness for vnode (vt.h). */
#define _GNU_SOURCE
#include "vt.h"
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>

int vt_rank = -1;

struct vt_shared {
    uint32_t bar_count, bar_gen;
    uint64_t key;               /* local rank 0's vnode_key, for the others' vnode_attach */
    char scratch[VT_SCRATCH] __attribute__ ((aligned(64)));
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

void vt_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR);
}

const char *vt_job_name(char *buf, size_t len)
{
    static int count;
    snprintf(buf, len, "vt%d-%d", (int) getpid(), count++);
    return buf;
}

/* Entries of /dev/shm made since this test program started: vnode makes none, at any time */
int vt_shm_entries(void)
{
    static time_t start;
    if (!start)
        start = time(NULL) - 1;
    int n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 &&
            st.st_ctime >= start)
            n++;
    closedir(d);
    return n;
}

/* vnode_attach with local rank 0's key, which the barrier before it carries to every rank
 * (the embedder's address exchange does so in aml) */
int vt_attach(vt_ctx_t * c, vnode_t * v)
{
    if (c->rank == 0)
        __atomic_store_n(&c->sh->key, vnode_key(v), __ATOMIC_RELEASE);
    vt_barrier(c);
    return vnode_attach(v, __atomic_load_n(&c->sh->key, __ATOMIC_ACQUIRE));
}

void vt_barrier(vt_ctx_t * c)
{
    vt_shared_t *sh = c->sh;
    uint32_t gen = __atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&sh->bar_count, 1, __ATOMIC_ACQ_REL) == (uint32_t) c->size) {
        __atomic_store_n(&sh->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sh->bar_gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    /* a hang detector, no timing: 203 forked ranks under AddressSanitizer on 2 busy cores
     * take more than a minute to arrive (bell_nlocal) */
    double deadline = now_s() + 300;
    for (unsigned i = 0; __atomic_load_n(&sh->bar_gen, __ATOMIC_ACQUIRE) == gen; i++) {
        CHECK(now_s() < deadline, "barrier: the other ranks did not arrive in 300 s");
        if (i < 100) {
            sched_yield();
        } else {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
}

static void rank_main(int r, int n, const char *job, vt_shared_t * sh, vt_body_t body,
                      const vt_opts_t * o)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    vt_rank = r;
    if (o->nice && nice(o->nice) < 0)
        perror("nice");
    vt_ctx_t c = { .rank = r,.size = n,.job = job,.sh = sh,.scratch = sh->scratch,
        .arg = o->arg
    };
    vnode_config_default(&c.cfg);
    c.cfg.nlocal = n;
    c.cfg.local = r;
    c.cfg.attach_timeout_ms = 30000;
    /* the tests count laps, PADs and units of this size (the default grows with few ranks) */
    c.cfg.ring_bytes = 65536;
    if (o->cfg_hook)
        o->cfg_hook(&c.cfg, o->arg);
    if (o->pre_init) {
        int rc = o->pre_init(&c);
        if (rc) {
            fflush(NULL);
            _exit(rc);
        }
    }
    if (o->setup) {
        char err[512] = "";
        int rc = vnode_init(&c.cfg, &c.v, err, sizeof(err));
        CHECK(rc == VNODE_OK && c.v, "vnode_init -> %d: %s", rc, err);
        CHECK_OK(c.v, vt_attach(&c, c.v));
    }
    int rc = body(&c);
    if (o->setup)
        vnode_finalize(c.v);
    fflush(NULL);
    _exit(rc);
}

int vt_run(int n, vt_body_t body, const vt_opts_t * o)
{
    static const vt_opts_t none = {.killed_rank = -1 };
    if (!o)
        o = &none;
    char job[64];
    vt_job_name(job, sizeof(job));
    vt_shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pid_t *pids = calloc(n, sizeof(*pids));
    int *status = calloc(n, sizeof(*status));
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            rank_main(r, n, job, sh, body, o);
        if (pids[r] < 0) {
            perror("fork");
            n = r;
            break;
        }
    }
    double deadline = now_s() + (o->timeout_s ? o->timeout_s : 100), kill_at = 0;
    int alive = n, result = 0;
    while (alive) {
        for (int r = 0; r < n; r++) {
            if (!pids[r] || waitpid(pids[r], &status[r], WNOHANG) != pids[r])
                continue;
            pids[r] = 0;
            alive--;
            int st = status[r];
            bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == VT_SKIP && result == 0)
                result = VT_SKIP;
            else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && r == o->killed_rank)
                ok = true;
            else if (!ok) {
                fprintf(stderr, "rank %d %s %d\n", r, WIFEXITED(st) ? "exited with" :
                        "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                result = 1;
                if (!kill_at)
                    kill_at = now_s() + 1;      /* let the others say what they saw */
            }
        }
        double t = now_s();
        if (alive && (t > deadline || (kill_at && t > kill_at))) {
            if (t > deadline) {
                fprintf(stderr, "job %s: timed out, killing %d ranks\n", job, alive);
                result = 1;
            }
            for (int r = 0; r < n; r++)
                if (pids[r])
                    kill(pids[r], SIGKILL);
            deadline = kill_at = t + 1e9;
        }
        if (alive)
            vt_sleep_ms(2);
    }
    if (vt_shm_entries()) {
        fprintf(stderr, "job %s: /dev/shm has %d new entries\n", job, vt_shm_entries());
        result = 1;
    }
    munmap(sh, sizeof(*sh));
    free(pids);
    free(status);
    return result;
}

/* -- traffic -- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void vt_packet(const vnode_config_t * cfg, enum vt_mode mode, int src, int dst, uint64_t seq,
               size_t *hlen, size_t *len, unsigned char *buf)
{
    static const size_t mix_len[] = { 0, 1, 7, 8, 15, 31, 47, 48, 63, 64, 65, 100, 255, 1000,
        4095, 4096, 8000, (size_t) -1
    };
    uint64_t s = mix64(((uint64_t) src << 48) ^ ((uint64_t) dst << 32) ^ seq ^
                       ((uint64_t) mode << 60));
    size_t max = cfg->max_pkt, h, l;
    switch (mode) {
    case VT_MIX:
        h = 1 + s % 48;
        l = mix_len[(s >> 8) % (sizeof(mix_len) / sizeof(mix_len[0]))];
        break;
    case VT_WRAP:
        h = 1 + s % 64;
        l = (s >> 16) % (max - (h < max ? h : max - 1) + 1);
        break;
    case VT_BIG:
        h = 16;
        l = 2000 + (s >> 16) % 6000;
        break;
    default:
        h = 8 + s % 8;
        l = (s >> 16) % (VNODE_CELL - VNODE_SHORT_HDR - h + 1);
        break;
    }
    if (h >= max)
        h = max;
    if (l > max - h)
        l = max - h;
    *hlen = h;
    *len = l;
    for (size_t i = 0; i < h + l; i++)
        buf[i] = (unsigned char) ((s >> ((i & 7) * 8)) + i + (i >> 8) * 3);
}

typedef struct {
    vt_ctx_t *c;
    vt_traffic_t *t;
    unsigned char *buf;
} rx_arg_t;

static void rx_check(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                     size_t len)
{
    rx_arg_t *a = arg;
    vt_traffic_t *t = a->t;
    size_t eh, el;
    CHECK(src >= 0 && src < a->c->size && src != a->c->rank, "packet from local rank %d", src);
    uint64_t seq = t->recvd[src];
    CHECK(seq < t->to_recv[src], "packet %llu from %d, only %llu expected",
          (unsigned long long) seq, src, (unsigned long long) t->to_recv[src]);
    vt_packet(&a->c->cfg, t->mode, src, a->c->rank, seq, &eh, &el, a->buf);
    CHECK(hlen == eh && len == el, "packet %llu from %d: hlen %zu len %zu, expected %zu %zu",
          (unsigned long long) seq, src, hlen, len, eh, el);
    CHECK(!memcmp(hdr, a->buf, hlen), "packet %llu from %d: header differs",
          (unsigned long long) seq, src);
    CHECK(!len || !memcmp(data, a->buf + hlen, len), "packet %llu from %d: data differs",
          (unsigned long long) seq, src);
    t->recvd[src]++;
}

int vt_poll(vt_ctx_t * c, vt_traffic_t * t)
{
    static unsigned char *rbuf;
    if (!rbuf)
        rbuf = malloc(c->cfg.max_pkt);
    rx_arg_t ra = { c, t, rbuf };
    int rc = vnode_poll(c->v, rx_check, &ra);
    CHECK(rc >= 0, "vnode_poll -> %d: %s", rc, vnode_error(c->v));
    return rc;
}

vt_traffic_t *vt_traffic_new(vt_ctx_t * c, enum vt_mode mode)
{
    vt_traffic_t *t = calloc(1, sizeof(*t));
    t->mode = mode;
    t->to_send = calloc(c->size, sizeof(uint64_t));
    t->to_recv = calloc(c->size, sizeof(uint64_t));
    t->sent = calloc(c->size, sizeof(uint64_t));
    t->recvd = calloc(c->size, sizeof(uint64_t));
    return t;
}

void vt_traffic_free(vt_traffic_t * t)
{
    free(t->to_send);
    free(t->to_recv);
    free(t->sent);
    free(t->recvd);
    free(t);
}

void vt_traffic(vt_ctx_t * c, vt_traffic_t * t)
{
    vnode_t *v = c->v;
    int me = c->rank, n = c->size;
    unsigned char *sbuf = malloc(c->cfg.max_pkt), *rbuf = malloc(c->cfg.max_pkt);
    rx_arg_t ra = { c, t, rbuf };
    double deadline = now_s() + 90;
    unsigned rr = 0, idle = 0;
    for (;;) {
        int progress = 0;
        uint64_t unsent = 0, unrecv = 0;
        for (int i = 0; i < n; i++) {
            int d = (rr + i) % n;
            for (int burst = 0; burst < 8 && t->sent[d] < t->to_send[d]; burst++) {
                size_t hl, l;
                vt_packet(&c->cfg, t->mode, me, d, t->sent[d], &hl, &l, sbuf);
                int rc = vnode_send(v, d, sbuf, hl, sbuf + hl, l);
                if (rc == VNODE_AGAIN)
                    break;
                CHECK_OK(v, rc);
                t->sent[d]++;
                t->units_sent += vnode_rec_units(hl + l);
                progress++;
            }
            unsent += t->to_send[d] - t->sent[d];
        }
        rr++;
        int rc = vnode_poll(v, rx_check, &ra);
        CHECK(rc >= 0, "vnode_poll -> %d: %s", rc, vnode_error(v));
        progress += rc;
        for (int i = 0; i < n; i++)
            unrecv += t->to_recv[i] - t->recvd[i];
        if (!unsent && !unrecv)
            break;
        CHECK(now_s() < deadline, "no end after 90 s: %llu packets to send, %llu to receive",
              (unsigned long long) unsent, (unsigned long long) unrecv);
        if (progress) {
            idle = 0;
            continue;
        }
        if (t->sleep) {
            rc = vnode_arm(v);
            if (rc == VNODE_AGAIN)
                continue;
            CHECK_OK(v, rc);
            struct pollfd p = { vnode_doorbell_fd(v), POLLIN, 0 };
            int r = poll(&p, 1, 20000);
            CHECK(r > 0, "asleep 20 s with %llu packets to send and %llu to receive: a lost "
                  "wake-up (poll -> %d)", (unsigned long long) unsent,
                  (unsigned long long) unrecv, r);
        } else if (++idle % 64 == 0) {
            sched_yield();
        }
    }
    free(sbuf);
    free(rbuf);
}
