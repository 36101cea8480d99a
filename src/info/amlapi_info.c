/*
 * amlapi_info -n N [--ppn P]: what MPI_Init of a job of N ranks (P of them on this node)
 * would choose on this node, and why; exits 1 naming the cause where that MPI_Init would fail.
 * In the spirit of ucx_info and fi_info.
 *
 * It decides with the code MPI_Init runs wherever that code carries no MPICH header:
 *   - memory: vnode_layout() sizes the segment as vnode_init does, from the
 *     vnode_config_t aml's vn_init builds (aml_vnode.c);
 *   - single copy: two sibling processes (as ranks under a launcher are) run vnode_init and
 *     vnode_attach, whose probe (Yama's PR_SET_PTRACER, process_vm_readv) is the one at init;
 *   - torus: coll_torus's own parsers, as amlapi_coll.c calls them;
 *   - UCX: the transports and devices UCT's API lists.
 * Every amlapi CVAR set in the environment is parsed by the type its block gives (the table
 * maint/gen-tuning generates, amlapi_cvars.h); the range checks MPICH's glue makes are restated
 * for the CVARs this command uses, each naming its variable as MPI_Init's error would.
 * Every environment value is untrusted: parsed strictly, overflow-checked.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"         /* vnode_layout: the segment's size, as vnode_init computes it */
#include "aml_impl.h"           /* aml_vnode_max_hdr: vnode's largest header */
#include "coll_torus.h"
#include "amlapi_cvars.h"
#include "../ch4/netmod/amlapi/amlapi_cvar_range.h"       /* generated from the CVAR blocks by maint/gen-tuning */

#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <inttypes.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#ifndef AMLAPI_VERSION
#define AMLAPI_VERSION "unknown"
#endif
#ifndef AMLAPI_GIT
#define AMLAPI_GIT "unknown"
#endif
#ifndef AMLAPI_MPICH
#define AMLAPI_MPICH "unknown"
#endif

/* MPICH 4.0.2's default for MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (mpidig_init.c): the packet
 * size may not exceed it (amlapi_init.c) */
#define CH4_AM_PACK_BUFFER_DEFAULT 69632

static int quiet;
static int nfail;
static char fails[8][512];

static void say(const char *fmt, ...)
{
    va_list ap;
    if (quiet)
        return;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

/* A cause MPI_Init would fail on: printed in place and again in the verdict. */
static void fail(const char *fmt, ...)
{
    va_list ap;
    char msg[512];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* the settings pass and a later check may both refuse one value: say it once */
    for (int i = 0; i < nfail && i < (int) (sizeof(fails) / sizeof(fails[0])); i++)
        if (!strcmp(fails[i], msg))
            return;
    say("  FAIL: %s\n", msg);
    if (nfail < (int) (sizeof(fails) / sizeof(fails[0])))
        snprintf(fails[nfail], sizeof(fails[0]), "%s", msg);
    nfail++;
}

/* An environment string as printable ASCII, at most 60 characters (a hostile value must not
 * drive the terminal); one of two static buffers, so two may appear in one message. */
static const char *clean(const char *s)
{
    static char buf[2][64];
    static int which;
    char *b = buf[which ^= 1];
    size_t i = 0;
    for (; s && s[i] && i < 60; i++)
        b[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    b[i] = '\0';
    if (s && s[i])
        snprintf(b + 57, 4, "...");
    return b;
}

/* ---- MPICH's reading of a CVAR from the environment ------------------------------------ */

/* MPICH reads MPICH_X, then MPIR_PARAM_X, then MPIR_CVAR_X; the last one set wins.
 * *var names the variable the value came from. */
static const char *cvar_env(const char *x, char *var, size_t len)
{
    static const char *const pre[3] = { "MPICH_", "MPIR_PARAM_", "MPIR_CVAR_" };
    const char *val = NULL;
    for (int i = 0; i < 3; i++) {
        char name[128];
        snprintf(name, sizeof(name), "%s%s", pre[i], x);
        const char *v = getenv(name);
        if (v) {
            val = v;
            snprintf(var, len, "%s", name);
        }
    }
    if (!val)
        snprintf(var, len, "MPIR_CVAR_%s", x);
    return val;
}

/* The range MPI_Init holds an int CVAR to (the netmod's table), if it has one: 1 and *lo,
 * *hi, *zero (0 allowed too); else 0. */
static int range_of(const char *x, long long *lo, long long *hi, int *zero)
{
    static const struct {
        const char *name;
        int lo, hi, zero;
    } ranges[] = {
#define ROW(n, l, h, z) { #n, l, h, z },
        MPIDI_AMLAPI_CVAR_RANGES(ROW)
#undef ROW
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
        if (!strcmp(ranges[i].name, x)) {
            *lo = ranges[i].lo;
            *hi = ranges[i].hi;
            *zero = ranges[i].zero;
            return 1;
        }
    return 0;
}

/* An int CVAR's value s, read from var: MPICH's syntax (spaces, an optional '-' then '+',
 * digits; no digit reads as 0, as MPL_env2int has it), but a value that does not fit an int
 * is refused here where MPL_env2int would wrap it silently. 0 and *v set, or -1 (the message
 * names the variable). */
static int parse_int(const char *var, const char *s, long long lo, long long hi, int zero,
                     int *v)
{
    const char *p;
    int neg = 0, val = 0;
    for (p = s; *p == ' ' || (*p >= '\t' && *p <= '\r'); p++);
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p == '+')
        p++;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (__builtin_mul_overflow(val, 10, &val) ||
            (neg ? __builtin_sub_overflow(val, *p - '0', &val)
             : __builtin_add_overflow(val, *p - '0', &val))) {
            fail("%s=%s does not fit in an int (MPICH would read a wrapped value)", var, clean(s));
            return -1;
        }
    }
    if (*p) {
        fail("%s=%s is not an integer: MPI_Init fails parsing it", var, clean(s));
        return -1;
    }
    if ((val < lo || val > hi) && !(zero && val == 0)) {
        fail("%s=%d is out of range (%s%lld to %lld): MPI_Init refuses it", var, val,
             zero ? "0, or " : "", lo, hi);
        return -1;
    }
    *v = val;
    return 0;
}

/* A boolean CVAR's value: MPL_env2bool's words. */
static int parse_bool(const char *var, const char *s, int *v)
{
    static const char *const yes[] = { "YES", "yes", "TRUE", "true", "ON", "on", "1" };
    static const char *const no[] = { "NO", "no", "FALSE", "false", "OFF", "off", "0" };
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcmp(s, yes[i])) {
            *v = 1;
            return 0;
        }
        if (!strcmp(s, no[i])) {
            *v = 0;
            return 0;
        }
    }
    fail("%s=%s is not a boolean (1/0, yes/no, true/false, on/off): MPI_Init fails parsing "
         "it", var, clean(s));
    return -1;
}

