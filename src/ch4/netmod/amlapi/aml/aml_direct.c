/*
 * Direct one-sided access (Baptista et al. 2003, §3.2: a contiguous put or get is a remote memory
 * access with no message at the target). Memory is exposed once with every transport this process
 * uses, and its key carries each transport's part: a peer opens the part of the transport
 * that reaches this process, so a rank of this node copies with process_vm_readv/writev
 * (vnode's single copy) and a rank of another host uses UCX RMA. Nothing runs at the target
 * unless the transport itself needs it (UCX over TCP emulates RMA in the target's progress).
 *
 * aml_put/aml_get (aml_rma.c) stay active messages: they work with any transport, run the
 * target's counters, and check every address at the target. Direct operations check the
 * range at the origin against what the target advertised in its key.
 *
 * Key layout (little-endian host order; peers are the same job's or compatible builds,
 * checked by the wire version at connect): uint64 addr, uint64 len, the uint32 length of each
 * transport's part by slot (aml_tports.h; 0 for one not in use), then the parts in slot order.
 * With UCX and vnode: uint32 ucx_len, uint32 vnode_len, UCX's part, vnode's part.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

struct aml_xmem {
    void *addr;
    size_t len;
    aml_tport_memh_t memh[AML_TPORT_SLOTS];     /* by slot: NULL for a transport not in use */
    void *key;                  /* packed, malloc'd */
    size_t key_len;
};

struct aml_xkey {
    int peer;
    const aml_tport_t *tport;
    aml_tport_rkey_t rkey;
    uint64_t addr, len;
};

typedef struct {
    uint64_t addr, len;
    uint32_t part_len[AML_TPORT_SLOTS];
} key_hdr_t;

/* An operation the transport may finish later: kept until op.done */
typedef struct {
    aml_tport_op_t op;          /* first: done() gets &op */
    aml_cntr_t *cntr;
    aml_compl_fn_t fn;
    void *arg;
} xop_t;

/* Unmaps what m has mapped with each transport. */
static void xmem_unmap(aml_t * aml, aml_xmem_t * m)
{
    for (int i = 0; i < aml->ntports; i++) {
        const aml_tport_t *t = aml->tports[i];
        if (m->memh[t->slot])
            t->mem_unmap(aml, m->memh[t->slot]);
    }
}

/* Maps m with every transport in use and packs the key: each transport's part by slot. */
static int xmem_pack(aml_t * aml, aml_xmem_t * m)
{
    void *buf[AML_TPORT_SLOTS] = { NULL };
    key_hdr_t h = { (uint64_t) (uintptr_t) m->addr, m->len, {0} };
    size_t total = 0;
    int rc = AML_OK;
    char *at;

    for (int i = 0; i < aml->ntports && rc == AML_OK; i++) {
        const aml_tport_t *t = aml->tports[i];
        size_t l = 0;
        if ((rc = t->mem_map(aml, m->addr, m->len, &m->memh[t->slot])) == AML_OK)
            rc = t->rkey_pack(aml, m->memh[t->slot], &buf[t->slot], &l);
        h.part_len[t->slot] = (uint32_t) l;
        total += l;
    }
    if (rc == AML_OK && !(m->key = malloc(sizeof(h) + total)))
        rc = AML_ERR_NOMEM;
    if (rc == AML_OK) {
        m->key_len = sizeof(h) + total;
        memcpy(m->key, &h, sizeof(h));
        at = (char *) m->key + sizeof(h);
        for (int s = 0; s < AML_TPORT_SLOTS; s++) {
            if (h.part_len[s])
                memcpy(at, buf[s], h.part_len[s]);
            at += h.part_len[s];
        }
    }
    for (int i = 0; i < aml->ntports; i++)
        if (buf[aml->tports[i]->slot])
            aml->tports[i]->rkey_buf_release(aml, buf[aml->tports[i]->slot]);
    return rc;
}

int aml_xmem_expose(aml_t * aml, void *addr, size_t len, aml_xmem_t ** out)
{
    aml_xmem_t *m;
    int rc;

    if (!aml || !out || !addr || len == 0)
        return AML_ERR_INVAL;
    if (!aml->ntports)
        return AML_ERR_STATE;
    m = calloc(1, sizeof(*m));
    if (!m)
        return AML_ERR_NOMEM;
    m->addr = addr;
    m->len = len;
    if ((rc = xmem_pack(aml, m)) != AML_OK) {
        xmem_unmap(aml, m);
        free(m);
        return rc;
    }
    *out = m;
    return AML_OK;
}

int aml_xmem_key(aml_t * aml, const aml_xmem_t * m, const void **key, size_t * key_len)
{
    if (!aml || !m || !key || !key_len)
        return AML_ERR_INVAL;
    *key = m->key;
    *key_len = m->key_len;
    return AML_OK;
}

int aml_xmem_withdraw(aml_t * aml, aml_xmem_t * m)
{
    if (!aml || !m)
        return AML_ERR_INVAL;
    xmem_unmap(aml, m);
    free(m->key);
    free(m);
    return AML_OK;
}

