/*
 * Peers of other jobs: processes met after aml_connect (MPI_Comm_spawn, connect/accept,
 * join). Each is named by its upid: its aml_t's 64-bit id, then UCX's network-only address
 * of its worker. The embedder moves upids (an MPI port name carries one); aml_add_peer turns
 * one into a peer index.
 *
 * Packets carry the sender's index at the receiver as their source, and a process of another
 * job has its own numbering: so the two processes first exchange CONNECT packets, each
 * carrying its settings (which must equal the receiver's, as between the ranks of a job), its
 * upid, and the index it gives the other. The one that connects sends CONNECT with REPLY and
 * waits; the other, from its progress, makes the peer (and its endpoint back) if it does not
 * know the sender yet and answers with its own CONNECT. When both connect at once each
 * learns the other's index from the other's packet; an answer that follows changes nothing.
 * A CONNECT is not sequenced: neither side has counted a packet from the other yet.
 *
 * Peers of other jobs go through UCX only (vnode's segment belongs to one job), with UCX's
 * peer failure handling: one that ends is marked failed, not fatal, since after MPI's
 * disconnect it may end before this process does.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A CONNECT being sent: header, body and upid live until the transport is done with them. */
typedef struct conn_send {
    aml_tport_op_t op;
    aml_pkt_t pkt;
    aml_conn_body_t body;       /* followed by the upid */
} conn_send_t;

static void conn_sent(aml_tport_op_t * op)
{
    op->aml->dyn_inflight--;
    free(op);
}

static void send_connect(aml_t * aml, int peer, uint32_t flags)
{
    aml_peer_t *p = &aml->peers[peer];
    conn_send_t *c = malloc(sizeof(*c) + aml->upid_len);
    if (!c)
        aml_fatal(aml, "out of memory connecting to a process of another job");
    memset(c, 0, sizeof(*c));
    c->op.done = conn_sent;
    c->op.aml = aml;
    c->op.peer = peer;
    c->op.hdr = &c->pkt;
    c->pkt.type = AML_PKT_CONNECT;
    c->pkt.src = AML_SRC_NONE;
    memcpy(&c->body.cfg, aml->addr, sizeof(c->body.cfg));      /* aml_local_address's header */
    c->body.idx = (uint32_t) peer;
    c->body.flags = flags;
    c->body.upid_len = (uint32_t) aml->upid_len;
    memcpy(c + 1, aml->upid, aml->upid_len);
    aml->dyn_inflight++;
    if (p->tport->send(p->ep, &c->op, sizeof(c->pkt), &c->body,
                       sizeof(c->body) + aml->upid_len, 0) == AML_TPORT_DONE)
        conn_sent(&c->op);
}

static uint64_t upid_uuid(const void *upid)
{
    uint64_t u;
    memcpy(&u, upid, sizeof(u));
    return u;
}

/* A new record for the process named upid (checked by the caller), its endpoints created. */
static int new_peer(aml_t * aml, const void *upid, size_t len, int *peer)
{
    aml_tport_ep_t eps[8];
    aml_peer_t *p;
    int i, rc;

    if (aml->npeers >= aml->peers_cap) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "more than %d processes of other jobs "
                 "(the limit set at init)", aml->cfg.dyn_peers_max);
        return AML_ERR_NOMEM;
    }
    i = aml->npeers;
    p = &aml->peers[i];
    memset(p, 0, sizeof(*p));
    if (!(p->upid = malloc(len))) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "out of memory");
        return AML_ERR_NOMEM;
    }
    memcpy(p->upid, upid, len);
    p->upid_len = len;
    p->tport = &aml_ucx_tport;
    rc = p->tport->connect(aml, i, (const char *) upid + sizeof(uint64_t), eps, aml->lanes,
                           AML_TPORT_CONN_DYNAMIC);
    if (rc != AML_OK) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "UCX cannot reach the process of another "
                 "job at the address it gave (%zu bytes)", len - sizeof(uint64_t));
        free(p->upid);
        p->upid = NULL;
        return rc;
    }
    p->caps = p->tport->caps;
    p->eager_limit = aml->eager_limit;
    p->pkt_size = aml->net_packet_size;
    p->ep = eps[0];
    for (int l = 1; l < aml->lanes; l++)
        aml->lane_eps[(size_t) i * (aml->lanes - 1) + l - 1] = eps[l];
    p->dyn = AML_DYN_CONNECTING;
    aml_htab_put(&aml->uuids, &p->uh, upid_uuid(upid));
    aml->ucx_remote = true;     /* aml_poll: UCX now reaches another process */
    aml->npeers++;
    *peer = i;
    return AML_OK;
}