/* An int CVAR as MPI_Init reads it (the last of its three names set wins), within its range
 * (amlapi's table, or lo..hi for one of MPICH's): 0 unset (*v = dflt), 1 set, -1 refused. */
static int cvar_int(const char *x, long long lo, long long hi, int dflt, int *v, char *var,
                    size_t varlen)
{
    const char *s = cvar_env(x, var, varlen);
    int zero = 0;
    *v = dflt;
    if (!s)
        return 0;
    range_of(x, &lo, &hi, &zero);
    return parse_int(var, s, lo, hi, zero, v) < 0 ? -1 : 1;
}

static int cvar_bool(const char *x, int dflt, int *v, char *var, size_t varlen)
{
    const char *s = cvar_env(x, var, varlen);
    *v = dflt;
    if (!s)
        return 0;
    return parse_bool(var, s, v) < 0 ? -1 : 1;
}

/* A count on the command line: 1..INT_MAX, digits only. */
static int arg_count(const char *opt, const char *s, int *out)
{
    int v = 0;
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, *p - '0', &v)) {
            fprintf(stderr, "amlapi_info: %s %s: not a count from 1 to %d\n", opt, s, INT_MAX);
            return -1;
        }
    if (v < 1) {
        fprintf(stderr, "amlapi_info: %s %s: not a count from 1 to %d\n", opt, s, INT_MAX);
        return -1;
    }
    *out = v;
    return 0;
}

static void human(uint64_t b, char *buf, size_t len)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double) b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, len, "%.1f MiB", (double) b / (1ull << 20));
    else
        snprintf(buf, len, "%.1f KiB", (double) b / 1024);
}

/* ---- cores ------------------------------------------------------------------------------ */

/* Cores the way MPI_Init counts them (amlapi_progress.c: hwloc's cores, allowed ones only) */
static int hwloc_cores(int *pus)
{
    hwloc_topology_t topo;
    int n = 0;
    *pus = 0;
    if (hwloc_topology_init(&topo) != 0)
        return 0;
    if (hwloc_topology_load(topo) == 0) {
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        *pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    }
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 0;
}

