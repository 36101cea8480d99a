/* vnode tests: malformed records, cleanup, setup errors. */
#define _GNU_SOURCE
#include "vt.h"
#include "vt_tests.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

/* -- malformed_*: rank 1 writes one bad record by hand; rank 0's poll must refuse it -- */
enum { M_SRC, M_LEN0, M_LEN_BIG, M_HLEN0, M_HLEN_GT, M_OVERRUN, M_PAD, M_SEQ, M_LONG_SMALL };
static const char *const mal_expect[] = {
    "source field 0", "length 0,", "length 9273,", "header length 0 of a 8-byte",
    "header length 20 of a 10-byte", "runs past the ring end", "PAD record at unit 0",
    "mark", "long record of 8 bytes"
};

static void count_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                     size_t len)
{
    ++*(int *) arg;
}

static int mal_body(vt_ctx_t * c)
{
    int kind = *(int *) c->arg;
    vnode_t *v = c->v;
    int *count = (int *) c->scratch;
    if (c->rank == 1) {
        uint64_t seq, nunits;
        int sent = 0;
        unsigned char b[8] = { 0 };
        /* overrun: one-unit packets up to the ring's last unit, then a 20-unit record */
        while (kind == M_OVERRUN) {
            vnode_test_cell(v, 0, &seq, &nunits);
            if ((seq & (nunits - 1)) == nunits - 1)
                break;
            CHECK_OK(v, vnode_send(v, 0, b, sizeof(b), NULL, 0));
            sent++;
        }
        *count = sent;
        /* a long record of 300 bytes (the bytes after its header are never read), or a short
         * one of 8 */
        vnode_long_hdr_t *h = vnode_test_cell(v, 0, &seq, &nunits);
        uint32_t word = VNODE_MARK(seq);
        h->src = 1;
        h->hlen = 8;
        h->len = 300;
        switch (kind) {
        case M_SRC:
            h->src = 0;
            break;
        case M_LEN0:
            h->hlen = 1;
            h->len = 0;
            break;
        case M_LEN_BIG:
            h->len = (uint32_t) c->cfg.max_pkt + 1;
            break;
        case M_HLEN0:
            word = VNODE_SHORT_WORD(seq, 8, 0);
            break;
        case M_HLEN_GT:
            word = VNODE_SHORT_WORD(seq, 10, 20);
            break;
        case M_OVERRUN:
            break;
        case M_PAD:
            h->hlen = VNODE_PAD_HLEN;
            h->len = (uint32_t) (nunits * VNODE_UNIT - VNODE_LONG_HDR);
            break;
        case M_SEQ:
            word = VNODE_MARK(seq + 1);
            break;
        case M_LONG_SMALL:
            h->len = 8;
            break;

        }
        __atomic_store_n(&h->word, word, __ATOMIC_RELEASE);
        vt_barrier(c);
        vt_barrier(c);
        return 0;
    }
    vt_barrier(c);
    int got = 0, rc = 0;
    for (int i = 0; i < 1000 && rc >= 0; i++)
        rc = vnode_poll(v, count_rx, &got);
    const char *err = vnode_error(v);
    CHECK(rc == VNODE_ERR_MALFORMED, "poll -> %d (%s)", rc, err);
    CHECK(got == *count, "%d packets before the bad one, %d sent", got, *count);
    CHECK(strstr(err, "from local rank 1") && strstr(err, mal_expect[kind]),
          "message \"%s\" lacks \"from local rank 1\" or \"%s\"", err, mal_expect[kind]);
    fprintf(stderr, "  (%s)\n", err);
    CHECK(vnode_poll(v, count_rx, &got) == VNODE_ERR_MALFORMED && got == *count,
          "a second poll delivered");
    vt_barrier(c);
    return 0;
}

static int malformed(int kind)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.arg = &kind };
    return vt_run(2, mal_body, &o);
}

int t_malformed_src(void)
{
    return malformed(M_SRC);
}

int t_malformed_len0(void)
{
    return malformed(M_LEN0);
}

