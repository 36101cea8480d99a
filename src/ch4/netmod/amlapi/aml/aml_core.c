/*
 * aml core: setup, the packet dispatcher (sequencing, validation), send descriptors,
 * counters, registered memory, protocol choice, progress.
 */
#include "aml_impl.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The packet types: what each may carry, checked for every packet before it is handled or
 * stashed (protocol files check what depends on their state). */
#define PK_SEQ     0x1          /* sequenced: handled in the sender's order */
#define PK_HANDLER 0x2          /* first packet of a message: names a registered header handler */
#define PK_UHDR    0x4          /* may carry a user header */
#define PK_DATA    0x8          /* may carry data (or an rkey) */
#define PK_MSG     (PK_SEQ | PK_HANDLER | PK_UHDR | PK_DATA)

static const struct {
    const char *name;
    unsigned flags;
} pkt_types[AML_PKT_TYPE_MAX] = {
    [0] = {"UNKNOWN", 0},
    [AML_PKT_ONE] = {"ONE", PK_MSG},
    [AML_PKT_EAGER_FIRST] = {"EAGER_FIRST", PK_MSG},
    [AML_PKT_EAGER_CONT] = {"EAGER_CONT", PK_SEQ | PK_DATA},
    [AML_PKT_RNDV_SCOUT] = {"RNDV_SCOUT", PK_MSG},
    [AML_PKT_RNDV_DONE] = {"RNDV_DONE", PK_SEQ},
    [AML_PKT_CMPL] = {"CMPL", PK_SEQ},
    [AML_PKT_GET_REQ] = {"GET_REQ", PK_SEQ},
    [AML_PKT_RMW_REQ] = {"RMW_REQ", PK_SEQ},
    [AML_PKT_RMW_REPLY] = {"RMW_REPLY", PK_SEQ},
    [AML_PKT_FENCE_REQ] = {"FENCE_REQ", PK_SEQ},
    [AML_PKT_FENCE_ACK] = {"FENCE_ACK", PK_SEQ},
    [AML_PKT_ADAPT_FIRST] = {"ADAPT_FIRST", PK_MSG},
    [AML_PKT_ADAPT_DATA] = {"ADAPT_DATA", PK_DATA},
    [AML_PKT_ADAPT_TOKEN] = {"ADAPT_TOKEN", PK_SEQ},
    [AML_PKT_RNDV_RTR] = {"RNDV_RTR", PK_SEQ | PK_DATA},
    [AML_PKT_RNDV_FIN] = {"RNDV_FIN", PK_SEQ},
    [AML_PKT_ONE_SHORT] = {"ONE_SHORT", PK_MSG},
    [AML_PKT_EAGER_SFIRST] = {"EAGER_SFIRST", PK_MSG},
    [AML_PKT_EAGER_SCONT] = {"EAGER_SCONT", PK_SEQ | PK_DATA},
    [AML_PKT_ADAPT_SFIRST] = {"ADAPT_SFIRST", PK_MSG},
    [AML_PKT_ADAPT_SDATA] = {"ADAPT_SDATA", PK_DATA},
    [AML_PKT_RNDV_SSCOUT] = {"RNDV_SSCOUT", PK_MSG},
    [AML_PKT_QUIESCE] = {"QUIESCE", PK_SEQ},
};

const char *aml_pkt_name(int type)
{
    return (type > 0 && type < AML_PKT_TYPE_MAX) ? pkt_types[type].name : "UNKNOWN";
}

bool aml_pkt_sequenced(int type)
{
    return type > 0 && type < AML_PKT_TYPE_MAX && (pkt_types[type].flags & PK_SEQ);
}

/* What a decoded packet may carry, by its type: user header bytes as the header says,
 * a registered handler, no user header or data where the type has none. */
static void check_shape(aml_t * aml, const aml_pkt_t * pkt, size_t uhdr_avail, size_t len)
{
    unsigned f = pkt_types[pkt->type].flags;
    if (uhdr_avail != pkt->uhdr_len)
        aml_fatal_pkt(aml, pkt, "header carries %zu user-header bytes, packet says %u",
                      uhdr_avail, pkt->uhdr_len);
    if (f & PK_HANDLER)
        aml_check_handler(aml, pkt);
    else if (pkt->uhdr_len && !(f & PK_UHDR))
        aml_fatal_pkt(aml, pkt, "carries a %u-byte user header", pkt->uhdr_len);
    if (len && !(f & PK_DATA))
        aml_fatal_pkt(aml, pkt, "control packet carries %u header and %zu data bytes",
                      pkt->uhdr_len, len);
}

const char *aml_strerror(int status)
{
    switch (status) {
        case AML_OK:
            return "success";
        case AML_ERR_INVAL:
            return "invalid argument";
        case AML_ERR_NOMEM:
            return "out of memory";
        case AML_ERR_TRANSPORT:
            return "transport (UCX) error";
        case AML_ERR_NOT_SUPPORTED:
            return "not supported";
        case AML_ERR_RANGE:
            return "address range not registered";
        case AML_ERR_STATE:
            return "called in the wrong state";
        case AML_ERR_CONFIG:
            return "ranks disagree on a setting";
        default:
            return "unknown aml status";
    }
}

const char *aml_proto_name(int proto)
{
    static const char *const n[AML_PROTO_COUNT] = { "auto", "onepacket", "eager", "rndv", "adaptive" };
    return (proto >= 0 && proto < AML_PROTO_COUNT) ? n[proto] : "unknown";
}

/* ---- fatal errors ------------------------------------------------------------------ */

static void vfatal(aml_t * aml, const char *fmt, va_list ap) __attribute__ ((noreturn));
static void vfatal(aml_t * aml, const char *fmt, va_list ap)
{
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "aml: fatal error on rank %d: ", aml ? aml->rank : -1);
    vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
    if (aml && aml->cfg.fatal)
        aml->cfg.fatal(aml->cfg.fatal_arg, msg);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    abort();
}

void aml_fatal(aml_t * aml, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfatal(aml, fmt, ap);
}

void aml_fatal_pkt(aml_t * aml, const aml_pkt_t * pkt, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    aml_fatal(aml, "malformed packet from rank %u: type %s (%u): %s", pkt->src,
              aml_pkt_name(pkt->type), pkt->type, what);
}

/* ---- hash table ----------------------------------------------------------------------- */

static inline size_t hslot(const aml_htab_t * t, uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return key & (t->nb - 1);
}

int aml_htab_init(aml_htab_t * t, size_t nb)
{
    t->b = calloc(nb, sizeof(*t->b));
    t->nb = nb;
    t->count = 0;
    return t->b ? AML_OK : AML_ERR_NOMEM;
}

void aml_htab_free(aml_htab_t * t)
{
    free(t->b);
    t->b = NULL;
}

void aml_htab_put(aml_htab_t * t, aml_hent_t * e, uint64_t key)
{
    size_t s = hslot(t, key);
    e->key = key;
    e->next = t->b[s];
    t->b[s] = e;
    t->count++;
}

aml_hent_t *aml_htab_get(aml_htab_t * t, uint64_t key)
{
    for (aml_hent_t * e = t->b[hslot(t, key)]; e; e = e->next)
        if (e->key == key)
            return e;
    return NULL;
}

aml_hent_t *aml_htab_del(aml_htab_t * t, uint64_t key)
{
    for (aml_hent_t ** p = &t->b[hslot(t, key)]; *p; p = &(*p)->next) {
        if ((*p)->key == key) {
            aml_hent_t *e = *p;
            *p = e->next;
            t->count--;
            return e;
        }
    }
    return NULL;
}