static void check_cores(int ppn)
{
    char var[128], mvar[128];
    int pus, cores = hwloc_cores(&pus), over, polling = 1;
    const char *mode = cvar_env("AMLAPI_PROGRESS_MODE", mvar, sizeof(mvar));
    say("cores: %d allowed (%d hardware threads), %d rank%s on this node\n", cores, pus, ppn,
        ppn == 1 ? "" : "s");
    if (mode && strcmp(mode, "polling") && strcmp(mode, "interrupt") && strcmp(mode, "coprocessor"))
        fail("%s=%s: use polling, interrupt or coprocessor", mvar, clean(mode));
    else if (mode && strcmp(mode, "polling"))
        polling = 0;
    if (cvar_int("AMLAPI_OVERSUBSCRIBED", INT_MIN, INT_MAX, -1, &over, var, sizeof(var)) < 0)
        return;
    int oversub = over >= 0 ? over : (cores > 0 && ppn > cores);
    if (!polling)
        say("  progress mode %s: blocked calls sleep when idle in any case\n", mode);
    else if (oversub)
        say("  oversubscribed%s%s%s: blocked calls yield their core, then sleep, instead of "
            "spinning\n", over >= 0 ? " (set by " : "", over >= 0 ? var : "",
            over >= 0 ? ")" : "");
    else
        say("  not oversubscribed%s: blocked calls spin (polling mode)\n",
            over == 0 ? " (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED=0)" : "");
    if (over < 0 && cores > 0 && ppn > cores)
        say("  %d ranks share %d cores: each waits for the others' time slices; expect "
            "latencies of scheduler ticks in tightly coupled phases\n", ppn, cores);
}

/* ---- single copy: two sibling processes run vnode's own probe ------------------------- */

static volatile uint64_t probe_word = 0x600dcafe;       /* same address in both children */

typedef struct {
    int vnode_ok;               /* both ran vnode_init and vnode_attach */
    int single_copy;            /* vnode_single_copy() after attach */
    int raw_errno;              /* a plain process_vm_readv of the sibling: 0 or errno */
    char err[400];
} probe_result_t;

static void probe_child(int local, int ready_w, int go_r, int res_w,
                        int sib_r)
{
    probe_result_t r;
    vnode_config_t vc;
    vnode_t *v = NULL;
    char c = 'x';
    memset(&r, 0, sizeof(r));
    vnode_config_default(&vc);
    vc.nlocal = 2;
    vc.local = local;
    vc.attach_timeout_ms = 10000;
    int rc = vnode_init(&vc, &v, r.err, sizeof(r.err));
    /* local rank 0's key goes to the parent, which hands it to both (as aml's exchange) */
    uint64_t mine[2] = { (uint64_t) local, rc == VNODE_OK ? vnode_key(v) : 0 }, key;
    if (write(ready_w, mine, sizeof(mine)) != (ssize_t) sizeof(mine) ||
        read(go_r, &key, sizeof(key)) != (ssize_t) sizeof(key))
        _exit(3);
    if (rc == VNODE_OK) {
        rc = vnode_attach(v, key);
        if (rc == VNODE_OK) {
            r.vnode_ok = 1;
            r.single_copy = vnode_single_copy(v);
        } else {
            snprintf(r.err, sizeof(r.err), "%s", vnode_error(v));
        }
    }
    /* a plain read of the sibling, for the errno vnode's probe does not keep */
    pid_t sib;
    if (read(sib_r, &sib, sizeof(sib)) == sizeof(sib)) {
        uint64_t got = 0;
        errno = 0;
        struct iovec l = { &got, sizeof(got) }, rm = { (void *) &probe_word, sizeof(got) };
        r.raw_errno = process_vm_readv(sib, &l, 1, &rm, 1, 0) == (ssize_t) sizeof(got) &&
            got == probe_word ? 0 : (errno ? errno : EIO);
    }
    if (write(res_w, &r, sizeof(r)) != (ssize_t) sizeof(r))
        _exit(4);
    /* both must finish reading before either ends */
    if (read(go_r, &c, 1) != 1)
        _exit(5);
    vnode_finalize(v);  /* NULL-safe */
    _exit(0);
}

/* 1 when len bytes were read */
static int read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *) buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        got += (size_t) n;
    }
    return 1;
}

static int read_int_file(const char *path, int *v)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%d", v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* "Seccomp:" of /proc/self/status: 0 none, 1 strict, 2 filter; -1 unknown */
static int seccomp_mode(void)
{
    char line[256];
    int m = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "Seccomp:", 8))
            m = atoi(line + 8);
    fclose(f);
    return m;
}

