/*
 * The transport interface: what aml's protocols need from whatever moves packets and bytes to
 * a peer. Not part of the API.
 *
 * A transport is chosen per peer (aml_peer_t.tport, set at aml_connect): the most local one
 * that reaches it (aml_tports.h lists them: vnode, on-node FIFOs and single copy, for the
 * other ranks of this node when the embedder configured it; UCX for every other peer and this
 * rank itself). The protocols call only through this table, and setup asks it what a
 * transport offers, so a further transport needs no change in them: its state is its own
 * (aml->tport_state[its slot]); what it cannot do it leaves out of `caps`, and the protocol
 * choice (aml_xfer.c) avoids it for that peer: e.g. a transport with get but no rendezvous of
 * its own gets aml's get-based rendezvous. A transport that cannot send inline refuses every
 * send_inline.
 *
 * The contract, for every transport:
 * - Packets. A packet is a header (hdr_len bytes) and an optional payload (len bytes). The
 *   receiver gets both as they were sent, through the rx function given to init, called
 *   from progress only (rx raises aml->in_dispatch itself while it runs handlers). A
 *   transport keeps the order of each endpoint: UCX does for every send, a rendezvous' RTS
 *   included (UCT queues a send behind the endpoint's pending ones), and vnode's rings are
 *   FIFOs. aml's sequence numbers check it and restore an order briefly lost
 *   (debug_reorder), holding up to AML_STASH_MAX early packets per peer: more means a
 *   misbehaving peer, never a burst of a correct one (aml_tests burst_order). The largest
 *   header is what init reports in *max_hdr.
 * - Buffers. The header and payload of a send belong to the transport until the send
 *   completes (AML_TPORT_DONE on return, or op->done later); send_inline copies at once or
 *   refuses. A rendezvous payload is read by the transport when the receiver takes it. The
 *   AML_TPORT_HEADROOM bytes before every header given to send_inline or send are the
 *   transport's to write, for as long: UCX puts the receiver's token there.
 * - Senders. A transport that knows who sent a packet says so to rx (vnode: the ring's owner;
 *   UCX: the token the packet carries); rx then holds the header to it. A UCX packet without
 *   a token of this process comes from outside the job: rx refuses it unless it is a
 *   CONNECT that aml_dynamic.c accepts.
 * - Completion. An operation returns AML_TPORT_DONE when it completed before returning (then
 *   op->done is never called: the caller completes it), or AML_TPORT_PENDING: then op->done
 *   runs exactly once, later, from progress, with aml->in_dispatch raised (so it may run
 *   handlers but must not progress the transport itself).
 * - Errors are fatal: a transport never fails back to the caller for a send or a data move;
 *   it ends the job through aml_fatal (aml_send_failed for packets) naming the peer, because a
 *   sequence number once taken cannot be given back (aml_send_failed says why). Setup (init,
 *   connect, flush) and registration return an aml status instead.
 * - Threading: one thread at a time per aml_t, as for the API.
 */
#ifndef AML_TPORT_H_INCLUDED
#define AML_TPORT_H_INCLUDED

#include "aml.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void *aml_tport_ep_t;   /* an endpoint (lane) to one peer */
struct aml_peer;                /* aml's state of one peer (aml_impl.h) */
typedef void *aml_tport_memh_t; /* local memory registered with a transport */
typedef void *aml_tport_rkey_t; /* a peer's memory, unpacked from the rkey it sent */

/* A rank's address for one transport, at aml_connect (len 0: it has none) */
typedef struct aml_tport_addr {
    const void *addr;
    size_t len;
} aml_tport_addr_t;

/* An operation that may complete after its call returned (a send, a rendezvous data move).
 * The caller embeds it in its own record, sets the fields the operation reads, and keeps the
 * record until completion; the transport never writes it. */
typedef struct aml_tport_op {
    void (*done) (struct aml_tport_op * op);    /* after AML_TPORT_PENDING: see the contract */
    aml_t *aml;
    int peer;                   /* the peer: errors name it */
    size_t len;                 /* data moves: the bytes to move (a receive checks it) */
    const void *hdr;            /* send: the packet header (an error names its type) */
} aml_tport_op_t;

/* What an operation returns */
enum {
    AML_TPORT_DONE = 0,         /* complete; op->done will not run */
    AML_TPORT_PENDING,          /* op->done runs later, from progress */
    AML_TPORT_REFUSED           /* send_inline only: nothing was sent (no room now, or larger
                                 * than the transport sends inline); send it by send */
};

/* Bytes before a header that the transport may write (see Buffers above) */
#define AML_TPORT_HEADROOM 8

/* connect flags */
#define AML_TPORT_CONN_DYNAMIC 0x1
#define AML_TPORT_CONN_REMOTE  0x2      /* a rank on another host: its failure (dead process,
                                         * host unreachable, found by keepalive) is fatal,
                                         * naming it */