int aml_xkey_open(aml_t * aml, int peer, const void *key, size_t key_len, aml_xkey_t ** out)
{
    aml_peer_t *p;
    aml_xkey_t *k;
    key_hdr_t h;
    const char *part;
    uint64_t total = 0;
    int rc;

    if (!aml || !out || !key || key_len < sizeof(h) || !aml_peer_ok(aml, peer))
        return AML_ERR_INVAL;
    if (!aml->connected)
        return AML_ERR_STATE;
    memcpy(&h, key, sizeof(h));
    for (int s = 0; s < AML_TPORT_SLOTS; s++)
        total += h.part_len[s];
    if (key_len != sizeof(h) + total || h.len == 0)
        return AML_ERR_INVAL;
    p = &aml->peers[peer];
    if ((p->caps & (AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT)) !=
        (AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT) || !p->ep)
        return AML_ERR_NOT_SUPPORTED;
    /* the part of the transport that reaches the peer; none: the peer does not use it, so
     * the key is not one it could have made for us */
    if (h.part_len[p->tport->slot] == 0)
        return AML_ERR_INVAL;
    part = (const char *) key + sizeof(h);
    for (int s = 0; s < p->tport->slot; s++)
        part += h.part_len[s];
    k = calloc(1, sizeof(*k));
    if (!k)
        return AML_ERR_NOMEM;
    if ((rc = p->tport->rkey_unpack(p->ep, part, h.part_len[p->tport->slot], &k->rkey)) !=
        AML_OK) {
        free(k);
        return rc;
    }
    k->peer = peer;
    k->tport = p->tport;
    k->addr = h.addr;
    k->len = h.len;
    *out = k;
    return AML_OK;
}

size_t aml_xkey_threshold(aml_t * aml, const aml_xkey_t * k)
{
    return aml && k ? aml->peers[k->peer].eager_limit : 0;
}

int aml_xkey_soft(aml_t * aml, const aml_xkey_t * k)
{
    aml_peer_t *p;
    if (!aml || !k)
        return 0;
    /* asked once per peer: the transport may have to print its whole configuration */
    p = &aml->peers[k->peer];
    if (!p->rma_soft)
        p->rma_soft = 1 + (k->tport->rma_soft && p->ep ? k->tport->rma_soft(p->ep) != 0 : 0);
    return p->rma_soft - 1;
}

void aml_xkey_close(aml_t * aml, aml_xkey_t * k)
{
    if (!aml || !k)
        return;
    k->tport->rkey_destroy(aml, k->rkey);
    free(k);
}

static void xop_finish(aml_t * aml, xop_t * x)
{
    aml->peers[x->op.peer].direct_pending--;
    if (x->cntr)
        aml_cntr_incr(x->cntr);
    if (x->fn)
        x->fn(aml, x->arg);
    free(x);
}

static void xop_done(aml_tport_op_t * op)
{
    xop_finish(op->aml, (xop_t *) op);
}

static int direct(aml_t * aml, aml_xkey_t * k, uint64_t raddr, void *local, size_t len,
                  int write, aml_cntr_t * cntr, aml_compl_fn_t fn, void *arg)
{
    aml_peer_t *p;
    xop_t *x;
    int rc;

    if (!aml || !k || (len && !local))
        return AML_ERR_INVAL;
    if (raddr < k->addr || len > k->len || raddr - k->addr > k->len - len)
        return AML_ERR_RANGE;
    if (len == 0) {
        if (cntr)
            aml_cntr_incr(cntr);
        if (fn)
            fn(aml, arg);
        return AML_OK;
    }
    x = malloc(sizeof(*x));
    if (!x)
        return AML_ERR_NOMEM;
    x->op.done = xop_done;
    x->op.aml = aml;
    x->op.peer = k->peer;
    x->op.len = len;
    x->op.hdr = NULL;
    x->cntr = cntr;
    x->fn = fn;
    x->arg = arg;
    p = &aml->peers[k->peer];
    p->direct_pending++;
    rc = write ? k->tport->put(p->ep, local, raddr, k->rkey, &x->op)
        : k->tport->get(p->ep, local, raddr, k->rkey, &x->op);
    if (rc == AML_TPORT_DONE)
        xop_finish(aml, x);
    return AML_OK;
}

int aml_put_direct(aml_t * aml, aml_xkey_t * k, uint64_t raddr, const void *src, size_t len,
                   aml_cntr_t * cmpl_cntr, aml_compl_fn_t fn, void *arg)
{
    return direct(aml, k, raddr, (void *) src, len, 1, cmpl_cntr, fn, arg);
}

int aml_get_direct(aml_t * aml, aml_xkey_t * k, uint64_t raddr, void *dst, size_t len,
                   aml_cntr_t * cmpl_cntr, aml_compl_fn_t fn, void *arg)
{
    return direct(aml, k, raddr, dst, len, 0, cmpl_cntr, fn, arg);
}

int aml_peer_read(aml_t * aml, int peer, void *dst, uint64_t raddr, size_t len)
{
    aml_peer_t *p;
    if (!aml || !aml_peer_ok(aml, peer) || (!dst && len))
        return AML_ERR_INVAL;
    if (!aml->connected)
        return AML_ERR_STATE;
    p = &aml->peers[peer];
    /* a copy only some transports make (vnode's single copy) */
    if (!p->tport || !p->tport->read)
        return AML_ERR_NOT_SUPPORTED;
    return p->tport->read(aml, p, dst, raddr, len);
}
