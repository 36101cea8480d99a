/*
 * Peers of other jobs: processes met after aml_connect (MPI_Comm_spawn, connect/accept,
 * join). Each is named by its upid: its aml_t's 64-bit id, then UCX's network-only address
 * of its worker. The embedder moves upids (an MPI port name carries one); aml_add_peer turns
 * one into a peer index.
 *
 * Packets carry the sender's index at the receiver as their source, and a process of another
 * job has its own numbering: so the two processes first exchange CONNECT packets, each
 * carrying its settings (which must equal the receiver's, as between the ranks of a job), its
 * upid, the index it gives the other, and the token the other must put on every packet to it
 * (aml_ucx.c). The one that connects sends a request (CONNECT with REPLY) and waits; the other
 * answers from its progress with its own CONNECT, which carries that token and so comes from
 * the process the request was sent to.
 *
 * Who may connect. A request carries no token: anyone who reaches the worker can send one. It
 * is accepted only when it names this process's id (which only its upid tells) and either
 * this process is connecting to the requester itself (both sides of an MPI connect/accept
 * connect to every process of the other side, in whatever order) or the embedder listens
 * (aml_listen: an MPI accept is waiting), at most AML_STRANGERS_PER_S new processes a second
 * and dyn_peers_max in all. Everything else is refused: dropped and counted (AML_Q_REFUSED),
 * never fatal, since its sender is not a peer. A request refused because nobody listened yet
 * is repeated by aml_add_peer every AML_CONNECT_RETRY_MS until its timeout: MPI lets a connect
 * come before the accept.
 *
 * Peers of other jobs go through UCX only (vnode's segment belongs to one job), with UCX's
 * peer failure handling: one that ends is marked failed, not fatal, since after MPI's
 * disconnect it may end before this process does.
 */
#include "aml_impl.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define AML_STRANGERS_PER_S 64    /* new processes of other jobs accepted per second */
#define AML_CONNECT_RETRY_MS 100    /* aml_add_peer repeats an unanswered request */

/* A CONNECT being sent: header, body and upid live until the transport is done with them. */
typedef struct conn_send {
    aml_tport_op_t op;
    uint64_t headroom;          /* the transport's (AML_TPORT_HEADROOM) */
    aml_pkt_t pkt;
    aml_conn_body_t body;       /* followed by the upid */
} conn_send_t;

_Static_assert(offsetof(conn_send_t, pkt) == offsetof(conn_send_t, headroom) +
               AML_TPORT_HEADROOM, "the header has the transport's headroom before it");

static void conn_sent(aml_tport_op_t * op)
{
    op->aml->dyn_inflight--;
    free(AML_CONTAINER(op, conn_send_t, op));
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static uint64_t upid_uuid(const void *upid)
{
    uint64_t u;
    memcpy(&u, upid, sizeof(u));
    return u;
}

/* A request (AML_CONNF_REPLY: src names nobody, since the receiver has given us no index
 * yet) or an answer (src is the index the peer gave us, the packet carries its token). The
 * body tells the peer the token it must use towards us: never the job's, which would let it
 * pose as any rank of the job. */
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
    c->pkt.src = (flags & AML_CONNF_REPLY) ? AML_SRC_NONE : p->me;
    memcpy(&c->body.cfg, aml->addr, sizeof(c->body.cfg));      /* aml_local_address's header */
    c->body.cfg.token = p->th.key;
    c->body.idx = (uint32_t) peer;
    c->body.flags = flags;
    c->body.upid_len = (uint32_t) aml->upid_len;
    c->body.to_uuid = upid_uuid(p->upid);
    memcpy(c + 1, aml->upid, aml->upid_len);
    aml->dyn_inflight++;
    if (flags & AML_CONNF_REPLY)
        p->conn_sent = now_ms();
    if (p->tport->send(p->ep, &c->op, sizeof(c->pkt), &c->body,
                       sizeof(c->body) + aml->upid_len, 0) == AML_TPORT_DONE)
        conn_sent(&c->op);
}

