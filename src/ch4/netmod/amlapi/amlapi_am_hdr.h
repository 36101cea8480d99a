/*
 * The checks of an MPIDIG header a peer sent, before MPIDIG reads it (amlapi_am.c): how many
 * bytes its handler reads, and what the receiver may allocate for it. No MPICH header, so
 * that test/fuzz/fuzz_mpidig_hdr.c fuzzes exactly this code.
 */
#ifndef AMLAPI_AM_HDR_H_INCLUDED
#define AMLAPI_AM_HDR_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* What an MPIDIG handler reads of its header: the struct it casts the header to and, for the
 * headers that carry more behind that struct, the 4- or 8-byte signed field that says how
 * much (var_at + var_size <= fixed). */
typedef struct {
    const char *name;
    uint16_t fixed;             /* sizeof the header struct */
    uint16_t var_at;            /* offset of the length of what follows it, if var_size */
    uint8_t var_size;           /* 0, 4 (int) or 8 (MPI_Aint) */
} MPIDI_AMLAPI_am_hdr_desc_t;

/* The bytes d's handler reads of a len-byte header hdr, in *need; returns 0 when hdr holds
 * them, 1 when it is shorter, -1 when the length it carries is negative or above limit (then
 * *extra is that length). The length field is read only when the fixed part is there. */
static inline int MPIDI_AMLAPI_am_hdr_need(const MPIDI_AMLAPI_am_hdr_desc_t * d, const char *hdr,
                                           size_t len, size_t limit, size_t * need,
                                           int64_t * extra)
{
    *need = d->fixed;
    *extra = 0;
    if (len < *need)
        return 1;
    if (d->var_size == 4) {
        int32_t v;
        memcpy(&v, hdr + d->var_at, sizeof(v));
        *extra = v;
    } else if (d->var_size == 8) {
        int64_t v;
        memcpy(&v, hdr + d->var_at, sizeof(v));
        *extra = v;
    }
    if (*extra < 0 || (uint64_t) * extra > limit)
        return -1;
    *need += (size_t) *extra;
    return len < *need;
}

/* Bytes for a record of rec bytes, then a header of hlen bytes rounded up to 8, then msg_len
 * data bytes, in *n; returns 0, or 1 when a peer's length makes that overflow. */
static inline int MPIDI_AMLAPI_am_alloc_size(size_t rec, size_t hlen, size_t msg_len, size_t * n)
{
    size_t h;
    if (__builtin_add_overflow(hlen, 7, &h))
        return 1;
    h &= ~(size_t) 7;
    return __builtin_add_overflow(rec, h, n) || __builtin_add_overflow(*n, msg_len, n);
}

#endif /* AMLAPI_AM_HDR_H_INCLUDED */
