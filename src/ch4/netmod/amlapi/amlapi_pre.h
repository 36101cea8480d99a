/*
 * amlapi netmod types that MPICH embeds in its own objects (requests, communicators,
 * datatypes, windows, address vectors, ops, partitioned requests). Included by every MPICH
 * translation unit through netmodpre.h, before MPICH's own types exist: keep it small.
 */
#ifndef AMLAPI_PRE_H_INCLUDED
#define AMLAPI_PRE_H_INCLUDED

/* per-request state of a message sent through the MPIDIG active-message path */
typedef struct {
    int handler_id;
    void *pack_buffer;
} MPIDI_AMLAPI_am_request_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_request_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_comm_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_dt_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_win_t;

/* peers are addressed by their COMM_WORLD rank inside aml: nothing per AV entry */
typedef struct {
    int dummy;
} MPIDI_AMLAPI_addr_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_op_t;

typedef struct {
    int dummy;
} MPIDI_AMLAPI_part_t;

#endif /* AMLAPI_PRE_H_INCLUDED */
