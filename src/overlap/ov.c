/* What every part of the library shares: its state (ov.h says why plain globals), the clock,
 * and a message to stderr from any context. The lowest layer: it calls nothing of the library. */
#define _GNU_SOURCE
#include "ov.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct ov_state ov;
__thread int ov_in_lib;
__thread int ov_is_owner;
volatile unsigned ov_tab_seq;

long long ov_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void ov_say(const char *msg, size_t len)
{
    /* the system call itself: async-signal-safe, no allocation. Our write() (ov_sys.c) would
     * only pass it on: every caller is inside the library or on a thread other than the owner. */
    if (syscall(SYS_write, 2, msg, len) < 0) { /* nothing better to do */ }
}