/* send flags */
#define AML_TPORT_SEND_RNDV 0x1 /* the transport's own rendezvous: the payload stays in the
                                 * caller's buffer until the receiver took it (rndv_recv or
                                 * rndv_release); the send completes after that */

/* rx flags, and rx's return value */
#define AML_TPORT_RX_RNDV 0x1   /* data is the transport's rendezvous descriptor, not bytes;
                                 * len is the payload's size */
#define AML_TPORT_RX_KEPT 1     /* rx returns it when it kept that descriptor: the receiver
                                 * calls rndv_recv or rndv_release later (exactly once);
                                 * 0: the transport drops it, and the send completes */

/* Called for every arriving packet, from progress; hdr and data are valid during the call
 * only (a kept rendezvous descriptor stays valid). src: the peer the transport knows sent
 * the packet, which the header must then name; AML_TPORT_SRC_STRANGER: one from outside the
 * job (see Senders above); -1: the header alone says (test harnesses). Returns 0 or
 * AML_TPORT_RX_KEPT. */
#define AML_TPORT_SRC_STRANGER (-2)
typedef int (*aml_tport_rx_fn_t) (aml_t * aml, const void *hdr, size_t hdr_len, void *data,
                                  size_t len, unsigned flags, int64_t src);

/* caps */
#define AML_TPORT_CAP_RNDV 0x1  /* send with AML_TPORT_SEND_RNDV, rndv_recv, rndv_release */
#define AML_TPORT_CAP_GET  0x2  /* get from a peer's registered memory (rkeys) */
#define AML_TPORT_CAP_PUT  0x4  /* put to a peer's registered memory (rkeys) */
#define AML_TPORT_CAP_LOCAL 0x8 /* shared memory on this node: its eager and adaptive packets
                                 * are aml_config.packet_size (what its records hold), the
                                 * other transports' net_packet_size */

