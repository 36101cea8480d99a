/*
 * What the native back end takes from outside before using it: a hand-off descriptor the
 * other end wrote into shared memory, and MPS_ARENA_BYTES. No MPI, so that
 * test/fuzz/fuzz_env.c fuzzes exactly this code.
 */
#ifndef MPS_NATIVE_CHECK_H
#define MPS_NATIVE_CHECK_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MPS_ARENA_MAX (1ull << 40)  /* MPS_ARENA_BYTES above it is a mistake, not a size */

/* A buffer the other end hands off, read once from shared memory: page-aligned offset off and
 * len bytes inside an arena of arena bytes, bytes of data in it. Compared without sums, so no
 * offset near 2^64 wraps into range. */
static inline int mps_nat_desc_ok(size_t arena, size_t page, uint64_t off, uint32_t len,
                                  int32_t bytes)
{
    return page && off <= arena && len <= arena - off && off % page == 0 && bytes >= 0 &&
        (uint32_t)bytes <= len;
}

/* MPS_ARENA_BYTES: a number (decimal, 0x hex or 0 octal, as strtoull reads them) from 0 to
 * MPS_ARENA_MAX, nothing before or after it. Returns 0 and *v, or -1. */
static inline int mps_parse_arena_bytes(const char *s, unsigned long long *v)
{
    char *end;
    if (!s || *s < '0' || *s > '9')    /* no sign, no space: strtoull would take " -1" */
        return -1;
    errno = 0;
    *v = strtoull(s, &end, 0);
    return errno || *end || *v > MPS_ARENA_MAX ? -1 : 0;
}

#endif
