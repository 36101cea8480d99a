/*
 * Settings from the environment: an integer in a range, or the program stops naming the
 * variable (the callers say so). No MPI, so that test/fuzz/fuzz_env.c fuzzes exactly this code.
 */
#ifndef OV_ENV_H
#define OV_ENV_H

#include <errno.h>
#include <stdlib.h>

/* v is a decimal integer from lo to hi (an optional sign, digits, nothing else): returns 0 and
 * *x, or -1. */
static inline int ov_parse_long(const char *v, long lo, long hi, long *x)
{
    char *end;
    const char *d = v + (*v == '+' || *v == '-');
    if (*d < '0' || *d > '9')   /* no space: strtol would skip it */
        return -1;
    errno = 0;
    *x = strtol(v, &end, 10);
    return end == v || *end || errno == ERANGE || *x < lo || *x > hi ? -1 : 0;
}

#endif