/* Removes and returns some entry, or NULL when the table is empty (draining at finalize). */
aml_hent_t *aml_htab_pop(aml_htab_t * t)
{
    for (size_t i = 0; t->b && t->count && i < t->nb; i++) {
        aml_hent_t *e = t->b[i];
        if (e) {
            t->b[i] = e->next;
            t->count--;
            return e;
        }
    }
    return NULL;
}

/* ---- configuration and environment ---------------------------------------------------- */

void aml_config_default(aml_config_t * cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->packet_size = 8248;     /* UCX shm bcopy segment (8256) less UCP's AM header */
    cfg->eager_limit = 12288;   /* MPIR_CVAR_AMLAPI_EAGER_LIMIT says why */
    cfg->protocol = AML_PROTO_AUTO;
    cfg->adaptive_credits = 32;
    cfg->rndv_ucx = 1;
    cfg->lanes = 1;
    cfg->progress_mode = AML_PROGRESS_POLLING;
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
        case AML_Q_PACKET_SIZE:
            *val = (int64_t) aml->packet_size;
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
        case AML_Q_MSGS_SENT:
        case AML_Q_BYTES_SENT:
            if (*val < 0 || *val >= AML_PROTO_COUNT)
                return AML_ERR_INVAL;
            *val = (q == AML_Q_MSGS_SENT) ? aml->msgs[*val] : aml->bytes[*val];
            break;
        default:
            return AML_ERR_INVAL;
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

static ucs_status_t am_recv_cb(void *arg, const void *header, size_t header_length,
                               void *data, size_t length, const ucp_am_recv_param_t * param);

int aml_init(const aml_config_t * cfg, aml_t ** out)
{
    ucp_config_t *ucfg = NULL;
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucp_worker_attr_t wattr;
    ucp_am_handler_param_t hparam;
    aml_t *aml;
    int rc = AML_ERR_TRANSPORT;

    if (!cfg || !out || cfg->size <= 0 || cfg->rank < 0 || cfg->rank >= cfg->size)
        return AML_ERR_INVAL;
    if (cfg->packet_size && (cfg->packet_size < 512 || cfg->packet_size > (1 << 20)))
        return AML_ERR_INVAL;
    if (!check_protocol(cfg->protocol))
        return AML_ERR_INVAL;
    if (cfg->adaptive_credits < 0 || cfg->adaptive_credits > 1024 || cfg->lanes < 1 ||
        cfg->lanes > 8 || (cfg->protocol == AML_PROTO_ADAPTIVE && cfg->adaptive_credits == 0))
        return AML_ERR_INVAL;
    if (cfg->progress_mode != AML_PROGRESS_POLLING &&
        cfg->progress_mode != AML_PROGRESS_INTERRUPT)
        return AML_ERR_INVAL;

    aml = calloc(1, sizeof(*aml));
    if (!aml)
        return AML_ERR_NOMEM;
    aml->cfg = *cfg;
    aml->rank = cfg->rank;
    aml->size = cfg->size;
    aml->packet_size = cfg->packet_size ? cfg->packet_size : 8248;
    aml->eager_limit = cfg->eager_limit;
    aml->protocol = cfg->protocol;
    aml->adaptive_credits = cfg->adaptive_credits;
    aml->lanes = cfg->lanes;
    aml->next_msg_id = 1;
    aml->peers = calloc(cfg->size, sizeof(aml_peer_t));
    if (!aml->peers || aml_htab_init(&aml->waits, 1024) || aml_htab_init(&aml->replies, 256) ||
        aml_htab_init(&aml->cntrs, 256) || aml_htab_init(&aml->adapt_rx, 256) ||
        aml_htab_init(&aml->deferred, 1024) || aml_htab_init(&aml->put_rx, 256)) {
        rc = AML_ERR_NOMEM;
        goto fail;
    }

    if (ucp_config_read(NULL, NULL, &ucfg) != UCS_OK)
        goto fail;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    if (cfg->progress_mode == AML_PROGRESS_INTERRUPT)
        params.features |= UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = cfg->size;
    if (ucp_init(&params, ucfg, &aml->ctx) != UCS_OK)
        goto fail;
    ucp_config_release(ucfg);
    ucfg = NULL;

    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if (ucp_worker_create(aml->ctx, &wparams, &aml->worker) != UCS_OK)
        goto fail;
    if (ucp_worker_get_address(aml->worker, &aml->ucx_addr, &aml->ucx_addr_len) != UCS_OK)
        goto fail;
    aml->efd = -1;
    if (cfg->progress_mode == AML_PROGRESS_INTERRUPT &&
        ucp_worker_get_efd(aml->worker, &aml->efd) != UCS_OK)
        goto fail;

    /* The user header travels in UCX's AM header together with our packet header. */
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (ucp_worker_query(aml->worker, &wattr) != UCS_OK)
        goto fail;
    aml->max_uhdr = AML_MAX_UHDR;
    if (wattr.max_am_header < sizeof(aml_pkt_t) + 64)
        goto fail;
    if (wattr.max_am_header - sizeof(aml_pkt_t) < aml->max_uhdr)
        aml->max_uhdr = wattr.max_am_header - sizeof(aml_pkt_t);
    if (aml->max_uhdr > aml->packet_size / 2)
        aml->max_uhdr = aml->packet_size / 2;
    aml->max_uhdr &= ~(size_t) 7;
    aml->compact_max = wattr.max_am_header < AML_COMPACT_MAX ? wattr.max_am_header :
        AML_COMPACT_MAX;
    aml->compact = cfg->size <= AML_COMPACT_MAX_RANKS;  /* 24 bits of source rank */
    aml->sdesc_size = sizeof(aml_sdesc_t) + aml->packet_size;

    /* the address: shared settings, then UCX's */
    aml->addr_len = sizeof(aml_addr_hdr_t) + aml->ucx_addr_len;
    aml->addr = malloc(aml->addr_len);
    if (!aml->addr) {
        rc = AML_ERR_NOMEM;
        goto fail;
    }
    {
        aml_addr_hdr_t h = { AML_WIRE_VERSION, (uint32_t) aml->packet_size,
            (uint32_t) aml->adaptive_credits, (uint32_t) aml->max_uhdr
        };
        memcpy(aml->addr, &h, sizeof(h));
        memcpy(aml->addr + sizeof(h), aml->ucx_addr, aml->ucx_addr_len);
    }

    memset(&hparam, 0, sizeof(hparam));
    hparam.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
        UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hparam.id = AML_UCP_AM_ID;
    hparam.cb = am_recv_cb;
    hparam.arg = aml;
    hparam.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (ucp_worker_set_am_recv_handler(aml->worker, &hparam) != UCS_OK)
        goto fail;

    if ((rc = aml_rma_init(aml)) != AML_OK || (rc = aml_sync_init(aml)) != AML_OK)
        goto fail;
    *out = aml;
    return AML_OK;

  fail:
    if (ucfg)
        ucp_config_release(ucfg);
    free(aml->addr);
    if (aml->ucx_addr)
        ucp_worker_release_address(aml->worker, aml->ucx_addr);
    if (aml->worker)
        ucp_worker_destroy(aml->worker);
    if (aml->ctx)
        ucp_cleanup(aml->ctx);
    aml_htab_free(&aml->waits);
    aml_htab_free(&aml->replies);
    aml_htab_free(&aml->cntrs);
    aml_htab_free(&aml->adapt_rx);
    aml_htab_free(&aml->deferred);
    aml_htab_free(&aml->put_rx);
    free(aml->peers);
    free(aml);
    return rc;
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

int aml_connect(aml_t * aml, const void *table, size_t stride)
{
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
            mismatch(aml, "adaptive_credits", i, me->adaptive_credits, h.adaptive_credits) ||
            mismatch(aml, "max_uhdr", i, me->max_uhdr, h.max_uhdr))
            return AML_ERR_CONFIG;
    }
    aml->adapt_ids = calloc((size_t) aml->size * (aml->adaptive_credits + 1), sizeof(uint64_t));
    aml->lane_eps = calloc((size_t) aml->size * aml->lanes, sizeof(ucp_ep_h));
    if (!aml->adapt_ids || !aml->lane_eps)
        return AML_ERR_NOMEM;
    for (int i = 0; i < aml->size; i++) {
        ucp_ep_params_t ep;
        memset(&ep, 0, sizeof(ep));
        ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep.address = (const ucp_address_t *) ((const char *) table + (size_t) i * stride +
                                              sizeof(aml_addr_hdr_t));
        if (ucp_ep_create(aml->worker, &ep, &aml->peers[i].ep) != UCS_OK)
            return AML_ERR_TRANSPORT;
        /* more endpoints to the same worker: adaptive data is spread over them */
        for (int l = 1; l < aml->lanes; l++)
            if (ucp_ep_create(aml->worker, &ep, &aml->lane_eps[(size_t) i * (aml->lanes - 1) +
                                                               l - 1]) != UCS_OK)
                return AML_ERR_TRANSPORT;
    }
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

/* Finalize is two rounds of QUIESCE packets, each sequenced behind everything its sender sent
 * before, so no packet can reach a closed endpoint:
 *   1. each rank sends QUIESCE 1 to all and waits for all: every message anybody started has
 *      now reached its header handler. Messages still deferred will never be accepted: they
 *      are rejected, which completes their senders (so crossed unmatched rendezvous sends
 *      cannot deadlock). Then each rank waits until everything it started is complete.
 *   2. each rank sends QUIESCE 2 to all and waits for all: only replies (DONE, TOKEN, CMPL,
 *      FENCE_ACK, an embedder's acknowledgements) can still travel between the rounds, and
 *      each was sent before its sender's QUIESCE 2 and triggers no further send.
 * After round 2 nothing arrives and nothing is sent: the endpoints are closed. */
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
           aml->rx_busy > 0)
        aml_progress(aml);
    aml_quiesce_rounds(aml, 2);
    while (aml->tx_inflight > 0)
        aml_progress(aml);

    /* flush-close every endpoint while progressing, as peers do the same (ch4:ucx's order) */
    size_t nreq = (size_t) aml->size * aml->lanes;
    void **reqs = calloc(nreq, sizeof(void *));
    if (!reqs)
        return AML_ERR_NOMEM;
    for (size_t i = 0; i < nreq; i++) {
        ucp_request_param_t p;
        ucp_ep_h *ep = i < (size_t) aml->size ? &aml->peers[i].ep :
            &aml->lane_eps[i - aml->size];
        memset(&p, 0, sizeof(p));
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = 0;    /* flush mode */
        reqs[i] = ucp_ep_close_nbx(*ep, &p);
        *ep = NULL;
    }
    for (size_t i = 0; i < nreq; i++) {
        if (reqs[i] == NULL || UCS_PTR_IS_ERR(reqs[i]))
            continue;
        while (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS)
            ucp_worker_progress(aml->worker);
        ucp_request_free(reqs[i]);
    }
    free(reqs);
    aml->connected = false;
    return AML_OK;
}

