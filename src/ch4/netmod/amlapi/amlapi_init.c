/*
 * amlapi netmod: initialization, address exchange, finalization.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "mpidu_bc.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

categories :
    - name : CH4_AMLAPI
      description : Variables of the ch4 amlapi netmod and its aml message layer

cvars:
    - name        : MPIR_CVAR_AMLAPI_PACKET_SIZE
      category    : CH4_AMLAPI
      type        : int
      default     : 8248
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest aml packet in bytes (headers and data) of the one-packet protocol and of vnode's
        on-node FIFOs; longer eager messages on a node are cut into packets of this size. Default
        8248 (an 8 KiB MPI message in one packet); 512 to 1048576, at most the CH4 AM pack buffer.

    - name        : MPIR_CVAR_AMLAPI_NET_PACKET_SIZE
      category    : CH4_AMLAPI
      type        : int
      default     : 65592
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest eager packet in bytes to peers reached through UCX (other hosts; this host with
        MPIR_CVAR_NOLOCAL, cliques or MPIR_CVAR_AMLAPI_VNODE=0). Default 65592: a 64 KiB message and
        its headers in one UCX send. 512 to 1048576; 0 means MPIR_CVAR_AMLAPI_PACKET_SIZE.

    - name        : MPIR_CVAR_AMLAPI_EAGER_LIMIT
      category    : CH4_AMLAPI
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Messages to peers reached through UCX with more data bytes than this go by rendezvous,
        smaller ones eagerly (on-node peers switch at MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD).
        Default 65536, >= 0; with adaptive credits it bounds the unexpected data per sender.

    - name        : MPIR_CVAR_AMLAPI_RNDV_MODE
      category    : CH4_AMLAPI
      type        : string
      default     : "ucx"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How rendezvous data moves: "ucx" (default) lets UCX's own rendezvous fill the receiver's
        buffer; "get" has the receiver read the sender's registered buffer (ucp_get_nbx); "put" has
        the sender write the receiver's buffer (ucp_put_nbx), for transports with poor remote reads.

    - name        : MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS
      category    : CH4_AMLAPI
      type        : int
      default     : 64
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Adaptive eager messages a sender may have unconfirmed per peer; further ones go by
        rendezvous, so a flooded receiver holds at most credits x eager limit bytes per sender.
        Default 64, 0 to 1024; 0 turns adaptive eager off (ordered eager, unbounded memory).

    - name        : MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX
      category    : CH4_AMLAPI
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest contiguous put/get done as a direct operation to a UCX peer whose RMA is done in
        software (tcp only); larger ones go as native amlapi messages. Default 0 (never direct); -1:
        no limit. Peers reached by RDMA or single copy are not affected.

    - name        : MPIR_CVAR_AMLAPI_RMA_SHM_COPY
      category    : CH4_AMLAPI
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        MPI_Win_create windows whose ranks all share one node do their RMA in shared memory too, as
        allocated ones always do (nothing needed from the target), by single copies of the
        target's memory. Default off (a system call per operation); turn it on when targets
        compute for long without calling MPI.

    - name        : MPIR_CVAR_AMLAPI_PROGRESS_MODE
      category    : CH4_AMLAPI
      type        : string
      default     : "polling"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How a blocked call waits: "polling" (default) spins; "interrupt" sleeps on the event fd when
        nothing is pending; "coprocessor" adds a progress thread (thread level MPI_THREAD_MULTIPLE)
        that moves transfers on while the application computes (Almasi et al. 2005).

    - name        : MPIR_CVAR_AMLAPI_KEEPALIVE
      category    : CH4_AMLAPI
      type        : int
      default     : 1000
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Failure detection for ranks on other hosts: a dead rank ends the job with its name, and a
        connection silent this many ms is probed by TCP keepalive (a dead host is found in about 4x
        this). Default 1000, 0 to 3600000; 0 turns failure handling off.

    - name        : MPIR_CVAR_AMLAPI_OVERSUBSCRIBED
      category    : CH4_AMLAPI
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Polling mode with more ranks than cores: an idle blocked call yields its core briefly,
        then sleeps on the event fd instead of spinning. -1 (default) decides at MPI_Init from the
        allowed cores (hwloc); 0 never; 1 always.

    - name        : MPIR_CVAR_AMLAPI_VNODE
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Ranks of one node (MPICH's node map, split by MPIR_CVAR_NOLOCAL and MPIR_CVAR_NUM_CLIQUES)
        talk through vnode's shared-memory FIFOs and single copy. Default on; 0: all through UCX.

    - name        : MPIR_CVAR_AMLAPI_VNODE_RING_SIZE
      category    : CH4_AMLAPI
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes of each vnode FIFO; a node's shared segment holds n*(n-1) of them for n ranks: lower
        it when memory is short. 0 (default): the largest of 512, 256, 128 KiB whose n-1 rings fit
        in 2 MiB, else 64 KiB. Else 4096 to 1073741824, rounded up to a power of two and 4 packets.

    - name        : MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node messages above MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD move by single copy
        (process_vm_readv) where the node allows it (probed at init). Default on; 0, or a node that
        forbids it (Yama ptrace_scope, seccomp, user namespaces): packets through the FIFOs.

    - name        : MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD
      category    : CH4_AMLAPI
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node messages with more data bytes than this go by single copy, smaller ones as packets
        through the FIFOs. Default 65536, >= 0; 0 means MPIR_CVAR_AMLAPI_EAGER_LIMIT. Lower it (to
        12288) where a cache line moves slowly between the ranks' cores (no shared cache).

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

static void aml_fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    MPIDI_AMLAPI_fatal("%s", msg);
}

/* vnode: the ranks that share this rank's node id (MPIR_CVAR_NOLOCAL and
 * MPIR_CVAR_NUM_CLIQUES already shaped node_map), named by the job and that id. */
