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
      default     : 8192
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest aml packet in bytes (packet header, user header and data). A message whose
        header and data fit one packet uses the one-packet protocol; longer eager messages
        are cut into packets of this size. Default: one UCX bcopy segment on shm and tcp.
        Range 512 to 1048576.

    - name        : MPIR_CVAR_AMLAPI_EAGER_LIMIT
      category    : CH4_AMLAPI
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Messages with more data bytes than this use the rendezvous protocol (scout, then the
        receiver pulls the data into the buffer its header handler chose); smaller ones are
        sent eagerly. Must be >= 0.

    - name        : MPIR_CVAR_AMLAPI_PROTOCOL
      category    : CH4_AMLAPI
      type        : string
      default     : "auto"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Point-to-point protocol of the aml message layer: "auto" chooses per message by size
        (one-packet, eager, rendezvous); "eager" and "rndv" force one protocol for every
        message (testing and tuning).

    - name        : MPIR_CVAR_AMLAPI_PROGRESS_MODE
      category    : CH4_AMLAPI
      type        : string
      default     : "polling"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How a blocked MPI call waits. "polling" spins on the UCX worker (lowest latency).
        "interrupt" polls once, and when nothing is pending arms the worker and sleeps on its
        event fd until a packet arrives (no spinning hysteresis), releasing MPICH's lock
        meanwhile; MPI_Test and MPI_Iprobe never sleep. "coprocessor" (a progress thread)
        is not supported yet and is rejected at MPI_Init.

    - name        : MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT
      category    : CH4_AMLAPI
      type        : int
      default     : 10
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Interrupt mode: longest sleep in milliseconds before a blocked call looks again
        without an arrival (progress that needs no packet, e.g. nonblocking collective
        schedules, waits at most this long). 1 to 1000.

    - name        : MPIR_CVAR_AMLAPI_OVERSUBSCRIBED
      category    : CH4_AMLAPI
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Polling mode: whether an idle blocked call gives up the CPU (sched_yield) after an
        empty poll. -1 decides at MPI_Init: yes when this node runs more ranks than it has
        cores (hwloc, allowed cores only); 0 never; 1 always.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

#include <stdarg.h>
#include <poll.h>
#include <sched.h>
#include <hwloc.h>

MPIDI_AMLAPI_global_t MPIDI_AMLAPI_global;

/* A malformed packet or a failed transport under a handler: end the job, naming it. */
void MPIDI_AMLAPI_fatal(const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    int n = snprintf(msg, sizeof(msg), "amlapi (rank %d): ", MPIR_Process.rank);
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
    va_end(ap);
    MPID_Abort(NULL, MPI_ERR_INTERN, 1, msg);
    abort();    /* MPID_Abort does not return */
}

/* Cores this process may run on (hwloc, allowed cores only); 0 when unknown. */
static int allowed_cores(void)
{
    hwloc_topology_t topo;
    int n = 0;
    if (hwloc_topology_init(&topo) != 0)
        return 0;
    if (hwloc_topology_load(topo) == 0)
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 0;
}

/* A blocked MPI call found nothing to do (MPIDI_NM_progress with blocking set and an empty
 * poll). Interrupt mode: arm the worker and sleep on its event fd without MPICH's lock.
 * Polling mode on an oversubscribed node: give the CPU to the rank we are waiting for. */
int MPIDI_AMLAPI_progress_idle(void)
{
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    if (MPIDI_AMLAPI_global.interrupt) {
        struct pollfd p;
        int rc = aml_arm(aml);
        if (rc == AML_ERR_STATE)
            return MPI_SUCCESS;         /* events pending: the next poll takes them */
        if (rc != AML_OK)
            MPIDI_AMLAPI_fatal("arming the UCX worker failed: %s", aml_strerror(rc));
        p.fd = MPIDI_AMLAPI_global.efd;
        p.events = POLLIN;
        p.revents = 0;
        MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
        (void) poll(&p, 1, MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT);
        MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
        aml_progress(aml);
    } else {
        sched_yield();
    }
    return MPI_SUCCESS;
}

static void aml_fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    MPIDI_AMLAPI_fatal("%s", msg);
}

