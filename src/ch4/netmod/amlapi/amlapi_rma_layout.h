/*
 * amlapi netmod: the layout of a derived target datatype as a native RMA message carries it
 * (amlapi_rma_am.c), and its checks at the target. A peer's description of memory decides
 * where the target writes, so it is a bounded list of blocks the target validates whole,
 * never a datatype the target rebuilds from the peer's bytes:
 *
 *     wire:  int64 extent, uint32 n, uint32 0, then n x (int64 disp, uint64 len)
 *
 * One element of the datatype is the n blocks [disp, disp + len) in that order; element i
 * starts i * extent bytes after the first. Every number is checked before it is used, with
 * overflow-checked arithmetic: n at most MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS and exactly what the
 * length says, every len a positive multiple of the basic element's size and at most 2^40,
 * every disp and the extent within +-2^60, and the span of count elements, [lo, hi) from the
 * element's start, computed without wrapping. The caller checks that span against its window
 * (MPIDI_AMLAPI_layout_span gives it) before touching memory.
 *
 * Plain C with no MPICH header, so that the unit tests and the fuzz target (test/fuzz) build
 * it on its own.
 */
#ifndef AMLAPI_RMA_LAYOUT_H_INCLUDED
#define AMLAPI_RMA_LAYOUT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* what fits in aml's largest user header (1024 bytes) after the request header */
#define MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS 56
#define MPIDI_AMLAPI_LAYOUT_LIMIT ((int64_t) 1 << 60)   /* |disp|, |extent| */
#define MPIDI_AMLAPI_LAYOUT_MAX_LEN ((uint64_t) 1 << 40)        /* len, element size, count */

typedef struct {
    int64_t disp;
    uint64_t len;
} MPIDI_AMLAPI_block_t;

typedef struct {
    int64_t extent;
    uint32_t n;
    uint32_t pad;
} MPIDI_AMLAPI_layout_wire_t;

/* a checked layout, as the target keeps it (in a datatype slot, shared by the operations
 * that wait for a lock) */
typedef struct {
    int refs;
    uint32_t n;
    int64_t extent;
    int64_t lo, hi;             /* one element's bytes: within [lo, hi) of its start */
    uint64_t size;              /* bytes of one element */
    MPIDI_AMLAPI_block_t b[];
} MPIDI_AMLAPI_layout_t;

static inline size_t MPIDI_AMLAPI_layout_wire_len(uint32_t n)
{
    return sizeof(MPIDI_AMLAPI_layout_wire_t) + (size_t) n * sizeof(MPIDI_AMLAPI_block_t);
}

/* Parses and checks len bytes at wire (any alignment) for elements of bsize bytes. Returns
 * NULL and a new layout (one reference, free with MPIDI_AMLAPI_layout_release) in *out, or
 * what is wrong (*out NULL). "out of memory" is the one answer that is not the peer's fault. */
static inline const char *MPIDI_AMLAPI_layout_parse(const void *wire, size_t len, uint64_t bsize,
                                                    MPIDI_AMLAPI_layout_t ** out)
{
    MPIDI_AMLAPI_layout_wire_t w;
    MPIDI_AMLAPI_layout_t *l;
    const char *blocks = (const char *) wire + sizeof(w);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    uint64_t size = 0;

    *out = NULL;
    if (bsize == 0 || bsize > 64)
        return "basic element size out of range";
    if (len < sizeof(w))
        return "layout shorter than its header";
    memcpy(&w, wire, sizeof(w));
    if (w.n == 0 || w.n > MPIDI_AMLAPI_LAYOUT_MAX_BLOCKS || w.pad != 0)
        return "block count out of range";
    if (len != MPIDI_AMLAPI_layout_wire_len(w.n))
        return "layout length disagrees with its block count";
    if (w.extent > MPIDI_AMLAPI_LAYOUT_LIMIT || w.extent < -MPIDI_AMLAPI_LAYOUT_LIMIT)
        return "extent out of range";
    l = malloc(sizeof(*l) + (size_t) w.n * sizeof(l->b[0]));
    if (!l)
        return "out of memory";
    memcpy(l->b, blocks, (size_t) w.n * sizeof(l->b[0]));
    for (uint32_t i = 0; i < w.n; i++) {
        const MPIDI_AMLAPI_block_t *b = &l->b[i];
        int64_t end;
        if (b->len == 0 || b->len > MPIDI_AMLAPI_LAYOUT_MAX_LEN || b->len % bsize ||
            b->disp > MPIDI_AMLAPI_LAYOUT_LIMIT || b->disp < -MPIDI_AMLAPI_LAYOUT_LIMIT) {
            free(l);
            return "block out of range";
        }
        end = b->disp + (int64_t) b->len;       /* |disp| <= 2^60, len <= 2^40: no wrap */
        lo = b->disp < lo ? b->disp : lo;
        hi = end > hi ? end : hi;
        size += b->len;         /* at most 56 * 2^40 */
    }
    if (size > MPIDI_AMLAPI_LAYOUT_MAX_LEN) {
        free(l);
        return "element size out of range";
    }
    l->refs = 1;
    l->n = w.n;
    l->extent = w.extent;
    l->lo = lo;
    l->hi = hi;
    l->size = size;
    *out = l;
    return NULL;
}

