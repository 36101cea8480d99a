/*
 * Unit tests of the aml message layer, without MPI. `aml_tests NAME` runs one test and
 * exits 0 on success; `aml_tests --list` prints the names. This file is the driver: the
 * tables of cases and main; the tests are in at_*.c (at.h).
 */
#include "at.h"

/* ---- driver --------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int nprocs;
    rank_body_t body;
    void (*hook) (aml_config_t *);
} test_t;

static const test_t tests[] = {
    {"handlers", 3, t_handlers, NULL},
    {"small_handler", 2, t_small_handler, NULL},
    {"sizes", 2, t_sizes, NULL},
    {"sizes_eager", 2, t_sizes, force_eager},
    {"sizes_rndv", 2, t_sizes, force_rndv},
    {"sizes_small_packets", 2, t_sizes, small_packets},
    {"order", 4, t_order, NULL},
    {"rma", 3, t_rma, NULL},
    {"direct", 3, t_direct, NULL},
    {"env", 2, t_env, NULL},
    {"defer", 2, t_defer, force_rndv},
    {"sizes_rndv_put", 2, t_sizes, force_rndv_put},
    {"sizes_rndv_ucx", 2, t_sizes, force_rndv_ucx},
    {"sizes_get", 2, t_sizes, rndv_get},
    {"defer_ucx", 2, t_defer, force_rndv_ucx},
    {"handlers_ucx", 3, t_handlers, force_rndv_ucx},
    {"order_get", 4, t_order, rndv_get},
    {"sizes_put", 2, t_sizes, rndv_put},
    {"defer_put", 2, t_defer, force_rndv_put},
    {"handlers_put", 3, t_handlers, force_rndv_put},
    {"sizes_adaptive", 2, t_sizes, force_adaptive},
    {"sizes_adaptive_reorder", 2, t_sizes, adaptive_reorder},
    {"sizes_lanes", 2, t_sizes, lanes_3},
    {"sizes_no_adaptive", 2, t_sizes, no_adaptive},
    {"order_adaptive_reorder", 4, t_order, adaptive_reorder},
    {"adaptive_credits", 2, t_adaptive_credits, adaptive_credits},
    {"adaptive_empty", 2, t_adaptive_empty, force_adaptive},
    {"interrupt", 2, t_interrupt, interrupt_mode},
    {"sizes_interrupt", 2, t_sizes, interrupt_mode},
    {"no_fd", 2, t_no_fd, NULL},
    {"compact_burst", 2, t_compact_burst, NULL},
    {"burst_order", 2, t_burst_order, NULL},
    {"quiesce_crossed", 2, t_quiesce_crossed, NULL},
    {"quiesce_crossed_get", 2, t_quiesce_crossed, rndv_get},
    {"quiesce_crossed_put", 2, t_quiesce_crossed, rndv_put},
    {"quiesce_crossed_adaptive", 2, t_quiesce_crossed, force_adaptive},
    {"quiesce_late", 2, t_quiesce_late, NULL},
    {"fence_defer", 2, t_fence_defer, NULL},
    {"fence_defer_get", 2, t_fence_defer, rndv_get},
    {"fence_defer_put", 2, t_fence_defer, rndv_put},
    {"reject_cmpl", 2, t_reject_cmpl, NULL},
    {"reject_cmpl_get", 2, t_reject_cmpl, rndv_get},
    {"reject_cmpl_put", 2, t_reject_cmpl, rndv_put},
    {"order_stash", 4, t_order_stash, seq_reorder},
    {"adapt_claim", 2, t_adapt_claim, NULL},
    {"order_stash_put", 4, t_order_stash, seq_reorder_put},
    {"sizes_stash", 2, t_sizes, seq_reorder},
    {"rma_stash", 3, t_rma, seq_reorder},
};

/* tests in which one rank must stop in aml's fatal path with this message */
static const struct {
    const char *name;
    int nprocs;
    rank_body_t body;
    void (*hook) (aml_config_t *);
    int rank;
    const char *msg;
} fatal_tests[] = {
    {"send_fail", 2, t_send_fail, eager_only, 0, "sending a EAGER_SCONT packet to rank 1 failed: "
     "injected"},
    {"bad_adapt_dup", 2, t_bad_adapt_dup, NULL, 1, "from rank 0: type ADAPT_DATA (13): chunk "
     "[40, 70) of adaptive message 5 overlaps bytes [40, 70) received before"},
    {"bad_put_collide", 3, t_bad_put_collide, force_rndv_put, 0, "malformed packet from rank 2: "
     "type RNDV_FIN (16): data put for message"},
};