/* 1 in a user namespace other than the initial one (its uid_map is not the identity) */
static int in_userns(void)
{
    unsigned a, b, c;
    FILE *f = fopen("/proc/self/uid_map", "r");
    if (!f)
        return -1;
    int n = fscanf(f, "%u %u %u", &a, &b, &c);
    fclose(f);
    return n == 3 ? !(a == 0 && b == 0 && c == 4294967295u) : -1;
}

static const char *container(void)
{
    const char *c = getenv("container");
    if (c && *c)
        return c;
    if (access("/.dockerenv", F_OK) == 0)
        return "docker";
    if (access("/run/.containerenv", F_OK) == 0)
        return "podman";
    return NULL;
}

static void check_single_copy(int ppn, int vnode_on)
{
    char var[128];
    int want;
    if (cvar_bool("AMLAPI_VNODE_SINGLE_COPY", 1, &want, var, sizeof(var)) < 0)
        return;
    say("single copy (process_vm_readv between the ranks of a node):\n");
    int scope = -1, have_yama = read_int_file("/proc/sys/kernel/yama/ptrace_scope", &scope) == 0;
    int sc = seccomp_mode(), ns = in_userns();
    const char *ct = container();
    say("  Yama ptrace_scope: %s%s", have_yama ? "" : "no Yama (no restriction from it)",
        have_yama ? "" : "\n");
    if (have_yama)
        say("%d (%s)\n", scope, scope == 0 ? "classic: same uid may attach" :
            scope == 1 ? "restricted: each rank lets the node's ranks attach, naming their "
            "launcher's proxy with PR_SET_PTRACER" :
            scope == 2 ? "admin-only attach: refuses single copy" :
            scope == 3 ? "no attach: refuses single copy" : "unknown");
    say("  seccomp: %s; user namespace: %s%s%s\n",
        sc == 0 ? "none" : sc == 1 ? "strict" : sc == 2 ? "filter (may deny the call)" :
        "unknown", ns == 1 ? "yes (not the initial one)" : ns == 0 ? "initial" : "unknown",
        ct ? "; container: " : "", ct ? ct : "");

    /* the probe MPI_Init runs, between two sibling processes */
    int ready[2], go[2], res[2], sib[2][2];
    pid_t kid[2] = { -1, -1 };
    probe_result_t r[2];
    memset(r, 0, sizeof(r));
    if (pipe(ready) || pipe(go) || pipe(res) || pipe(sib[0]) || pipe(sib[1])) {
        say("  probe: pipe: %s\n", strerror(errno));
        return;
    }
    /* a child that died must end a read with EOF, not hang it, and a write to it must fail,
     * not kill us: each side keeps only its ends, and SIGPIPE is ignored meanwhile */
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        kid[i] = fork();
        if (kid[i] == 0) {
            close(ready[0]);
            close(go[1]);
            close(res[0]);
            for (int j = 0; j < 2; j++) {
                close(sib[j][1]);
                if (j != i)
                    close(sib[j][0]);
            }
            probe_child(i, ready[1], go[0], res[1], sib[i][0]);
        }
        if (kid[i] < 0)
            say("  probe: fork: %s\n", strerror(errno));
    }
    close(ready[1]);
    close(go[0]);
    close(res[1]);
    close(sib[0][0]);
    close(sib[1][0]);
    uint64_t rec[4], keys[2] = { 0, 0 };
    int ok = kid[0] > 0 && kid[1] > 0 && read_full(ready[0], rec, sizeof(rec));
    if (ok)
        keys[0] = keys[1] = rec[0] == 0 ? rec[1] : rec[3];
    ok = ok && write(go[1], keys, sizeof(keys)) == (ssize_t) sizeof(keys);
    /* each child learns its sibling's pid for the plain read */
    ok = ok && write(sib[0][1], &kid[1], sizeof(pid_t)) == sizeof(pid_t) &&
        write(sib[1][1], &kid[0], sizeof(pid_t)) == sizeof(pid_t);
    for (int i = 0; ok && i < 2; i++)
        ok = read_full(res[0], &r[i], sizeof(r[i]));
    if (ok && write(go[1], "gg", 2) != 2)
        ok = 0;
    for (int i = 0; i < 2; i++) {
        int st;
        if (kid[i] <= 0)
            continue;
        if (!ok)
            kill(kid[i], SIGKILL);      /* one blocked on a sibling that failed */
        if (waitpid(kid[i], &st, 0) != kid[i] || !WIFEXITED(st) || WEXITSTATUS(st))
            ok = 0;
    }
    close(ready[0]);
    close(go[1]);
    close(res[0]);
    close(sib[0][1]);
    close(sib[1][1]);
    signal(SIGPIPE, old_pipe);
    if (!ok) {
        say("  probe: the two probe processes did not finish\n");
        return;
    }
    if (!r[0].vnode_ok || !r[1].vnode_ok) {
        /* vnode could not even start between two processes: MPI_Init would fail the same way */
        if (vnode_on && ppn > 1)
            fail("vnode between two processes of this node: %s",
                 r[0].vnode_ok ? r[1].err : r[0].err);
        else
            say("  probe: vnode could not start: %s\n", r[0].vnode_ok ? r[1].err : r[0].err);
        return;
    }
    int allowed = r[0].single_copy && r[1].single_copy;
    int e = r[0].raw_errno ? r[0].raw_errno : r[1].raw_errno;
    if (allowed)
        say("  allowed: vnode's probe read a sibling process%s\n",
            want ? "" : " (but MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY is off)");
    else {
        const char *why = e == ENOSYS ? "process_vm_readv is not available (a kernel without "
            "cross-memory attach, or a seccomp filter answering ENOSYS)" :
            have_yama && scope >= 2 ? "Yama's ptrace_scope (2 or 3) forbids it; an administrator "
            "can set kernel.yama.ptrace_scope=1 (vnode lifts 1 for the node's ranks)" :
            sc == 2 ? "a seccomp filter denies it (a container profile: allow process_vm_readv, "
            "or run with CAP_SYS_PTRACE)" :
            ns == 1 ? "the user namespace: the ranks lack ptrace access to each other" :
            "the kernel's ptrace access check (an LSM such as AppArmor or SELinux?)";
        say("  REFUSED by this node: %s (%s)\n", why, e ? strerror(e) : "probe failed");
        say("  MPI_Init still works: large on-node messages go through the FIFOs (slower; an "
            "unexpected large message costs the receiver its size); the node's first rank "
            "warns once\n");
    }
    if (allowed && e)
        say("  (a plain read between the probe processes failed: %s)\n", strerror(e));
}