static inline void MPIDI_AMLAPI_layout_release(MPIDI_AMLAPI_layout_t * l)
{
    if (l && --l->refs == 0)
        free(l);
}

/* The bytes count elements touch, [*lo, *hi) from the first element's start, and the data
 * they hold (*bytes, at most 2^40: elements may overlap); NULL, or what is wrong. count 0
 * touches nothing (*lo == *hi == 0). */
static inline const char *MPIDI_AMLAPI_layout_span(const MPIDI_AMLAPI_layout_t * l,
                                                   uint64_t count, int64_t * lo, int64_t * hi,
                                                   uint64_t * bytes)
{
    int64_t reach;
    *lo = *hi = 0;
    *bytes = 0;
    if (count > MPIDI_AMLAPI_LAYOUT_MAX_LEN)
        return "element count out of range";
    if (count == 0)
        return NULL;
    /* |extent| <= 2^60 times count <= 2^40 may exceed int64: checked */
    if (__builtin_mul_overflow((int64_t) (count - 1), l->extent, &reach) ||
        __builtin_mul_overflow(count, l->size, bytes) || *bytes > MPIDI_AMLAPI_LAYOUT_MAX_LEN)
        return "span out of range";
    if (__builtin_add_overflow(l->lo, reach < 0 ? reach : 0, lo) ||
        __builtin_add_overflow(l->hi, reach > 0 ? reach : 0, hi))
        return "span out of range";
    return NULL;
}

/* [off + lo, off + hi) as absolute offsets (*a, *b), 0 <= a < b; NULL, or what is wrong.
 * off is at most 2^62, so that base + off, where element 0 starts, wraps no address. */
static inline const char *MPIDI_AMLAPI_layout_place(uint64_t off, int64_t lo, int64_t hi,
                                                    uint64_t * a, uint64_t * b)
{
    int64_t sa, sb;
    if (off > (uint64_t) 1 << 62 || hi <= lo ||
        __builtin_add_overflow((int64_t) off, lo, &sa) ||
        __builtin_add_overflow((int64_t) off, hi, &sb) || sa < 0)
        return "span out of range";
    *a = (uint64_t) sa;
    *b = (uint64_t) sb;
    return NULL;
}

/* Where block j of element i starts: base + i * extent + disp, in integer arithmetic, as
 * base (element 0's start) may lie outside the window when the span was checked to lie in
 * it (a negative displacement, a negative extent); the sum does. */
static inline char *MPIDI_AMLAPI_layout_at(const MPIDI_AMLAPI_layout_t * l, char *base,
                                           uint64_t i, uint32_t j)
{
    return (char *) ((uintptr_t) base + (uintptr_t) ((int64_t) i * l->extent + l->b[j].disp));
}

/* count elements at base to and from packed data; the span was checked */
static inline void MPIDI_AMLAPI_layout_scatter(const MPIDI_AMLAPI_layout_t * l, uint64_t count,
                                               char *base, const char *data)
{
    for (uint64_t i = 0; i < count; i++)
        for (uint32_t j = 0; j < l->n; j++) {
            memcpy(MPIDI_AMLAPI_layout_at(l, base, i, j), data, l->b[j].len);
            data += l->b[j].len;
        }
}

static inline void MPIDI_AMLAPI_layout_gather(const MPIDI_AMLAPI_layout_t * l, uint64_t count,
                                              char *base, char *data)
{
    for (uint64_t i = 0; i < count; i++)
        for (uint32_t j = 0; j < l->n; j++) {
            memcpy(data, MPIDI_AMLAPI_layout_at(l, base, i, j), l->b[j].len);
            data += l->b[j].len;
        }
}

#endif /* AMLAPI_RMA_LAYOUT_H_INCLUDED */