static void rec_drain(void **head);

int aml_finalize(aml_t * aml)
{
    if (!aml)
        return AML_ERR_INVAL;
    if (aml->connected)
        aml_quiesce(aml);
    for (int i = 0; i < aml->size; i++) {
        for (aml_ooo_t * o = aml->peers[i].ooo, *n; o; o = n) {
            n = o->next;
            if (o->ucx_desc)
                ucp_am_data_release(aml->worker, o->data);
            free(o->hdr);
            free(o);
        }
    }
    aml_rndv_free_deferred(aml);
    aml_adaptive_free_all(aml);
    aml_rndv_put_free_all(aml);
    for (aml_sdesc_t * d = aml->free_sdesc, *n; d; d = n) {
        n = d->next;
        free(d);
    }
    rec_drain(&aml->free_smsg);
    rec_drain(&aml->free_rmsg);
    ucp_worker_release_address(aml->worker, aml->ucx_addr);
    free(aml->addr);
    ucp_worker_destroy(aml->worker);
    ucp_cleanup(aml->ctx);
    aml_htab_free(&aml->waits);
    aml_htab_free(&aml->replies);
    aml_htab_free(&aml->cntrs);
    aml_htab_free(&aml->adapt_rx);
    aml_htab_free(&aml->deferred);
    aml_htab_free(&aml->put_rx);
    free(aml->adapt_ids);
    free(aml->lane_eps);
    free(aml->addr_tab[0]);
    free(aml->addr_tab[1]);
    free(aml->regions);
    free(aml->peers);
    free(aml);
    return AML_OK;
}

/* ---- counters ------------------------------------------------------------------------- */

int aml_cntr_init(aml_t * aml, aml_cntr_t * c, int64_t value)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    c->value = value;
    if (!aml_htab_get(&aml->cntrs, (uintptr_t) c)) {
        aml_hent_t *e = malloc(sizeof(*e));
        if (!e)
            return AML_ERR_NOMEM;
        aml_htab_put(&aml->cntrs, e, (uintptr_t) c);
    }
    c->registered = 1;
    return AML_OK;
}

int aml_cntr_destroy(aml_t * aml, aml_cntr_t * c)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    free(aml_htab_del(&aml->cntrs, (uintptr_t) c));
    c->registered = 0;
    return AML_OK;
}

int64_t aml_cntr_get(const aml_cntr_t * c)
{
    return c->value;
}

void aml_cntr_set(aml_cntr_t * c, int64_t value)
{
    c->value = value;
}

void aml_cntr_incr(aml_cntr_t * c)
{
    if (c)
        c->value++;
}

int aml_cntr_wait(aml_t * aml, aml_cntr_t * c, int64_t val)
{
    if (!aml || !c)
        return AML_ERR_INVAL;
    if (aml->in_dispatch)
        return AML_ERR_STATE;   /* handlers must not block */
    while (c->value < val)
        aml_progress(aml);
    c->value -= val;
    return AML_OK;
}

aml_cntr_t *aml_check_cntr(aml_t * aml, const aml_pkt_t * pkt)
{
    if (!pkt->cntr)
        return NULL;
    if (!aml_htab_get(&aml->cntrs, pkt->cntr))
        aml_fatal_pkt(aml, pkt, "target counter 0x%llx is not a counter of this process",
                      (unsigned long long) pkt->cntr);
    return (aml_cntr_t *) (uintptr_t) pkt->cntr;
}

/* ---- registered memory ---------------------------------------------------------------- */

int aml_mem_register(aml_t * aml, void *addr, size_t len)
{
    if (!aml || (!addr && len))
        return AML_ERR_INVAL;
    if (aml->nregions == aml->cap_regions) {
        int cap = aml->cap_regions ? 2 * aml->cap_regions : 8;
        aml_region_t *r = realloc(aml->regions, cap * sizeof(*r));
        if (!r)
            return AML_ERR_NOMEM;
        aml->regions = r;
        aml->cap_regions = cap;
    }
    aml->regions[aml->nregions].base = (uintptr_t) addr;
    aml->regions[aml->nregions].len = len;
    aml->nregions++;
    return AML_OK;
}

