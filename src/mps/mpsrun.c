/* mpsrun TOPOLOGY -- PROGRAM [ARGS]: starts one process of PROGRAM per process of the topology
 * file, in the file's order (its MPI_COMM_WORLD rank), each on its host and bound to its cpu
 * (taskset), with MPS_TOPOLOGY naming the file. The launcher is MPICH's mpiexec (hydra) by
 * default; --launcher (or MPS_LAUNCHER) picks another, e.g. Open MPI's mpirun, whose
 * command-line dialect is recognised from its --version output. */
#define _GNU_SOURCE
#include "topo.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MPS_DEFAULT_LAUNCHER
#define MPS_DEFAULT_LAUNCHER "mpiexec"
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpsrun [--launcher=CMD] [--launcher-kind=mpich|openmpi] [--launcher-arg=ARG]... [--dry-run]\n"
            "              TOPOLOGY -- PROGRAM [ARGS...]\n"
            "  --launcher=CMD       the MPI launcher (default: $MPS_LAUNCHER, else %s)\n"
            "  --launcher-kind=K    its dialect: mpich (hydra) or openmpi (default: asked with CMD --version)\n"
            "  --launcher-arg=ARG   passed to the launcher before the processes (repeatable)\n"
            "  --dry-run            print the launcher command instead of running it\n",
            MPS_DEFAULT_LAUNCHER);
}

/* "mpich" or "openmpi" from the launcher's --version, NULL if neither */
static const char *launcher_kind(const char *launcher)
{
    char cmd[PATH_MAX + 64], line[512];
    snprintf(cmd, sizeof(cmd), "'%s' --version 2>&1", launcher);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    const char *kind = NULL;
    while (fgets(line, sizeof(line), p))
        if (!kind && strstr(line, "HYDRA"))
            kind = "mpich";
        else if (!kind && (strstr(line, "Open MPI") || strstr(line, "OpenRTE")))
            kind = "openmpi";
    pclose(p);
    return kind;
}

static int is_local(const char *host)
{
    char me[256] = "";
    gethostname(me, sizeof(me) - 1);
    return !strcmp(host, "localhost") || !strcmp(host, me);
}

int main(int argc, char **argv)
{
    const char *launcher = getenv("MPS_LAUNCHER"), *kind = NULL;
    if (!launcher || !*launcher)
        launcher = MPS_DEFAULT_LAUNCHER;
    char **largs = calloc(argc, sizeof(char *));
    int nlargs = 0, dry = 0, i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2) && strcmp(argv[i], "--"); i++) {
        if (!strncmp(argv[i], "--launcher=", 11))
            launcher = argv[i] + 11;
        else if (!strncmp(argv[i], "--launcher-kind=", 16))
            kind = argv[i] + 16;
        else if (!strncmp(argv[i], "--launcher-arg=", 15))
            largs[nlargs++] = argv[i] + 15;
        else if (!strcmp(argv[i], "--dry-run"))
            dry = 1;
        else if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "mpsrun: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i + 2 >= argc + 0 || strcmp(argv[i + 1], "--") || i + 2 >= argc) {
        usage(stderr);
        return 2;
    }
    const char *topofile = argv[i];
    char **prog = argv + i + 2;
    int nprog = argc - i - 2;

    mps_topo t;
    char err[2048];
    if (mps_topo_load(topofile, &t, err, sizeof(err))) {
        fprintf(stderr, "mpsrun: %s\n", err);
        return 1;
    }
    char abspath[PATH_MAX];
    if (!realpath(topofile, abspath)) {
        perror("mpsrun: realpath");
        return 1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    int multihost = 0;
    for (int p = 0; p < t.nprocs; p++) {
        if (strcmp(t.procs[p].host, t.procs[0].host))
            multihost = 1;
        if (t.procs[p].cpu >= ncpu && is_local(t.procs[p].host)) {
            fprintf(stderr, "mpsrun: %s:%d: process '%s': cpu %d, but this host has cpus 0 to %ld\n", topofile,
                    t.procs[p].line, t.procs[p].name, t.procs[p].cpu, ncpu - 1);
            return 1;
        }
    }
    if (!kind && !(kind = launcher_kind(launcher))) {
        fprintf(stderr, "mpsrun: cannot tell what kind of launcher '%s' is from its --version (not found, or neither "
                "MPICH's hydra nor Open MPI's mpirun); say --launcher-kind=mpich|openmpi\n", launcher);
        return 1;
    }
    int ompi = !strcmp(kind, "openmpi");
    if (!ompi && strcmp(kind, "mpich")) {
        fprintf(stderr, "mpsrun: unknown launcher kind '%s' (mpich or openmpi)\n", kind);
        return 2;
    }

    /* one MPMD segment per process: hydra and Open MPI both start ranks in segment order */
    size_t max = 8 + nlargs + (size_t)t.nprocs * (10 + nprog);
    char **cmd = calloc(max, sizeof(char *));
    char *envarg = NULL;
    int n = 0;
    cmd[n++] = (char *)launcher;
    if (ompi) {
        if (asprintf(&envarg, "MPS_TOPOLOGY=%s", abspath) < 0)
            return 1;
        cmd[n++] = "-x";
        cmd[n++] = envarg;
        cmd[n++] = "--bind-to";     /* taskset binds each process where the file says */
        cmd[n++] = "none";
    } else {
        cmd[n++] = "-genv";
        cmd[n++] = "MPS_TOPOLOGY";
        cmd[n++] = abspath;
    }
    for (int a = 0; a < nlargs; a++)
        cmd[n++] = largs[a];
    for (int p = 0; p < t.nprocs; p++) {
        if (p > 0)
            cmd[n++] = ":";
        cmd[n++] = "-n";
        cmd[n++] = "1";
        if (multihost) {
            cmd[n++] = ompi ? "-H" : "-hosts";
            cmd[n++] = t.procs[p].host;
        }
        if (t.procs[p].cpu >= 0) {
            char *c;
            if (asprintf(&c, "%d", t.procs[p].cpu) < 0)
                return 1;
            cmd[n++] = "taskset";
            cmd[n++] = "-c";
            cmd[n++] = c;
        }
        for (int a = 0; a < nprog; a++)
            cmd[n++] = prog[a];
    }
    cmd[n] = NULL;
    if (dry) {
        for (int a = 0; a < n; a++)
            printf("%s%s", a ? " " : "", cmd[a]);
        printf("\n");
        return 0;
    }
    setenv("MPS_TOPOLOGY", abspath, 1);
    execvp(launcher, cmd);
    fprintf(stderr, "mpsrun: cannot run %s: %m\n", launcher);
    return 127;
}
