/* libFuzzer target: what the companion libraries take from the environment and from the other
 * end of a channel before using it. The first byte picks the parser:
 *   0  libmpioverlap's integer settings (src/overlap/ov_env.h), checked against a reference
 *      reading of the same rule (optional sign, decimal digits, nothing else, in range);
 *   1  MPS_ARENA_BYTES (src/mps/native_check.h): accepted only as a number that starts with a
 *      digit, read whole, at most MPS_ARENA_MAX;
 *   2  a native hand-off descriptor (native_check.h): accepted only when its buffer lies
 *      inside the arena, page-aligned, its data inside the buffer; then every byte of it is
 *      touched in an arena of exactly that size (AddressSanitizer stops on one outside). */
#include "ov_env.h"
#include "native_check.h"
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the rule of ov_parse_long, written the other way: digit by digit, overflow-checked */
static int reference_long(const char *s, long lo, long hi, long *x)
{
    int neg = *s == '-';
    long v = 0;
    s += *s == '+' || *s == '-';
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || __builtin_mul_overflow(v, 10, &v) ||
            (neg ? __builtin_sub_overflow(v, *s - '0', &v) : __builtin_add_overflow(v, *s - '0', &v)))
            return -1;
    }
    if (v < lo || v > hi)
        return -1;
    *x = v;
    return 0;
}

static void check_ov(const char *s, const uint8_t *data, size_t size)
{
    static const long bounds[][2] = { {0, INT_MAX}, {34, 64}, {LONG_MIN, LONG_MAX}, {-5, 5} };
    const long *b = bounds[size ? data[0] % 4 : 0];
    long x = 0, y = 0;
    int rc = ov_parse_long(s, b[0], b[1], &x), ref = reference_long(s, b[0], b[1], &y);
    if (rc != ref || (rc == 0 && x != y))
        abort();
}

static void check_arena(const char *s)
{
    unsigned long long v;
    if (mps_parse_arena_bytes(s, &v) == 0 && (v > MPS_ARENA_MAX || *s < '0' || *s > '9' ||
                                              strchr(s, '-') || strchr(s, ' ')))
        abort();
}

static void check_desc(const uint8_t *data, size_t size)
{
    uint64_t arena, page, off;
    uint32_t len;
    int32_t bytes;
    volatile char sink = 0;
    if (size < 32)
        return;
    memcpy(&arena, data, 8);
    memcpy(&page, data + 8, 8);
    memcpy(&off, data + 16, 8);
    memcpy(&len, data + 24, 4);
    memcpy(&bytes, data + 28, 4);
    arena %= 1 << 20;           /* a test arena; the check itself takes any size */
    page = (uint64_t) 1 << (page % 17);
    if (!mps_nat_desc_ok((size_t) arena, (size_t) page, off, len, bytes))
        return;
    if (off % page || off > arena || (uint64_t) len > arena - off || bytes < 0 ||
        (uint32_t) bytes > len)
        abort();
    char *a = malloc(arena ? arena : 1);
    if (!a)
        return;
    memset(a, 1, arena);
    for (uint64_t i = 0; i < len; i++)
        sink ^= a[off + i];
    free(a);
    (void) sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[64];
    size_t n;
    if (size < 1)
        return 0;
    if (data[0] % 3 == 2) {
        check_desc(data + 1, size - 1);
        return 0;
    }
    n = size - 1 < sizeof(s) - 1 ? size - 1 : sizeof(s) - 1;
    memcpy(s, data + 1, n);
    s[n] = 0;
    if (data[0] % 3 == 0)
        check_ov(s, data, size);
    else
        check_arena(s);
    return 0;
}