int t_malformed_len_big(void)
{
    return malformed(M_LEN_BIG);
}

int t_malformed_hlen0(void)
{
    return malformed(M_HLEN0);
}

int t_malformed_hlen_gt_len(void)
{
    return malformed(M_HLEN_GT);
}

int t_malformed_overrun(void)
{
    return malformed(M_OVERRUN);
}

int t_malformed_pad(void)
{
    return malformed(M_PAD);
}

int t_malformed_seq(void)
{
    return malformed(M_SEQ);
}

int t_malformed_long_small(void)
{
    return malformed(M_LONG_SMALL);
}

/* -- stale_cells: old payload that looks like the header the receiver expects next must not
 * be taken for one. Lap 1: 32-unit records whose continuation units start with the mark the
 * unit will have in lap 2 and a plausible short header; then a 3-unit record leaves the
 * receiver's tail on such a unit inside a line (the sender zeroes it), and a 1-unit record
 * on one that starts a line (the receiver zeroed it before it published its tail). -- */
#define SC_BIG (32 * VNODE_UNIT - VNODE_LONG_HDR)       /* a long record of 32 units */
#define SC_SMALL (3 * VNODE_UNIT - VNODE_SHORT_HDR)     /* a short record of 3 units */
#define SC_ONE (VNODE_UNIT - VNODE_SHORT_HDR)   /* and of 1 */
static void sc_rx(void *arg, int src, const void *hdr, size_t hlen, const void *data,
                  size_t len)
{
    int *got = arg;
    size_t want = *got < 128 ? SC_BIG : *got == 128 ? SC_SMALL : SC_ONE;
    CHECK(hlen == 8 && hlen + len == want && *(const int *) hdr == *got, "packet %d: hlen %zu "
          "len %zu, first word %d", *got, hlen, len, *(const int *) hdr);
    ++*got;
}

static int stale_body(vt_ctx_t * c)
{
    vnode_t *v = c->v;
    uint64_t seq, nunits;
    if (c->rank == 1) {
        vnode_test_cell(v, 0, &seq, &nunits);
        CHECK(nunits == 4096, "%llu units", (unsigned long long) nunits);
        unsigned char pkt[SC_BIG];
        for (int i = 0; i < 130; i++) {
            size_t plen = i < 128 ? SC_BIG : i == 128 ? SC_SMALL : SC_ONE;
            vnode_test_cell(v, 0, &seq, &nunits);
            memset(pkt, 0, sizeof(pkt));
            memcpy(pkt, &i, sizeof(i));
            for (size_t j = 2; i < 128 && j < 32; j++) {      /* unit 1 holds i */
                uint32_t w = VNODE_SHORT_WORD(seq + j + nunits, 8, 8);
                memcpy(pkt + j * VNODE_UNIT - VNODE_LONG_HDR, &w, sizeof(w));
            }
            CHECK_OK(v, vnode_send(v, 0, pkt, 8, pkt + 8, plen - 8));
            if (i == 63 || i == 127)
                vt_barrier(c);  /* rank 0 consumed half a lap, then lap 1 */
        }
        vt_barrier(c);
        return 0;
    }
    int got = 0;
    while (got < 64)
        CHECK(vnode_poll(v, sc_rx, &got) >= 0, "poll: %s", vnode_error(v));
    vt_barrier(c);
    while (got < 128)
        CHECK(vnode_poll(v, sc_rx, &got) >= 0, "poll: %s", vnode_error(v));
    vt_barrier(c);
    while (got < 130)
        CHECK(vnode_poll(v, sc_rx, &got) >= 0, "poll: %s", vnode_error(v));
    for (int i = 0; i < 1000; i++)
        CHECK(vnode_poll(v, sc_rx, &got) == 0, "poll after the last packet: %s",
              vnode_error(v));
    vt_barrier(c);
    return 0;
}

int t_stale_cells(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = -1 };
    return vt_run(2, stale_body, &o);
}