int aml_mem_deregister(aml_t * aml, void *addr)
{
    if (!aml)
        return AML_ERR_INVAL;
    for (int i = 0; i < aml->nregions; i++) {
        if (aml->regions[i].base == (uintptr_t) addr) {
            aml->regions[i] = aml->regions[--aml->nregions];
            return AML_OK;
        }
    }
    return AML_ERR_RANGE;
}

bool aml_range_registered(aml_t * aml, uintptr_t addr, size_t len)
{
    if (addr + len < addr)
        return false;
    for (int i = 0; i < aml->nregions; i++) {
        const aml_region_t *r = &aml->regions[i];
        if (addr >= r->base && addr + len <= r->base + r->len)
            return true;
    }
    return false;
}

/* ---- sending -------------------------------------------------------------------------- */

aml_sdesc_t *aml_sdesc_get(aml_t * aml)
{
    aml_sdesc_t *d = aml->free_sdesc;
    if (AML_LIKELY(d != NULL)) {
        aml->free_sdesc = d->next;
    } else {
        d = malloc(aml->sdesc_size);
        if (!d)
            return NULL;
    }
    d->aml = aml;
    d->msg = NULL;
    d->org_cntr = NULL;
    d->org_fn = NULL;
    return d;
}

void aml_sdesc_put(aml_t * aml, aml_sdesc_t * d)
{
    d->next = aml->free_sdesc;
    aml->free_sdesc = d;
}

void aml_pkt_init(aml_t * aml, aml_pkt_t * pkt, int type, int peer)
{
    memset(pkt, 0, sizeof(*pkt));
    pkt->type = (uint8_t) type;
    pkt->src = (uint32_t) aml->rank;
    (void) peer;
}

/* The fields a message's first packet carries: handler, user header (copied into d), target
 * counter, and whether the origin wants a CMPL. */
void aml_pkt_set_first(aml_sdesc_t * d, const aml_xfer_t * x, bool want_cmpl)
{
    d->u.pkt.handler = (uint16_t) x->handler;
    d->u.pkt.uhdr_len = (uint32_t) x->uhdr_len;
    d->u.pkt.cntr = (uintptr_t) x->tgt_cntr;
    if (want_cmpl)
        d->u.pkt.flags |= AML_PKTF_CMPL;
    if (x->uhdr_len)
        memcpy(AML_SDESC_PAYLOAD(d), x->uhdr, x->uhdr_len);
    d->hdr_len = sizeof(aml_pkt_t) + x->uhdr_len;
}

void aml_mpkt_set(aml_t * aml, aml_sdesc_t * d, const aml_xfer_t * x, int type, uint64_t id,
                  size_t off)
{
    aml_mpkt_t *m = (aml_mpkt_t *) & d->u.pkt;
    bool first = type == AML_PKT_EAGER_SFIRST || type == AML_PKT_ADAPT_SFIRST ||
        type == AML_PKT_RNDV_SSCOUT;
    size_t uhdr_len = first ? x->uhdr_len : 0;
    aml_spkt_fill(aml, &m->s, type == AML_PKT_ADAPT_SDATA ? NULL : &aml->peers[x->peer], type,
                  first ? x->handler : 0, uhdr_len);
    m->msg_len = (uint32_t) x->len;
    m->off = (uint32_t) off;
    m->msg_id = id;
    if (uhdr_len)
        memcpy(m + 1, x->uhdr, uhdr_len);
    d->hdr_len = sizeof(*m) + uhdr_len;
}

void aml_stat(aml_t * aml, int proto, size_t len)
{
    aml->msgs[proto]++;
    aml->bytes[proto] += (int64_t) len;
}

static void send_done(aml_t * aml, aml_sdesc_t * d)
{
    aml_smsg_t *m = d->msg;
    aml_cntr_t *org_cntr = d->org_cntr;
    aml_compl_fn_t org_fn = d->org_fn;
    void *org_arg = d->org_arg;
    aml->tx_inflight--;
    aml_sdesc_put(aml, d);
    if (m)
        aml_smsg_event_done(aml, m, true);
    aml_org_done(aml, org_cntr, org_fn, org_arg);     /* zero-copy compact packet */
}

/* Whether a packet header (either format: both begin with the type) is sequenced. */
static inline bool pkt_sequenced(const void *hdr)
{
    return aml_pkt_sequenced(*(const uint8_t *) hdr);
}

/* A transport error on a send is fatal, naming the peer. Why not roll the sequence back: UCX
 * fails a send only when the endpoint has failed (peer gone, connection reset), so no later
 * packet to that peer would arrive either; and a multi-packet message cannot be taken back
 * once its first packets left. Without this, the receiver would stash every later packet
 * from us behind the hole, and quiesce would hang with no error. */
void aml_send_failed(aml_t * aml, int peer, const void *hdr, const char *status)
{
    uint8_t t = *(const uint8_t *) hdr;
    aml_fatal(aml, "sending a %s packet to rank %d failed: %s", aml_pkt_name(t), peer, status);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    aml_sdesc_t *d = user_data;
    if (status != UCS_OK)
        aml_send_failed(d->aml, d->peer, &d->u.pkt, ucs_status_string(status));
    aml_t *aml = d->aml;
    ucp_request_free(request);
    /* org_fn may run user code: it must not progress the worker from here */
    aml->in_dispatch++;
    send_done(aml, d);
    aml->in_dispatch--;
}

/* Hands d to UCX; it is sent or the job ends. */
static void send_now(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len,
                     uint32_t am_flags)
{
    ucp_request_param_t param;
    ucs_status_ptr_t r;

    if (AML_UNLIKELY(!ep))
        aml_send_failed(aml, d->peer, &d->u.pkt, "the endpoint is closed (after aml_quiesce)");
#ifdef AML_TEST_HOOKS
    if (AML_UNLIKELY(aml->debug_fail_sends) && --aml->debug_fail_sends == 0)
        aml_send_failed(aml, d->peer, &d->u.pkt, "injected by aml_debug_fail_send");
#endif
    aml->peers[d->peer].dirty = true;
    aml->tx_inflight++;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
        UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = am_flags;
    param.cb.send = send_cb;
    param.user_data = d;
    r = ucp_am_send_nbx(ep, AML_UCP_AM_ID, &d->u.pkt, d->hdr_len, data, len, &param);
    if (AML_LIKELY(r == NULL))
        send_done(aml, d);
    else if (UCS_PTR_IS_ERR(r))
        aml_send_failed(aml, d->peer, &d->u.pkt, ucs_status_string(UCS_PTR_STATUS(r)));
}

static void send_held(aml_t * aml, aml_peer_t * p)
{
    aml_sdesc_t *h = p->held;
    p->held = NULL;
    aml->nheld--;
    aml->tx_inflight--;
    send_now(aml, h, p->ep, h->held_len ? (char *) &h->u.pkt + h->hdr_len : NULL, h->held_len,
             UCP_AM_SEND_FLAG_EAGER);
}

/* debug_reorder: every other sequenced packet to a peer is held back (copied whole into its
 * descriptor) and sent right after the next one, or at the next aml_progress, so that the
 * receiver's stash and replay run in ordinary tests. Returns whether d was taken. */
static bool debug_hold(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[d->peer];
    char *room = (char *) &d->u.pkt + d->hdr_len;

    if (!pkt_sequenced(&d->u.pkt) || ep != p->ep)
        return false;
    if (p->held) {
        /* d goes first, then the packet it overtakes */
        send_now(aml, d, ep, data, len, UCP_AM_SEND_FLAG_EAGER);
        send_held(aml, p);
        return true;
    }
    if (d->hdr_len + len > aml->sdesc_size - offsetof(aml_sdesc_t, u))
        return false;           /* does not fit its descriptor: send it now */
    if (len && data != room)
        memmove(room, data, len);
    d->held_len = len;
    p->held = d;
    aml->nheld++;
    aml->tx_inflight++;         /* quiesce waits for it */
    return true;
}