/* ---- the vnode segment's memory ------------------------------------------------------ */

/* The segment vnode_init would make for ppn ranks, from the configuration aml's vn_init
 * builds: its bytes (0 when vnode refuses it: err says why) and the FIFOs' size. */
static size_t segment_bytes(int ppn, size_t ring, size_t packet_size, size_t *ring_out,
                            char *err, size_t errlen)
{
    vnode_config_t vc;
    vnode_layout_t L;
    char e[256];
    vnode_config_default(&vc);
    vc.nlocal = ppn;
    vc.local = 0;
    vc.ring_bytes = ring;
    vc.max_pkt = aml_vnode_max_hdr() + packet_size;   /* as aml_vnode.c's vn_init */
    if (vnode_layout(&vc, &L, err ? err : e, err ? errlen : sizeof(e)) != VNODE_OK)
        return 0;
    if (ring_out)
        *ring_out = L.ring_bytes;
    return L.total;
}

static int check_vnode_memory(int ppn, int *vnode_on)
{
    char var[128], rvar[128], pvar[128], bvar[128], h1[32], h2[32];
    int on, nolocal = 0, ring, pkt, pack;
    if (cvar_bool("AMLAPI_VNODE", 1, &on, var, sizeof(var)) < 0)
        return -1;
    if (cvar_bool("NOLOCAL", 0, &nolocal, bvar, sizeof(bvar)) < 0)
        return -1;
    *vnode_on = on && !nolocal;
    if (cvar_int("AMLAPI_VNODE_RING_SIZE", INT_MIN, INT_MAX, 0, &ring, rvar, sizeof(rvar)) < 0 ||
        cvar_int("CH4_AM_PACK_BUFFER_SIZE", 0, INT_MAX, CH4_AM_PACK_BUFFER_DEFAULT, &pack, bvar,
                 sizeof(bvar)) < 0 ||
        cvar_int("AMLAPI_PACKET_SIZE", INT_MIN, INT_MAX, 8248, &pkt, pvar, sizeof(pvar)) < 0)
        return -1;
    if (pkt > pack) {
        fail("%s=%d exceeds MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (%d): MPI_Init refuses it", pvar,
             pkt, pack);
        return -1;
    }
    say("vnode (on-node shared memory):\n");
    if (!on || nolocal) {
        say("  off (%s): ranks of this node talk through UCX; no segment\n",
            !on ? var : "MPIR_CVAR_NOLOCAL");
        return 0;
    }
    if (ppn == 1) {
        say("  1 rank on this node: no segment\n");
        return 0;
    }
    char err[256];
    size_t fifo = 0, need = segment_bytes(ppn, (size_t) ring, (size_t) pkt, &fifo, err,
                                          sizeof(err));
    uint64_t avail;
    if (need == 0) {
        fail("%s: MPI_Init fails (MPIR_CVAR_AMLAPI_VNODE=0, or MPIR_CVAR_NUM_CLIQUES to split "
             "the node, avoids it)", err);
        return -1;
    }
    /* what vnode_init checks the segment against, by the same function */
    if ((avail = vnode_mem_available()) == UINT64_MAX)
        say("  (no MemAvailable in /proc/meminfo: vnode_init cannot check either)\n");
    human(need, h1, sizeof(h1));
    human(avail, h2, sizeof(h2));
    say("  segment for %d ranks: %zu bytes (%s): %d x %d FIFOs of %zu bytes%s%s\n", ppn, need,
        h1, ppn, ppn - 1, fifo, ring ? ", from " : " (sized by the rank count)",
        ring ? rvar : "");
    say("  memory: %llu bytes available (%s)\n", (unsigned long long) avail, h2);
    if (getenv("MPIR_CVAR_NUM_CLIQUES") || getenv("MPICH_NUM_CLIQUES"))
        say("  (MPIR_CVAR_NUM_CLIQUES splits the node: each clique's segment is smaller; the "
            "figure above is for all %d ranks)\n", ppn);
    if (avail >= need) {
        say("  ok\n");
        return 0;
    }
    /* the largest ring that fits, by the same function */
    size_t fit = 0;
    for (size_t r = 4096; r <= ((size_t) 1 << 30); r <<= 1) {
        size_t b = segment_bytes(ppn, r, (size_t) pkt, NULL, NULL, 0);
        if (b && b <= avail)
            fit = r;
    }
    if (fit)
        fail("the vnode segment of %d ranks needs %zu bytes of memory, and the node has %llu "
             "available: "
             "set MPIR_CVAR_AMLAPI_VNODE_RING_SIZE=%zu (needs %zu), or MPIR_CVAR_AMLAPI_VNODE=0",
             ppn, need, (unsigned long long) avail, fit,
             segment_bytes(ppn, fit, (size_t) pkt, NULL, NULL, 0));
    else
        fail("the vnode segment of %d ranks needs %zu bytes of memory, and the node has %llu "
             "available, and even the smallest rings need %zu: set MPIR_CVAR_AMLAPI_VNODE=0",
             ppn, need, (unsigned long long) avail,
             segment_bytes(ppn, 4096, (size_t) pkt, NULL, NULL, 0));
    return -1;
}