/* 64 random bits; tokens are worth only what the kernel's randomness is. */
static int rand64(uint64_t * v)
{
    return getrandom(v, sizeof(*v), 0) == (ssize_t) sizeof(*v) ? AML_OK : AML_ERR_SETUP;
}

/* A new record for the process named upid (checked by the caller), its endpoints created and
 * the token it must use towards us drawn. */
static int new_peer(aml_t * aml, const void *upid, size_t len, int *peer)
{
    aml_tport_ep_t eps[8];
    const aml_tport_t *t;
    aml_peer_t *p;
    uint64_t tok;
    int i, rc;

    if (aml->npeers >= aml->peers_cap) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "more than %d processes of other jobs "
                 "(the limit set at init)", aml->cfg.dyn_peers_max);
        return AML_ERR_NOMEM;
    }
    /* never 0 (a request carries none), never one that names a rank of the job, never one
     * in use */
    do {
        if (rand64(&tok) != AML_OK) {
            snprintf(aml->errmsg, sizeof(aml->errmsg), "getrandom failed");
            return AML_ERR_SETUP;
        }
    } while (!tok || !((tok ^ aml->token) >> 32) || aml_htab_get(&aml->tokens, tok));
    i = aml->npeers;
    p = &aml->peers[i];
    memset(p, 0, sizeof(*p));
    if (!(p->upid = malloc(len))) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "out of memory");
        return AML_ERR_NOMEM;
    }
    memcpy(p->upid, upid, len);
    p->upid_len = len;
    /* the transport whose network address the upid carries (aml_dynamic_init) */
    t = aml_net_tport(aml);
    rc = t->connect(aml, i, (const char *) upid + sizeof(uint64_t), eps, aml->lanes,
                    AML_TPORT_CONN_DYNAMIC);
    if (rc != AML_OK) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "%s cannot reach the process of another "
                 "job at the address it gave (%zu bytes)", t->name, len - sizeof(uint64_t));
        free(p->upid);
        p->upid = NULL;
        return rc;
    }
    aml_peer_set_tport(aml, p, t);
    p->ep = eps[0];
    for (int l = 1; l < aml->lanes; l++)
        aml->lane_eps[(size_t) i * (aml->lanes - 1) + l - 1] = eps[l];
    p->dyn = AML_DYN_CONNECTING;
    aml_htab_put(&aml->uuids, &p->uh, upid_uuid(upid));
    aml_htab_put(&aml->tokens, &p->th, tok);
    aml_tport_used(aml, t);
    aml->npeers++;
    *peer = i;
    return AML_OK;
}

static int find_peer(aml_t * aml, uint64_t uuid)
{
    aml_hent_t *e = aml_htab_get(&aml->uuids, uuid);
    return e ? (int) (AML_CONTAINER(e, aml_peer_t, uh) - aml->peers) : -1;
}

/* The first setting in which the sender of b differs from this process, or NULL. */
static const char *cfg_differs(aml_t * aml, const aml_conn_body_t * b)
{
    const aml_addr_hdr_t *me = (const aml_addr_hdr_t *) aml->addr;
    if (b->cfg.wire_version != me->wire_version)
        return "wire version";
    if (b->cfg.packet_size != me->packet_size)
        return "packet size (MPIR_CVAR_AMLAPI_PACKET_SIZE)";
    if (b->cfg.net_packet_size != me->net_packet_size)
        return "network packet size (MPIR_CVAR_AMLAPI_NET_PACKET_SIZE)";
    if (b->cfg.adaptive_credits != me->adaptive_credits)
        return "adaptive credits (MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS)";
    if (b->cfg.max_uhdr != me->max_uhdr)
        return "largest user header (UCX's active-message header limit)";
    return NULL;
}

/* Receivers check packets against their own settings, as between a job's ranks: a process
 * this one connects with must have the same, or a correct sender would be taken for a
 * malformed one. */