typedef struct aml_tport {
    const char *name;           /* in error messages */
    int slot;                   /* its slot (aml_tports.h) */
    unsigned caps;              /* AML_TPORT_CAP_*: the most it offers (see offers) */

    /* -- setup, from aml_init/aml_connect/aml_quiesce/aml_finalize -- */
    /* NULL (always), or: whether aml_init sets it up for cfg, asked before anything is
     * created: 1 yes, 0 no, -1 cfg's settings of it contradict each other (aml_init fails
     * with AML_ERR_INVAL). */
    int (*wanted) (const aml_config_t * cfg);
    /* Creates the transport's state for aml (aml->cfg is set) in aml->tport_state[slot];
     * packets go to rx. *max_hdr: the largest packet header it carries. */
    int (*init) (aml_t * aml, aml_tport_rx_fn_t rx, size_t * max_hdr);
    /* This process's transport address (exchanged by the embedder). */
    int (*address) (aml_t * aml, const void **addr, size_t * len);
    /* NULL, or: an address of this process that reaches it from any host, for processes of
     * other jobs (aml_dynamic.c); as short as the transport can make it. */
    int (*net_address) (aml_t * aml, const void **addr, size_t * len);
    /* NULL (every peer: the transport of last resort), or: whether it reaches rank peer,
     * whose address for it is addr (after attach). */
    bool (*reaches) (aml_t * aml, int peer, const aml_tport_addr_t * addr);
    /* NULL, or: what needs every rank's address, at aml_connect before any connect:
     * addrs[rank] (none for a malformed one: connecting its rank fails later). vnode maps the
     * node's segment here, which every rank of the node has created by now (the embedder's
     * exchange was the barrier), and starts watching its ranks. Errors: why in aml->errmsg. */
    int (*attach) (aml_t * aml, const aml_tport_addr_t * addrs);
    /* NULL, or: aml_connect found that the ranks' settings differ, so attach will not come:
     * release at once what other ranks would attach to (vnode: the segment's name). The
     * aml_t is only finalized after that (the embedder ends the job). */
    void (*abandon) (aml_t * aml);
    /* NULL (caps), or: what it offers every peer it connects, within caps, once attach ran
     * (vnode: get and put only where the node allows single copy). */
    unsigned (*offers) (aml_t * aml);
    /* NULL, or: true and *limit when it sets its peers' eager limit itself (where its own
     * data moves start to beat its packets: aml_senv leaves it alone); else they get aml's. */
    bool (*eager_limit) (aml_t * aml, size_t * limit);
    /* neps endpoints to peer, whose address is addr (lanes: eps[0] carries the sequenced
     * packets, the others adaptive data). AML_TPORT_CONN_DYNAMIC: peer is a process of
     * another job, which may end before this one (its failure marks the peer
     * AML_DYN_FAILED instead of ending this process; flush then ignores it).
     * AML_TPORT_CONN_REMOTE: see there. */
    int (*connect) (aml_t * aml, int peer, const void *addr, aml_tport_ep_t * eps, int neps,
                    unsigned flags);
    /* NULL, or: completes everything sent on ep (a connection still being set up included):
     * AML_TPORT_DONE, or AML_TPORT_PENDING and op->done from progress (peers may need to
     * answer). aml_quiesce flushes every endpoint between its rounds, while every peer still
     * progresses, and forgets the endpoints after the last round: fini releases them. */
    int (*flush) (aml_tport_ep_t ep, aml_tport_op_t * op);
    /* Releases everything init and connect created, endpoints included, without needing a
     * peer (also after a failed init). */
    void (*fini) (aml_t * aml);

    /* -- packets -- */
    /* Sends [pkt, pkt+len) as a header-only packet on p's first endpoint (p->ep; p is
     * &aml->peers[peer]) if the transport can copy it at once: AML_TPORT_DONE, else
     * AML_TPORT_REFUSED. The latency path. */
    int (*send_inline) (aml_t * aml, struct aml_peer * p, const void *pkt, size_t len);
    /* Optional (NULL: not offered): where to write a header-only packet of len bytes for p
     * in place, or NULL when it cannot now (then send_inline it, which keeps the order);
     * commit sends what was written there. Nothing else is called on p in between. Spares
     * the latency path its copy into the transport. */
    void *(*reserve) (aml_t * aml, struct aml_peer * p, size_t len);
    void (*commit) (aml_t * aml, struct aml_peer * p);
    /* Sends op->hdr (hdr_len bytes) and the payload [data, data+len). */
    int (*send) (aml_tport_ep_t ep, aml_tport_op_t * op, size_t hdr_len, const void *data,
                 size_t len, unsigned flags);
    /* Receiver of an AML_TPORT_SEND_RNDV packet: moves its op->len payload bytes into dst. */
    int (*rndv_recv) (aml_t * aml, void *desc, void *dst, aml_tport_op_t * op);
    /* ... or drops them unread (the send completes at the sender as if they were taken). */
    void (*rndv_release) (aml_t * aml, void *desc);

    /* -- memory -- */
    int (*mem_map) (aml_t * aml, void *addr, size_t len, aml_tport_memh_t * memh);
    void (*mem_unmap) (aml_t * aml, aml_tport_memh_t memh);
    /* The bytes a peer needs to reach memh (*buf until rkey_buf_release). */
    int (*rkey_pack) (aml_t * aml, aml_tport_memh_t memh, void **buf, size_t * len);
    void (*rkey_buf_release) (aml_t * aml, void *buf);
    int (*rkey_unpack) (aml_tport_ep_t ep, const void *buf, size_t len, aml_tport_rkey_t * rkey);
    void (*rkey_destroy) (aml_t * aml, aml_tport_rkey_t rkey);
    /* op->len bytes from the peer's raddr into dst (a rendezvous pull, a direct get). */
    int (*get) (aml_tport_ep_t ep, void *dst, uint64_t raddr, aml_tport_rkey_t rkey,
                aml_tport_op_t * op);
    /* op->len bytes from src to the peer's raddr, complete when they are in place there
     * (a rendezvous put, a direct put). */
    int (*put) (aml_tport_ep_t ep, const void *src, uint64_t raddr, aml_tport_rkey_t rkey,
                aml_tport_op_t * op);
    /* NULL, or: 1 when get and put on ep are carried out in software by the peer's progress
     * (no RDMA under them), else 0. */
    int (*rma_soft) (aml_tport_ep_t ep);
    /* NULL (AML_ERR_NOT_SUPPORTED), or: len bytes at raddr in p's memory into dst, done when
     * it returns, with no key (aml_peer_read): AML_OK, or AML_ERR_NOT_SUPPORTED where this
     * node does not allow it. A failed copy is fatal, naming the peer. */
    int (*read) (aml_t * aml, struct aml_peer * p, void *dst, uint64_t raddr, size_t len);

    /* -- progress -- */
    /* One pass: delivers arrivals (rx) and completions (op->done); returns the events. */
    int (*progress) (aml_t * aml);
    /* Interrupt mode: AML_OK when nothing is pending and the event fd will wake a sleeper,
     * AML_ERR_STATE when events are pending, else AML_ERR_TRANSPORT. */
    int (*arm) (aml_t * aml);
    int (*event_fd) (aml_t * aml, int *fd);

    /* -- environment -- */
    /* NULL, or: the value of aml_qenv's query q when q is one of its own (its counters):
     * AML_OK; else AML_ERR_INVAL. Asked whether or not it is in use (then its counters are
     * 0). */
    int (*query) (aml_t * aml, int q, int64_t * val);
} aml_tport_t;

#endif /* AML_TPORT_H_INCLUDED */