/* ---- UCX -------------------------------------------------------------------------------- */

static void check_ucx(void)
{
    unsigned maj, min, rel;
    uct_component_h *comps;
    unsigned ncomps, ntl = 0;
    ucp_get_version(&maj, &min, &rel);
    say("UCX %u.%u.%u (built against %d.%d)", maj, min, rel, UCP_API_MAJOR, UCP_API_MINOR);
    if (getenv("UCX_TLS"))
        say(", UCX_TLS=%s", clean(getenv("UCX_TLS")));
    if (getenv("UCX_NET_DEVICES"))
        say(", UCX_NET_DEVICES=%s", clean(getenv("UCX_NET_DEVICES")));
    say("\n  transports/devices:");
    if (uct_query_components(&comps, &ncomps) != UCS_OK) {
        fail("UCX: uct_query_components failed: UCX cannot start here");
        return;
    }
    for (unsigned c = 0; c < ncomps; c++) {
        uct_component_attr_t ca;
        memset(&ca, 0, sizeof(ca));
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(comps[c], &ca) != UCS_OK)
            continue;
        uct_md_resource_desc_t *mdr = calloc(ca.md_resource_count ? ca.md_resource_count : 1,
                                             sizeof(*mdr));
        if (!mdr)
            continue;
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources = mdr;
        if (uct_component_query(comps[c], &ca) == UCS_OK) {
            for (unsigned m = 0; m < ca.md_resource_count; m++) {
                uct_md_config_t *cfg;
                uct_md_h md;
                uct_tl_resource_desc_t *tl;
                unsigned n;
                if (uct_md_config_read(comps[c], NULL, NULL, &cfg) != UCS_OK)
                    continue;
                if (uct_md_open(comps[c], mdr[m].md_name, cfg, &md) == UCS_OK) {
                    if (uct_md_query_tl_resources(md, &tl, &n) == UCS_OK) {
                        for (unsigned t = 0; t < n; t++, ntl++)
                            say(" %s/%s", tl[t].tl_name, tl[t].dev_name);
                        uct_release_tl_resource_list(tl);
                    }
                    uct_md_close(md);
                }
                uct_config_release(cfg);
            }
        }
        free(mdr);
    }
    uct_release_component_list(comps);
    say("%s\n", ntl ? "" : " none");
    if (!ntl)
        fail("UCX finds no transport on this node: aml's UCX worker cannot start");
}