static int find_peer(aml_t * aml, uint64_t uuid)
{
    aml_hent_t *e = aml_htab_get(&aml->uuids, uuid);
    return e ? (int) (AML_CONTAINER(e, aml_peer_t, uh) - aml->peers) : -1;
}

void aml_dynamic_recv_connect(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                              const void *data, size_t len)
{
    aml_conn_body_t b;
    const aml_addr_hdr_t *me = (const aml_addr_hdr_t *) aml->addr;
    const char *upid = (const char *) data + sizeof(b);
    const char *what = NULL;
    int i;
    (void) uhdr;

    if (pkt->src != AML_SRC_NONE)
        aml_fatal_pkt(aml, pkt, "a CONNECT from a known rank");
    if (len < sizeof(b))
        aml_fatal_pkt(aml, pkt, "%zu-byte body, shorter than %zu", len, sizeof(b));
    memcpy(&b, data, sizeof(b));
    if (b.upid_len != len - sizeof(b) || b.upid_len <= sizeof(uint64_t) ||
        b.upid_len > AML_UPID_MAX || upid_uuid(upid) != b.cfg.uuid ||
        b.cfg.uuid == aml->uuid || (b.flags & ~AML_CONNF_REPLY))
        aml_fatal_pkt(aml, pkt, "body of %zu bytes names a %u-byte upid, id 0x%llx, flags %u",
                      len, b.upid_len, (unsigned long long) b.cfg.uuid, b.flags);
    /* receivers check packets against their own settings, as between a job's ranks */
    if (b.cfg.wire_version != me->wire_version)
        what = "wire version";
    else if (b.cfg.packet_size != me->packet_size)
        what = "packet size (MPIR_CVAR_AMLAPI_PACKET_SIZE)";
    else if (b.cfg.net_packet_size != me->net_packet_size)
        what = "network packet size (MPIR_CVAR_AMLAPI_NET_PACKET_SIZE)";
    else if (b.cfg.adaptive_credits != me->adaptive_credits)
        what = "adaptive credits (MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS)";
    else if (b.cfg.max_uhdr != me->max_uhdr)
        what = "largest user header (UCX's active-message header limit)";
    if (what)
        aml_fatal(aml, "a process of another job connects with a different %s: "
                  "wire version %u, packet sizes %u/%u, credits %u, user header %u here "
                  "against %u, %u/%u, %u, %u there", what, me->wire_version, me->packet_size,
                  me->net_packet_size, me->adaptive_credits, me->max_uhdr, b.cfg.wire_version,
                  b.cfg.packet_size, b.cfg.net_packet_size, b.cfg.adaptive_credits,
                  b.cfg.max_uhdr);

    i = find_peer(aml, b.cfg.uuid);
    if (i >= 0 && i < aml->size)
        aml_fatal_pkt(aml, pkt, "CONNECT from rank %d of this job", i);
    if (i < 0) {
        int rc = new_peer(aml, upid, b.upid_len, &i);
        if (rc != AML_OK)
            aml_fatal(aml, "a process of another job connects: %s", aml->errmsg);
    }
    aml_peer_t *p = &aml->peers[i];
    if (p->dyn == AML_DYN_UP && p->me != b.idx)
        aml_fatal_pkt(aml, pkt, "connected peer %d now says it knows this process as %u, "
                      "not %u", i, b.idx, p->me);
    if (p->dyn != AML_DYN_FAILED) {
        p->me = b.idx;
        p->dyn = AML_DYN_UP;
    }
    if (b.flags & AML_CONNF_REPLY)
        send_connect(aml, i, 0);
}

