/*
 * The aml context: configuration and environment (LAPI_Qenv/Senv), setup (init, address,
 * connect with its settings check), handler registration, and the end (quiesce, finalize).
 */
#include "aml_poll.h"
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

/* ---- configuration and environment ---------------------------------------------------- */

void aml_config_default(aml_config_t * cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->packet_size = 8248;     /* UCX shm bcopy segment (8256) less UCP's AM header */
    cfg->net_packet_size = 65592;       /* MPIR_CVAR_AMLAPI_NET_PACKET_SIZE says why */
    cfg->eager_limit = 65536;   /* MPIR_CVAR_AMLAPI_EAGER_LIMIT says why */
    cfg->protocol = AML_PROTO_AUTO;
    cfg->adaptive_credits = 64;  /* MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS says why */
    cfg->rndv_ucx = 1;
    cfg->lanes = 1;
    cfg->progress_mode = AML_PROGRESS_POLLING;
    cfg->vnode_single_copy = 1;
    cfg->vnode_eager_limit = 65536;     /* MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD says why */
    cfg->vnode_shared_copy = 65536;     /* vnode_config_default's share_min */
    cfg->ucx_onnode = 1;
    cfg->dyn_peers_max = 1024;
    cfg->keepalive_ms = 1000;   /* MPIR_CVAR_AMLAPI_KEEPALIVE says why */
}

/* A transport's own counters: asked of every transport built in, so that one not in use
 * answers 0 to its queries rather than leaving them unknown. */
static int tport_query(aml_t * aml, aml_query_t q, int64_t * val)
{
    for (int s = 0; s < AML_TPORT_SLOTS; s++) {
        const aml_tport_t *t = aml_tport_builtin(s);
        if (t->query && t->query(aml, (int) q, val) == AML_OK)
            return AML_OK;
    }
    return AML_ERR_INVAL;
}

int aml_qenv(aml_t * aml, aml_query_t q, int64_t * val)
{
    if (!aml || !val)
        return AML_ERR_INVAL;
    switch (q) {
        case AML_Q_RANK:
            *val = aml->rank;
            break;
        case AML_Q_SIZE:
            *val = aml->size;
            break;
        case AML_Q_PEERS:
            *val = aml->npeers;
            break;
        case AML_Q_PACKET_SIZE:
            *val = (int64_t) aml->packet_size;
            break;
        case AML_Q_NET_PACKET_SIZE:
            *val = (int64_t) aml->net_packet_size;
            break;
        case AML_Q_MAX_UHDR:
            *val = (int64_t) aml->max_uhdr;
            break;
        case AML_Q_ONEPACKET_LIMIT:
            *val = (int64_t) (aml->packet_size -
                              (aml->compact ? sizeof(aml_spkt_t) : sizeof(aml_pkt_t)));
            break;
        case AML_Q_INLINE_LIMIT:
            *val = aml->compact && aml->protocol == AML_PROTO_AUTO ?
                (int64_t) (aml->compact_max - sizeof(aml_spkt_t)) : 0;
            break;
        case AML_Q_EAGER_LIMIT:
            *val = (int64_t) aml->eager_limit;
            break;
        case AML_Q_PROTOCOL:
            *val = aml->protocol;
            break;
        case AML_Q_PROGRESS_MODE:
            *val = aml->cfg.progress_mode;
            break;
        case AML_Q_MAX_HANDLERS:
            *val = AML_MAX_HANDLERS;
            break;
        case AML_Q_ADAPTIVE_CREDITS:
            *val = aml->adaptive_credits;
            break;
        case AML_Q_LANES:
            *val = aml->lanes;
            break;
        case AML_Q_STASHED:
            *val = aml->stashed;
            break;
        case AML_Q_REFUSED:
            *val = aml->refused;
            break;
        case AML_Q_VNODE_FALLBACK:
            /* the protocol choice's count (aml_xfer.c), for any transport that moves no
             * data; the query is named for the one that may not (vnode) */
            *val = aml->rndv_as_eager;
            break;
        case AML_Q_MSGS_SENT:
        case AML_Q_BYTES_SENT:
            if (*val < 0 || *val >= AML_PROTO_COUNT)
                return AML_ERR_INVAL;
            *val = (q == AML_Q_MSGS_SENT) ? aml->msgs[*val] : aml->bytes[*val];
            break;
        default:
            return tport_query(aml, q, val);
    }
    return AML_OK;
}