static void read_vnode_config(aml_config_t * cfg)
{
    static char job[128];
    int me = MPIR_Process.rank, node = MPIR_Process.node_map[me];

    if (!MPIR_CVAR_AMLAPI_VNODE)
        return;
    cfg->vnode_nlocal = 0;
    for (int i = 0; i < MPIR_Process.size; i++) {
        if (MPIR_Process.node_map[i] != node)
            continue;
        if (i < me)
            cfg->vnode_local++;
        cfg->vnode_nlocal++;
    }
    snprintf(job, sizeof(job), "%s.%d", MPIR_pmi_job_id() ? MPIR_pmi_job_id() : "job", node);
    cfg->vnode_job = job;
    cfg->vnode_ring_bytes = (size_t) MPIR_CVAR_AMLAPI_VNODE_RING_SIZE;
    cfg->vnode_eager_limit = (size_t) MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD;
    cfg->vnode_single_copy = MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY;
    /* split nodes (NOLOCAL, cliques) reach the rest of this host through UCX */
    cfg->ucx_onnode = MPIR_CVAR_NOLOCAL || MPIR_pmi_has_local_cliques();
    cfg->vnode_watch = MPIR_CVAR_AMLAPI_REPORT_EXIT;
}

/* CVARs -> aml configuration; a bad value is an MPI_ERR_OTHER naming the variable. */
static int read_config(aml_config_t * cfg)
{
    int mpi_errno = MPI_SUCCESS, choice;
    char buf[96];

    aml_config_default(cfg);
    cfg->rank = MPIR_Process.rank;
    cfg->size = MPIR_Process.size;
    cfg->fatal = aml_fatal_cb;

    /* the ranges (amlapi_cvar_range.h); then what one CVAR's bounds owe another */
    mpi_errno = MPIDI_AMLAPI_cvar_check();
    MPIR_ERR_CHECK(mpi_errno);
    if (MPIR_CVAR_AMLAPI_PACKET_SIZE > MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE) {
        snprintf(buf, sizeof(buf), "%d (must be at most MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE, %d)",
                 MPIR_CVAR_AMLAPI_PACKET_SIZE, MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PACKET_SIZE", buf);
    }
    cfg->packet_size = MPIR_CVAR_AMLAPI_PACKET_SIZE;
    cfg->net_packet_size = (size_t) MPIR_CVAR_AMLAPI_NET_PACKET_SIZE;
    cfg->eager_limit = MPIR_CVAR_AMLAPI_EAGER_LIMIT;

    cfg->adaptive_credits = MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS;

    static const char *const rndv_modes[] = { "ucx", "get", "put", NULL };
    mpi_errno = MPIDI_AMLAPI_cvar_choice("MPIR_CVAR_AMLAPI_RNDV_MODE",
                                         MPIR_CVAR_AMLAPI_RNDV_MODE, rndv_modes, &choice);
    MPIR_ERR_CHECK(mpi_errno);
    cfg->rndv_ucx = choice == 0;
    cfg->rndv_put = choice == 2;

    /* interrupt and coprocessor modes both need the event fd */
    static const char *const progress_modes[] = { "polling", "interrupt", "coprocessor", NULL };
    mpi_errno = MPIDI_AMLAPI_cvar_choice("MPIR_CVAR_AMLAPI_PROGRESS_MODE",
                                         MPIR_CVAR_AMLAPI_PROGRESS_MODE, progress_modes, &choice);
    MPIR_ERR_CHECK(mpi_errno);
    cfg->progress_mode = choice == 0 ? AML_PROGRESS_POLLING : AML_PROGRESS_INTERRUPT;
    /* oversubscribed polling sleeps like interrupt mode: it needs the event fd too */
    MPIDI_AMLAPI_global.oversub = cfg->progress_mode == AML_PROGRESS_POLLING &&
        MPIDI_AMLAPI_oversubscribed();
    if (MPIDI_AMLAPI_global.oversub)
        cfg->progress_mode = AML_PROGRESS_INTERRUPT;
    cfg->keepalive_ms = MPIR_CVAR_AMLAPI_KEEPALIVE;
    cfg->dyn_peers_max = MPIR_CVAR_AMLAPI_DYNAMIC_PEERS;
    read_vnode_config(cfg);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* aml's setup message in the user's terms: vnode's setting is a CVAR here. */
static const char *setup_msg(char *msg)
{
    static char out[640];
    char *at;
    if (!strncmp(msg, "vnode: ", 7))
        msg += 7;       /* the error already says where */
    at = strstr(msg, "ring_bytes");
    if (!at)
        return msg;
    *at = '\0';
    snprintf(out, sizeof(out), "%sMPIR_CVAR_AMLAPI_VNODE_RING_SIZE%s", msg,
             at + strlen("ring_bytes"));
    return out;
}

int MPIDI_AMLAPI_init_local(int *tag_bits)
{
    int mpi_errno = MPI_SUCCESS;
    aml_config_t cfg;
    char errbuf[512];
    int rc;

    /* one VCI: aml has one worker (threads share it under MPICH's global lock) */
    MPIR_Assert(MPIDI_global.n_vcis == 1);
    mpi_errno = read_config(&cfg);
    MPIR_ERR_CHECK(mpi_errno);
    cfg.errbuf = errbuf;
    cfg.errlen = sizeof(errbuf);
    rc = aml_init(&cfg, &MPIDI_AMLAPI_global.aml);
    if (rc == AML_ERR_SETUP)
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_setup", "**amlapi_setup %s %s",
                             "vnode (on-node shared memory)", setup_msg(errbuf));
    MPIDI_AMLAPI_CHK(rc, "aml_init");
    MPIDI_AMLAPI_global.rank = MPIR_Process.rank;
    mpi_errno = MPIDI_AMLAPI_progress_init(&cfg);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_am_init();
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_AMLAPI_win_pvars();
    mpi_errno = MPIDI_AMLAPI_p2p_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_spawn_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_rma_am_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_lk_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_pscw_init();
    MPIR_ERR_CHECK(mpi_errno);
    /* aml carries the whole tag in its header: no tag bits are taken for matching */
    *tag_bits = MPIR_TAG_BITS_DEFAULT;

    if (MPIR_CVAR_DEBUG_SUMMARY && MPIR_Process.rank == 0) {
        printf("==== amlapi netmod ====\n");
        printf("packet size: %ld\n", (long) MPIDI_AMLAPI_global.packet_size);
        printf("max MPIDIG header: %ld\n", (long) MPIDI_AMLAPI_global.am_hdr_max);
        printf("eager limit: %ld\n", (long) MPIDI_AMLAPI_global.eager_limit);
        printf("adaptive eager credits: %d\n", MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS);
        printf("rendezvous: %s\n", MPIR_CVAR_AMLAPI_RNDV_MODE);
        printf("progress: %s%s%s\n", MPIR_CVAR_AMLAPI_PROGRESS_MODE,
               MPIDI_AMLAPI_global.oversub ?
               " (oversubscribed: blocked calls sleep when idle)" : "",
               MPIDI_AMLAPI_global.coproc_sleeps ? " (helper sleeps when idle)" :
               MPIDI_AMLAPI_global.coproc ? " (helper polls)" : "");
        printf("=======================\n");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Said once per node: the node forbids single copy, so large on-node messages are copied
 * through the FIFOs (slower, and more memory at the receiver); or, under Yama's ptrace_scope
 * 1, the ranks had no common ancestor to declare as their ptracer, so they let any process of
 * their user read them. */
static void warn_no_single_copy(void)
{
    int64_t peers = 0, sc = 0, any = 0;
    int first = 0;
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_VNODE_PEERS, &peers);
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_VNODE_SINGLE_COPY, &sc);
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_VNODE_PTRACER_ANY, &any);
    /* the first rank of the node says it */
    while (MPIR_Process.node_map[first] != MPIR_Process.node_map[MPIR_Process.rank])
        first++;
    if (peers > 0 && !sc && MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY && first == MPIR_Process.rank)
        fprintf(stderr, "amlapi: single copy (process_vm_readv) is not allowed between the "
                "ranks on the node of rank %d (Yama ptrace_scope, seccomp or user namespaces): "
                "large on-node messages are copied through shared-memory FIFOs instead\n",
                MPIR_Process.rank);
    if (peers > 0 && any && first == MPIR_Process.rank)
        fprintf(stderr, "amlapi: Yama's ptrace_scope is 1 and the ranks on the node of rank %d "
                "have no common ancestor below init: for single copy each lets any process of "
                "its user read its memory (PR_SET_PTRACER_ANY)\n", MPIR_Process.rank);
}