/* Sends the packets debug_hold kept back (from aml_progress). */
static void debug_release(aml_t * aml)
{
    for (int i = 0; i < aml->size && aml->nheld; i++)
        if (aml->peers[i].held)
            send_held(aml, &aml->peers[i]);
}

/* Hands one packet to UCX: header = pkt | uhdr (in d), data = [data, data+len). Assigns the
 * packet's sequence number: packets to one peer are handled there in this order. */
int aml_send_desc(aml_t * aml, aml_sdesc_t * d, const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[d->peer];
    d->u.pkt.seq = p->tx_seq++;
    return aml_send_desc_lane(aml, d, p->ep, data, len);
}

/* The same without a sequence number, on any of the peer's endpoints (adaptive data). */
int aml_send_desc_lane(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len)
{
    return aml_send_desc_flags(aml, d, ep, data, len, UCP_AM_SEND_FLAG_EAGER);
}

/* am_flags: UCP_AM_SEND_FLAG_EAGER for aml's own packets; UCP_AM_SEND_FLAG_RNDV for a
 * UCX-rendezvous scout, whose send completes when the receiver has taken the data. Once
 * called, the packet is sent or the job ends: it never fails back to the caller, so no
 * sequence number is ever left unused. */
int aml_send_desc_flags(aml_t * aml, aml_sdesc_t * d, ucp_ep_h ep, const void *data, size_t len,
                        uint32_t am_flags)
{
    if (AML_UNLIKELY(aml->cfg.debug_reorder) && am_flags == UCP_AM_SEND_FLAG_EAGER &&
        debug_hold(aml, d, ep, data, len))
        return AML_OK;
    send_now(aml, d, ep, data, len, am_flags);
    return AML_OK;
}

/* A header-only control packet. */
int aml_send_ctrl(aml_t * aml, int peer, int type, uint64_t msg_id, uint64_t aux0)
{
    aml_sdesc_t *d = aml_sdesc_get(aml);
    if (!d)
        return AML_ERR_NOMEM;
    aml_pkt_init(aml, &d->u.pkt, type, peer);
    d->u.pkt.msg_id = msg_id;
    d->u.pkt.aux0 = aux0;
    d->peer = peer;
    d->hdr_len = sizeof(aml_pkt_t);
    return aml_send_desc(aml, d, NULL, 0);
}

/* ---- send-side message bookkeeping ---------------------------------------------------- */

/* A zeroed record from free list *head, else from malloc. */
static void *rec_get(void **head, size_t size)
{
    void *p = *head;
    if (p)
        *head = *(void **) p;
    else if (!(p = malloc(size)))
        return NULL;
    memset(p, 0, size);
    return p;
}

static void rec_put(void **head, void *p)
{
    *(void **) p = *head;
    *head = p;
}

static void rec_drain(void **head)
{
    for (void *p = *head, *n; p; p = n) {
        n = *(void **) p;
        free(p);
    }
    *head = NULL;
}

aml_rmsg_t *aml_rmsg_new(aml_t * aml)
{
    return rec_get(&aml->free_rmsg, sizeof(aml_rmsg_t));
}

void aml_rmsg_free(aml_t * aml, aml_rmsg_t * r)
{
    if (r->got != r->got_inline)
        free(r->got);
    rec_put(&aml->free_rmsg, r);
}

aml_smsg_t *aml_smsg_new(aml_t * aml, const aml_xfer_t * x, int proto)
{
    aml_smsg_t *m = rec_get(&aml->free_smsg, sizeof(aml_smsg_t));
    if (!m)
        return NULL;
    m->peer = x->peer;
    m->proto = proto;
    m->pending = 1;     /* guard: released by the protocol once it issued everything */
    m->org_pending = 1;
    m->org_cntr = x->org_cntr;
    m->org_fn = x->org_fn;
    m->org_arg = x->org_arg;
    m->cmpl_cntr = x->cmpl_cntr;
    return m;
}

void aml_smsg_org_complete(aml_t * aml, aml_smsg_t * m)
{
    if (m->org_done)
        return;
    m->org_done = true;
    aml_org_done(aml, m->org_cntr, m->org_fn, m->org_arg);
}

/* One of the message's events finished: a packet send or the rendezvous DONE (org_event:
 * they gate reuse of the origin buffer), or the target's CMPL. */
void aml_smsg_event_done(aml_t * aml, aml_smsg_t * m, bool org_event)
{
    if (org_event && --m->org_pending == 0)
        aml_smsg_org_complete(aml, m);
    if (--m->pending == 0)
        aml_smsg_release(aml, m);
}

void aml_smsg_release(aml_t * aml, aml_smsg_t * m)
{
    if (m->memh) {
        if (m->rkey_buf)
            ucp_rkey_buffer_release(m->rkey_buf);
        ucp_mem_unmap(aml->ctx, m->memh);
    }
    rec_put(&aml->free_smsg, m);
}

/* ---- the transfer entry point ------------------------------------------------------- */

int aml_xfer(aml_t * aml, const aml_xfer_t * x)
{
    if (AML_UNLIKELY(!aml || !x || x->handler >= AML_MAX_HANDLERS))
        return AML_ERR_INVAL;
    return aml_xfer_internal(aml, x);
}

/* aml_xfer without the restriction to user handler ids */
int aml_xfer_internal(aml_t * aml, const aml_xfer_t * x)
{
    int proto;
    if (AML_UNLIKELY(!aml->connected))
        return AML_ERR_STATE;
    if (AML_UNLIKELY(x->peer < 0 || x->peer >= aml->size || x->handler >= AML_H_TOTAL ||
                     x->uhdr_len > aml->max_uhdr || (x->uhdr_len && !x->uhdr) ||
                     (x->len && !x->data)))
        return AML_ERR_INVAL;

    proto = x->protocol != AML_PROTO_AUTO ? x->protocol : aml->protocol;
    switch (proto) {
        case AML_PROTO_AUTO:
            if (aml_fits_onepacket(aml, x))
                return aml_onepacket_send(aml, x);
            if (x->len > aml->eager_limit)
                return aml_rndv_send(aml, x);
            if (aml->adaptive_credits == 0)
                return aml_eager_send(aml, x);
            /* peer state: without a credit only the scout may wait at the receiver */
            return aml_adaptive_credit(aml, x->peer) ? aml_adaptive_send(aml, x) :
                aml_rndv_send(aml, x);
        case AML_PROTO_ADAPTIVE:
            if (aml_adaptive_credit(aml, x->peer))
                return aml_adaptive_send(aml, x);
            return x->len ? aml_rndv_send(aml, x) : aml_onepacket_send(aml, x);
        case AML_PROTO_ONEPACKET:
            if (!aml_fits_onepacket(aml, x))
                return AML_ERR_INVAL;
            return aml_onepacket_send(aml, x);
        case AML_PROTO_EAGER:
            return aml_eager_send(aml, x);
        case AML_PROTO_RNDV:
            /* nothing to pull for an empty message */
            return x->len ? aml_rndv_send(aml, x) : aml_onepacket_send(aml, x);
        default:
            return AML_ERR_INVAL;
    }
}

/* ---- the receive side ----------------------------------------------------------------- */