/* -- cleanup_kill9: nothing in /dev/shm after attach; a peer killed mid-traffic -- */
static int kill_body(vt_ctx_t * c)
{
    CHECK(vt_shm_entries() == 0, "/dev/shm has the segment after attach");
    pid_t *pids = (pid_t *) c->scratch;
    pids[c->rank] = getpid();
    vt_traffic_t *t = vt_traffic_new(c, VT_MIX);
    t->sleep = 1;
    vt_barrier(c);
    if (c->rank == 1) {
        t->to_send[0] = t->to_recv[0] = 1ULL << 40;     /* until killed */
        vt_traffic(c, t);
        return 1;
    }
    /* traffic both ways, then the kill */
    unsigned char *buf = malloc(c->cfg.max_pkt);
    t->to_recv[1] = 1ULL << 40;
    while (t->recvd[1] < 2000 || t->sent[1] < 2000) {
        size_t hl, l;
        vt_packet(&c->cfg, VT_MIX, 0, 1, t->sent[1], &hl, &l, buf);
        int rc = vnode_send(c->v, 1, buf, hl, buf + hl, l);
        CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "send -> %d: %s", rc, vnode_error(c->v));
        t->sent[1] += rc == VNODE_OK;
        vt_poll(c, t);
    }
    CHECK(kill(pids[1], SIGKILL) == 0, "kill: %s", strerror(errno));
    for (int i = 0; kill(pids[1], 0) == 0; i++) {      /* until the launcher reaped it */
        CHECK(i < 10000, "rank 1 still there");
        vt_sleep_ms(1);
    }
    /* whatever it left in the ring is delivered; our sends fill its ring, then AGAIN; its
     * doorbell is gone (make it look asleep so we ring it: armed, and sleepy, since a rank
     * that was killed before its first sleep left its sleepy word 0, and senders skip the
     * check of a receiver that never slept) */
    uint64_t ok = 0, again = 0;
    __atomic_store_n(&vnode_rank(c->v, 1)->sleepy, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 20000; i++) {
        size_t hl, l;
        __atomic_store_n(&vnode_rank(c->v, 1)->sleeping, VNODE_ARMED, __ATOMIC_SEQ_CST);
        vt_packet(&c->cfg, VT_MIX, 0, 1, t->sent[1], &hl, &l, buf);
        int rc = vnode_send(c->v, 1, buf, hl, buf + hl, l);
        CHECK(rc == VNODE_OK || rc == VNODE_AGAIN, "send -> %d: %s", rc, vnode_error(c->v));
        if (rc == VNODE_OK)
            t->sent[1]++, ok++;
        else
            again++;
        vt_poll(c, t);
    }
    vnode_stats_t s;
    vnode_get_stats(c->v, &s);
    CHECK(again > 0 && s.doorbells >= ok, "%llu sent, %llu AGAIN, %llu doorbells",
          (unsigned long long) ok, (unsigned long long) again,
          (unsigned long long) s.doorbells);
    CHECK(vt_shm_entries() == 0, "/dev/shm has the segment after the kill");
    free(buf);
    vt_traffic_free(t);
    return 0;
}

int t_cleanup_kill9(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = 1 };
    return vt_run(2, kill_body, &o);
}

/* -- two_jobs: two 2-rank jobs at once, different names -- */
int t_two_jobs(void)
{
    pid_t p[2];
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        if ((p[i] = fork()) == 0)
            _exit(t_basic());
    }
    for (int i = 0; i < 2; i++) {
        int st;
        waitpid(p[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "job %d failed (status %#x)\n", i, st);
            ok = 0;
        }
    }
    return ok ? 0 : 1;
}

static void one_rank_cfg(vnode_config_t * cfg, const char *job, int nlocal)
{
    vnode_config_default(cfg);
    cfg->nlocal = nlocal;
    cfg->local = 0;
}

