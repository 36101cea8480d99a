#include "launch.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADDR_MAX 4096
#define MAX_RANKS 16
#define FATAL_EXIT 42

typedef struct {
    pthread_barrier_t bar;
    size_t len[MAX_RANKS];
    char addr[MAX_RANKS][ADDR_MAX];
    char fatal_msg[MAX_RANKS][600];
    char board[MAX_RANKS][BOARD_MAX];
} shared_t;

static shared_t *sh;

void test_barrier(rank_ctx_t * c)
{
    (void) c;
    pthread_barrier_wait(&sh->bar);
}

static int my_rank;
static char vnode_job[64];      /* unique per launch: concurrent test runs never share */

int (*launch_connect_fails) (aml_t * aml, int rank, int rc);
int launch_split;

void *test_board(int grank)
{
    return sh->board[grank];
}

static void fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    snprintf(sh->fatal_msg[my_rank], sizeof(sh->fatal_msg[0]), "%s", msg);
    fprintf(stderr, "%s\n", msg);
    _exit(FATAL_EXIT);
}

static int run_rank(int grank, int nprocs, rank_body_t body, void (*cfg_hook) (aml_config_t *))
{
    aml_config_t cfg;
    int job = launch_split > 0 && grank >= launch_split;
    int off = job ? launch_split : 0;
    int rank = grank - off;
    int size = launch_split > 0 ? (job ? nprocs - launch_split : launch_split) : nprocs;
    rank_ctx_t ctx = { rank, size, NULL, job, grank };
    const void *a;
    size_t alen;
    int rc;

    my_rank = grank;
    if (job)
        strcat(vnode_job, "-job1");
    aml_config_default(&cfg);
    cfg.rank = rank;
    cfg.size = size;
    cfg.fatal = fatal_cb;
    if (cfg_hook)
        cfg_hook(&cfg);
    /* AML_TEST_VNODE=1: every rank on one node, so all peers go through vnode */
    if (getenv("AML_TEST_VNODE") && atoi(getenv("AML_TEST_VNODE")) && !cfg.vnode_job) {
        cfg.vnode_job = vnode_job;
        cfg.vnode_nlocal = size;
        cfg.vnode_local = rank;
    }
    if ((rc = aml_init(&cfg, &ctx.aml)) != AML_OK) {
        fprintf(stderr, "rank %d: aml_init: %s\n", rank, aml_strerror(rc));
        return 1;
    }
    aml_local_address(ctx.aml, &a, &alen);
    if (alen > ADDR_MAX)
        return 1;
    memcpy(sh->addr[grank], a, alen);
    sh->len[grank] = alen;
    pthread_barrier_wait(&sh->bar);
    rc = aml_connect(ctx.aml, sh->addr[off], ADDR_MAX);
    if (launch_connect_fails) {
        if (rc == AML_OK)
            fprintf(stderr, "rank %d: aml_connect succeeded, a failure was expected\n", rank);
        return rc == AML_OK ? 1 : launch_connect_fails(ctx.aml, rank, rc);
    }
    if (rc != AML_OK) {
        fprintf(stderr, "rank %d: aml_connect: %s\n", rank, aml_strerror(rc));
        return 1;
    }
    rc = body(&ctx);
    if (rc == 0) {
        aml_quiesce(ctx.aml);
        pthread_barrier_wait(&sh->bar);
        aml_finalize(ctx.aml);
    }
    return rc;
}

int launch(int nprocs, rank_body_t body, void (*cfg_hook) (aml_config_t *), int timeout_s,
           int expect_fatal_rank, const char *expect_msg)
{
    pid_t pids[MAX_RANKS];
    int status[MAX_RANKS], alive, failed = 0, expected_died = 0;
    pthread_barrierattr_t ba;
    time_t t0 = time(NULL);

    if (nprocs > MAX_RANKS)
        return 1;
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    memset(sh, 0, sizeof(*sh));
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->bar, &ba, nprocs);
    {
        static int launches;
        snprintf(vnode_job, sizeof(vnode_job), "amltest-%d-%d", (int) getpid(), launches++);
    }
    fflush(NULL);
    for (int i = 0; i < nprocs; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(run_rank(i, nprocs, body, cfg_hook));
        status[i] = -1;
    }
    alive = nprocs;
    while (alive > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < nprocs; i++) {
                if (pids[i] == p) {
                    status[i] = st;
                    alive--;
                    int bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
                    int expected = i == expect_fatal_rank && WIFEXITED(st) &&
                        WEXITSTATUS(st) == FATAL_EXIT;
                    /* a dead rank would leave the others waiting: stop them (after the
                     * expected fatal error, the ranks killed here are expected too) */
                    if (bad && !expected && !expected_died) {
                        failed = 1;
                        for (int j = 0; j < nprocs; j++)
                            if (status[j] == -1)
                                kill(pids[j], SIGKILL);
                    }
                    if (expected)
                        expected_died = 1;
                    if (i == expect_fatal_rank) {
                        /* the others cannot finish their protocol with a dead peer */
                        for (int j = 0; j < nprocs; j++)
                            if (status[j] == -1)
                                kill(pids[j], SIGKILL);
                    }
                }
            }
            continue;
        }
        if (time(NULL) - t0 > timeout_s) {
            fprintf(stderr, "launch: timeout after %d s, killing ranks\n", timeout_s);
            for (int j = 0; j < nprocs; j++)
                if (status[j] == -1)
                    kill(pids[j], SIGKILL);
            failed = 1;
        }
        usleep(2000);
    }
    if (expect_fatal_rank >= 0) {
        int st = status[expect_fatal_rank];
        if (!WIFEXITED(st) || WEXITSTATUS(st) != FATAL_EXIT) {
            fprintf(stderr, "launch: rank %d was expected to stop with a fatal error\n",
                    expect_fatal_rank);
            failed = 1;
        } else if (expect_msg && !strstr(sh->fatal_msg[expect_fatal_rank], expect_msg)) {
            fprintf(stderr, "launch: fatal message \"%s\" lacks \"%s\"\n",
                    sh->fatal_msg[expect_fatal_rank], expect_msg);
            failed = 1;
        }
    }
    munmap(sh, sizeof(*sh));
    return failed;
}
