/*
 * amlapi netmod: dynamic processes. MPICH's ch4 does MPI_Comm_spawn, connect/accept and join
 * itself (ch4_spawn.c, ch4_comm.c) and asks the netmod for four things:
 *   - upids: a name for each process that another job can connect to (aml_upid: the aml
 *     context's id, then UCX's network-only worker address, ~90 bytes, so it fits an MPI
 *     port name, which is 256 characters of hex);
 *   - upids to gpids: connect to the processes those names give (aml_add_peer_async: a
 *     CONNECT handshake, after which the process is an aml peer reached by UCX; completed from
 *     progress, since the root of an intercommunicator connects to the other group before
 *     its own group, which the other group's processes wait for, knows of them; the first
 *     send waits for it), in a new AV table whose entries keep the aml peer index
 *     (MPIDI_AMLAPI_peer reads it);
 *   - dynamic_send/dynamic_recv: the small tagged messages of the connect/accept handshake,
 *     here aml messages to handler MPIDI_AMLAPI_H_DYNPROC, queued on arrival until a
 *     dynamic_recv takes them.
 * A process of another job can connect only while a dynamic_recv waits (aml_listen): that is
 * MPI_Comm_accept waiting for its connector (ch4_spawn.c's peer_intercomm_create); the other
 * processes of both jobs connect to each other from upids_to_gpids, each adding the other.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_noinline.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_AMLAPI_DYNAMIC_PEERS
      category    : CH4_AMLAPI
      type        : int
      default     : 1024
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Processes of other jobs (spawned, connect/accept, join) one process can connect to in its
        life; their records (about 700 bytes each, touched only when used) are reserved at init.
        Default 1024, 0 to 1048576; one more is an error naming this variable.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* the handshake message's user header */
typedef struct {
    int32_t tag;
    int32_t len;
} dynproc_hdr_t;

/* an arrived handshake message, until dynamic_recv takes it */
typedef struct dynproc_msg {
    struct dynproc_msg *next;
    int tag;
    int len;
    int done;                   /* all its bytes landed */
    char data[];
} dynproc_msg_t;

static dynproc_msg_t *arrived, **arrived_tail = &arrived;
static int narrived;

/* No handshake message is longer than ch4_spawn.c's dynproc_conn_hdr (a context id, a length
 * and a port name's upid), and a handshake has two: a peer that sends more is not one. */
#define DYNPROC_MSG_MAX 1024
#define DYNPROC_QUEUE_MAX 64

static void dynproc_landed(aml_t * aml, void *arg)
{
    ((dynproc_msg_t *) arg)->done = 1;
}

static int dynproc_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                           aml_recv_t * recv)
{
    dynproc_hdr_t h;
    dynproc_msg_t *m;
    if (info->uhdr_len != sizeof(h))
        MPIDI_AMLAPI_fatal("malformed connect/accept message from process %d: %zu-byte header",
                           info->src, info->uhdr_len);
    memcpy(&h, info->uhdr, sizeof(h));
    if (h.len < 0 || (size_t) h.len != info->msg_len || info->msg_len > DYNPROC_MSG_MAX)
        MPIDI_AMLAPI_fatal("malformed connect/accept message from process %d: %d bytes "
                           "announced, %zu sent (at most %d)", info->src, h.len, info->msg_len,
                           DYNPROC_MSG_MAX);
    if (narrived >= DYNPROC_QUEUE_MAX)
        MPIDI_AMLAPI_fatal("connect/accept message from process %d: %d such messages wait "
                           "already, nobody takes them", info->src, narrived);
    m = MPL_malloc(sizeof(*m) + info->msg_len, MPL_MEM_OTHER);
    if (!m)
        MPIDI_AMLAPI_fatal("out of memory receiving a connect/accept message");
    m->next = NULL;
    m->tag = h.tag;
    m->len = h.len;
    m->done = 0;
    *arrived_tail = m;
    arrived_tail = &m->next;
    narrived++;
    if (info->data || !info->msg_len) {
        memcpy(m->data, info->data, info->msg_len);
        m->done = 1;
    } else {
        recv->buf = m->data;
        recv->compl_fn = dynproc_landed;
        recv->compl_arg = m;
    }
    return 0;
}