static void check_cfg(aml_t * aml, const aml_conn_body_t * b)
{
    const aml_addr_hdr_t *me = (const aml_addr_hdr_t *) aml->addr;
    const char *what = cfg_differs(aml, b);
    if (what)
        aml_fatal(aml, "a process of another job connects with a different %s: "
                  "wire version %u, packet sizes %u/%u, credits %u, user header %u here "
                  "against %u, %u/%u, %u, %u there", what, me->wire_version, me->packet_size,
                  me->net_packet_size, me->adaptive_credits, me->max_uhdr, b->cfg.wire_version,
                  b->cfg.packet_size, b->cfg.net_packet_size, b->cfg.adaptive_credits,
                  b->cfg.max_uhdr);
}

/* The body of a CONNECT (len bytes at data) into *b, if it is well formed. */
static bool body_ok(aml_t * aml, const void *data, size_t len, aml_conn_body_t * b)
{
    const char *upid;
    if (!data || len < sizeof(*b))
        return false;
    upid = (const char *) data + sizeof(*b);
    memcpy(b, data, sizeof(*b));
    return b->upid_len == len - sizeof(*b) && b->upid_len > sizeof(uint64_t) &&
        b->upid_len <= AML_UPID_MAX && upid_uuid(upid) == b->cfg.uuid &&
        b->cfg.uuid != aml->uuid && b->to_uuid == aml->uuid && b->cfg.token &&
        !(b->flags & ~AML_CONNF_REPLY);
}

/* Peer i (of another job) told us its index for us and its token. */
static void peer_up(aml_t * aml, int i, const aml_conn_body_t * b)
{
    aml_peer_t *p = &aml->peers[i];
    p->me = b->idx;
    p->tx_token = b->cfg.token;
    if (p->dyn != AML_DYN_FAILED)
        p->dyn = AML_DYN_UP;
}

static int refuse(aml_t * aml)
{
    aml->refused++;
    return 0;
}

/* A packet without a token of this process: a request to connect that is welcome (see the
 * top), or refused. */
int aml_dynamic_rx_stranger(aml_t * aml, const void *header, size_t header_length,
                            const void *data, size_t length, bool by_rndv)
{
    aml_pkt_t pkt;
    aml_conn_body_t b;
    int i;

    if (by_rndv || header_length != sizeof(pkt) || !aml->connected)
        return refuse(aml);
    memcpy(&pkt, header, sizeof(pkt));
    if (pkt.type != AML_PKT_CONNECT || pkt.src != AML_SRC_NONE || pkt.uhdr_len ||
        !body_ok(aml, data, length, &b) || !(b.flags & AML_CONNF_REPLY))
        return refuse(aml);
    i = find_peer(aml, b.cfg.uuid);
    if (i >= 0 && (i < aml->size || aml->peers[i].dyn != AML_DYN_CONNECTING))
        return refuse(aml);     /* a rank of the job, or a process already connected */
    if (i < 0) {
        int64_t t = now_ms();
        if (!aml->listening)
            return refuse(aml);
        if (t - aml->strangers_t0 >= 1000) {
            aml->strangers_t0 = t;
            aml->strangers = 0;
        }
        if (aml->strangers >= AML_STRANGERS_PER_S || aml->npeers >= aml->peers_cap)
            return refuse(aml);
        /* welcome: from here on it is a peer, held to its settings like a rank */
        check_cfg(aml, &b);
        if (new_peer(aml, (const char *) data + sizeof(b), b.upid_len, &i) != AML_OK)
            return refuse(aml);
        aml->strangers++;
    } else if (cfg_differs(aml, &b)) {
        return refuse(aml);     /* our own request tells the process we asked, if it is so */
    }
    /* Both sides connecting: the request may not come from the process we asked (anyone
     * given its upid can claim it), but what it sets only directs our packets to the
     * endpoint we made from that upid; the peer's answer, which carries our token, sets it
     * right (aml_dynamic_recv_connect). */
    peer_up(aml, i, &b);
    send_connect(aml, i, 0);
    return 0;
}

