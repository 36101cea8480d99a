/*
 * Test harness for vnode: forks the local ranks of a job, gives them a barrier and a shared
 * scratch area (an anonymous shared mapping made before the fork), drives packet traffic and
 * checks every packet's size, contents and per-sender order.
 */
#ifndef VT_H_INCLUDED
#define VT_H_INCLUDED

#include "vnode.h"
#include <stdio.h>
#include <stdlib.h>

#define VT_SKIP 77

typedef struct vt_shared vt_shared_t;

typedef struct vt_ctx {
    int rank, size;
    const char *job;
    vnode_config_t cfg;
    vnode_t *v;                 /* after setup (VT_SETUP) */
    vt_shared_t *sh;
    char *scratch;              /* VT_SCRATCH bytes shared by the ranks of this job */
    void *arg;                  /* vt_run's arg */
} vt_ctx_t;

#define VT_SCRATCH (1 << 16)

typedef int (*vt_body_t) (vt_ctx_t * c);

typedef struct vt_opts {
    void (*cfg_hook) (vnode_config_t * cfg, void *arg);
    int (*pre_init) (vt_ctx_t * c);     /* in the rank, before vnode_init: 0, or its exit code */
    int setup;                  /* 1: init, barrier, attach before body; finalize after */
    int killed_rank;            /* this rank may die by SIGKILL (-1: none) */
    int timeout_s;              /* whole job (0: 100) */
    int nice;                   /* ranks lower their priority by this much */
    void *arg;
} vt_opts_t;

/* Runs body on n ranks: 0 when every rank exited 0, VT_SKIP when one skipped and none
 * failed, 1 otherwise. Afterwards /dev/shm must hold nothing of the job. */
int vt_run(int n, vt_body_t body, const vt_opts_t * o);
void vt_barrier(vt_ctx_t * c);
/* a job name unique to this process and call */
const char *vt_job_name(char *buf, size_t len);
/* /dev/shm entries "amlapi-*-<job>" (any uid) */
int vt_shm_entries(void);
int vt_attach(vt_ctx_t * c, vnode_t * v);

extern int vt_rank;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "rank %d: check failed at %s:%d: %s: ", vt_rank, __FILE__,    \
                    __LINE__, #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)
#define CHECK_OK(v, call)                                                                 \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        CHECK(rc_ == VNODE_OK, "%s -> %d: %s", #call, rc_, vnode_error(v));               \
    } while (0)

/* -- traffic -- */
enum vt_mode { VT_MIX, VT_WRAP, VT_BIG, VT_SMALL };

typedef struct vt_traffic {
    enum vt_mode mode;
    uint64_t *to_send;          /* [size]: packets for each rank */
    uint64_t *to_recv;          /* [size]: packets expected from each rank */
    int sleep;                  /* arm and sleep on the doorbell when idle */
    /* filled in */
    uint64_t *sent, *recvd;
    uint64_t units_sent;
} vt_traffic_t;

/* packet number seq from src to dst: sizes and contents (buf >= max_pkt bytes) */
void vt_packet(const vnode_config_t * cfg, enum vt_mode mode, int src, int dst, uint64_t seq,
               size_t *hlen, size_t *len, unsigned char *buf);
/* Sends and receives until all is done; checks every packet; exits on failure. */
void vt_traffic(vt_ctx_t * c, vt_traffic_t * t);
/* One vnode_poll with the checks of vt_traffic: the packets delivered. */
int vt_poll(vt_ctx_t * c, vt_traffic_t * t);
vt_traffic_t *vt_traffic_new(vt_ctx_t * c, enum vt_mode mode);
void vt_traffic_free(vt_traffic_t * t);

void vt_sleep_ms(int ms);

#endif