/* ---- torus ------------------------------------------------------------------------------ */

static void check_torus(int n, int ppn)
{
    char var[128], svar[128], fvar[128], buf[64];
    const char *mode = cvar_env("AMLAPI_COLL_TORUS", var, sizeof(var));
    const char *shape = cvar_env("AMLAPI_TORUS_SHAPE", svar, sizeof(svar));
    const char *file = cvar_env("AMLAPI_TORUS_MAP_FILE", fvar, sizeof(fvar));
    int described = (shape && *shape) || (file && *file), rc;
    ct_topo t;
    if (mode && strcmp(mode, "auto") && strcmp(mode, "on") && strcmp(mode, "off")) {
        fail("%s=%s: use one of: auto on off", var, clean(mode));
        return;
    }
    if (!mode)
        mode = "auto";
    say("torus collectives (coll_torus): %s=%s", var, mode);
    if (!strcmp(mode, "off") || (!strcmp(mode, "auto") && !described)) {
        say(", no torus described: MPICH's algorithms\n");
        return;
    }
    say("\n");
    /* the check holds every rank's node and coordinates: a bound keeps a typo in -n from
     * asking for gigabytes */
    if (n > (1 << 24)) {
        say("  not checked for more than %d ranks\n", 1 << 24);
        return;
    }
    if (file && *file) {
        say("  map file %s (%s)%s%s\n", clean(file), fvar, shape && *shape ? ", shape " : "",
            shape && *shape ? clean(shape) : "");
        rc = ct_topo_from_file(&t, file, n, shape && *shape ? shape : NULL);
        if (rc != CT_OK) {
            fail("%s: %s: MPI_Init fails", fvar, ct_strerror());    /* names file:line */
            return;
        }
    } else {
        int *node = malloc(sizeof(int) * (size_t) n);
        if (!node) {
            say("  out of memory for %d ranks\n", n);
            return;
        }
        for (int r = 0; r < n; r++)
            node[r] = r / ppn;
        rc = ct_topo_default(&t, n, node, shape && *shape ? shape : NULL);
        free(node);
        if (rc != CT_OK && described) {
            fail("%s=%s: %s: MPI_Init fails", svar, clean(shape), ct_strerror());
            return;
        }
        if (rc != CT_OK) {
            say("  no default torus for %d ranks, %d per node (%s): MPICH's algorithms\n", n,
                ppn, ct_strerror());
            return;
        }
    }
    ct_shape_format(t.dims, t.wrap, buf, sizeof(buf));
    if (!strcmp(mode, "auto") && ct_topo_nnodes(&t) < 2)
        say("  parses: %s, but one node: MPICH's algorithms (faster in shared memory)\n", buf);
    else
        say("  parses: %s, %d nodes: coll_torus's schedules\n", buf, ct_topo_nnodes(&t));
    ct_topo_free(&t);
}

/* ---- the settings: every amlapi CVAR in the environment, by the type its block gives ---- */

extern char **environ;