int MPIDI_AMLAPI_init_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    const void *addr;
    size_t addr_len;
    void *table = NULL;
    int stride, rc;

    if (MPIR_CVAR_CH4_ROOTS_ONLY_PMI)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**amlapi_notsupported",
                             "**amlapi_notsupported %s", "MPIR_CVAR_CH4_ROOTS_ONLY_PMI=1");
    aml_local_address(MPIDI_AMLAPI_global.aml, &addr, &addr_len);
    /* every rank's UCX worker address through PMI; the table has a fixed stride */
    mpi_errno = MPIDU_bc_table_create(MPIR_Process.rank, MPIR_Process.size,
                                      MPIR_Process.node_map, (void *) addr, (int) addr_len,
                                      FALSE, FALSE, &table, &stride);
    MPIR_ERR_CHECK(mpi_errno);
    rc = aml_connect(MPIDI_AMLAPI_global.aml, table, (size_t) stride);
    MPIDU_bc_table_destroy();
    if (rc == AML_ERR_CONFIG) {
        /* the ranks were started with different settings: name the variable, both values */
        const char *setting, *var;
        int peer;
        int64_t mine, theirs;
        char vals[128];
        aml_connect_mismatch(MPIDI_AMLAPI_global.aml, &setting, &peer, &mine, &theirs);
        if (!strcmp(setting, "packet_size"))
            var = "MPIR_CVAR_AMLAPI_PACKET_SIZE";
        else if (!strcmp(setting, "net_packet_size"))
            var = "MPIR_CVAR_AMLAPI_NET_PACKET_SIZE";
        else if (!strcmp(setting, "adaptive_credits"))
            var = "MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS";
        else if (!strcmp(setting, "max_uhdr"))
            var = "the largest aml user header (UCX's active-message header limit: UCX_* settings)";
        else
            var = "the aml wire version (a different amlapi build)";
        /* lower rank first, so both ranks of the pair print the same line: the first to
         * abort may kill the other before it prints */
        if (MPIR_Process.rank < peer)
            snprintf(vals, sizeof(vals), "%lld on rank %d, %lld on rank %d", (long long) mine,
                     MPIR_Process.rank, (long long) theirs, peer);
        else
            snprintf(vals, sizeof(vals), "%lld on rank %d, %lld on rank %d", (long long) theirs,
                     peer, (long long) mine, MPIR_Process.rank);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_mismatch",
                             "**amlapi_mismatch %s %s", var, vals);
    }
    if (rc == AML_ERR_SETUP)
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_setup", "**amlapi_setup %s %s",
                             "vnode (on-node shared memory)",
                             setup_msg((char *) aml_error(MPIDI_AMLAPI_global.aml)));
    MPIDI_AMLAPI_CHK(rc, "aml_connect");
    warn_no_single_copy();
    /* the torus of COMM_WORLD, before its sub-communicators (node_roots_comm) are made */
    mpi_errno = MPIDI_AMLAPI_coll_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_coll_shm_init();
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_post_init(void)
{
    MPIDI_AMLAPI_fault_init();
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rc;

    MPIDI_AMLAPI_fault_finalize();
    MPIDI_AMLAPI_coll_finalize();
    MPIDI_AMLAPI_coll_shm_finalize();
    MPIDI_AMLAPI_rma_am_finalize();
    /* aml_quiesce runs aml's two finalize rounds with every peer (nothing can reach a closed
     * endpoint after it); the PMI barrier then keeps every worker alive until all ranks have
     * closed their endpoints to it */
    rc = aml_quiesce(MPIDI_AMLAPI_global.aml);
    MPIDI_AMLAPI_CHK(rc, "aml_quiesce");
    mpi_errno = MPIR_pmi_barrier();
    MPIR_ERR_CHECK(mpi_errno);
    rc = aml_finalize(MPIDI_AMLAPI_global.aml);
    MPIDI_AMLAPI_global.aml = NULL;
    MPIDI_AMLAPI_p2p_finalize();
    MPIDI_AMLAPI_spawn_finalize();
    MPIDI_AMLAPI_CHK(rc, "aml_finalize");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
