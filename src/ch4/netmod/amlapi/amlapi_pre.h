/*
 * amlapi netmod types that MPICH embeds in its own objects (requests, communicators,
 * datatypes, windows, address vectors, ops, partitioned requests). Included by every MPICH
 * translation unit through netmodpre.h, before MPICH's own types exist: keep it small.
 */
#ifndef AMLAPI_PRE_H_INCLUDED
#define AMLAPI_PRE_H_INCLUDED

#include <stdint.h>

/* per-request state of a message sent through the MPIDIG active-message path */
typedef struct {
    int handler_id;
    void *pack_buffer;
} MPIDI_AMLAPI_am_request_t;

struct MPIR_Request;
struct MPIDI_AMLAPI_ue;

/* per-request state of native point-to-point (amlapi_p2p_impl.h) */
typedef struct {
    struct MPIR_Request *next, *prev;   /* posted-receive queue */
    void *buf;                  /* receive: the user's buffer */
    MPI_Aint count;
    MPI_Datatype datatype;
    int rank;                   /* receive: source to match (MPI_ANY_SOURCE) */
    int tag;                    /* receive: tag to match (MPI_ANY_TAG) */
    int context_id;
    int flags;                  /* MPIDI_AMLAPI_RF_* */
    int peer;                   /* send: destination's aml peer index (cancel) */
    void *pack_buf;             /* send: packed data; receive: staging buffer */
    uint64_t msg_id;            /* send: the message's id at the receiver */
    struct MPIDI_AMLAPI_ue *ue; /* mprobe: the matched early arrival */
} MPIDI_AMLAPI_request_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_comm_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_dt_t;

struct MPIDI_AMLAPI_win;

/* per window: amlapi_win.h's state (direct operations, on-node shared-memory RMA), or NULL
 * when every operation is MPIDIG's. A pointer, so that the state can change without every
 * file of MPICH recompiling. */
typedef struct {
    struct MPIDI_AMLAPI_win *w;
} MPIDI_AMLAPI_win_t;

/* per AV entry: the aml peer index of a process of another job (AV tables above 0; those
 * of COMM_WORLD are addressed by their rank and leave it unused) */
typedef struct {
    int peer;
} MPIDI_AMLAPI_addr_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_op_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_part_t;

#endif /* AMLAPI_PRE_H_INCLUDED */
