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
        Largest aml packet in bytes (packet header, user header and data) of the one-packet
        protocol, and of every packet through vnode's on-node FIFOs: a message whose header
        and data fit one packet uses the one-packet protocol; longer eager messages to on-node
        peers are cut into packets of this size. Default: UCX's shared-memory bcopy segment
        (8256) less UCP's 8-byte AM header, so an 8 KiB MPI message is one packet (measured:
        8 KiB latency 1.72 vs 2.25 us, bandwidth 11.4 vs 8.5 GB/s against 8192). Range 512 to
        1048576.

    - name        : MPIR_CVAR_AMLAPI_NET_PACKET_SIZE
      category    : CH4_AMLAPI
      type        : int
      default     : 65592
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest eager or adaptive-eager packet, in bytes, to peers reached through UCX (other
        hosts; this host's ranks with MPIR_CVAR_NOLOCAL, cliques or MPIR_CVAR_AMLAPI_VNODE=0):
        longer messages below the eager limit are cut into packets of this size, each one UCX
        active message. Default: a 64 KiB MPI message and its headers in one UCX send, which
        UCX moves without a rendezvous of its own (measured between two hosts over TCP:
        16 KiB latency 6.5 against 39.5 us with 8248-byte packets; on-node UCX 0.9 against
        3.4 us). Packets are sent from the user's buffer, so the size costs no memory per
        pending send. Range 512 to 1048576; 0 means MPIR_CVAR_AMLAPI_PACKET_SIZE.

    - name        : MPIR_CVAR_AMLAPI_EAGER_LIMIT
      category    : CH4_AMLAPI
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Messages with more data bytes than this use the rendezvous protocol (scout, then the
        data moves into the buffer the receiver's header handler chose); smaller ones are
        sent eagerly. Applies to peers reached through UCX; on-node vnode peers switch at
        MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD. Must be >= 0. Default measured between
        two hosts over TCP (maint/bench --hosts=2, medians of 5): with 64 KiB eager 64 KiB
        latency 37 against 50 us and bandwidth 2154 against 1797 MB/s with the earlier
        12288-byte limit and 8248-byte packets. Above it rendezvous keeps the memory a flood of
        unexpected messages holds bounded.

    - name        : MPIR_CVAR_AMLAPI_PROTOCOL
      category    : CH4_AMLAPI
      type        : string
      default     : "auto"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Point-to-point protocol of the aml message layer: "auto" chooses per message by size
        and peer state (one-packet; adaptive eager while the peer has a credit, else
        rendezvous; rendezvous above the eager limit); "eager", "adaptive" and "rndv" force
        one protocol for every message (testing and tuning; "adaptive" still falls back to
        rendezvous without a credit).

    - name        : MPIR_CVAR_AMLAPI_RNDV_MODE
      category    : CH4_AMLAPI
      type        : string
      default     : "ucx"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How rendezvous moves the data once the receiver knows where it lands. "ucx": the
        scout is a UCX active message sent by UCX's own rendezvous and the header handler's
        landing is filled by ucp_am_recv_data_nbx, with UCX's tuned zero-copy protocols and
        no registration per message (measured 1 MiB one way: 53-63 us against 89 us for
        "get"). "get": aml registers the sender's buffer and the receiver pulls it
        (ucp_get_nbx). "put": the receiver sends its landing's address and key, the sender
        writes it (ucp_put_nbx); for transports where remote reads are poor.

    - name        : MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS
      category    : CH4_AMLAPI
      type        : int
      default     : 64
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Adaptive eager flow control: a sender keeps at most this many adaptive eager messages
        per peer that the receiver has not confirmed (a message is confirmed once it no
        longer takes receiver memory: it was received, or matched a posted receive). Further
        messages to that peer go by rendezvous, so a receiver flooded by many senders holds
        at most credits x eager limit bytes of unexpected data per sender (64 x 64 KiB with
        the defaults, on one node and from another). 0 turns adaptive eager off (ordered eager is
        used, and unexpected memory is unbounded). 0 to 1024. Default: the window of the
        usual bandwidth benchmarks (OSU's, ours): with 32, half of a 64-message window of
        16-64 KiB went by rendezvous, and the mix ran at a third of all-eager speed
        (bidirectional 64 KiB: 11 vs 39 GB/s).

    - name        : MPIR_CVAR_AMLAPI_RMA_DIRECT
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        MPI_Put, MPI_Get, MPI_Rput and MPI_Rget with a contiguous target datatype and at
        least the target's eager limit in bytes (smaller ones cost less as active messages:
        an 8-byte put under a lock 5.4 us direct, 1.8 us through MPIDIG) go as direct
        operations with no message at the target: a single copy
        (process_vm_writev/readv) to a rank of this node, UCX RMA to a rank of another host.
        Windows from MPI_Win_create, MPI_Win_allocate and MPI_Win_allocate_shared expose
        their memory for it at creation. 0: every RMA operation is an active message of
        MPICH's generic RMA (MPIDIG). Non-contiguous targets, accumulates and dynamic
        windows are MPIDIG's either way. Shared-memory windows (MPIR_CVAR_AMLAPI_RMA_SHM) do
        not use it; with it 0, MPI_Win_create windows are never shared-memory windows.

    - name        : MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX
      category    : CH4_AMLAPI
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Largest contiguous MPI_Put/MPI_Get/MPI_Rput/MPI_Rget done as a direct operation to a
        rank reached by UCX whose RMA is carried out in software by the target's progress
        (only tcp lanes for RMA, or none: UCX then emulates RMA over its active messages);
        larger ones go as a native amlapi message whose data moves by UCX's message
        protocols. Default 0: none is direct, since the message wins at every size that
        would be (from the eager limit, 64 KiB, up), measured between two test hosts on
        TCP: 1 MiB get 1040 against 340 us, put 1122 against 351 us; 64 KiB + 1 byte get 76
        against 52 us; at 64 KiB both take 49 us, but a window of 64 of them under a lock
        moves 810-818 MB/s direct against about 2.1x ch4:ucx's 850-880 as messages. -1: no
        limit. Transfers over RDMA and single copy are direct at every size from the eager
        limit.

    - name        : MPIR_CVAR_AMLAPI_RMA_SHM
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        A window whose ranks all share one node does all of its RMA in shared memory: from
        MPI_Win_allocate or MPI_Win_allocate_shared (MPICH puts its memory in one shared
        segment) put, get and the accumulate family are copies and loads/stores at the
        target's memory; from MPI_Win_create, single copies (process_vm_readv/writev) of
        the target's memory, when vnode's single copy works on the node and
        MPIR_CVAR_AMLAPI_RMA_SHM_COPY asks for it (off by default). Accumulates are
        applied under a per-target mutex, and MPI_Win_lock/unlock, lock_all/unlock_all and
        post/start/complete/wait are atomic words in shared memory. No message and nothing
        from the target: a target busy computing does not delay them. Fence stays MPIDIG's
        (a barrier). 0: such windows use direct operations and MPIDIG like any other.

    - name        : MPIR_CVAR_AMLAPI_RMA_SHM_COPY
      category    : CH4_AMLAPI
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        With MPIR_CVAR_AMLAPI_RMA_SHM, an MPI_Win_create window whose ranks all share one
        node is a shared-memory window too: lock/unlock, lock_all and post/start/complete/wait
        are the atomic words of the control segment, put and get single copies
        (process_vm_readv/writev) of the target's memory, the accumulate family a single-copy
        read, apply and write-back under the target's mutex; nothing from the target, so a
        target that computes without MPI calls delays nothing (passive-target progress).
        Off by default because a single copy costs 1.9 us a call on this machine kind (a
        virtual machine), more than an active message through vnode's FIFOs when the target
        makes progress: 8-byte get 2.32 against 0.98 us, accumulate 4.27 against 1.21.

    - name        : MPIR_CVAR_AMLAPI_LANES
      category    : CH4_AMLAPI
      type        : int
      default     : 1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        UCX endpoints per peer. Adaptive eager data packets carry no ordering and are spread
        round robin over them (several rails or connections); everything else uses the first.
        1 to 8.

    - name        : MPIR_CVAR_AMLAPI_DEBUG_REORDER
      category    : CH4_AMLAPI
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_MPIDEV_DETAIL
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Testing: adaptive eager data packets are sent last to first, ahead of their message's
        first packet, and every other sequenced packet to a peer is held back and sent after
        the next one, so receivers exercise out-of-order placement and their stash and replay
        of early packets. Slower; never for production.

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
        meanwhile; MPI_Test and MPI_Iprobe never sleep. "coprocessor" adds a helper thread
        (MPICH's progress thread, which this mode turns on; the thread level provided becomes
        MPI_THREAD_MULTIPLE) that keeps aml progressing while the application computes, so
        rendezvous transfers and completions go on between MPI calls (Almasi et al. 2005). When the
        application asked for MPI_THREAD_SINGLE or FUNNELED the helper sleeps on the event fd
        whenever nothing is pending; otherwise it polls. Blocked calls poll as in "polling".

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

    - name        : MPIR_CVAR_AMLAPI_KEEPALIVE
      category    : CH4_AMLAPI
      type        : int
      default     : 1000
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Failure handling for ranks on other hosts. Their endpoints use UCX's peer failure
        handling, so a rank there that dies ends the job at once with an error naming it and
        its host; and a connection to such a rank that has been silent for this many
        milliseconds is probed by TCP keepalive (3 probes this far apart, whole seconds), so a
        host that stops answering is found in about 4 times this (measured 4 s at 1000 ms,
        between namespaces; UCX's defaults take 28 s). The kernel answers the probes, so a rank
        that computes without calling MPI is never taken for dead. Both ends probe (UCX 1.13
        arms only the sockets it connects; aml arms those it accepts). A connection with data
        in flight waits for the kernel's retransmission limit instead
        (net.ipv4.tcp_retries2, about 15 minutes by default). 0 = no failure handling. 0 to
        3600000.

    - name        : MPIR_CVAR_AMLAPI_OVERSUBSCRIBED
      category    : CH4_AMLAPI
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Polling mode on an oversubscribed node: a blocked call that finds nothing to do
        yields its core (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD), then sleeps as in interrupt
        mode (on the event fd that vnode doorbells and UCX share, at most
        MPIR_CVAR_AMLAPI_INTERRUPT_TIMEOUT ms) instead of spinning, so the rank it waits for
        gets the core. -1 decides at MPI_Init: yes when this node runs more ranks than it has
        cores (hwloc, allowed cores only); 0 never; 1 always.

    - name        : MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD
      category    : CH4_AMLAPI
      type        : int
      default     : 200
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Polling mode on an oversubscribed node: for this many microseconds a blocked call
        that finds nothing to do gives its core away with sched_yield (the rank sharing
        the core, often the one it waits for, runs at once, without the wake-up latency of
        a sleep); after that it sleeps on the event fd. 0 sleeps at once. 0 to 1000000.

    - name        : MPIR_CVAR_AMLAPI_POLL_PAUSE
      category    : CH4_AMLAPI
      type        : int
      default     : 1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Polling mode: a blocked call whose poll found nothing executes this many CPU pause
        instructions (x86 pause, Arm yield) before it polls again. The waiting core then
        leaves the FIFO line it polls to the sender writing it, and a hyperthread sibling
        gets the core. 0 polls back to back. 0 to 1000.

    - name        : MPIR_CVAR_AMLAPI_VNODE
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Ranks on the same node (MPICH's node map: MPIR_CVAR_NOLOCAL and
        MPIR_CVAR_NUM_CLIQUES split it) talk through vnode, amlapi's shared-memory FIFOs
        with single copy for large messages. 0: every peer through UCX.

    - name        : MPIR_CVAR_AMLAPI_VNODE_RING_SIZE
      category    : CH4_AMLAPI
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes of each vnode FIFO (one per ordered pair of ranks on a node), rounded up to a
        power of two and at least four packets (MPIR_CVAR_AMLAPI_PACKET_SIZE). The node's
        segment in /dev/shm holds n*(n-1) of them for n ranks: lower it when /dev/shm is
        small (containers default to 64 MiB). 0 (default): by the node's n, the largest of
        512, 256, 128 KiB whose n-1 rings take at most 2 MiB per rank, else 64 KiB (512 KiB
        up to 5 ranks, 256 KiB up to 9, 128 KiB up to 17). Measured with 2 ranks on an Intel
        Xeon VM against the former fixed 64 KiB: 8-byte message rate 11.2-12.5 against
        10.3-10.7 Mmsg/s, 4 KiB latency 1.27-1.32 against 1.44-1.50 us, 8 KiB bandwidth
        11.5-11.8 against 5.6 GB/s (512 KiB; 7.5-7.9 with 256 KiB). Medians of 5 message
        rates: 12.3 with 256 KiB rings, 12.1 with 512 KiB, 11.7 with 1 MiB.

    - name        : MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node messages above MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD move by single
        copy (the receiver reads the sender's buffer with process_vm_readv) when the node
        allows it (checked at init: Yama ptrace_scope, seccomp, user namespaces). 0, or a
        node that forbids it: they go as packets through the FIFOs.

    - name        : MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD
      category    : CH4_AMLAPI
      type        : int
      default     : 12288
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node messages of more data bytes than this go by single copy (rendezvous),
        smaller ones eagerly as packets through the FIFOs. 0: MPIR_CVAR_AMLAPI_EAGER_LIMIT.
        The crossover depends on what a cache line costs between the two cores. Measured
        with 2 ranks, FIFO vs single copy: on an Intel Xeon VM, level at 8 KiB, then 16 KiB
        latency 3.8 vs 2.3-2.8 us and bandwidth 5.6-5.9 vs 11.8 GB/s, 64 KiB 12.1-12.6 vs
        4.0-5.1 us and 5.5-5.8 vs 18.2-19.6 GB/s (Open MPI 2.3-2.7 us at 16 KiB); on an AMD
        EPYC VM the FIFOs won up to 64 KiB while its two vCPUs shared a core complex (16 KiB
        0.72 vs 3.0 us) and lost across complexes (64 KiB 8.4-9.3 vs 13.5-15.5 GB/s), as
        most pairs of ranks of a many-core node are. 12 KiB keeps a two-packet eager range
        (adaptive eager, whose credits bound a flood's memory). Each eager message a receiver
        has not yet matched holds a buffer of its size.

    - name        : MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY
      category    : CH4_AMLAPI
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node single copies of at least this many bytes are shared: while the receiver
        reads the sender's buffer from the front, the sender's progress writes chunks of the
        same message into the receiver's buffer, so two cores move it (measured: 1 MiB in
        about half the time). Direct puts and gets into an MPI_Win_create window of a rank
        of this node share the same way with the target's progress, every operation in turn
        (1 MiB under a lock: 24 against 13 GB/s). Neither waits for the other. 0: the
        receiver (the origin) copies alone. Default 64 KiB: chunks are at least 32 KiB, so a
        smaller copy has nothing to share and only paid for the export (Intel Xeon VM, 2
        ranks, 6 interleaved runs: 32 KiB latency 3.36 against 3.57 us, 48 KiB 3.88 against
        4.14, with 32768).

    - name        : MPIR_CVAR_AMLAPI_VNODE_MEMBARRIER
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On-node packets to a rank that polls go without a full memory fence: a rank about to
        sleep for the first time (interrupt mode, an oversubscribed node, a progress thread)
        calls membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) once, and its senders fence from
        then on. Applies on nodes of at most 9 ranks (every peer polled directly) where the
        kernel offers membarrier. Measured, 2 ranks on an Intel Xeon VM: 8-byte message rate
        15.5-16.0 against 10.9-11.3 Mmsg/s with a fence per packet, 1-byte latency level;
        the membarrier took 16 us. 0: a fence after every packet.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

#include <stdarg.h>

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
    MPIDI_AMLAPI_fault_finalize();      /* this message says it all: no exit report */
    MPID_Abort(NULL, MPI_ERR_INTERN, 1, msg);
    abort();    /* MPID_Abort does not return */
}

static void aml_fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    MPIDI_AMLAPI_fatal("%s", msg);
}

/* vnode: the ranks that share this rank's node id (MPIR_CVAR_NOLOCAL and
 * MPIR_CVAR_NUM_CLIQUES already shaped node_map), named by the job and that id. */
static int read_vnode_config(aml_config_t * cfg)
{
    int mpi_errno = MPI_SUCCESS;
    static char job[128];
    char buf[64];
    int me = MPIR_Process.rank, node = MPIR_Process.node_map[me];

    if (MPIR_CVAR_AMLAPI_VNODE_RING_SIZE != 0 &&
        (MPIR_CVAR_AMLAPI_VNODE_RING_SIZE < 4096 || MPIR_CVAR_AMLAPI_VNODE_RING_SIZE > (1 << 30))) {
        snprintf(buf, sizeof(buf), "%d (must be 0 or 4096..2^30)",
                 MPIR_CVAR_AMLAPI_VNODE_RING_SIZE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_VNODE_RING_SIZE", buf);
    }
    if (MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD < 0) {
        snprintf(buf, sizeof(buf), "%d (must be >= 0)",
                 MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD", buf);
    }
    if (MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY < 0) {
        snprintf(buf, sizeof(buf), "%d (must be >= 0)", MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY", buf);
    }
    if (!MPIR_CVAR_AMLAPI_VNODE)
        goto fn_exit;
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
    cfg->vnode_shared_copy = (size_t) MPIR_CVAR_AMLAPI_VNODE_SHARED_COPY;
    cfg->vnode_fence_always = !MPIR_CVAR_AMLAPI_VNODE_MEMBARRIER;
    /* split nodes (NOLOCAL, cliques) reach the rest of this host through UCX */
    cfg->ucx_onnode = MPIR_CVAR_NOLOCAL || MPIR_pmi_has_local_cliques();
    cfg->vnode_watch = MPIR_CVAR_AMLAPI_REPORT_EXIT;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
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

    if (MPIR_CVAR_AMLAPI_NET_PACKET_SIZE != 0 && (MPIR_CVAR_AMLAPI_NET_PACKET_SIZE < 512 ||
                                                 MPIR_CVAR_AMLAPI_NET_PACKET_SIZE > 1048576)) {
        snprintf(buf, sizeof(buf), "%d (must be 0 or 512..1048576)",
                 MPIR_CVAR_AMLAPI_NET_PACKET_SIZE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_NET_PACKET_SIZE", buf);
    }
    cfg->net_packet_size = (size_t) MPIR_CVAR_AMLAPI_NET_PACKET_SIZE;

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
    else if (!strcmp(p, "adaptive"))
        cfg->protocol = AML_PROTO_ADAPTIVE;
    else
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PROTOCOL", "(use auto, eager, adaptive or rndv)");

    if (MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS < 0 || MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS > 1024 ||
        (MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS == 0 && cfg->protocol == AML_PROTO_ADAPTIVE)) {
        snprintf(buf, sizeof(buf), "%d (must be 0..1024, and > 0 for protocol adaptive)",
                 MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS", buf);
    }
    cfg->adaptive_credits = MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS;
    if (MPIR_CVAR_AMLAPI_LANES < 1 || MPIR_CVAR_AMLAPI_LANES > 8) {
        snprintf(buf, sizeof(buf), "%d (must be 1..8)", MPIR_CVAR_AMLAPI_LANES);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_LANES", buf);
    }
    cfg->lanes = MPIR_CVAR_AMLAPI_LANES;
    cfg->debug_reorder = MPIR_CVAR_AMLAPI_DEBUG_REORDER;

    const char *rm = MPIR_CVAR_AMLAPI_RNDV_MODE ? MPIR_CVAR_AMLAPI_RNDV_MODE : "ucx";
    cfg->rndv_ucx = !strcmp(rm, "ucx");
    cfg->rndv_put = !strcmp(rm, "put");
    if (!cfg->rndv_ucx && !cfg->rndv_put && strcmp(rm, "get"))
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_RNDV_MODE", "(use ucx, get or put)");

    const char *m = MPIR_CVAR_AMLAPI_PROGRESS_MODE ? MPIR_CVAR_AMLAPI_PROGRESS_MODE : "polling";
    if (!strcmp(m, "polling"))
        cfg->progress_mode = AML_PROGRESS_POLLING;
    else if (!strcmp(m, "interrupt") || !strcmp(m, "coprocessor"))
        cfg->progress_mode = AML_PROGRESS_INTERRUPT;    /* both need the event fd */
    else
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_PROGRESS_MODE",
                             "(use polling, interrupt or coprocessor)");
    /* oversubscribed polling sleeps like interrupt mode: it needs the event fd too */
    MPIDI_AMLAPI_global.oversub = cfg->progress_mode == AML_PROGRESS_POLLING &&
        MPIDI_AMLAPI_oversubscribed();
    if (MPIDI_AMLAPI_global.oversub)
        cfg->progress_mode = AML_PROGRESS_INTERRUPT;

    if (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD < 0 ||
        MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD > 1000000) {
        snprintf(buf, sizeof(buf), "%d (must be 0..1000000)",
                 MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_OVERSUBSCRIBED_YIELD", buf);
    }
    if (MPIR_CVAR_AMLAPI_POLL_PAUSE < 0 || MPIR_CVAR_AMLAPI_POLL_PAUSE > 1000) {
        snprintf(buf, sizeof(buf), "%d (must be 0..1000)", MPIR_CVAR_AMLAPI_POLL_PAUSE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_POLL_PAUSE", buf);
    }
    MPIDI_AMLAPI_global.poll_pause = MPIR_CVAR_AMLAPI_POLL_PAUSE;
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
    if (MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX < -1) {
        snprintf(buf, sizeof(buf), "%d (must be -1 or a byte count)",
                 MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX", buf);
    }
    if (MPIR_CVAR_AMLAPI_KEEPALIVE < 0 || MPIR_CVAR_AMLAPI_KEEPALIVE > 3600000) {
        snprintf(buf, sizeof(buf), "%d (must be 0..3600000)", MPIR_CVAR_AMLAPI_KEEPALIVE);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_KEEPALIVE", buf);
    }
    cfg->keepalive_ms = MPIR_CVAR_AMLAPI_KEEPALIVE;
    if (MPIR_CVAR_AMLAPI_DYNAMIC_PEERS < 0 || MPIR_CVAR_AMLAPI_DYNAMIC_PEERS > 1048576) {
        snprintf(buf, sizeof(buf), "%d (must be 0..1048576)", MPIR_CVAR_AMLAPI_DYNAMIC_PEERS);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             "MPIR_CVAR_AMLAPI_DYNAMIC_PEERS", buf);
    }
    cfg->dyn_peers_max = MPIR_CVAR_AMLAPI_DYNAMIC_PEERS;
    mpi_errno = read_vnode_config(cfg);
    MPIR_ERR_CHECK(mpi_errno);
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
        printf("protocol: %s\n", MPIR_CVAR_AMLAPI_PROTOCOL);
        printf("adaptive eager credits: %d, lanes: %d\n", MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS,
               MPIR_CVAR_AMLAPI_LANES);
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
 * through the FIFOs (slower, and more memory at the receiver). */
static void warn_no_single_copy(void)
{
    int64_t peers = 0, sc = 0;
    int first = 0;
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_VNODE_PEERS, &peers);
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_VNODE_SINGLE_COPY, &sc);
    /* the first rank of the node says it */
    while (MPIR_Process.node_map[first] != MPIR_Process.node_map[MPIR_Process.rank])
        first++;
    if (peers > 0 && !sc && MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY && first == MPIR_Process.rank)
        fprintf(stderr, "amlapi: single copy (process_vm_readv) is not allowed between the "
                "ranks on the node of rank %d (Yama ptrace_scope, seccomp or user namespaces): "
                "large on-node messages are copied through shared-memory FIFOs instead\n",
                MPIR_Process.rank);
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