void aml_check_handler(aml_t * aml, const aml_pkt_t * pkt)
{
    if (pkt->handler >= AML_H_TOTAL || !aml->handlers[pkt->handler].fn)
        aml_fatal_pkt(aml, pkt, "handler %u is not registered", pkt->handler);
    if (pkt->uhdr_len > aml->max_uhdr)
        aml_fatal_pkt(aml, pkt, "user header of %u bytes exceeds the limit %zu", pkt->uhdr_len,
                      aml->max_uhdr);
}

/* Runs header handler `handler` (registered: the caller checked) for a message from src,
 * with an 8-byte aligned copy of the user header; recv is cleared first. type names the
 * packet in errors. */
void aml_run_handler(aml_t * aml, unsigned handler, int type, uint32_t src, const void *uhdr,
                     size_t uhdr_len, uint64_t msg_len, const void *data, int proto,
                     aml_recv_t * recv, aml_rmsg_t * msg)
{
    const aml_handler_t *h = &aml->handlers[handler];
    uint64_t aligned[AML_MAX_UHDR / 8];
    aml_msg_info_t info;
    if (((uintptr_t) uhdr & 7) && uhdr_len) {
        memcpy(aligned, uhdr, uhdr_len);
        uhdr = aligned;
    }
    info.src = (int) src;
    info.uhdr = uhdr_len ? uhdr : NULL;
    info.uhdr_len = uhdr_len;
    info.msg_len = msg_len;
    info.data = data;
    info.protocol = proto;
    info.msg = AML_HANDLE_NONE;
    if (msg)
        info.msg = msg->handle = ++aml->next_handle;
    memset(recv, 0, sizeof(*recv));
    if (h->fn(aml, h->ctx, &info, recv) != 0)
        aml_fatal(aml, "header handler %u refused a %s message of %llu bytes from rank %u",
                  handler, aml_pkt_name(type), (unsigned long long) msg_len, src);
    if (recv->defer && !msg)
        aml_fatal(aml, "header handler %u deferred a %s message from rank %u: only rendezvous "
                  "and adaptive messages can be deferred", handler, aml_pkt_name(type), src);
    if (!recv->defer && !data && msg_len && !recv->buf && !recv->unpack)
        aml_fatal(aml, "header handler %u gave no buffer for a %llu-byte message from rank %u",
                  handler, (unsigned long long) msg_len, src);
}

/* aml_run_handler for a decoded packet; the caller ran aml_check_handler. */
void aml_call_handler(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                      aml_recv_t * recv, aml_rmsg_t * msg)
{
    aml_run_handler(aml, pkt->handler, pkt->type, pkt->src, uhdr, pkt->uhdr_len, pkt->msg_len,
                    data, pkt->proto, recv, msg);
}

void aml_deliver(aml_t * aml, const aml_recv_t * recv, size_t offset, const void *data,
                 size_t len)
{
    (void) aml;
    if (!len)
        return;
    if (recv->buf)
        memcpy((char *) recv->buf + offset, data, len);
    else if (recv->unpack)
        recv->unpack(recv->unpack_arg, offset, data, len);
}