/* CVARs -> aml configuration; a bad value is an MPI_ERR_OTHER naming the variable. */
static int read_config(aml_config_t * cfg)
{
    int mpi_errno = MPI_SUCCESS;
    char buf[64];

    aml_config_default(cfg);
    cfg->rank = MPIR_Process.rank;
    cfg->size = MPIR_Process.size;
    cfg->fatal = aml_fatal_cb;

    if (MPIR_CVAR_AMLAPI_PACKET_SIZE < 512 || MPIR_CVAR_AMLAPI_PACKET_SIZE > 1048576 ||
        MPIR_CVAR_AMLAPI_PACKET_SIZE > MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE) {
        snprintf(buf, sizeof(buf), "%d (must be 512..min(1048576, %d))",
                 MPIR_CVAR_AMLAPI_PACKET_SIZE, MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PACKET_SIZE", buf);
    }
    cfg->packet_size = MPIR_CVAR_AMLAPI_PACKET_SIZE;

    if (MPIR_CVAR_AMLAPI_EAGER_LIMIT < 0) {
        snprintf(buf, sizeof(buf), "%d (must be >= 0)", MPIR_CVAR_AMLAPI_EAGER_LIMIT);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_EAGER_LIMIT", buf);
    }
    cfg->eager_limit = MPIR_CVAR_AMLAPI_EAGER_LIMIT;

    const char *p = MPIR_CVAR_AMLAPI_PROTOCOL ? MPIR_CVAR_AMLAPI_PROTOCOL : "auto";
    if (!strcmp(p, "auto"))
        cfg->protocol = AML_PROTO_AUTO;
    else if (!strcmp(p, "eager"))
        cfg->protocol = AML_PROTO_EAGER;
    else if (!strcmp(p, "rndv"))
        cfg->protocol = AML_PROTO_RNDV;
    else
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PROTOCOL", "(use auto, eager or rndv)");

    const char *m = MPIR_CVAR_AMLAPI_PROGRESS_MODE ? MPIR_CVAR_AMLAPI_PROGRESS_MODE : "polling";
    if (!strcmp(m, "polling"))
        cfg->progress_mode = AML_PROGRESS_POLLING;
    else if (!strcmp(m, "interrupt"))
        cfg->progress_mode = AML_PROGRESS_INTERRUPT;
    else if (!strcmp(m, "coprocessor"))
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PROGRESS_MODE",
                             "coprocessor (not supported yet; use polling or interrupt)");
    else
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PROGRESS_MODE", "(use polling or interrupt)");

    if (MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT < 1 || MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT > 1000) {
        snprintf(buf, sizeof(buf), "%d (must be 1..1000)", MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT", buf);
    }
    if (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED < -1 || MPIR_CVAR_AMLAPI_OVERSUBSCRIBED > 1) {
        snprintf(buf, sizeof(buf), "%d (must be -1, 0 or 1)", MPIR_CVAR_AMLAPI_OVERSUBSCRIBED);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_OVERSUBSCRIBED", buf);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_init_local(int *tag_bits)
{
    int mpi_errno = MPI_SUCCESS;
    aml_config_t cfg;
    int rc;

    /* one VCI: aml has one worker (threads share it under MPICH's global lock) */
    MPIR_Assert(MPIDI_global.n_vcis == 1);
    mpi_errno = read_config(&cfg);
    MPIR_ERR_CHECK(mpi_errno);
    rc = aml_init(&cfg, &MPIDI_AMLAPI_global.aml);
    MPIDI_AMLAPI_CHK(rc, "aml_init");
    MPIDI_AMLAPI_global.rank = MPIR_Process.rank;
    MPIDI_AMLAPI_global.interrupt = cfg.progress_mode == AML_PROGRESS_INTERRUPT;
    if (MPIDI_AMLAPI_global.interrupt) {
        rc = aml_event_fd(MPIDI_AMLAPI_global.aml, &MPIDI_AMLAPI_global.efd);
        MPIDI_AMLAPI_CHK(rc, "aml_event_fd");
        MPIDI_AMLAPI_global.idle = 1;
    } else if (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED >= 0) {
        MPIDI_AMLAPI_global.idle = MPIR_CVAR_AMLAPI_OVERSUBSCRIBED;
    } else {
        int cores = allowed_cores();
        MPIDI_AMLAPI_global.idle = cores > 0 && MPIR_Process.local_size > cores;
    }
    mpi_errno = MPIDI_AMLAPI_am_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_AMLAPI_p2p_init();
    MPIR_ERR_CHECK(mpi_errno);
    /* aml carries the whole tag in its header: no tag bits are taken for matching */
    *tag_bits = MPIR_TAG_BITS_DEFAULT;

    if (MPIR_CVAR_DEBUG_SUMMARY && MPIR_Process.rank == 0) {
        printf("==== amlapi netmod ====\n");
        printf("packet size: %ld\n", (long) MPIDI_AMLAPI_global.packet_size);
        printf("max MPIDIG header: %ld\n", (long) MPIDI_AMLAPI_global.am_hdr_max);
        printf("eager limit: %ld\n", (long) MPIDI_AMLAPI_global.eager_limit);
        printf("protocol: %s\n", MPIR_CVAR_AMLAPI_PROTOCOL);
        printf("progress: %s%s\n", MPIR_CVAR_AMLAPI_PROGRESS_MODE,
               !MPIDI_AMLAPI_global.interrupt && MPIDI_AMLAPI_global.idle ?
               " (oversubscribed: idle polls yield)" : "");
        printf("=======================\n");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
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
    MPIDI_AMLAPI_CHK(rc, "aml_connect");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_post_init(void)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rc;

    /* everything of ours delivered and endpoints closed, then wait for all peers, then free */
    rc = aml_quiesce(MPIDI_AMLAPI_global.aml);
    MPIDI_AMLAPI_CHK(rc, "aml_quiesce");
    mpi_errno = MPIR_pmi_barrier();
    MPIR_ERR_CHECK(mpi_errno);
    rc = aml_finalize(MPIDI_AMLAPI_global.aml);
    MPIDI_AMLAPI_global.aml = NULL;
    MPIDI_AMLAPI_p2p_finalize();
    MPIDI_AMLAPI_CHK(rc, "aml_finalize");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
