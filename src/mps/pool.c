/* Buffer pools: ownership of each buffer passes between the application and the I/O system
 * (the back end). Every handle and buffer pointer is checked against the live pools before
 * use, so misuse is an error code and never touches a pool's state. */
#include "mps_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *link_of(MPS_pool_t p, mps_state *s)
{
    return p->chan ? s->topo.links[p->chan->link].name : "(freed communicator)";
}

/* the live pool `pool` is, or NULL (detail set) */
static MPS_pool_t live_pool(mps_state *s, MPS_pool_t pool, const char *fn, int *rc)
{
    for (MPS_pool_t p = s->pools; p; p = p->next)
        if (p == pool && p->magic == MPS_POOL_MAGIC)
            return p;
    *rc = mps_error(MPS_ERR_POOL, "%s: %p is not a live pool (never made, or finalized)", fn, (void *)pool);
    return NULL;
}

/* index of `buf` in p, or -1 with the reason (a buffer of another pool, or no buffer) */
static int buf_index(mps_state *s, MPS_pool_t p, const void *buf, const char *fn, int *rc)
{
    uintptr_t a = (uintptr_t)buf;
    for (MPS_pool_t q = s->pools; q; q = q->next) {
        if (mps_nat_in_peer(q, buf)) {
            /* in the other end's arena: a buffer lent to q (native receive pool) */
            if (q != p) {
                *rc = mps_error(MPS_ERR_BUF_FOREIGN, "%s: %p is a buffer lent to another pool (receive, link '%s'), "
                                "not to this one (%s, link '%s')", fn, buf, link_of(q, s),
                                p->way == MPS_SND ? "send" : "receive", link_of(p, s));
                return -1;
            }
            for (int k = 0; k < p->bufcount; k++) {
                char *lo = mps_nat_loan_ptr(p, k);
                if (!p->loans[k].held || (const char *)buf < lo || (const char *)buf >= lo + p->loans[k].len)
                    continue;
                if (buf != lo) {
                    *rc = mps_error(MPS_ERR_BUF_UNKNOWN, "%s: %p points inside a buffer lent to the pool of link "
                                    "'%s', not at its start", fn, buf, link_of(p, s));
                    return -1;
                }
                return p->bufcount + k;     /* loan k */
            }
            /* not held: given back already (or never got) */
            *rc = mps_error(MPS_ERR_BUF_NOT_OWNED, "%s: %p is a buffer of the other end of link '%s' that the "
                            "application does not hold (released twice, or never got)", fn, buf, link_of(p, s));
            return -1;
        }
        uintptr_t lo = (uintptr_t)q->mem, hi = lo + q->stride * q->bufcount;
        if (a < lo || a >= hi)
            continue;
        size_t off = a - lo;
        if (q != p) {
            *rc = mps_error(MPS_ERR_BUF_FOREIGN, "%s: %p is buffer %zu of another pool (%s, link '%s'), not of this one (%s, link '%s')",
                            fn, buf, off / q->stride, q->way == MPS_SND ? "send" : "receive", link_of(q, s),
                            p->way == MPS_SND ? "send" : "receive", link_of(p, s));
            return -1;
        }
        if (off % p->stride || off / p->stride >= (size_t)p->bufcount) {
            *rc = mps_error(MPS_ERR_BUF_UNKNOWN, "%s: %p points inside buffer %zu of the pool of link '%s', not at its start",
                            fn, buf, off / p->stride, link_of(p, s));
            return -1;
        }
        return (int)(off / p->stride);
    }
    *rc = mps_error(MPS_ERR_BUF_UNKNOWN, "%s: %p is no buffer of any pool", fn, buf);
    return -1;
}