/* -- noshm: too little memory for the segment -- */
int t_noshm(void)
{
    char job[64], err[512] = "", need[32];
    vnode_config_t cfg;
    vnode_t *v = (vnode_t *) 1;
    one_rank_cfg(&cfg, vt_job_name(job, sizeof(job)), 2);
    cfg.shm_free = 4096;
    snprintf(need, sizeof(need), "%zu", vnode_segment_bytes(&cfg));
    int rc = vnode_init(&cfg, &v, err, sizeof(err));
    fprintf(stderr, "  (%s)\n", err);
    CHECK(rc == VNODE_ERR_NOSPACE && v == NULL, "vnode_init -> %d", rc);
    CHECK(strstr(err, need) && strstr(err, "4096") && strstr(err, "ring_bytes"),
          "message lacks %s, 4096 or ring_bytes", need);
    CHECK(vt_shm_entries() == 0, "/dev/shm has an entry");
    return 0;
}

/* -- auto_ring: the default ring size by the number of local ranks, and its segment -- */
int t_auto_ring(void)
{
    static const struct {
        int n;
        size_t ring;
    } want[] = { {1, 524288}, {2, 524288}, {5, 524288}, {6, 262144}, {9, 262144},
    {10, 131072}, {17, 131072}, {18, 65536}, {64, 65536}, {VNODE_MAX_LOCAL, 65536}
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t got = vnode_auto_ring(want[i].n);
        CHECK(got == want[i].ring, "%d local ranks: %zu-byte rings, expected %zu", want[i].n,
              got, want[i].ring);
    }
    /* ring_bytes 0 lays the segment out with that size; a set size is kept */
    char job[64];
    vnode_config_t a, b;
    one_rank_cfg(&a, vt_job_name(job, sizeof(job)), 6);
    b = a;
    b.ring_bytes = 262144;
    CHECK(a.ring_bytes == 0 && vnode_segment_bytes(&a) == vnode_segment_bytes(&b),
          "default segment %zu bytes, with 256 KiB rings %zu", vnode_segment_bytes(&a),
          vnode_segment_bytes(&b));
    b.ring_bytes = 65536;
    CHECK(vnode_segment_bytes(&b) < vnode_segment_bytes(&a), "a set 64 KiB ring is not kept");
    return 0;
}

/* -- attach_timeout: local rank 1 never comes -- */
int t_attach_timeout(void)
{
    char job[64];
    vnode_config_t cfg;
    vnode_t *v;
    one_rank_cfg(&cfg, vt_job_name(job, sizeof(job)), 3);
    cfg.attach_timeout_ms = 300;
    CHECK(vnode_init(&cfg, &v, NULL, 0) == VNODE_OK, "init");
    int rc = vnode_attach(v, 0);
    fprintf(stderr, "  (%s)\n", vnode_error(v));
    CHECK(rc == VNODE_ERR_TIMEOUT && strstr(vnode_error(v), "local ranks 1, 2 (2 of 3) never "
                                            "attached"), "attach -> %d", rc);
    vnode_finalize(v);
    CHECK(vt_shm_entries() == 0, "/dev/shm has an entry");
    return 0;
}

/* -- mismatch: local rank 1 has another ring size -- */
static void mm_cfg(vnode_config_t * cfg, void *arg)
{
    cfg->attach_timeout_ms = 2000;
    if (cfg->local == 1)
        cfg->ring_bytes = 131072;
}

static int mm_body(vt_ctx_t * c)
{
    vnode_t *v;
    CHECK(vnode_init(&c->cfg, &v, NULL, 0) == VNODE_OK, "init");
    int rc = vt_attach(c, v);
    if (c->rank == 1) {
        fprintf(stderr, "  (%s)\n", vnode_error(v));
        CHECK(rc == VNODE_ERR_INVAL && strstr(vnode_error(v), "ring_bytes differs from local "
                                              "rank 0's: 65536 there, 131072 here"),
              "attach -> %d", rc);
    } else {
        CHECK(rc == VNODE_ERR_TIMEOUT, "attach -> %d: %s", rc, vnode_error(v));
    }
    vnode_finalize(v);
    return 0;
}

int t_mismatch(void)
{
    vt_opts_t o = {.killed_rank = -1,.cfg_hook = mm_cfg };
    return vt_run(2, mm_body, &o);
}

