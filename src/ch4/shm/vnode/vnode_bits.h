/*
 * Small helpers shared by vnode and every layer above it (aml, the MPI glue): a copy of a few
 * bytes and the FNV-1a hash. No state, no calls.
 */
#ifndef VNODE_BITS_H_INCLUDED
#define VNODE_BITS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Copies n bytes, up to 64 by fixed-size moves (overlapping at the end): for a small packet or
 * message, a call of memcpy (through the PLT, then its size dispatch) costs more than the
 * copy. */
static inline void vnode_copy_small(void *dst, const void *src, size_t n)
{
    char *d = (char *) dst;
    const char *s = (const char *) src;
    if (n >= 16 && n <= 64) {
        for (size_t i = 0; i + 16 < n; i += 16)
            memcpy(d + i, s + i, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        memcpy(d, s, n);
    }
}

/* 64-bit FNV-1a of n bytes: names and layouts, not a defence against chosen collisions. */
static inline uint64_t vnode_fnv1a(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *) p;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif /* VNODE_BITS_H_INCLUDED */