static int check_protocol(int p)
{
    return p == AML_PROTO_AUTO || p == AML_PROTO_EAGER || p == AML_PROTO_RNDV ||
        p == AML_PROTO_ADAPTIVE;
}

int aml_senv(aml_t * aml, aml_query_t q, int64_t val)
{
    if (!aml)
        return AML_ERR_INVAL;
    switch (q) {
        case AML_Q_EAGER_LIMIT:
            if (val < 0)
                return AML_ERR_INVAL;
            aml->eager_limit = (size_t) val;
            /* peers whose transport sets their limit itself keep it */
            for (int i = 0; i < aml->size; i++) {
                const aml_tport_t *t = aml->peers[i].tport;
                size_t own;
                if (!t || !t->eager_limit || !t->eager_limit(aml, &own))
                    aml->peers[i].eager_limit = (size_t) val;
            }
            return AML_OK;
        case AML_Q_PROTOCOL:
            if (!check_protocol((int) val) ||
                (val == AML_PROTO_ADAPTIVE && aml->adaptive_credits == 0))
                return AML_ERR_INVAL;
            aml->protocol = (int) val;
            return AML_OK;
        default:
            return AML_ERR_INVAL;       /* read-only or unknown */
    }
}

/* ---- setup ---------------------------------------------------------------------------- */

static void context_free(aml_t * aml)
{
    for (int i = 0; i < aml->ntports; i++)
        aml->tports[i]->fini(aml);
    aml_dynamic_free(aml);
    free(aml->qflush);
    if (aml->ntports > 1 && aml->efd >= 0)
        close(aml->efd);        /* our epoll set over the transports' fds */
    free(aml->addr);
    aml_htab_free(&aml->waits);
    aml_htab_free(&aml->replies);
    aml_htab_free(&aml->cntrs);
    aml_htab_free(&aml->adapt_rx);
    aml_htab_free(&aml->deferred);
    aml_htab_free(&aml->put_rx);
    free(aml->lane_eps);
    free(aml->hosts);
    free(aml->addr_tab[0]);
    free(aml->addr_tab[1]);
    free(aml->regions);
    free(aml->peers);
    free(aml);
}

/* Interrupt mode: one fd to sleep on. With one transport it is that transport's; with two,
 * an epoll set of both, readable when either is. */