/* -- no_names: the segment is a memfd and the doorbells eventfds; the only name, local rank
 * 0's listening socket, is random and gone after attach; /dev/shm gets nothing -- */
static int unix_names_with(const char *part)
{
    char line[512];
    int n = 0;
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, part) != NULL;
    fclose(f);
    return n;
}

static bool fd_is(int fd, const char *what)
{
    char path[64], link[128];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t l = readlink(path, link, sizeof(link) - 1);
    if (l < 0)
        return false;
    link[l] = 0;
    return strstr(link, what) != NULL;
}

static int nn_body(vt_ctx_t * c)
{
    vnode_t *v;
    char name[64];
    CHECK(vnode_init(&c->cfg, &v, NULL, 0) == VNODE_OK, "init");
    if (c->rank == 0) {
        uint64_t key = vnode_key(v);
        snprintf(name, sizeof(name), "@amlapi-vnode-%u-%016llx", (unsigned) geteuid(),
                 (unsigned long long) key);
        CHECK(key != 0 && unix_names_with(name) == 1, "key %#llx: %d sockets named %s",
              (unsigned long long) key, unix_names_with(name), name);
        memcpy(c->scratch, name, sizeof(name));
        /* the segment exists now, with no name: a crash from here leaves nothing */
        CHECK(vt_shm_entries() == 0, "/dev/shm has an entry between init and attach");
    }
    CHECK_OK(v, vt_attach(c, v));
    CHECK(unix_names_with(c->scratch) == 0, "%s is still there after attach", c->scratch);
    CHECK(unix_names_with("amlapi") == 0, "a unix socket named amlapi-... after attach");
    CHECK(fd_is(vnode_doorbell_fd(v), "eventfd"), "the doorbell is not an eventfd");
    CHECK(vt_shm_entries() == 0, "/dev/shm has an entry");
    vt_barrier(c);
    vnode_finalize(v);
    return 0;
}

int t_no_names(void)
{
    vt_opts_t o = {.killed_rank = -1 };
    return vt_run(3, nn_body, &o);
}

/* -- hand_foreign: local rank 0 hands the segment only to a process of its uid, once per
 * local index: another user's connection, a malformed request and a second request for an
 * index already served are refused, and the ranks of the job still attach -- */
static int foreign_request(const char *name, uid_t uid, uint32_t magic, uint32_t local)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        if (uid && setuid(uid) != 0)
            _exit(2);
        struct sockaddr_un a = {.sun_family = AF_UNIX };
        size_t n = strlen(name + 1);
        memcpy(a.sun_path + 1, name + 1, n);
        int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (s < 0 || connect(s, (struct sockaddr *) &a,
                             (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0)
            _exit(3);
        /* a request as a rank makes it: its header and its doorbell */
        uint32_t q[6] = { magic, local, 0, 0, 0, 0 };
        int bell = eventfd(0, 0);
        char cbo[CMSG_SPACE(sizeof(int))];
        struct iovec qo = { q, sizeof(q) };
        struct msghdr mo = {.msg_iov = &qo,.msg_iovlen = 1,.msg_control = cbo,
            .msg_controllen = sizeof(cbo)
        };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mo);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &bell, sizeof(int));
        if (bell < 0 || sendmsg(s, &mo, MSG_NOSIGNAL) != sizeof(q))
            _exit(0);   /* closed at once: refused */
        /* refused: the connection closes without any descriptor */
        char buf[64], cb[CMSG_SPACE(sizeof(int))];
        struct iovec io = { buf, sizeof(buf) };
        struct msghdr m = {.msg_iov = &io,.msg_iovlen = 1,.msg_control = cb,
            .msg_controllen = sizeof(cb)
        };
        struct pollfd pf = { s, POLLIN, 0 };
        if (poll(&pf, 1, 10000) != 1)
            _exit(5);
        ssize_t r = recvmsg(s, &m, 0);
        _exit(r > 0 ? 6 : 0);  /* anything but the end (or a reset): it was served */
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