int mps_pool_progress(MPS_pool_t p)
{
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if (p->in_arena)
        mps_nat_progress_returns(s, p->nat);
    for (int i = 0; i < p->bufcount; i++) {
        if (p->bufs[i].state != MPS_BUF_INFLIGHT || p->bufs[i].req == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        if ((rc = s->be->test(p, i, &done)) != MPS_SUCCESS)
            return rc;
        if (done)
            p->bufs[i].state = p->way == MPS_SND ? MPS_BUF_FREE : MPS_BUF_READY;
        if (done && p->way == MPS_RCV)
            p->copied += p->bufs[i].bytes;  /* through MPI, into this pool's own buffer */
    }
    return MPS_SUCCESS;
}

/* receive pool: the buffer holding the next message in order (the oldest posting), whether or
 * not it has arrived; -1 if the application holds them all */
static int next_in_order(MPS_pool_t p)
{
    int best = -1;
    for (int i = 0; i < p->bufcount; i++) {
        enum mps_buf_state st = p->bufs[i].state;
        if ((st == MPS_BUF_INFLIGHT || st == MPS_BUF_READY) && (best < 0 || p->bufs[i].seq < p->bufs[best].seq))
            best = i;
    }
    return best;
}

int mps_pool_has_data(MPS_pool_t p)
{
    if (p->loans && mps_nat_pending(p))
        return 1;
    int i = next_in_order(p);
    return i >= 0 && p->bufs[i].state == MPS_BUF_READY;
}

static int post(mps_state *s, MPS_pool_t p, int i)
{
    p->bufs[i].seq = p->next_seq++;
    int rc = s->be->post_recv(p, i);
    if (rc == MPS_SUCCESS)
        p->bufs[i].state = MPS_BUF_INFLIGHT;
    return rc;
}

static void pool_free(mps_state *s, MPS_pool_t p)
{
    for (MPS_pool_t *pp = &s->pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    if (p->chan && p->chan->rcv_pool == p)
        p->chan->rcv_pool = NULL;
    if (p->dep)
        mps_nat_arena_free(p->nat, p->dep);
    if (p->mem && p->in_arena)
        mps_nat_arena_free(p->nat, p->mem);
    else if (p->mem)
        s->be->mem_free(p, p->mem);
    p->magic = 0;
    free(p->loans);
    free(p->bufs);
    free(p);
}

/* at MPI_Finalize (the state calls it): pools the application did not finalize */
static void pools_free_all(mps_state *s)
{
    while (s->pools) {
        MPS_pool_t p = s->pools;
        for (int i = 0; i < p->bufcount; i++) {
            int c;
            if (p->way == MPS_RCV && p->bufs[i].state == MPS_BUF_INFLIGHT)
                s->be->cancel_recv(p, i, &c);
            else if (p->bufs[i].state == MPS_BUF_INFLIGHT)
                MPI_Wait(&p->bufs[i].req, MPI_STATUS_IGNORE);
        }
        pool_free(s, p);
    }
}

int MPS_Buf_pool_init(MPI_Comm comm, int way, int *p_bufsize, int *p_bufcount, MPS_pool_t *pool)
{
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if (!p_bufsize || !p_bufcount || !pool)
        return mps_error(MPS_ERR_ARG, "MPS_Buf_pool_init: NULL argument");
    if (way != MPS_SND && way != MPS_RCV)
        return mps_error(MPS_ERR_ARG, "MPS_Buf_pool_init: way %d is neither MPS_SND nor MPS_RCV", way);
    mps_channel *ch = mps_channel_of(s, comm);
    if (!ch)
        return mps_error(MPS_ERR_COMM, "MPS_Buf_pool_init: the communicator was not made by MPS_Channel_create");
    const mps_topo_link *l = &s->topo.links[ch->link];
    long size = *p_bufsize ? *p_bufsize : l->bufsize;
    long count = *p_bufcount ? *p_bufcount : l->bufcount;
    if (size <= 0 || count <= 0 || size > (1L << 30) || count > (1 << 16))
        return mps_error(MPS_ERR_ARG, "MPS_Buf_pool_init: link '%s': buffer size %ld / count %ld out of range "
                         "(1 B to 1 GiB, 1 to 65536; 0 takes the topology's)", l->name, size, count);
    if (way == MPS_RCV && ch->rcv_pool)
        return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_init: link '%s' already has a receive pool (it takes all "
                         "the channel's messages)", l->name);
    MPS_pool_t p = calloc(1, sizeof(*p));
    if (!p || !(p->bufs = calloc(count, sizeof(*p->bufs)))) {
        free(p);
        return mps_error(MPS_ERR_NOMEM, "MPS_Buf_pool_init: out of memory");
    }
    p->magic = MPS_POOL_MAGIC;
    p->comm = comm;
    p->chan = ch;
    p->way = way;
    p->peer = ch->rrank;
    p->bufsize = (int)size;
    p->bufcount = (int)count;
    p->stride = ((size_t)size + 63) & ~(size_t)63;   /* buffers start on cache lines */
    for (int i = 0; i < p->bufcount; i++) {
        p->bufs[i].req = MPI_REQUEST_NULL;
        p->bufs[i].state = MPS_BUF_FREE;
    }
    p->nat = ch->nat;
    p->next = s->pools;
    s->pools = p;
    s->free_pools = pools_free_all;
    if (p->nat && way == MPS_SND) {
        /* in the channel's arena, on pages of their own (the ownership guard protects pages);
         * a pool the arena has no room for sends by message */
        size_t pg = mps_nat_page(), st = (p->stride + pg - 1) & ~(pg - 1);
        if (mps_nat_arena_alloc(p->nat, st * p->bufcount, p->bufcount, (void **)&p->mem) == MPS_SUCCESS) {
            p->stride = st;
            p->in_arena = 1;
        }
    }
    if (p->nat && way == MPS_RCV && mps_nat_remote(p->nat)) {
        /* RMA path: the buffers it reads hand-offs into, in the registered arena; a pool the
         * arena has no room for receives by message only */
        size_t pg = mps_nat_page(), st = (p->stride + pg - 1) & ~(pg - 1);
        if (mps_nat_arena_alloc(p->nat, st * p->bufcount, p->bufcount, (void **)&p->dep) == MPS_SUCCESS)
            p->stride = st;
        else
            p->dep = NULL;
    }
    if (p->nat && way == MPS_RCV && (!mps_nat_remote(p->nat) || p->dep) &&
        !(p->loans = calloc(count, sizeof(*p->loans)))) {
        pool_free(s, p);
        return mps_error(MPS_ERR_NOMEM, "MPS_Buf_pool_init: out of memory");
    }
    if (!p->in_arena && (rc = s->be->mem_alloc(p, p->stride * p->bufcount, (void **)&p->mem)) != MPS_SUCCESS) {
        p->mem = NULL;
        pool_free(s, p);
        return rc;
    }
    /* hand-offs of the other end's send pools come here */
    if (p->loans && (rc = mps_nat_attach(p)) != MPS_SUCCESS) {
        pool_free(s, p);
        return rc;
    }
    if (way == MPS_RCV) {
        for (int i = 0; i < p->bufcount; i++)
            if ((rc = post(s, p, i)) != MPS_SUCCESS) {
                for (int j = 0; j < i; j++) {
                    int c;
                    s->be->cancel_recv(p, j, &c);
                }
                pool_free(s, p);
                return rc;
            }
        ch->rcv_pool = p;
    }
    *p_bufsize = p->bufsize;
    *p_bufcount = p->bufcount;
    *pool = p;
    return MPS_SUCCESS;
}

/* buffers the application holds: its pool's own and (native receive pool) lent ones */
static int held(MPS_pool_t p)
{
    int n = 0;
    for (int i = 0; i < p->bufcount; i++)
        n += (p->bufs[i].state == MPS_BUF_APP) + (p->loans && p->loans[i].held);
    return n;
}

/* one attempt: MPS_SUCCESS with a buffer, or MPS_EEMPTY */
static int try_take(mps_state *s, MPS_pool_t p, void **buf)
{
    int rc = mps_pool_progress(p);
    if (rc != MPS_SUCCESS)
        return rc;
    int i = -1;
    if (p->way == MPS_SND) {
        for (int j = 0; j < p->bufcount && i < 0; j++)
            if (p->bufs[j].state == MPS_BUF_FREE)
                i = j;
    } else {
        /* the application holds at most bufcount buffers, lent or its pool's own */
        if (held(p) >= p->bufcount)
            return MPS_EEMPTY;
        if (p->loans && mps_nat_pending(p)) {
            int k = mps_nat_take(p);
            *buf = mps_nat_loan_ptr(p, k);
            if (p->loans[k].lost)
                return mps_error(MPS_ERR_TRUNCATE, "MPS_Buf_get: link '%s': a message %d bytes larger than the "
                                 "pool's %d-byte buffers; the buffer holds its first %d bytes (release it)",
                                 link_of(p, s), p->loans[k].lost, p->bufsize, p->bufsize);
            return MPS_SUCCESS;
            return MPS_SUCCESS;
        }
        i = next_in_order(p);
        if (i >= 0 && p->bufs[i].state != MPS_BUF_READY)
            i = -1;
    }
    if (i < 0)
        return MPS_EEMPTY;
    p->bufs[i].state = MPS_BUF_APP;
    *buf = p->mem + p->stride * i;
    if (p->way == MPS_RCV && p->nat)
        mps_nat_msg_taken(p->nat);
    return MPS_SUCCESS;
}

/* seconds < 0: no deadline */
static int get(MPS_pool_t pool, void **buf, double seconds, const char *fn)
{
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    MPS_pool_t p = live_pool(s, pool, fn, &rc);
    if (!p)
        return rc;
    if (!buf)
        return mps_error(MPS_ERR_ARG, "%s: p_buffer is NULL", fn);
    double deadline = seconds >= 0 ? MPI_Wtime() + seconds : 0;
    for (;;) {
        rc = try_take(s, p, buf);
        if (rc != MPS_EEMPTY)
            return rc;
        if (seconds != 0) {
            /* with every buffer in the application's hands nothing can free one: waiting
             * would never end (single-threaded use; see mps.h) */
            int h = held(p);
            if (h >= p->bufcount)
                return mps_error(MPS_ERR_BUSY, "%s: the application holds all %d buffers of the pool of link '%s': "
                                 "release one first (waiting would never end)", fn, h, link_of(p, s));
        }
        if (seconds == 0)
            return mps_error(MPS_EEMPTY, "%s: every buffer of the pool of link '%s' is %s", fn, link_of(p, s),
                             p->way == MPS_SND ? "held by the application or in flight" : "held by the application or still waiting for data");
        if (seconds > 0 && MPI_Wtime() >= deadline)
            return mps_error(MPS_ERR_TIMEOUT, "%s: no buffer of the pool of link '%s' within %g s", fn, link_of(p, s),
                             seconds);
        mps_relax();
    }
}

int MPS_Buf_get(MPS_pool_t pool, void **p_buffer)
{
    return get(pool, p_buffer, -1, "MPS_Buf_get");
}

int MPS_Buf_tryget(MPS_pool_t pool, void **p_buffer)
{
    return get(pool, p_buffer, 0, "MPS_Buf_tryget");
}

int MPS_Buf_get_timeout(MPS_pool_t pool, void **p_buffer, double seconds)
{
    if (!(seconds >= 0))
        return mps_error(MPS_ERR_ARG, "MPS_Buf_get_timeout: timeout %g s is negative", seconds);
    /* 0 would mean "poll": a deadline already passed times out after one attempt */
    return get(pool, p_buffer, seconds > 0 ? seconds : 1e-300, "MPS_Buf_get_timeout");
}

/* the buffer index of an application-owned buffer, or -1 with the error in *rc */
static int owned(mps_state *s, MPS_pool_t *pp, MPS_pool_t pool, const void *buf, const char *fn, int *rc)
{
    MPS_pool_t p = live_pool(s, pool, fn, rc);
    if (!p)
        return -1;
    int i = buf_index(s, p, buf, fn, rc);
    if (i < 0)
        return -1;
    if (i >= p->bufcount) {         /* a lent buffer the application holds */
        *pp = p;
        return i;
    }
    if (p->bufs[i].state != MPS_BUF_APP) {
        *rc = mps_error(MPS_ERR_BUF_NOT_OWNED, "%s: buffer %d (%p) of the pool of link '%s' belongs to the I/O "
                        "system, not to the application (released twice, or never got)", fn, i, buf, link_of(p, s));
        return -1;
    }
    *pp = p;
    return i;
}

int MPS_Buf_release(MPS_pool_t pool, void *buffer)
{
    mps_state *s;
    MPS_pool_t p;
    int rc, i;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if ((i = owned(s, &p, pool, buffer, "MPS_Buf_release", &rc)) < 0)
        return rc;
    if (i >= p->bufcount) {         /* back to the other end's send pool: nothing was copied */
        mps_nat_giveback(p, i - p->bufcount);
        return MPS_SUCCESS;
    }
    if (p->way == MPS_SND) {
        p->bufs[i].state = MPS_BUF_FREE;
        return MPS_SUCCESS;
    }
    return post(s, p, i);       /* the buffer waits for the next message again */
}

int MPS_Buf_send(MPS_pool_t pool, void *buffer, int bytes, int tag)
{
    mps_state *s;
    MPS_pool_t p;
    int rc, i;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if ((i = owned(s, &p, pool, buffer, "MPS_Buf_send", &rc)) < 0)
        return rc;
    if (p->way != MPS_SND)
        return mps_error(MPS_ERR_ARG, "MPS_Buf_send: the pool of link '%s' is a receive pool", link_of(p, s));
    if (bytes < 0 || bytes > p->bufsize)
        return mps_error(MPS_ERR_ARG, "MPS_Buf_send: %d bytes, but the buffers of link '%s' hold %d", bytes,
                         link_of(p, s), p->bufsize);
    if (p->in_arena) {
        /* lent to the other end's receive pool, back when it releases it */
        int done = 0;
        if ((rc = mps_nat_handoff(p, i, bytes, tag, &done)) != MPS_SUCCESS)
            return rc;
        if (done) {
            p->bufs[i].req = MPI_REQUEST_NULL;
            p->bufs[i].state = MPS_BUF_INFLIGHT;
            return MPS_SUCCESS;
        }
    }
    if ((rc = s->be->start_send(p, i, bytes, tag)) != MPS_SUCCESS)
        return rc;
    p->bufs[i].state = MPS_BUF_INFLIGHT;
    p->copied += bytes;     /* the MPI library moves the bytes */
    if (p->nat)
        mps_nat_msg_sent(p->nat);
    return MPS_SUCCESS;
}

int MPS_Buf_received(MPS_pool_t pool, const void *buffer, int *bytes, int *tag)
{
    mps_state *s;
    MPS_pool_t p;
    int rc, i;
    if (!(s = mps_get_state(&rc)))
        return rc;
    if ((i = owned(s, &p, pool, buffer, "MPS_Buf_received", &rc)) < 0)
        return rc;
    if (p->way != MPS_RCV)
        return mps_error(MPS_ERR_ARG, "MPS_Buf_received: the pool of link '%s' is a send pool", link_of(p, s));
    if (i >= p->bufcount) {
        if (bytes)
            *bytes = p->loans[i - p->bufcount].bytes;
        if (tag)
            *tag = p->loans[i - p->bufcount].tag;
        return MPS_SUCCESS;
    }
    if (bytes)
        *bytes = p->bufs[i].bytes;
    if (tag)
        *tag = p->bufs[i].tag;
    return MPS_SUCCESS;
}

int MPS_Buf_pool_finalize(MPS_pool_t pool)
{
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    MPS_pool_t p = live_pool(s, pool, "MPS_Buf_pool_finalize", &rc);
    if (!p)
        return rc;
    if ((rc = mps_pool_progress(p)) != MPS_SUCCESS)
        return rc;
    int app = held(p), inflight = 0, ready = p->loans ? mps_nat_pending(p) : 0;
    for (int i = 0; i < p->bufcount; i++) {
        inflight += p->bufs[i].state == MPS_BUF_INFLIGHT;
        ready += p->bufs[i].state == MPS_BUF_READY;
    }
    if (app)
        return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_finalize: the application holds %d buffer(s) of the pool of "
                         "link '%s' (release them first); the pool is unchanged", app, link_of(p, s));
    if (ready)
        return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_finalize: %d received message(s) on link '%s' not taken by "
                         "MPS_Buf_get; the pool is unchanged", ready, link_of(p, s));
    if (p->way == MPS_SND && inflight)
        return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_finalize: %d send(s) of link '%s' still in flight (the "
                         "receiver has not taken them); the pool is unchanged", inflight, link_of(p, s));
    if (p->way == MPS_RCV) {
        /* no more hand-offs: fails if one was published since the count above */
        if (p->loans && mps_nat_detach(p) != MPS_SUCCESS)
            return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_finalize: a buffer was handed to the pool of link '%s' "
                             "while finalizing; take it with MPS_Buf_get first (the pool is unchanged)",
                             link_of(p, s));
        /* the pre-posted receives are the I/O system's own: stop them; one a message reached
         * meanwhile keeps its data, and the pool stays */
        int landed = 0;
        for (int i = 0; i < p->bufcount; i++) {
            int cancelled = 1;
            if (p->bufs[i].state != MPS_BUF_INFLIGHT)
                continue;
            if ((rc = s->be->cancel_recv(p, i, &cancelled)) != MPS_SUCCESS)
                return rc;
            p->bufs[i].state = cancelled ? MPS_BUF_FREE : MPS_BUF_READY;
            landed += !cancelled;
        }
        if (landed) {
            if (p->loans && (rc = mps_nat_attach(p)) != MPS_SUCCESS)
                return rc;
            for (int i = 0; i < p->bufcount; i++)
                if (p->bufs[i].state == MPS_BUF_FREE && (rc = post(s, p, i)) != MPS_SUCCESS)
                    return rc;
            return mps_error(MPS_ERR_BUSY, "MPS_Buf_pool_finalize: %d message(s) arrived on link '%s' while "
                             "finalizing; take them with MPS_Buf_get first (the pool is unchanged)", landed,
                             link_of(p, s));
        }
    }
    pool_free(s, p);
    return MPS_SUCCESS;
}

int MPS_Pool_counters(MPS_pool_t pool, long long *handoffs, long long *bytes_copied)
{
    mps_state *s;
    int rc;
    if (!(s = mps_get_state(&rc)))
        return rc;
    MPS_pool_t p = live_pool(s, pool, "MPS_Pool_counters", &rc);
    if (!p)
        return rc;
    if (handoffs)
        *handoffs = p->handoffs;
    if (bytes_copied)
        *bytes_copied = p->copied;
    return MPS_SUCCESS;
}
