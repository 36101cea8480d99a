/*
 * Dynamic processes over amlapi: the parents spawn 2 children (MPI_Comm_spawn), and the two
 * jobs exchange messages of every aml protocol's size both ways over the intercommunicator,
 * merge it (MPI_Intercomm_merge) for collectives, then connect again through a port
 * (MPI_Open_port, MPI_Comm_accept/connect: processes already known to each other) and
 * disconnect. Needs >= 1 rank. MPICH's MTest convention: the parents' rank 0 prints
 * " No Errors" (" Found N errors", counted over both jobs, and a non-zero exit on any error);
 * "spawn: N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mtest.h"

#define NCHILD 2

static int errs, wrank;

#define ERR(...) do { errs++; fprintf(stderr, "%s %d: ", parent == MPI_COMM_NULL ? \
                      "parent" : "child", wrank); fprintf(stderr, __VA_ARGS__); \
                      fprintf(stderr, "\n"); } while (0)

static MPI_Comm parent = MPI_COMM_NULL;
static const int sizes[] = { 0, 8, 3000, 20000, 1 << 20, 4 << 20 };
#define NSIZES ((int) (sizeof(sizes) / sizeof(sizes[0])))

static int verbose;             /* mtest_verbose() */

static void fill(char *b, int n, int seed)
{
    for (int i = 0; i < n; i++)
        b[i] = (char) ((i * 7 + seed * 13) & 0xff);
}

static void expect(const char *b, int n, int seed, const char *what)
{
    for (int i = 0; i < n; i++)
        if (b[i] != (char) ((i * 7 + seed * 13) & 0xff)) {
            ERR("%s: byte %d of %d differs", what, i, n);
            return;
        }
}

/* Each process of the local group exchanges every size with its partner in the remote
 * group: local rank r talks to remote rank r % remote_size, and the remote rank answers each
 * local rank that picked it. */
static void exchange(MPI_Comm inter, int is_parent)
{
    int lrank, lsize, rsize;
    char *buf = malloc(4 << 20);
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_size(inter, &lsize);
    MPI_Comm_remote_size(inter, &rsize);
    for (int k = 0; k < NSIZES; k++) {
        /* parents send first: each parent to child lrank % rsize */
        if (is_parent) {
            int partner = lrank % rsize;
            fill(buf, sizes[k], lrank * 100 + k);
            MPI_Send(buf, sizes[k], MPI_CHAR, partner, k, inter);
            MPI_Status st;
            memset(buf, 0, sizes[k]);
            MPI_Recv(buf, sizes[k], MPI_CHAR, partner, k, inter, &st);
            expect(buf, sizes[k], 1000 + lrank * 100 + k, "reply");
        } else {
            for (int p = 0; p < rsize; p++) {
                if (p % lsize != lrank)
                    continue;
                MPI_Status st;
                int n;
                MPI_Recv(buf, 4 << 20, MPI_CHAR, MPI_ANY_SOURCE, k, inter, &st);
                MPI_Get_count(&st, MPI_CHAR, &n);
                if (n != sizes[k])
                    ERR("%d bytes from parent %d, expected %d", n, st.MPI_SOURCE, sizes[k]);
                expect(buf, n, st.MPI_SOURCE * 100 + k, "message");
                fill(buf, sizes[k], 1000 + st.MPI_SOURCE * 100 + k);
                MPI_Send(buf, sizes[k], MPI_CHAR, st.MPI_SOURCE, k, inter);
            }
        }
    }
    free(buf);
}

/* The merged intracommunicator: parents first. */
static void merged(MPI_Comm inter, int is_parent)
{
    MPI_Comm all;
    int rank, size, sum = 0, want;
    char *big = malloc(1 << 20);
    MPI_Intercomm_merge(inter, is_parent ? 0 : 1, &all);
    MPI_Comm_rank(all, &rank);
    MPI_Comm_size(all, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, all);
    want = size * (size - 1) / 2;
    if (sum != want)
        ERR("allreduce over the merged communicator: %d, expected %d", sum, want);
    if (rank == size - 1)
        fill(big, 1 << 20, 77);
    MPI_Bcast(big, 1 << 20, MPI_CHAR, size - 1, all);
    expect(big, 1 << 20, 77, "bcast from a child");
    MPI_Barrier(all);
    MPI_Comm_free(&all);
    free(big);
}

/* Connect through a port, between processes already connected: parent 0 opens it and tells
 * child 0 over the spawn intercommunicator. */
static void port(MPI_Comm inter, int is_parent)
{
    char name[MPI_MAX_PORT_NAME] = "";
    MPI_Comm again;
    int lrank, v;
    MPI_Comm_rank(inter, &lrank);
    if (is_parent) {
        if (lrank == 0) {
            MPI_Open_port(MPI_INFO_NULL, name);
            MPI_Send(name, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 99, inter);
        }
        MPI_Comm_accept(name, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &again);
    } else {
        if (lrank == 0)
            MPI_Recv(name, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 99, inter, MPI_STATUS_IGNORE);
        MPI_Comm_connect(name, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &again);
    }
    v = is_parent ? 1000 + lrank : lrank;
    if (lrank == 0) {
        int got;
        MPI_Sendrecv(&v, 1, MPI_INT, 0, 5, &got, 1, MPI_INT, 0, 5, again, MPI_STATUS_IGNORE);
        if (got != (is_parent ? 0 : 1000))
            ERR("over the port's intercommunicator: %d", got);
    }
    MPI_Comm_disconnect(&again);
    if (is_parent && lrank == 0)
        MPI_Close_port(name);
}

int main(int argc, char **argv)
{
    MPI_Comm inter;
    int errcodes[NCHILD], total;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    verbose = mtest_verbose();
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                       &inter, errcodes);
        for (int i = 0; i < NCHILD; i++)
            if (errcodes[i] != MPI_SUCCESS)
                ERR("child %d: spawn error %d", i, errcodes[i]);
    } else {
        int rsize;
        inter = parent;
        MPI_Comm_remote_size(inter, &rsize);
        if (rsize < 1)
            ERR("parent group of %d", rsize);
    }
    exchange(inter, parent == MPI_COMM_NULL);
    merged(inter, parent == MPI_COMM_NULL);
    port(inter, parent == MPI_COMM_NULL);

    /* every process's errors, counted in each job */
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    {
        int theirs = 0;
        if (wrank == 0)
            MPI_Sendrecv(&total, 1, MPI_INT, 0, 7, &theirs, 1, MPI_INT, 0, 7, inter,
                         MPI_STATUS_IGNORE);
        total += theirs;
        MPI_Bcast(&total, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Comm_disconnect(&inter);
    if (parent == MPI_COMM_NULL && wrank == 0 && verbose)
        printf("spawn: %d errors\n", total);
    if (parent == MPI_COMM_NULL && wrank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
