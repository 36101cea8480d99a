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
    int rank, size;
    aml_t *aml;
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