int aml_add_peer(aml_t * aml, const void *upid, size_t len, int timeout_ms, int *peer)
{
    struct timespec t0, t;
    uint64_t uuid;
    int i, rc;

    if (!aml || !upid || !peer || len <= sizeof(uint64_t) || len > AML_UPID_MAX ||
        timeout_ms < 0)
        return AML_ERR_INVAL;
    if (!aml->connected || aml->in_dispatch)
        return AML_ERR_STATE;
    uuid = upid_uuid(upid);
    if (uuid == aml->uuid) {
        *peer = aml->rank;
        return AML_OK;
    }
    i = find_peer(aml, uuid);
    if (i < 0) {
        if ((rc = new_peer(aml, upid, len, &i)) != AML_OK)
            return rc;
        send_connect(aml, i, AML_CONNF_REPLY);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (aml->peers[i].dyn == AML_DYN_CONNECTING) {
        aml_progress(aml);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout_ms && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
            timeout_ms) {
            snprintf(aml->errmsg, sizeof(aml->errmsg), "the process of another job did not "
                     "answer within %d ms", timeout_ms);
            return AML_ERR_TIMEOUT;
        }
    }
    if (aml->peers[i].dyn == AML_DYN_FAILED) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "the process of another job failed or "
                 "cannot be reached (UCX reported its endpoint failed)");
        return AML_ERR_TRANSPORT;
    }
    *peer = i;
    return AML_OK;
}

int aml_upid(aml_t * aml, int peer, const void **upid, size_t * len)
{
    if (!aml || !upid || !len || (peer != -1 && !aml_peer_ok(aml, peer)))
        return AML_ERR_INVAL;
    if (peer == -1 || peer == aml->rank) {
        *upid = aml->upid;
        *len = aml->upid_len;
    } else {
        if (!aml->peers[peer].upid)
            return AML_ERR_STATE;       /* before aml_connect */
        *upid = aml->peers[peer].upid;
        *len = aml->peers[peer].upid_len;
    }
    return AML_OK;
}

/* ---- setup, from aml_context.c --------------------------------------------------------- */

/* This aml_t's id (never 0) and upid. */
int aml_dynamic_init(aml_t * aml)
{
    const void *na;
    size_t nl;
    int rc;

    if (getrandom(&aml->uuid, sizeof(aml->uuid), 0) != sizeof(aml->uuid)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        aml->uuid = ((uint64_t) t.tv_sec * 1000000007u) ^ (uint64_t) t.tv_nsec ^
            ((uint64_t) getpid() << 40);
    }
    aml->uuid |= !aml->uuid;
    if (aml_htab_init(&aml->uuids, 256))
        return AML_ERR_NOMEM;
    if ((rc = aml_ucx_tport.net_address(aml, &na, &nl)) != AML_OK)
        return rc;
    aml->upid_len = sizeof(aml->uuid) + nl;
    if (aml->upid_len > AML_UPID_MAX)
        return AML_ERR_TRANSPORT;
    if (!(aml->upid = malloc(aml->upid_len)))
        return AML_ERR_NOMEM;
    memcpy(aml->upid, &aml->uuid, sizeof(aml->uuid));
    memcpy(aml->upid + sizeof(aml->uuid), na, nl);
    return AML_OK;
}

/* Rank i of the job, from its address at aml_connect: its id and upid, so that a process of
 * another job that names it (an MPI group spanning both jobs) finds the rank. */
int aml_dynamic_world(aml_t * aml, int i, const void *net, size_t net_len, uint64_t uuid)
{
    aml_peer_t *p = &aml->peers[i];
    if (!(p->upid = malloc(sizeof(uuid) + net_len)))
        return AML_ERR_NOMEM;
    memcpy(p->upid, &uuid, sizeof(uuid));
    memcpy(p->upid + sizeof(uuid), net, net_len);
    p->upid_len = sizeof(uuid) + net_len;
    if (i != aml->rank)
        aml_htab_put(&aml->uuids, &p->uh, uuid);
    return AML_OK;
}

void aml_dynamic_free(aml_t * aml)
{
    if (aml->peers)
        for (int i = 0; i < aml->npeers; i++) {
            free(aml->peers[i].upid);
            aml->peers[i].upid = NULL;
        }
    free(aml->upid);
    aml->upid = NULL;
    aml_htab_free(&aml->uuids);
}