static int event_fd_setup(aml_t * aml)
{
    int fds[AML_TPORTS_MAX];
    for (int i = 0; i < aml->ntports; i++)
        if (aml->tports[i]->event_fd(aml, &fds[i]) != AML_OK)
            return AML_ERR_TRANSPORT;
    if (aml->ntports == 1) {
        aml->efd = fds[0];
        return AML_OK;
    }
    aml->efd = epoll_create1(EPOLL_CLOEXEC);
    if (aml->efd < 0)
        return AML_ERR_TRANSPORT;
    for (int i = 0; i < aml->ntports; i++) {
        struct epoll_event ev = {.events = EPOLLIN };
        ev.data.u32 = (uint32_t) i;
        if (epoll_ctl(aml->efd, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return AML_ERR_TRANSPORT;
    }
    return AML_OK;
}

/* The address: the settings every rank shares (and its id), the lengths of its parts, then
 * the parts: each transport's address by slot (aml_tports.h; none for one not in use), the
 * network-only address of the transport that reaches other jobs (what another job needs of
 * each rank: aml_upid) and the hostname. With UCX and vnode: UCX's, vnode's, UCX's network
 * address, the host. */
typedef struct addr_lens {
    uint32_t part[AML_TPORT_SLOTS], net, host;
} addr_lens_t;

static int address_build(aml_t * aml)
{
    const void *part[AML_TPORT_SLOTS] = { NULL }, *na = NULL;
    size_t nl = 0, total = 0;
    addr_lens_t lens;
    aml_addr_hdr_t h = { AML_WIRE_VERSION, (uint32_t) aml->packet_size,
        (uint32_t) aml->adaptive_credits, (uint32_t) aml->max_uhdr,
        (uint32_t) aml->net_packet_size, 0, aml->uuid, aml->token
    };
    const aml_tport_t *net = aml_net_tport(aml);
    char *at;
    int rc = AML_OK;

    memset(&lens, 0, sizeof(lens));
    for (int i = 0; i < aml->ntports && rc == AML_OK; i++) {
        const aml_tport_t *t = aml->tports[i];
        size_t l = 0;
        rc = t->address(aml, &part[t->slot], &l);
        lens.part[t->slot] = (uint32_t) l;
        total += l;
    }
    if (rc == AML_OK)
        rc = net ? net->net_address(aml, &na, &nl) : AML_ERR_TRANSPORT;
    if (rc != AML_OK)
        return rc;
    /* the hostname, for errors that name a rank (and to tell which ranks are on other hosts) */
    gethostname(aml->host, sizeof(aml->host) - 1);
    lens.net = (uint32_t) nl;
    lens.host = (uint32_t) strlen(aml->host) + 1;
    aml->addr_len = sizeof(h) + sizeof(lens) + total + nl + lens.host;
    aml->addr = malloc(aml->addr_len);
    if (!aml->addr)
        return AML_ERR_NOMEM;
    at = aml->addr;
    memcpy(at, &h, sizeof(h));
    memcpy(at += sizeof(h), &lens, sizeof(lens));
    at += sizeof(lens);
    for (int s = 0; s < AML_TPORT_SLOTS; s++) {
        if (lens.part[s])
            memcpy(at, part[s], lens.part[s]);
        at += lens.part[s];
    }
    memcpy(at, na, nl);
    memcpy(at + nl, aml->host, lens.host);
    return AML_OK;
}

int aml_init(const aml_config_t * cfg, aml_t ** out)
{
    size_t max_hdr = 0;
    aml_t *aml;
    int rc = AML_ERR_TRANSPORT;
    bool want[AML_TPORT_SLOTS];

    if (cfg && cfg->errbuf && cfg->errlen)
        cfg->errbuf[0] = '\0';
    if (!cfg || !out || cfg->size <= 0 || cfg->rank < 0 || cfg->rank >= cfg->size)
        return AML_ERR_INVAL;
    if (cfg->packet_size && (cfg->packet_size < 512 || cfg->packet_size > (1 << 20)))
        return AML_ERR_INVAL;
    if (cfg->net_packet_size && (cfg->net_packet_size < 512 || cfg->net_packet_size > (1 << 20)))
        return AML_ERR_INVAL;
    if (!check_protocol(cfg->protocol))
        return AML_ERR_INVAL;
#ifndef AML_TEST_HOOKS
    if (cfg->debug_reorder)
        return AML_ERR_INVAL;   /* a test hook (aml_reorder) */
#endif
    if (cfg->adaptive_credits < 0 || cfg->adaptive_credits > 1024 || cfg->lanes < 1 ||
        cfg->lanes > 8 || (cfg->protocol == AML_PROTO_ADAPTIVE && cfg->adaptive_credits == 0))
        return AML_ERR_INVAL;
    if (cfg->progress_mode != AML_PROGRESS_POLLING &&
        cfg->progress_mode != AML_PROGRESS_INTERRUPT)
        return AML_ERR_INVAL;
    if (cfg->dyn_peers_max < 0 || cfg->dyn_peers_max > (1 << 20))
        return AML_ERR_INVAL;
    for (int s = 0; s < AML_TPORT_SLOTS; s++) {
        const aml_tport_t *t = aml_tport_builtin(s);
        int w = t->wanted ? t->wanted(cfg) : 1;
        if (w < 0)
            return AML_ERR_INVAL;
        want[s] = w > 0;
    }

    aml = calloc(1, sizeof(*aml));
    if (!aml)
        return AML_ERR_NOMEM;
    aml->cfg = *cfg;
    aml->rank = cfg->rank;
    aml->size = cfg->size;
    aml->packet_size = cfg->packet_size ? cfg->packet_size : 8248;
    aml->net_packet_size = cfg->net_packet_size ? cfg->net_packet_size : aml->packet_size;
    aml->eager_limit = cfg->eager_limit;
    aml->protocol = cfg->protocol;
    aml->adaptive_credits = cfg->adaptive_credits;
    aml->lanes = cfg->lanes;
    aml->next_msg_id = 1;
    aml->efd = -1;
    aml->tok_head = -1;
    aml->idle = aml_adaptive_flush_tokens;
    aml->npeers = cfg->size;
    aml->peers_cap = cfg->size + cfg->dyn_peers_max;
    aml->peers = calloc((size_t) aml->peers_cap, sizeof(aml_peer_t));
    if (aml->peers)
        for (int i = 0; i < cfg->size; i++)
            aml->peers[i].me = (uint32_t) cfg->rank;
    if (!aml->peers || aml_htab_init(&aml->waits, 1024) || aml_htab_init(&aml->replies, 256) ||
        aml_htab_init(&aml->cntrs, 256) || aml_htab_init(&aml->adapt_rx, 256) ||
        aml_htab_init(&aml->deferred, 1024) || aml_htab_init(&aml->put_rx, 256)) {
        rc = AML_ERR_NOMEM;
        goto fail;
    }

    /* the transports, each with the rx function of the dispatcher; the largest header is the
     * smallest of theirs */
    for (int s = 0; s < AML_TPORT_SLOTS; s++)
        if (want[s])
            aml->tports[aml->ntports++] = aml_tport_builtin(s);
    for (int i = 0; i < aml->ntports; i++) {
        size_t h = 0;
        aml->tport_every[i] = aml->ntports > 1 ? AML_POLL_EVERY_SELF : 1;
        if ((rc = aml->tports[i]->init(aml, aml_rx, &h)) != AML_OK)
            goto fail;
        if (i == 0 || h < max_hdr)
            max_hdr = h;
    }
    rc = AML_ERR_TRANSPORT;
    if (cfg->progress_mode == AML_PROGRESS_INTERRUPT && (rc = event_fd_setup(aml)) != AML_OK)
        goto fail;

    /* The user header travels in the transport's header together with our packet header. */
    rc = AML_ERR_TRANSPORT;
    aml->max_uhdr = AML_MAX_UHDR;
    if (max_hdr < sizeof(aml_pkt_t) + 64)
        goto fail;
    if (max_hdr - sizeof(aml_pkt_t) < aml->max_uhdr)
        aml->max_uhdr = max_hdr - sizeof(aml_pkt_t);
    if (aml->max_uhdr > aml->packet_size / 2)
        aml->max_uhdr = aml->packet_size / 2;
    if (aml->max_uhdr > aml->net_packet_size / 2)
        aml->max_uhdr = aml->net_packet_size / 2;
    aml->max_uhdr &= ~(size_t) 7;
    aml->compact_max = max_hdr < AML_COMPACT_MAX ? max_hdr : AML_COMPACT_MAX;
    aml->compact = aml->peers_cap <= AML_COMPACT_MAX_RANKS;     /* 24 bits of source */
    aml->sdesc_small = (sizeof(aml_pkt_t) + AML_SDESC_SMALL_UHDR + 7) & ~(size_t) 7;
    aml->sdesc_big = sizeof(aml_pkt_t) + aml->packet_size;
    if (cfg->debug_reorder) {
        /* every descriptor holds a whole packet, so that data packets can be held back too */
        if (aml->net_packet_size > aml->packet_size)
            aml->sdesc_big = sizeof(aml_pkt_t) + aml->net_packet_size;
        aml->sdesc_small = aml->sdesc_big;
    }

    if ((rc = aml_dynamic_init(aml)) != AML_OK || (rc = address_build(aml)) != AML_OK)
        goto fail;
    if ((rc = aml_rma_init(aml)) != AML_OK || (rc = aml_sync_init(aml)) != AML_OK)
        goto fail;
    *out = aml;
    return AML_OK;

  fail:
    context_free(aml);
    return rc;
}

const char *aml_error(aml_t * aml)
{
    return aml ? aml->errmsg : "no aml context";
}

int aml_local_address(aml_t * aml, const void **addr, size_t * len)
{
    if (!aml || !addr || !len)
        return AML_ERR_INVAL;
    *addr = aml->addr;
    *len = aml->addr_len;
    return AML_OK;
}

/* Records the first setting on which peer disagrees with this rank. */
static bool mismatch(aml_t * aml, const char *setting, int peer, uint32_t mine, uint32_t theirs)
{
    if (mine == theirs || aml->mismatch.setting)
        return mine != theirs;
    aml->mismatch.setting = setting;
    aml->mismatch.peer = peer;
    aml->mismatch.mine = mine;
    aml->mismatch.theirs = theirs;
    return true;
}

int aml_connect_mismatch(aml_t * aml, const char **setting, int *peer, int64_t * mine,
                         int64_t * theirs)
{
    if (!aml || !setting || !peer || !mine || !theirs || !aml->mismatch.setting)
        return AML_ERR_INVAL;
    *setting = aml->mismatch.setting;
    *peer = aml->mismatch.peer;
    *mine = aml->mismatch.mine;
    *theirs = aml->mismatch.theirs;
    return AML_OK;
}

/* A rank's addresses inside its entry (stride bytes) of the table: each transport's (by
 * slot), the network-only one and the hostname. */
typedef struct addr_parts {
    aml_tport_addr_t part[AML_TPORT_SLOTS];
    const void *na;
    const char *host;
    size_t nl, hl;
} addr_parts_t;

static bool address_parts(const char *entry, size_t stride, addr_parts_t * a)
{
    addr_lens_t lens;
    uint64_t total = 0;
    const char *at = entry + sizeof(aml_addr_hdr_t) + sizeof(lens);
    memcpy(&lens, entry + sizeof(aml_addr_hdr_t), sizeof(lens));
    for (int s = 0; s < AML_TPORT_SLOTS; s++)
        total += lens.part[s];
    if (total + lens.net + lens.host > stride - sizeof(aml_addr_hdr_t) - sizeof(lens) ||
        lens.host < 1 || lens.host > AML_HOST_MAX)
        return false;
    for (int s = 0; s < AML_TPORT_SLOTS; s++) {
        a->part[s].addr = at;
        a->part[s].len = lens.part[s];
        at += lens.part[s];
    }
    a->na = at;
    a->nl = lens.net;
    a->host = at + lens.net;
    a->hl = lens.host;
    return a->host[a->hl - 1] == '\0';
}

/* The addresses of rank i, or AML_ERR_SETUP saying that they are malformed. */
static int rank_parts(aml_t * aml, int i, const char *table, size_t stride, addr_parts_t * a)
{
    if (address_parts(table + (size_t) i * stride, stride, a))
        return AML_OK;
    snprintf(aml->errmsg, sizeof(aml->errmsg), "the address of rank %d is malformed", i);
    return AML_ERR_SETUP;
}

/* Transport t's attach, with every rank's address for it. A malformed one counts as none
 * here: its rank is named when it is connected, after t attached, since the other ranks may
 * wait for this one's attach (vnode's segment). */
static int attach_tport(aml_t * aml, const aml_tport_t * t, const char *table, size_t stride)
{
    aml_tport_addr_t *addrs = malloc((size_t) aml->size * sizeof(*addrs));
    int rc;
    if (!addrs)
        return AML_ERR_NOMEM;
    for (int i = 0; i < aml->size; i++) {
        addr_parts_t a;
        bool ok = address_parts(table + (size_t) i * stride, stride, &a);
        addrs[i].addr = ok ? a.part[t->slot].addr : NULL;
        addrs[i].len = ok ? a.part[t->slot].len : 0;
    }
    rc = t->attach(aml, addrs);
    free(addrs);
    return rc;
}

/* The transport of rank i: the most local one that reaches it (the last in use whose
 * reaches says so; one without reaches takes every rank). */
static int choose_tport(aml_t * aml, int i, const addr_parts_t * a, const aml_tport_t ** out)
{
    for (int k = aml->ntports - 1; k >= 0; k--) {
        const aml_tport_t *t = aml->tports[k];
        if (!t->reaches || t->reaches(aml, i, &a->part[t->slot])) {
            *out = t;
            return AML_OK;
        }
    }
    snprintf(aml->errmsg, sizeof(aml->errmsg), "no transport reaches rank %d", i);
    return AML_ERR_SETUP;
}

static int connect_peer(aml_t * aml, int i, const char *table, size_t stride,
                        aml_tport_ep_t * eps)
{
    aml_peer_t *p = &aml->peers[i];
    const aml_tport_t *t;
    addr_parts_t a;
    aml_addr_hdr_t h;
    int rc;
    unsigned flags = 0;

    if ((rc = rank_parts(aml, i, table, stride, &a)) != AML_OK)
        return rc;
    memcpy(&h, table + (size_t) i * stride, sizeof(h));
    if ((rc = aml_dynamic_world(aml, i, a.na, a.nl, h.uuid)) != AML_OK)
        return rc;
    memcpy(aml->hosts[i], a.host, a.hl);
    p->tx_token = h.token ^ (uint64_t) aml->rank;
    if ((rc = choose_tport(aml, i, &a, &t)) != AML_OK)
        return rc;
    /* a rank on another host may fail on its own (its process, its host, the network): the
     * transport's failure handling (UCX's keepalive) tells us, and we end the job naming it */
    if (aml->cfg.keepalive_ms > 0 && strcmp(aml->hosts[i], aml->host))
        flags |= AML_TPORT_CONN_REMOTE;
    rc = t->connect(aml, i, a.part[t->slot].addr, eps, aml->lanes, flags);
    if (rc != AML_OK)
        return rc;
    aml_peer_set_tport(aml, p, t);
    if (i != aml->rank)
        aml_tport_used(aml, t);
    p->ep = eps[0];
    for (int l = 1; l < aml->lanes; l++)
        aml->lane_eps[(size_t) i * (aml->lanes - 1) + l - 1] = eps[l];
    return AML_OK;
}

int aml_connect(aml_t * aml, const void *table, size_t stride)
{
    aml_tport_ep_t *eps;
    int rc = AML_OK;

    if (!aml || !table || aml->connected)
        return aml && aml->connected ? AML_ERR_STATE : AML_ERR_INVAL;
    if (stride < aml->addr_len)
        return AML_ERR_INVAL;
    /* every rank's settings first: with a mismatch nothing is connected. Receivers check
     * packets against their own settings, so a correct sender would otherwise be killed as
     * "malformed" (e.g. more adaptive messages in flight than the receiver's credits). */
    for (int i = 0; i < aml->size; i++) {
        aml_addr_hdr_t h, *me = (aml_addr_hdr_t *) aml->addr;
        memcpy(&h, (const char *) table + (size_t) i * stride, sizeof(h));
        if (mismatch(aml, "wire_version", i, me->wire_version, h.wire_version) ||
            mismatch(aml, "packet_size", i, me->packet_size, h.packet_size) ||
            mismatch(aml, "net_packet_size", i, me->net_packet_size, h.net_packet_size) ||
            mismatch(aml, "adaptive_credits", i, me->adaptive_credits, h.adaptive_credits) ||
            mismatch(aml, "max_uhdr", i, me->max_uhdr, h.max_uhdr)) {
            /* nobody attaches now */
            for (int k = 0; k < aml->ntports; k++)
                if (aml->tports[k]->abandon)
                    aml->tports[k]->abandon(aml);
            return AML_ERR_CONFIG;
        }
    }
    /* every rank is here (the exchange was the barrier): what a transport needs of all */
    for (int k = 0; k < aml->ntports && rc == AML_OK; k++)
        if (aml->tports[k]->attach)
            rc = attach_tport(aml, aml->tports[k], table, stride);
    if (rc != AML_OK)
        return rc;
    /* for every peer record, those of other jobs included (untouched pages cost nothing) */
    aml->lane_eps = calloc((size_t) aml->peers_cap * aml->lanes, sizeof(aml_tport_ep_t));
    aml->hosts = calloc((size_t) aml->size, AML_HOST_MAX);
    eps = malloc(aml->lanes * sizeof(aml_tport_ep_t));
    if (!aml->lane_eps || !aml->hosts || !eps) {
        free(eps);
        return AML_ERR_NOMEM;
    }
    for (int i = 0; i < aml->size && rc == AML_OK; i++)
        rc = connect_peer(aml, i, table, stride, eps);
    free(eps);
    if (rc != AML_OK)
        return rc;
    aml->connected = true;
    return AML_OK;
}

int aml_register_handler(aml_t * aml, unsigned id, aml_hdr_handler_t fn, void *ctx)
{
    if (!aml || id >= AML_MAX_HANDLERS || !fn)
        return AML_ERR_INVAL;
    aml->handlers[id].fn = fn;
    aml->handlers[id].ctx = ctx;
    return AML_OK;
}

int aml_register_small_handler(aml_t * aml, unsigned id, aml_small_handler_t fn)
{
    if (!aml || id >= AML_MAX_HANDLERS || !aml->handlers[id].fn)
        return AML_ERR_INVAL;
    aml->handlers[id].small = fn;
    return AML_OK;
}

/* ---- the end -------------------------------------------------------------------------- */

/* Finalize is two rounds of QUIESCE packets, each sequenced behind everything its sender sent
 * before, so no packet can reach a closed endpoint:
 *   1. each rank sends QUIESCE 1 to all and waits for all: every message anybody started has
 *      now reached its header handler. Messages still deferred will never be accepted: they
 *      are rejected, which completes their senders (so crossed unmatched rendezvous sends
 *      cannot deadlock). Then each rank waits until everything it started is complete.
 *   2. each rank sends QUIESCE 2 to all and waits for all: only replies (DONE, TOKEN, CMPL,
 *      FENCE_ACK, an embedder's acknowledgements) can still travel between the rounds, and
 *      each was sent before its sender's QUIESCE 2 and triggers no further send.
 * After round 2 nothing arrives and nothing is sent: the endpoint handles are forgotten, and
 * each transport's fini releases what is behind them (UCX: ucp_worker_destroy disconnects
 * its endpoints without asking the peer. A flush close after round 2 waits for peers to
 * progress, and over TCP one did when they had gone into the embedder's barrier: 1 p2p run in
 * 10 across two hosts hung). What a transport still owes its peers (a TCP connection being
 * set up, queued data) it completes in its flush before round 2, while every peer progresses:
 * it is before its QUIESCE 2 or waiting for ours. */
/* A flush in flight: its record lives in aml->qflush until context_free (after the
 * transports' fini), since a flush given up on may still complete, cancelled, when the
 * transport goes. */
static void quiesce_flushed(aml_tport_op_t * op)
{
    op->aml->qflush_pending[op->peer >= op->aml->size]--;
}

/* What a process of another job does not take within this long is given up: UCX's flush over
 * TCP needs the peer's progress (milliseconds when it progresses), and such a process
 * need not progress (after MPI_Comm_disconnect it may compute, or sit in its own job's final
 * barrier). Data UCX has handed to the kernel still arrives. */
#define AML_DYN_FLUSH_MS 1000

/* Flushes every endpoint of the transports that have a flush, progressing until all are
 * done: those of the job's ranks always (they all progress in aml_quiesce), those of other
 * jobs' processes for at most AML_DYN_FLUSH_MS. */
static int flush_eps(aml_t * aml)
{
    struct timespec t0, t;
    size_t n = 0;
    aml->qflush = calloc((size_t) aml->npeers * aml->lanes, sizeof(aml_tport_op_t));
    if (!aml->qflush)
        return AML_ERR_NOMEM;
    for (int i = 0; i < aml->npeers; i++) {
        if (!aml->peers[i].tport->flush || !aml->peers[i].ep ||
            aml->peers[i].dyn == AML_DYN_FAILED)
            continue;
        for (int l = 0; l < aml->lanes; l++) {
            aml_tport_op_t *op = &aml->qflush[n++];
            op->done = quiesce_flushed;
            op->aml = aml;
            op->peer = i;
            if (aml->peers[i].tport->flush(aml_lane(aml, i, (unsigned) l), op) ==
                AML_TPORT_PENDING)
                aml->qflush_pending[i >= aml->size]++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        aml_progress(aml);
        if (aml->qflush_pending[0] > 0)
            continue;
        if (aml->qflush_pending[1] <= 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > AML_DYN_FLUSH_MS)
            break;
    }
    return AML_OK;
}

int aml_quiesce(aml_t * aml)
{
    if (!aml)
        return AML_ERR_INVAL;
    if (!aml->connected)
        return AML_OK;
    if (aml->in_dispatch)
        return AML_ERR_STATE;
    aml_quiesce_rounds(aml, 1);
    for (aml_hent_t * e; (e = aml_htab_pop(&aml->deferred));) {
        aml_rmsg_t *r = AML_CONTAINER(e, aml_rmsg_t, dh);
        r->deferred = false;
        aml_rmsg_reject(aml, r);
    }
    while (aml->tx_inflight > 0 || aml->waits.count > 0 || aml->replies.count > 0 ||
           aml->rx_busy > 0 || aml->dyn_inflight > 0)
        aml_progress(aml);
    aml_adaptive_flush_tokens(aml);     /* before QUIESCE 2, like every reply */
    int rc = flush_eps(aml);
    if (rc != AML_OK)
        return rc;
    aml_quiesce_rounds(aml, 2);
    while (aml->tx_inflight > 0)
        aml_progress(aml);
    for (int i = 0; i < aml->npeers; i++)
        aml->peers[i].ep = NULL;
    for (size_t i = 0; i < (size_t) aml->npeers * (aml->lanes - 1); i++)
        aml->lane_eps[i] = NULL;
    aml->connected = false;
    return AML_OK;
}

int aml_finalize(aml_t * aml)
{
    if (!aml)
        return AML_ERR_INVAL;
    if (aml->connected)
        aml_quiesce(aml);
    aml_dispatch_free_stash(aml);
    aml_rndv_free_deferred(aml);
    aml_adaptive_free_all(aml);
    aml_rndv_put_free_all(aml);
    aml_sdesc_free_all(aml);
    aml_rec_drain(&aml->free_smsg);
    aml_rec_drain(&aml->free_rmsg);
    context_free(aml);
    return AML_OK;
}