/* All data of a message landed: completion handler, target counter, CMPL to the origin. */
void aml_rx_complete(aml_t * aml, int src, aml_cntr_t * tgt_cntr, const aml_recv_t * recv,
                     bool want_cmpl, uint64_t msg_id, bool counted)
{
    if (recv->compl_fn)
        recv->compl_fn(aml, recv->compl_arg);
    aml_cntr_incr(tgt_cntr);
    if (want_cmpl && aml_send_ctrl(aml, src, AML_PKT_CMPL, msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send CMPL to rank %d", src);
    if (counted)
        aml_rx_counted_done(aml, src);
}

/* A message from src counted in rx_busy and rx_incomplete (from its first packet or scout on,
 * deferred or not) is complete or dropped: a fence waiting for it may be acknowledged. */
void aml_rx_counted_done(aml_t * aml, int src)
{
    aml->rx_busy--;
    if (--aml->peers[src].rx_incomplete == 0)
        aml_sync_rx_idle(aml, src);
}

static void dispatch(aml_t * aml, const aml_pkt_t * pkt, const char *uhdr, size_t uhdr_avail,
                     const void *data, size_t len)
{
    check_shape(aml, pkt, uhdr_avail, len);
    switch (pkt->type) {
        case AML_PKT_ONE:
        case AML_PKT_ONE_SHORT:
            aml_onepacket_recv(aml, pkt, uhdr, data, len);
            break;
        case AML_PKT_EAGER_FIRST:
        case AML_PKT_EAGER_SFIRST:
            aml_eager_recv_first(aml, pkt, uhdr, data, len);
            break;
        case AML_PKT_EAGER_CONT:
        case AML_PKT_EAGER_SCONT:
            aml_eager_recv_cont(aml, pkt, data, len);
            break;
        case AML_PKT_RNDV_SCOUT:
        case AML_PKT_RNDV_SSCOUT:
            aml_rndv_recv_scout(aml, pkt, uhdr, data, len);
            break;
        case AML_PKT_ADAPT_FIRST:
        case AML_PKT_ADAPT_SFIRST:
            aml_adaptive_recv_first(aml, pkt, uhdr, data, len);
            break;
        case AML_PKT_RNDV_RTR:
            aml_rndv_put_recv_rtr(aml, pkt, data, len);
            break;
        case AML_PKT_RNDV_DONE:
            aml_rndv_recv_done(aml, pkt);
            break;
        case AML_PKT_CMPL:
            aml_sync_recv_cmpl(aml, pkt);
            break;
        case AML_PKT_GET_REQ:
            aml_rma_recv_get_req(aml, pkt);
            break;
        case AML_PKT_RMW_REQ:
            aml_rma_recv_rmw_req(aml, pkt);
            break;
        case AML_PKT_RMW_REPLY:
            aml_rma_recv_rmw_reply(aml, pkt);
            break;
        case AML_PKT_FENCE_REQ:
            aml_sync_recv_fence_req(aml, pkt);
            break;
        case AML_PKT_FENCE_ACK:
            aml_sync_recv_fence_ack(aml, pkt);
            break;
        case AML_PKT_ADAPT_TOKEN:
            aml_adaptive_recv_token(aml, pkt);
            break;
        case AML_PKT_RNDV_FIN:
            aml_rndv_put_recv_fin(aml, pkt);
            break;
        case AML_PKT_QUIESCE:
            aml_sync_recv_quiesce(aml, pkt);
            break;
        default:
            aml_fatal_pkt(aml, pkt, "unknown packet type");
    }
}

/* dispatch for a packet as UCX delivered it: header = wire header (hsize bytes) | the rest */
static void dispatch_pkt(aml_t * aml, const aml_pkt_t * pkt, size_t hsize, const char *header,
                         size_t header_length, const void *data, size_t len)
{
    const char *rest = header + hsize;
    if (pkt->type == AML_PKT_ONE_SHORT && !len)     /* user header, then the data */
        dispatch(aml, pkt, rest, pkt->uhdr_len, rest + pkt->uhdr_len, pkt->msg_len);
    else
        dispatch(aml, pkt, rest, header_length - hsize, data, len);
}

static void stash(aml_t * aml, aml_peer_t * p, const aml_pkt_t * pkt, const void *header,
                  size_t hlen, const void *data, size_t len)
{
    aml_ooo_t *o = malloc(sizeof(*o));
    char *buf = malloc(hlen + (data ? len : 0) + 1);
    aml->stashed++;
    if (!o || !buf)
        aml_fatal(aml, "out of memory holding an early packet from rank %u", pkt->src);
    memcpy(buf, header, hlen);
    if (len && data)
        memcpy(buf + hlen, data, len);
    o->seq = pkt->seq;
    o->ucx_desc = false;
    o->hdr = buf;
    o->hdr_len = hlen;
    o->data = data ? buf + hlen : NULL;
    o->len = len;
    aml_ooo_t **q = &p->ooo;
    while (*q && (int32_t) ((*q)->seq - o->seq) < 0)
        q = &(*q)->next;
    if (*q && (*q)->seq == o->seq)
        aml_fatal_pkt(aml, pkt, "duplicate sequence number %u", pkt->seq);
    o->next = *q;
    *q = o;
    p->nstashed++;
}

/* Reads a wire header, full or compact, into *pkt; returns its size on the wire. Both begin
 * with the packet type, and each names its sender before anything else is checked. A compact
 * packet's data is the end of UCX's header (see dispatch_pkt). */
static size_t decode(aml_t * aml, const void *header, size_t header_length, size_t length,
                     aml_pkt_t * pkt)
{
    if (AML_UNLIKELY(header_length < sizeof(aml_spkt_t)))
        aml_fatal(aml, "malformed packet from an unknown rank: %zu-byte header is shorter than "
                  "the smallest aml packet header (%zu)", header_length, sizeof(aml_spkt_t));
    if (*(const uint8_t *) header == AML_PKT_ONE_SHORT) {
        aml_spkt_t s;
        memcpy(&s, header, sizeof(s));
        memset(pkt, 0, sizeof(*pkt));
        pkt->type = s.type;
        pkt->src = AML_SPKT_SRC(&s);
        if (AML_UNLIKELY(pkt->src >= (uint32_t) aml->size))
            aml_fatal(aml, "malformed packet from an unknown rank: source %u out of range "
                      "(size %d), type %s", pkt->src, aml->size, aml_pkt_name(pkt->type));
        pkt->handler = s.handler;
        pkt->uhdr_len = s.uhdr_len;
        pkt->seq = aml_seq_extend(aml->peers[pkt->src].rx_seq, s.seq);
        pkt->proto = AML_PROTO_ONEPACKET;
        /* the data follows the user header inside UCX's header, or is UCX's payload */
        if (AML_UNLIKELY(s.uhdr_len > header_length - sizeof(s) ||
                         (length && header_length != sizeof(s) + s.uhdr_len)))
            aml_fatal_pkt(aml, pkt, "%zu-byte header with a %u-byte user header and %zu bytes "
                          "of UCX payload: data in both", header_length, s.uhdr_len, length);
        pkt->msg_len = length ? length : header_length - sizeof(s) - s.uhdr_len;
        return sizeof(s);
    }
    if (*(const uint8_t *) header >= AML_PKT_EAGER_SFIRST &&
        *(const uint8_t *) header <= AML_PKT_RNDV_SSCOUT) {
        aml_mpkt_t m;
        uint32_t src;
        memcpy(&m.s, header, sizeof(m.s));
        src = AML_SPKT_SRC(&m.s);
        if (AML_UNLIKELY(src >= (uint32_t) aml->size))
            aml_fatal(aml, "malformed packet from an unknown rank: source %u out of range "
                      "(size %d), type %s", src, aml->size, aml_pkt_name(m.s.type));
        if (AML_UNLIKELY(header_length < sizeof(m)))
            aml_fatal(aml, "malformed packet from rank %u: type %s (%u): %zu-byte header is "
                      "shorter than a medium compact header (%zu)", src,
                      aml_pkt_name(m.s.type), m.s.type, header_length, sizeof(m));
        memcpy(&m, header, sizeof(m));
        memset(pkt, 0, sizeof(*pkt));
        pkt->type = m.s.type;
        pkt->src = src;
        pkt->handler = m.s.handler;
        pkt->uhdr_len = m.s.uhdr_len;
        pkt->proto = m.s.type <= AML_PKT_EAGER_SCONT ? AML_PROTO_EAGER :
            m.s.type == AML_PKT_RNDV_SSCOUT ? AML_PROTO_RNDV : AML_PROTO_ADAPTIVE;
        if (m.s.type == AML_PKT_RNDV_SSCOUT) {
            pkt->flags = AML_PKTF_UCX;  /* the only compact scout */
            if (AML_UNLIKELY(m.off))
                aml_fatal_pkt(aml, pkt, "scout at offset %u", m.off);
        }
        pkt->msg_len = m.msg_len;
        pkt->addr = m.off;
        pkt->msg_id = m.msg_id;
        if (m.s.type != AML_PKT_ADAPT_SDATA)
            pkt->seq = aml_seq_extend(aml->peers[src].rx_seq, m.s.seq);
        if (AML_UNLIKELY((m.s.type == AML_PKT_EAGER_SCONT || m.s.type == AML_PKT_ADAPT_SDATA) &&
                         (m.s.handler || m.s.uhdr_len)))
            aml_fatal_pkt(aml, pkt, "continuation names handler %u and a %u-byte user header",
                          m.s.handler, m.s.uhdr_len);
        return sizeof(m);
    }
    if (AML_UNLIKELY(header_length < sizeof(*pkt))) {
        /* name the sender if the bytes that would hold it arrived */
        uint32_t src = (uint32_t) -1;
        if (header_length >= offsetof(aml_pkt_t, src) + sizeof(src))
            memcpy(&src, (const char *) header + offsetof(aml_pkt_t, src), sizeof(src));
        if (src < (uint32_t) aml->size)
            aml_fatal(aml, "malformed packet from rank %u: type %s (%u): %zu-byte header is "
                      "shorter than an aml packet header (%zu)", src,
                      aml_pkt_name(*(const uint8_t *) header), *(const uint8_t *) header,
                      header_length, sizeof(*pkt));
        aml_fatal(aml, "malformed packet from an unknown rank: %zu-byte header is shorter than "
                  "an aml packet header (%zu)", header_length, sizeof(*pkt));
    }
    memcpy(pkt, header, sizeof(*pkt));
    if (AML_UNLIKELY(pkt->src >= (uint32_t) aml->size))
        aml_fatal(aml, "malformed packet from an unknown rank: source %u out of range "
                  "(size %d), type %s", pkt->src, aml->size, aml_pkt_name(pkt->type));
    if (AML_UNLIKELY(pkt->type == 0 || pkt->type >= AML_PKT_TYPE_MAX))
        aml_fatal_pkt(aml, pkt, "unknown packet type");
    return sizeof(*pkt);
}

static ucs_status_t am_recv_cb(void *arg, const void *header, size_t header_length,
                               void *data, size_t length, const ucp_am_recv_param_t * param)
{
    aml_t *aml = arg;
    aml_pkt_t pkt;
    aml_peer_t *p;
    size_t hsize;

    /* fast path: a well-formed compact packet in sequence (anything else, including every
     * malformed one, takes the checked path below) */
    if (AML_LIKELY(header_length >= sizeof(aml_spkt_t) &&
                   *(const uint8_t *) header == AML_PKT_ONE_SHORT)) {
        aml_spkt_t s;
        uint32_t src;
        memcpy(&s, header, sizeof(s));
        src = AML_SPKT_SRC(&s);
        if (AML_LIKELY(src < (uint32_t) aml->size && s.handler < AML_H_TOTAL &&
                       aml->handlers[s.handler].fn && s.uhdr_len <= aml->max_uhdr &&
                       s.uhdr_len <= header_length - sizeof(s) &&
                       (!length || header_length == sizeof(s) + s.uhdr_len) &&
                       !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))) {
            p = &aml->peers[src];
            if (AML_LIKELY(s.seq == (uint16_t) p->rx_seq && !p->ooo)) {
                const char *uhdr = (const char *) header + sizeof(s);
                p->rx_seq++;
                aml->in_dispatch++;
                if (length)
                    aml_onepacket_recv_compact(aml, &s, uhdr, data, length);
                else
                    aml_onepacket_recv_compact(aml, &s, uhdr, uhdr + s.uhdr_len,
                                               header_length - sizeof(s) - s.uhdr_len);
                aml->in_dispatch--;
                return UCS_OK;
            }
        }
    }

    /* fast path: a well-formed compact UCX-rendezvous scout in sequence */
    if (AML_LIKELY(header_length >= sizeof(aml_mpkt_t) &&
                   *(const uint8_t *) header == AML_PKT_RNDV_SSCOUT &&
                   (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))) {
        aml_mpkt_t m;
        uint32_t src;
        memcpy(&m, header, sizeof(m));
        src = AML_SPKT_SRC(&m.s);
        if (AML_LIKELY(src < (uint32_t) aml->size && m.s.handler < AML_H_TOTAL &&
                       aml->handlers[m.s.handler].fn && m.s.uhdr_len <= aml->max_uhdr &&
                       header_length == sizeof(m) + m.s.uhdr_len && m.off == 0 &&
                       m.msg_len != 0 && length == m.msg_len)) {
            p = &aml->peers[src];
            if (AML_LIKELY(m.s.seq == (uint16_t) p->rx_seq && !p->ooo)) {
                p->rx_seq++;
                aml->in_dispatch++;
                aml_rndv_recv_sscout(aml, &m, (const char *) header + sizeof(m), data);
                aml->in_dispatch--;
                return UCS_INPROGRESS;
            }
        }
    }

    hsize = decode(aml, header, header_length, length, &pkt);

    /* only a UCX-rendezvous scout comes by UCX rendezvous; then data is UCP's descriptor */
    bool ucx_rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    if (AML_UNLIKELY(ucx_rndv != ((pkt.type == AML_PKT_RNDV_SCOUT ||
                                   pkt.type == AML_PKT_RNDV_SSCOUT) && (pkt.flags & AML_PKTF_UCX))))
        aml_fatal_pkt(aml, &pkt, "UCX delivered it %s, the packet says otherwise",
                      ucx_rndv ? "by rendezvous" : "eagerly");

    if (pkt.type == AML_PKT_ADAPT_DATA || pkt.type == AML_PKT_ADAPT_SDATA) {
        /* outside the sequence: placed by offset whenever it comes */
        check_shape(aml, &pkt, header_length - hsize, length);
        aml->in_dispatch++;
        aml_adaptive_recv_data(aml, &pkt, data, length);
        aml->in_dispatch--;
        return UCS_OK;
    }
    p = &aml->peers[pkt.src];
    if (AML_UNLIKELY(pkt.seq != p->rx_seq)) {
        int32_t ahead = (int32_t) (pkt.seq - p->rx_seq);
        if (ahead < 0)
            aml_fatal_pkt(aml, &pkt, "stale sequence number %u (expected %u)", pkt.seq,
                          p->rx_seq);
        /* early packets wait for the gap to fill: they are checked before they are kept, and
         * only so many, so far ahead (packets leave their endpoint's order only briefly) */
        if (ahead >= AML_SEQ_WINDOW || p->nstashed >= AML_STASH_MAX)
            aml_fatal_pkt(aml, &pkt, "sequence number %u is %d ahead of %u with %d packets "
                          "held (limits %d ahead, %d held)", pkt.seq, ahead, p->rx_seq,
                          p->nstashed, AML_SEQ_WINDOW, AML_STASH_MAX);
        if (pkt.type == AML_PKT_ONE_SHORT && !length)
            check_shape(aml, &pkt, pkt.uhdr_len, pkt.msg_len);
        else
            check_shape(aml, &pkt, header_length - hsize, length);
        stash(aml, p, &pkt, header, header_length, ucx_rndv ? NULL : data, length);
        if (ucx_rndv) {
            /* keep UCP's descriptor, not a copy: it persists when we return UCS_INPROGRESS */
            for (aml_ooo_t * o = p->ooo; o; o = o->next)
                if (o->seq == pkt.seq) {
                    o->data = data;
                    o->ucx_desc = true;
                }
            return UCS_INPROGRESS;
        }
        return UCS_OK;
    }

    aml->in_dispatch++;
    p->rx_seq++;
    dispatch_pkt(aml, &pkt, hsize, header, header_length, data, length);
    while (p->ooo && p->ooo->seq == p->rx_seq) {
        aml_ooo_t *o = p->ooo;
        p->ooo = o->next;
        hsize = decode(aml, o->hdr, o->hdr_len, o->len, &pkt);
        p->rx_seq++;
        p->nstashed--;
        dispatch_pkt(aml, &pkt, hsize, o->hdr, o->hdr_len, o->data, o->len);
        free(o->hdr);
        free(o);
    }
    aml->in_dispatch--;
    /* a UCX-rendezvous descriptor was handed to ucp_am_recv_data_nbx or kept (deferred) */
    return ucx_rndv ? UCS_INPROGRESS : UCS_OK;
}

/* ---- progress ------------------------------------------------------------------------- */

/* One pass over the transports, as ch4:ucx does: draining until an empty pass cost a second
 * ucp_worker_progress (every interface polled once more) after each arrival, about 0.02 us of
 * a 0.4 us ping-pong. Callers that wait loop anyway. */
int aml_progress(aml_t * aml)
{
    if (AML_UNLIKELY(aml->in_dispatch))
        return 0;       /* UCX forbids progressing the worker from its own callbacks */
    if (AML_UNLIKELY(aml->nheld))
        debug_release(aml);
    return (int) ucp_worker_progress(aml->worker);
}

int aml_arm(aml_t * aml)
{
    ucs_status_t st;
    if (!aml || aml->efd < 0)
        return AML_ERR_STATE;
    if (aml->in_dispatch || aml->nheld)
        return AML_ERR_STATE;   /* a held packet (debug_reorder) goes at the next progress */
    st = ucp_worker_arm(aml->worker);
    if (st == UCS_OK)
        return AML_OK;
    if (st == UCS_ERR_BUSY)
        return AML_ERR_STATE;
    return AML_ERR_TRANSPORT;
}

int aml_event_fd(aml_t * aml, int *fd)
{
    if (!aml || !fd || aml->efd < 0)
        return AML_ERR_STATE;
    *fd = aml->efd;
    return AML_OK;
}

/* ---- test hooks ----------------------------------------------------------------------- */
#ifdef AML_TEST_HOOKS

void aml_debug_fail_send(aml_t * aml, int n)
{
    aml->debug_fail_sends = n;
}

int aml_debug_send_raw(aml_t * aml, int peer, const void *hdr, size_t hdr_len,
                       const void *data, size_t len)
{
    ucp_request_param_t param;
    ucs_status_ptr_t r;
    if (peer < 0 || peer >= aml->size)
        return AML_ERR_INVAL;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(aml->peers[peer].ep, AML_UCP_AM_ID, hdr, hdr_len, data, len, &param);
    if (UCS_PTR_IS_ERR(r))
        return AML_ERR_TRANSPORT;
    if (r) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(aml->worker);
        ucp_request_free(r);
    }
    if (pkt_sequenced(hdr))
        aml->peers[peer].tx_seq++;
    return AML_OK;
}

uint32_t aml_debug_next_seq(aml_t * aml, int peer)
{
    return aml->peers[peer].tx_seq;
}
#endif /* AML_TEST_HOOKS */