int t_hand_foreign(void)
{
    char job[64], name[64], err[512];
    vnode_config_t cfg;
    vnode_t *v;
    one_rank_cfg(&cfg, vt_job_name(job, sizeof(job)), 3);
    cfg.attach_timeout_ms = 4000;
    CHECK(vnode_init(&cfg, &v, err, sizeof(err)) == VNODE_OK, "init: %s", err);
    snprintf(name, sizeof(name), "@amlapi-vnode-%u-%016llx", (unsigned) geteuid(),
             (unsigned long long) vnode_key(v));
    /* the requests come from other processes while local rank 0 serves in vnode_attach;
     * foreign_request exits 0 when closed without the segment. A valid request for index 2
     * waits for index 1, which never comes: when rank 0 gives up, it too gets nothing. */
    fflush(NULL);
    pid_t p2 = fork();
    if (p2 == 0)
        _exit(foreign_request(name, 0, 0x766e6864u, 2));
    pid_t p = fork();
    if (p == 0) {
        struct { uid_t uid; uint32_t magic, local; int want; const char *what; } q[] = {
            { 0, 0x766e6864u, 2, 0, "local index 2 was accepted twice" },
            { 12345, 0x766e6864u, 1, 0, "another user was served" },
            { 0, 0x12345678u, 1, 0, "a request with a bad magic was served" },
            { 0, 0x766e6864u, 7, 0, "local index 7 of 3 was served" },
            { 0, 0x766e6864u, 0, 0, "local index 0 was served" },
        };
        vt_sleep_ms(300);       /* after the first request of index 2 */
        for (unsigned i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
            if (q[i].uid && geteuid() != 0)
                continue;       /* another user needs root */
            int rc = foreign_request(name, q[i].uid, q[i].magic, q[i].local);
            if (rc != q[i].want) {
                fprintf(stderr, "request %u: %s (%d)\n", i, q[i].what, rc);
                _exit(1);
            }
        }
        _exit(0);
    }
    int rc = vnode_attach(v, 0), st;
    fprintf(stderr, "  (%s)\n", vnode_error(v));
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the requests were not answered as expected");
    waitpid(p2, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "index 2 got the segment though 1 never came "
          "(%#x)", st);
    int refused = geteuid() == 0 ? 5 : 4;
    char want[64];
    snprintf(want, sizeof(want), "local ranks 1 (1 of 3) never attached (%d requests refused)",
             refused);
    CHECK(rc == VNODE_ERR_TIMEOUT && strstr(vnode_error(v), want), "attach -> %d", rc);
    vnode_finalize(v);
    return 0;
}

/* -- alone: one local rank -- */
int t_alone(void)
{
    char job[64];
    vnode_config_t cfg;
    vnode_t *v;
    one_rank_cfg(&cfg, vt_job_name(job, sizeof(job)), 1);
    CHECK(vnode_init(&cfg, &v, NULL, 0) == VNODE_OK, "init");
    CHECK_OK(v, vnode_attach(v, 0));
    CHECK(vt_shm_entries() == 0, "/dev/shm has an entry");
    CHECK(vnode_single_copy(v) == 1, "single copy to itself is off");
    CHECK(vnode_arm(v) == VNODE_OK, "arm");
    CHECK(vnode_poll(v, count_rx, NULL) == 0, "poll");
    CHECK(vnode_send(v, 0, "x", 1, NULL, 0) == VNODE_ERR_INVAL, "send to itself");
    uint64_t x = 42, y = 0;
    CHECK_OK(v, vnode_read(v, 0, &y, (uintptr_t) & x, 8));
    CHECK(y == 42, "read %llu", (unsigned long long) y);
    vnode_finalize(v);
    return 0;
}

/* -- watch: a rank killed with SIGKILL is named at once by the rank that watches it; a rank
 * that finalizes is not -- */
struct watch_sh {
    pid_t pids[3];
    int died, local, pid;
    int finalized1;
};