int main(int argc, char **argv)
{
    size_t nt = sizeof(tests) / sizeof(tests[0]), nb = at_nbad_cases;
    if (argc < 2) {
        fprintf(stderr, "usage: aml_tests NAME | --list\n");
        return 2;
    }
    if (!strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < nt; i++)
            printf("%s\n", tests[i].name);
        for (size_t i = 0; i < sizeof(fatal_tests) / sizeof(fatal_tests[0]); i++)
            printf("%s\n", fatal_tests[i].name);
        printf("config\nconfig_mismatch\ndynamic\ndynamic_map\nstranger\nkeepalive\n");
        for (size_t i = 0; i < nb; i++)
            printf("%s\n", bad_cases[i].name);
        return 0;
    }
    if (!strcmp(argv[1], "config"))
        return t_config();
    if (!strcmp(argv[1], "keepalive"))
        return t_keepalive();
    if (!strcmp(argv[1], "dynamic")) {
        launch_split = 2;
        return launch(4, t_dynamic, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "dynamic_map")) {
        launch_split = 2;
        return launch(4, t_dynamic_map, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "stranger")) {
        launch_split = 2;
        return launch(4, t_stranger, NULL, 120, -1, NULL);
    }
    if (!strcmp(argv[1], "config_mismatch")) {
        launch_connect_fails = mismatch_check;
        return launch(2, t_never, credits_by_rank, 60, -1, NULL);
    }
    for (size_t i = 0; i < nt; i++)
        if (!strcmp(argv[1], tests[i].name))
            return launch(tests[i].nprocs, tests[i].body, tests[i].hook, 120, -1, NULL);
    for (size_t i = 0; i < sizeof(fatal_tests) / sizeof(fatal_tests[0]); i++)
        if (!strcmp(argv[1], fatal_tests[i].name))
            return launch(fatal_tests[i].nprocs, fatal_tests[i].body, fatal_tests[i].hook, 60,
                          fatal_tests[i].rank, fatal_tests[i].msg);
    for (size_t i = 0; i < nb; i++) {
        if (!strcmp(argv[1], bad_cases[i].name)) {
            char expect[300];
            cur_bad = &bad_cases[i];
            /* the message names the sending peer and the packet type */
            if (cur_bad->make == mk_claim)
                setenv("AML_TEST_VNODE", "1", 1);
            if (strstr(cur_bad->expect, "source") || strstr(cur_bad->expect, "unknown rank") ||
                cur_bad->make == mk_claim)
                snprintf(expect, sizeof(expect), "%s", cur_bad->expect);
            else
                snprintf(expect, sizeof(expect), "from rank 0: %s", cur_bad->expect);
            /* messages name the transport that delivered the packet */
            if (getenv("AML_TEST_VNODE") && atoi(getenv("AML_TEST_VNODE"))) {
                char *u = strstr(expect, "UCX");
                if (u) {
                    char rest[300];
                    snprintf(rest, sizeof(rest), "%s", u + 3);
                    snprintf(u, sizeof(expect) - (size_t) (u - expect), "vnode%s", rest);
                }
            }
            return launch(2, t_bad, NULL, 60, 1, expect);
        }
    }
    fprintf(stderr, "aml_tests: unknown test %s\n", argv[1]);
    return 2;
}
