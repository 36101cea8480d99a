/*
 * A tiny launcher for aml unit tests: forks N ranks, exchanges UCX worker addresses through
 * a shared anonymous mapping, gives them a process-shared barrier, and collects exit codes.
 */
#ifndef AML_TEST_LAUNCH_H
#define AML_TEST_LAUNCH_H

#include "aml.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int rank, size;             /* within this rank's job */
    aml_t *aml;
    int job;                    /* launch_split: 0 or 1 */
    int grank;                  /* among every process launched */
} rank_ctx_t;

/* Runs body on nprocs ranks, each with a connected aml. cfg_hook may adjust the config.
 * Returns 0 when every rank exited 0 (or, with expect_fatal_rank >= 0, when exactly that rank
 * died through aml's fatal path and its message contains expect_msg). */
typedef int (*rank_body_t) (rank_ctx_t * c);
int launch(int nprocs, rank_body_t body, void (*cfg_hook) (aml_config_t *), int timeout_s,
           int expect_fatal_rank, const char *expect_msg);
void test_barrier(rank_ctx_t * c);
/* When set, aml_connect is expected to fail on every rank: the rank's exit code is this
 * function's result (it checks the failure), and a connect that succeeds fails the test. */
extern int (*launch_connect_fails) (aml_t * aml, int rank, int rc);
/* When > 0: two jobs, as MPI's dynamic processes make: the first launch_split processes are
 * job 0, the others job 1, each connected within its job only (aml ranks count from 0 in each;
 * with AML_TEST_VNODE each job has its own segment). test_barrier spans both jobs. */
extern int launch_split;
/* A scratch area per process, shared by all (e.g. to pass upids between jobs). */
#define BOARD_MAX 1024
void *test_board(int grank);

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "rank %d: check failed at %s:%d: %s: ", c->rank,     \
                    __FILE__, __LINE__, #cond);                                  \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

#define CHECK_OK(call) do { int rc_ = (call); CHECK(rc_ == AML_OK, "%s -> %s", #call, \
                                                    aml_strerror(rc_)); } while (0)

#endif