/* A CONNECT carrying our token: an answer from the process that token was given to. */
void aml_dynamic_recv_connect(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                              const void *data, size_t len)
{
    aml_conn_body_t b;
    aml_peer_t *p;
    (void) uhdr;

    memset(&b, 0, sizeof(b));   /* named in the error below even when too short */
    if (pkt->src == AML_SRC_NONE || pkt->src < (uint32_t) aml->size)
        aml_fatal_pkt(aml, pkt, "a CONNECT naming source %d", (int) pkt->src);
    p = &aml->peers[pkt->src];
    if (!body_ok(aml, data, len, &b) || (b.flags & AML_CONNF_REPLY) ||
        b.cfg.uuid != upid_uuid(p->upid))
        aml_fatal_pkt(aml, pkt, "body of %zu bytes names a %u-byte upid, id 0x%llx, flags %u",
                      len, b.upid_len, (unsigned long long) b.cfg.uuid, b.flags);
    check_cfg(aml, &b);
    peer_up(aml, (int) pkt->src, &b);
}

int aml_listen(aml_t * aml, int on)
{
    if (!aml || (!on && aml->listening == 0))
        return AML_ERR_INVAL;
    aml->listening += on ? 1 : -1;
    return AML_OK;
}

int aml_add_peer_async(aml_t * aml, const void *upid, size_t len, int timeout_ms, int *peer)
{
    int64_t deadline;
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
    /* the latest of the deadlines asked for; none if one asked for none */
    deadline = timeout_ms ? now_ms() + timeout_ms : INT64_MAX;
    if (aml->peers[i].conn_deadline < deadline)
        aml->peers[i].conn_deadline = deadline;
    *peer = i;
    return AML_OK;
}

int aml_dynamic_wait(aml_t * aml, int i)
{
    aml_peer_t *p = &aml->peers[i];
    if (aml->in_dispatch)
        return AML_ERR_STATE;
    while (p->dyn == AML_DYN_CONNECTING) {
        int64_t t;
        aml_progress(aml);
        t = now_ms();
        if (p->dyn == AML_DYN_CONNECTING && t - p->conn_sent >= AML_CONNECT_RETRY_MS)
            send_connect(aml, i, AML_CONNF_REPLY);
        if (p->dyn == AML_DYN_CONNECTING && t > p->conn_deadline) {
            snprintf(aml->errmsg, sizeof(aml->errmsg), "the process of another job did not "
                     "answer in time (is it accepting?)");
            return AML_ERR_TIMEOUT;
        }
    }
    if (p->dyn == AML_DYN_FAILED) {
        snprintf(aml->errmsg, sizeof(aml->errmsg), "the process of another job failed or "
                 "cannot be reached (UCX reported its endpoint failed)");
        return AML_ERR_TRANSPORT;
    }
    return AML_OK;
}

int aml_add_peer(aml_t * aml, const void *upid, size_t len, int timeout_ms, int *peer)
{
    int rc = aml_add_peer_async(aml, upid, len, timeout_ms, peer);
    return rc == AML_OK ? aml_dynamic_wait(aml, *peer) : rc;
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
    const aml_tport_t *net = aml_net_tport(aml);
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
    /* at or above 2^32, so that no stamp a process of another job is given, nor a missing one
     * (0), names a rank of the job (aml_token_src) */
    do {
        if (rand64(&aml->token) != AML_OK)
            return AML_ERR_SETUP;
    } while (!(aml->token >> 32));
    if (aml_htab_init(&aml->uuids, 256) || aml_htab_init(&aml->tokens, 64))
        return AML_ERR_NOMEM;
    /* the network address of the transport that reaches other jobs */
    if (!net)
        return AML_ERR_TRANSPORT;
    if ((rc = net->net_address(aml, &na, &nl)) != AML_OK)
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
    aml_htab_free(&aml->tokens);
}