static void check_settings(void)
{
    static const char *const pre[3] = { "MPICH_", "MPIR_PARAM_", "MPIR_CVAR_" };
    const size_t ncv = sizeof(amlapi_cvars) / sizeof(amlapi_cvars[0]);
    int shown = 0;
    say("settings (amlapi CVARs in the environment):");
    for (char **e = environ; *e; e++) {
        const char *x = NULL;
        for (int i = 0; i < 3 && !x; i++)
            if (!strncmp(*e, pre[i], strlen(pre[i])) && !strncmp(*e + strlen(pre[i]), "AMLAPI_", 7))
                x = *e + strlen(pre[i]);
        const char *eq = x ? strchr(x, '=') : NULL;
        if (!eq)
            continue;
        size_t len = (size_t) (eq - x);
        const struct amlapi_cvar *cv = NULL;
        for (size_t i = 0; i < ncv && !cv; i++)
            if (strlen(amlapi_cvars[i].name) == len && !strncmp(amlapi_cvars[i].name, x, len))
                cv = &amlapi_cvars[i];
        say("%s  %s", shown++ ? "" : "\n", clean(*e));
        if (!cv) {
            /* MPICH reads only the names it knows: a misspelt one changes nothing */
            say("  (NOT a CVAR of this amlapi: MPICH ignores it; see amlapi(7))\n");
            continue;
        }
        say("\n");
        /* MPICH parses every one of a CVAR's three names that is set, not only the winner */
        char var[160];
        int v;
        snprintf(var, sizeof(var), "%.*s", (int) (eq - *e), *e);
        if (cv->type == 'i') {
            long long lo = INT_MIN, hi = INT_MAX;
            int zero = 0;
            range_of(cv->name, &lo, &hi, &zero);
            parse_int(var, eq + 1, lo, hi, zero, &v);
        } else if (cv->type == 'b')
            parse_bool(var, eq + 1, &v);
    }
    /* an enum is matched on the value that wins, as MPICH does */
    for (size_t i = 0; i < ncv; i++) {
        char var[128];
        const char *val, *w = amlapi_cvars[i].values;
        if (amlapi_cvars[i].type != 'e' ||
            !(val = cvar_env(amlapi_cvars[i].name, var, sizeof(var))))
            continue;
        int ok = 0;
        while (*w && !ok) {
            size_t wl = strcspn(w, " ");
            ok = wl == strlen(val) && !strncmp(w, val, wl);
            w += wl + (w[wl] == ' ');
        }
        if (!ok)
            fail("%s=%s: use one of: %s", var, clean(val), amlapi_cvars[i].values);
    }
    if (!shown)
        say(" none (the defaults)\n");
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: amlapi_info [-n N] [--ppn P] [-q] [--no-probe]\n"
            "  -n N        ranks of the job (default: this node's cores)\n"
            "  --ppn P     of them on this node (default: N, a one-node job)\n"
            "  -q          print only the verdict\n"
            "  --no-probe  skip the single-copy probe (it forks two processes)\n"
            "Reads the job's MPIR_CVAR_* settings from the environment. Exit status: 0 when "
            "MPI_Init would start, 1 when it would fail (the causes are printed), 2 on a usage "
            "error.\n");
}

int main(int argc, char **argv)
{
    int n = 0, ppn = 0, probe = 1, vnode_on = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-n") || !strcmp(a, "-np") || !strcmp(a, "--ppn")) && i + 1 < argc) {
            if (arg_count(a, argv[i + 1], !strcmp(a, "--ppn") ? &ppn : &n) < 0)
                return 2;
            i++;
        } else if (!strncmp(a, "--ppn=", 6)) {
            if (arg_count("--ppn", a + 6, &ppn) < 0)
                return 2;
        } else if (!strcmp(a, "-q")) {
            quiet = 1;
        } else if (!strcmp(a, "--no-probe")) {
            probe = 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "amlapi_info: unknown argument %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!n) {
        int pus;
        n = hwloc_cores(&pus);
        if (n < 1)
            n = 1;
    }
    if (!ppn)
        ppn = n;
    if (ppn > n) {
        fprintf(stderr, "amlapi_info: --ppn %d is more than the job's %d ranks\n", ppn, n);
        return 2;
    }

    struct utsname u;
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    uname(&u);
    say("amlapi %s (git %s), %s, built with gcc %s\n", AMLAPI_VERSION, AMLAPI_GIT, AMLAPI_MPICH,
        __VERSION__);
    say("node %s, Linux %s %s\n", host, u.release, u.machine);
    say("job: %d rank%s, %d on this node\n\n", n, n == 1 ? "" : "s", ppn);

    check_settings();
    check_vnode_memory(ppn, &vnode_on);
    if (probe && vnode_on && ppn > 1)
        check_single_copy(ppn, vnode_on);
    else if (!quiet)
        say("single copy: not probed (%s)\n", !probe ? "--no-probe" :
            ppn == 1 ? "1 rank on this node" : "vnode off");
    check_cores(ppn);
    check_ucx();
    check_torus(n, ppn);

    if (nfail) {
        fprintf(quiet ? stderr : stdout, "%samlapi_info: MPI_Init of %d ranks (%d on this node) "
                "would fail:\n", quiet ? "" : "\n", n, ppn);
        for (int i = 0; i < nfail && i < (int) (sizeof(fails) / sizeof(fails[0])); i++)
            fprintf(quiet ? stderr : stdout, "  %s\n", fails[i]);
        if (nfail > (int) (sizeof(fails) / sizeof(fails[0])))
            fprintf(quiet ? stderr : stdout, "  and %d more %s\n",
                    nfail - (int) (sizeof(fails) / sizeof(fails[0])),
                    quiet ? "(without -q, each where it is found)" : "above");
        return 1;
    }
    printf("%samlapi_info: MPI_Init of %d ranks (%d on this node) would start\n",
           quiet ? "" : "\n", n, ppn);
    return 0;
}
