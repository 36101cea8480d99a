/*
 * vnode's errors: a failing call records its message (and, for a peer's fault, that peer)
 * in the vnode_t, and returns its code; vnode_error and vnode_error_peer read them back.
 * Every other file of vnode uses this one, which uses none of them.
 */
#include "vnode_impl.h"
#include <stdarg.h>
#include <stdio.h>

int vnode_fail(vnode_t * v, int rc, const char *fmt, ...)
{
    va_list ap;
    v->err_peer = -1;
    va_start(ap, fmt);
    vsnprintf(v->err, sizeof(v->err), fmt, ap);
    va_end(ap);
    return rc;
}

int vnode_error_peer(const vnode_t * v)
{
    return v ? v->err_peer : -1;
}

const char *vnode_error(const vnode_t * v)
{
    return v ? v->err : "vnode: no vnode";
}