static void refused_get(void *addr, void *obj, int count, void *buf)
{
    int64_t v = 0;
    aml_qenv(MPIDI_AMLAPI_global.aml, AML_Q_REFUSED, &v);
    *(unsigned long long *) buf = (unsigned long long) v;
}

int MPIDI_AMLAPI_spawn_init(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rc = aml_register_handler(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_H_DYNPROC,
                                  dynproc_handler, NULL);
    MPIDI_AMLAPI_CHK(rc, "aml_register_handler");
    MPIDI_AMLAPI_PVAR_COUNTER_FN("amlapi_refused_packets", refused_get,
                                 "Packets from outside the job this process refused: UCX "
                                 "packets without a token of it, CONNECTs nobody expected");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_AMLAPI_spawn_finalize(void)
{
    while (arrived) {
        dynproc_msg_t *m = arrived;
        arrived = m->next;
        MPL_free(m);
    }
    arrived_tail = &arrived;
    narrived = 0;
}

/* Whether timeout (seconds, 0 = none) has passed since t0. */
static int timed_out(MPL_time_t * t0, int timeout)
{
    MPL_time_t now;
    double secs;
    if (timeout <= 0)
        return 0;
    MPL_wtime(&now);
    MPL_wtime_diff(t0, &now, &secs);
    return secs >= (double) timeout;
}

/* a handshake message being sent: a copy of the caller's bytes, so that a send that times out
 * can be left to complete (or fail) on its own */
typedef struct {
    int done;
    int abandoned;
    char data[];
} dynproc_send_t;

static void sent(aml_t * aml, void *arg)
{
    dynproc_send_t *s = arg;
    if (s->abandoned)
        MPL_free(s);
    else
        s->done = 1;
}

int MPIDI_AMLAPI_dynamic_send(uint64_t remote_gpid, int tag, const void *buf, int size,
                              int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    int avtid = MPIDIU_GPID_GET_AVTID(remote_gpid);
    int lpid = MPIDIU_GPID_GET_LPID(remote_gpid);
    dynproc_hdr_t h = { tag, size };
    dynproc_send_t *s;
    aml_xfer_t x;
    MPL_time_t t0;
    int rc;

    s = MPL_malloc(sizeof(*s) + size, MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP1(!s, mpi_errno, MPI_ERR_NO_MEM, "**nomem", "**nomem %s",
                         "connect/accept message");
    s->done = 0;
    s->abandoned = 0;
    memcpy(s->data, buf, size);
    memset(&x, 0, sizeof(x));
    x.peer = avtid ? MPIDI_AMLAPI_AV(&MPIDIU_get_av(avtid, lpid)).peer : lpid;
    x.handler = MPIDI_AMLAPI_H_DYNPROC;
    x.uhdr = &h;
    x.uhdr_len = sizeof(h);
    x.data = s->data;
    x.len = size;
    x.org_fn = sent;
    x.org_arg = s;
    x.protocol = AML_PROTO_AUTO;
    rc = aml_xfer(MPIDI_AMLAPI_global.aml, &x);
    if (rc != AML_OK)
        MPL_free(s);
    /* a process of another job that never answered its CONNECT (nobody accepts on the port) */
    if (rc == AML_ERR_TIMEOUT || rc == AML_ERR_TRANSPORT)
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_PORT, "**amlapi_aml", "**amlapi_aml %s %s",
                             "connecting", aml_error(MPIDI_AMLAPI_global.aml));
    MPIDI_AMLAPI_CHK(rc, "aml_xfer");
    MPL_wtime(&t0);
    while (!s->done) {
        mpi_errno = MPID_Progress_test(NULL);
        MPIR_ERR_CHECK(mpi_errno);
        if (!s->done && timed_out(&t0, timeout)) {
            s->abandoned = 1;   /* freed when the send completes */
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_PORT, "**amlapi_dynproc_send",
                                 "**amlapi_dynproc_send %d %d", size, timeout);
        }
    }
    MPL_free(s);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_dynamic_recv(int tag, void *buf, int size, int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    dynproc_msg_t **pm, *m = NULL;
    MPL_time_t t0;

    MPL_wtime(&t0);
    aml_listen(MPIDI_AMLAPI_global.aml, 1);
    for (;;) {
        for (pm = &arrived; *pm; pm = &(*pm)->next)
            if ((*pm)->tag == tag && (*pm)->done)
                break;
        if (*pm)
            break;
        if (timed_out(&t0, timeout)) {
            aml_listen(MPIDI_AMLAPI_global.aml, 0);
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_PORT, "**amlapi_dynproc",
                                 "**amlapi_dynproc %d %d", tag, timeout);
        }
        mpi_errno = MPID_Progress_test(NULL);
        if (mpi_errno)
            aml_listen(MPIDI_AMLAPI_global.aml, 0);
        MPIR_ERR_CHECK(mpi_errno);
    }
    aml_listen(MPIDI_AMLAPI_global.aml, 0);
    m = *pm;
    *pm = m->next;
    narrived--;
    if (arrived_tail == &m->next)
        arrived_tail = pm;
    MPIR_ERR_CHKANDJUMP2(m->len > size, mpi_errno, MPI_ERR_TRUNCATE, "**truncate",
                         "**truncate %d %d", m->len, size);
    memcpy(buf, m->data, m->len);
  fn_exit:
    MPL_free(m);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- names of processes ------------------------------------------------------------------ */

int MPIDI_AMLAPI_get_local_upids(MPIR_Comm * comm, int **local_upid_size, char **local_upids)
{
    int mpi_errno = MPI_SUCCESS;
    int n = comm->local_size, total = 0;
    const void **up = NULL;
    size_t *len = NULL;
    char *at;
    MPIR_CHKPMEM_DECL(2);
    MPIR_CHKLMEM_DECL(2);

    MPIR_CHKLMEM_MALLOC(up, const void **, n * sizeof(*up), mpi_errno, "upids", MPL_MEM_ADDRESS);
    MPIR_CHKLMEM_MALLOC(len, size_t *, n * sizeof(*len), mpi_errno, "upid sizes",
                        MPL_MEM_ADDRESS);
    for (int i = 0; i < n; i++) {
        int lpid, avtid, peer, rc;
        if (comm->comm_kind == MPIR_COMM_KIND__INTERCOMM)
            MPIDIU_comm_rank_to_pid_local(comm, i, &lpid, &avtid);
        else
            MPIDIU_comm_rank_to_pid(comm, i, &lpid, &avtid);
        peer = avtid ? MPIDI_AMLAPI_AV(&MPIDIU_get_av(avtid, lpid)).peer : lpid;
        rc = aml_upid(MPIDI_AMLAPI_global.aml, peer, &up[i], &len[i]);
        MPIDI_AMLAPI_CHK(rc, "aml_upid");
        total += (int) len[i];
    }
    MPIR_CHKPMEM_MALLOC(*local_upid_size, int *, n * sizeof(int), mpi_errno, "upid sizes",
                        MPL_MEM_ADDRESS);
    MPIR_CHKPMEM_MALLOC(*local_upids, char *, total, mpi_errno, "upids", MPL_MEM_ADDRESS);
    at = *local_upids;
    for (int i = 0; i < n; i++) {
        (*local_upid_size)[i] = (int) len[i];
        memcpy(at, up[i], len[i]);
        at += len[i];
    }
    MPIR_CHKPMEM_COMMIT();
  fn_exit:
    MPIR_CHKLMEM_FREEALL();
    return mpi_errno;
  fn_fail:
    MPIR_CHKPMEM_REAP();
    goto fn_exit;
}

/* The gpid of aml peer index peer: COMM_WORLD's, or a live AV table's entry that keeps it. */
static int find_gpid(int peer, uint64_t * gpid)
{
    int n_avts = MPIDIU_get_n_avts();
    if (peer < MPIR_Process.size) {
        *gpid = MPIDIU_GPID_CREATE(0, peer);
        return 1;
    }
    for (int k = 1; k < n_avts; k++) {
        MPIDI_av_table_t *t = MPIDIU_get_av_table(k);
        if (!t)
            continue;
        for (int j = 0; j < t->size; j++)
            if (MPIDI_AMLAPI_AV(&t->table[j]).peer == peer) {
                *gpid = MPIDIU_GPID_CREATE(k, j);
                return 1;
            }
    }
    return 0;
}

int MPIDI_AMLAPI_upids_to_gpids(int size, int *remote_upid_size, char *remote_upids,
                                uint64_t * remote_gpids)
{
    int mpi_errno = MPI_SUCCESS;
    int *fresh = NULL, *fresh_peer = NULL, nfresh = 0;
    char *at = remote_upids;
    /* each connection waits at most MPICH's connect timeout for the other process */
    int timeout_ms = MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT > 0 ?
        MPIR_CVAR_CH4_COMM_CONNECT_TIMEOUT * 1000 : 0;
    MPIR_CHKLMEM_DECL(2);

    MPIR_CHKLMEM_MALLOC(fresh, int *, size * sizeof(int), mpi_errno, "new processes",
                        MPL_MEM_ADDRESS);
    MPIR_CHKLMEM_MALLOC(fresh_peer, int *, size * sizeof(int), mpi_errno, "new peers",
                        MPL_MEM_ADDRESS);
    for (int i = 0; i < size; i++) {
        int peer, rc;
        /* One process: a port's (connect) or a connector's (accept), or a group of one,
         * whose root is connected already; waited for here, so that a connect nobody
         * accepts fails before an AV table exists (MPICH's finalize expects every table it
         * finds to be referenced). A group: connected from progress (see the top). */
        rc = size == 1 ?
            aml_add_peer(MPIDI_AMLAPI_global.aml, at, (size_t) remote_upid_size[i], timeout_ms,
                         &peer) :
            aml_add_peer_async(MPIDI_AMLAPI_global.aml, at, (size_t) remote_upid_size[i],
                               timeout_ms, &peer);
        if (rc == AML_ERR_NOMEM)
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                                 "MPIR_CVAR_AMLAPI_DYNAMIC_PEERS",
                                 aml_error(MPIDI_AMLAPI_global.aml));
        if (rc != AML_OK)
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_PORT, "**amlapi_aml", "**amlapi_aml %s %s",
                                 "aml_add_peer", aml_error(MPIDI_AMLAPI_global.aml));
        at += remote_upid_size[i];
        if (!find_gpid(peer, &remote_gpids[i])) {
            /* a peer named twice in this call gets one entry */
            int j;
            for (j = 0; j < nfresh && fresh_peer[j] != peer; j++);
            if (j == nfresh) {
                fresh_peer[nfresh] = peer;
                nfresh++;
            }
            fresh[i] = j;
        } else {
            fresh[i] = -1;
        }
    }
    if (nfresh > 0) {
        int avtid;
        mpi_errno = MPIDIU_new_avt(nfresh, &avtid);
        MPIR_ERR_CHECK(mpi_errno);
        for (int j = 0; j < nfresh; j++)
            MPIDI_AMLAPI_AV(&MPIDIU_get_av(avtid, j)).peer = fresh_peer[j];
        for (int i = 0; i < size; i++)
            if (fresh[i] >= 0)
                remote_gpids[i] = MPIDIU_GPID_CREATE(avtid, fresh[i]);
    }
  fn_exit:
    MPIR_CHKLMEM_FREEALL();
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