static void watch_cb(void *arg, int n, const int *local, const int *pid)
{
    struct watch_sh *w = (struct watch_sh *) ((vt_ctx_t *) arg)->scratch;
    w->local = n == 1 ? local[0] : -n;
    w->pid = pid[0];
    __atomic_add_fetch(&w->died, 1, __ATOMIC_SEQ_CST);
}

static int watch_body(vt_ctx_t * c)
{
    struct watch_sh *w = (struct watch_sh *) c->scratch;
    w->pids[c->rank] = getpid();
    CHECK_OK(c->v, vnode_watch(c->v, watch_cb, c));
    vt_barrier(c);
    if (c->rank == 2) {
        for (;;)
            pause();    /* until killed */
    }
    if (c->rank == 0) {
        CHECK(kill(w->pids[2], SIGKILL) == 0, "kill: %s", strerror(errno));
        /* rank 1 watches rank 2 */
        for (int i = 0; __atomic_load_n(&w->died, __ATOMIC_SEQ_CST) == 0; i++) {
            CHECK(i < 2000, "nobody said that rank 2 died");
            vt_sleep_ms(1);
        }
        CHECK(w->local == 2 && w->pid == (int) w->pids[2], "named local %d pid %d, killed 2 "
              "(pid %d)", w->local, w->pid, (int) w->pids[2]);
        /* rank 1 finalizes normally: rank 0, its watcher, says nothing */
        while (!__atomic_load_n(&w->finalized1, __ATOMIC_SEQ_CST))
            vt_sleep_ms(1);
        vt_sleep_ms(200);
        CHECK(__atomic_load_n(&w->died, __ATOMIC_SEQ_CST) == 1, "%d deaths reported", w->died);
    } else {
        while (__atomic_load_n(&w->died, __ATOMIC_SEQ_CST) == 0)
            vt_sleep_ms(1);
        vnode_finalize(c->v);
        c->v = NULL;
        __atomic_store_n(&w->finalized1, 1, __ATOMIC_SEQ_CST);
    }
    return 0;
}

int t_watch(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = 2 };
    return vt_run(3, watch_body, &o);
}

/* -- watch_finalize: a death the watcher is reporting while its rank finalizes is reported
 * before vnode_finalize returns, never after (the report may use what finalize frees) -- */
struct wf_sh {
    pid_t pid1;
    int reported, after_finalize, finalized;
};

static void wf_cb(void *arg, int n, const int *local, const int *pid)
{
    struct wf_sh *w = arg;
    if (__atomic_load_n(&w->finalized, __ATOMIC_SEQ_CST))
        __atomic_store_n(&w->after_finalize, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&w->reported, 1, __ATOMIC_SEQ_CST);
}

static int wf_body(vt_ctx_t * c)
{
    struct wf_sh *w = (struct wf_sh *) c->scratch;
    if (c->rank == 1) {
        w->pid1 = getpid();
        vt_barrier(c);
        for (;;)
            pause();    /* until killed */
    }
    /* rank 0 watches rank 1; its watcher waits 300 ms after it decided to report */
    vnode_test_watch_delay_us = 300000;
    CHECK_OK(c->v, vnode_watch(c->v, wf_cb, w));
    vt_barrier(c);
    CHECK(kill(w->pid1, SIGKILL) == 0, "kill: %s", strerror(errno));
    vt_sleep_ms(100);   /* the watcher woke and decided, and sleeps */
    vnode_finalize(c->v);
    c->v = NULL;
    __atomic_store_n(&w->finalized, 1, __ATOMIC_SEQ_CST);
    vt_sleep_ms(500);
    CHECK(__atomic_load_n(&w->reported, __ATOMIC_SEQ_CST), "the death was never reported");
    CHECK(!__atomic_load_n(&w->after_finalize, __ATOMIC_SEQ_CST),
          "the death was reported after vnode_finalize returned");
    return 0;
}

int t_watch_finalize(void)
{
    vt_opts_t o = {.setup = 1,.killed_rank = 1 };
    return vt_run(2, wf_body, &o);
}

/* -- bell_nlocal: a node of many ranks (each holds every doorbell, more descriptors than
 * one message carries) attaches, and every doorbell wakes its rank -- */
