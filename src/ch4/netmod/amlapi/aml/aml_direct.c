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
 * checked by the wire version at connect):
 *   uint64 addr, uint64 len, uint32 ucx_len, uint32 vnode_len, ucx part, vnode part.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

struct aml_xmem {
    void *addr;
    size_t len;
    aml_tport_memh_t ucx_memh;
    aml_tport_memh_t vn_memh;   /* NULL without vnode */
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
    uint32_t ucx_len, vn_len;
} key_hdr_t;

/* An operation the transport may finish later: kept until op.done */
typedef struct {
    aml_tport_op_t op;          /* first: done() gets &op */
    aml_cntr_t *cntr;
    aml_compl_fn_t fn;
    void *arg;
} xop_t;

int aml_xmem_expose(aml_t * aml, void *addr, size_t len, aml_xmem_t ** out)
{
    aml_xmem_t *m;
    void *ub = NULL, *vb = NULL;
    size_t ulen = 0, vlen = 0;
    key_hdr_t h;
    int rc;

    if (!aml || !out || !addr || len == 0)
        return AML_ERR_INVAL;
    if (!aml->ucx)
        return AML_ERR_STATE;
    m = calloc(1, sizeof(*m));
    if (!m)
        return AML_ERR_NOMEM;
    m->addr = addr;
    m->len = len;
    if ((rc = aml_ucx_tport.mem_map(aml, addr, len, &m->ucx_memh)) != AML_OK)
        goto fail;
    if ((rc = aml_ucx_tport.rkey_pack(aml, m->ucx_memh, &ub, &ulen)) != AML_OK)
        goto fail;
    if (aml->vnode) {
        if ((rc = aml_vnode_tport.mem_map(aml, addr, len, &m->vn_memh)) != AML_OK)
            goto fail;
        if ((rc = aml_vnode_tport.rkey_pack(aml, m->vn_memh, &vb, &vlen)) != AML_OK)
            goto fail;
    }
    h.addr = (uint64_t) (uintptr_t) addr;
    h.len = len;
    h.ucx_len = (uint32_t) ulen;
    h.vn_len = (uint32_t) vlen;
    m->key_len = sizeof(h) + ulen + vlen;
    m->key = malloc(m->key_len);
    if (!m->key) {
        rc = AML_ERR_NOMEM;
        goto fail;
    }
    memcpy(m->key, &h, sizeof(h));
    memcpy((char *) m->key + sizeof(h), ub, ulen);
    if (vlen)
        memcpy((char *) m->key + sizeof(h) + ulen, vb, vlen);
    aml_ucx_tport.rkey_buf_release(aml, ub);
    if (vb)
        aml_vnode_tport.rkey_buf_release(aml, vb);
    *out = m;
    return AML_OK;
  fail:
    if (ub)
        aml_ucx_tport.rkey_buf_release(aml, ub);
    if (vb)
        aml_vnode_tport.rkey_buf_release(aml, vb);
    if (m->vn_memh)
        aml_vnode_tport.mem_unmap(aml, m->vn_memh);
    if (m->ucx_memh)
        aml_ucx_tport.mem_unmap(aml, m->ucx_memh);
    free(m);
    return rc;
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
    if (m->vn_memh)
        aml_vnode_tport.mem_unmap(aml, m->vn_memh);
    aml_ucx_tport.mem_unmap(aml, m->ucx_memh);
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
    size_t plen;
    int rc;

    if (!aml || !out || !key || key_len < sizeof(h) || !aml_peer_ok(aml, peer))
        return AML_ERR_INVAL;
    if (!aml->connected)
        return AML_ERR_STATE;
    memcpy(&h, key, sizeof(h));
    if (key_len != sizeof(h) + (size_t) h.ucx_len + h.vn_len || h.len == 0)
        return AML_ERR_INVAL;
    p = &aml->peers[peer];
    if ((p->caps & (AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT)) !=
        (AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT) || !p->ep)
        return AML_ERR_NOT_SUPPORTED;
    if (p->tport == &aml_vnode_tport) {
        if (h.vn_len == 0)      /* the peer has no vnode: then it is not on our segment */
            return AML_ERR_INVAL;
        part = (const char *) key + sizeof(h) + h.ucx_len;
        plen = h.vn_len;
    } else {
        part = (const char *) key + sizeof(h);
        plen = h.ucx_len;
    }
    k = calloc(1, sizeof(*k));
    if (!k)
        return AML_ERR_NOMEM;
    if ((rc = p->tport->rkey_unpack(p->ep, part, plen, &k->rkey)) != AML_OK) {
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
    if (!aml || !aml_peer_ok(aml, peer) || (!dst && len))
        return AML_ERR_INVAL;
    if (!aml->connected)
        return AML_ERR_STATE;
    return aml_vnode_read(aml, peer, dst, raddr, len);
}