static int bn_body(vt_ctx_t * c)
{
    /* every rank but 0 arms and sleeps; rank 0 sends one packet to each */
    if (c->rank != 0) {
        struct pollfd p = { vnode_doorbell_fd(c->v), POLLIN, 0 };
        CHECK(vnode_arm(c->v) == VNODE_OK, "arm");
        vt_barrier(c);
        CHECK(poll(&p, 1, 20000) == 1, "rank %d: the doorbell did not ring", c->rank);
        int got = 0;
        while (got == 0)
            CHECK(vnode_poll(c->v, count_rx, &got) >= 0, "poll: %s", vnode_error(c->v));
        CHECK(got == 1, "rank %d: %d packets", c->rank, got);
    } else {
        int none = 0;
        vt_barrier(c);
        for (int r = 1; r < c->size; r++)
            while (vnode_send(c->v, r, "x", 1, NULL, 0) == VNODE_AGAIN)
                vnode_poll(c->v, count_rx, &none);
    }
    vt_barrier(c);
    return 0;
}

static void bn_cfg(vnode_config_t * cfg, void *arg)
{
    cfg->max_pkt = 256;         /* small rings: 203 * 202 of them */
    cfg->ring_bytes = 0;
}

int t_bell_nlocal(void)
{
    /* 203 forks take over a minute under AddressSanitizer on 2 busy cores */
    vt_opts_t o = {.setup = 1,.killed_rank = -1,.cfg_hook = bn_cfg,.timeout_s = 300 };
    return vt_run(203, bn_body, &o);
}

/* -- ptracer: under Yama's ptrace_scope 1 a rank lets only the nearest common ancestor of the
 * node's ranks (the launcher's proxy) and its descendants read it: that ancestor, found
 * through /proc, for siblings, a parent and its child, and a grandchild -- */
int t_ptracer(void)
{
    int go[2];
    CHECK(pipe(go) == 0, "pipe");
    fflush(NULL);
    pid_t a = fork();
    if (a == 0) {
        pid_t b = fork();
        if (b == 0) {
            char c;
            if (read(go[0], &c, 1) < 0)
                _exit(1);
            _exit(0);
        }
        char c;
        if (read(go[0], &c, 1) < 0)
            _exit(1);
        waitpid(b, NULL, 0);
        _exit(0);
    }
    pid_t a2 = fork();
    if (a2 == 0) {
        char c;
        if (read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    /* a's child b: the first child process of a, found through /proc */
    pid_t b = 0;
    for (int i = 0; i < 200 && !b; i++) {
        char path[64], line[64];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) a, (int) a);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(line, sizeof(line), f))
                b = (pid_t) atoi(line);
            fclose(f);
        }
        if (!b)
            vt_sleep_ms(5);
    }
    CHECK(b > 0, "no grandchild");
    uint64_t me = (uint64_t) getpid();
    uint64_t sib[2] = { (uint64_t) a, (uint64_t) a2 }, pc[2] = { (uint64_t) a, (uint64_t) b };
    uint64_t deep[3] = { (uint64_t) b, (uint64_t) a2, me }, one[1] = { (uint64_t) b };
    CHECK(vnode_common_ancestor(sib, 2) == (pid_t) me, "siblings: %d, not their parent %d",
          (int) vnode_common_ancestor(sib, 2), (int) me);
    CHECK(vnode_common_ancestor(pc, 2) == a, "parent and child: %d, not the parent %d",
          (int) vnode_common_ancestor(pc, 2), (int) a);
    CHECK(vnode_common_ancestor(deep, 3) == (pid_t) me, "grandchild, child, self: %d, not %d",
          (int) vnode_common_ancestor(deep, 3), (int) me);
    CHECK(vnode_common_ancestor(one, 1) == b, "one rank: %d, not itself %d",
          (int) vnode_common_ancestor(one, 1), (int) b);
    if (write(go[1], "xxx", 3) != 3)
        return 1;
    waitpid(a, NULL, 0);
    waitpid(a2, NULL, 0);
    return 0;
}
