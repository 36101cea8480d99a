/* The schedule builder the generators use. A generator writes its rank's steps in program
 * order; the builder derives every dependency from the buffer ranges the steps touch (read
 * after write, write after read, write after write), so steps that touch different data are
 * free to run concurrently, and a generator cannot forget a dependency. */
#ifndef CT_SCHED_INT_H
#define CT_SCHED_INT_H

#include "coll_torus.h"

int ct_sched_init(ct_sched *s, int rank, int nranks, size_t elem_size);
/* each returns the new step's index, or -1 once the builder ran out of memory (then
 * ct_sched_finish reports it); a zero-length reduce or copy adds no step and returns -1, a
 * zero-length message is a step (generators skip empty blocks themselves) */
int ct_send(ct_sched *s, int buf, int64_t off, int64_t len, int peer);
int ct_recv(ct_sched *s, int buf, int64_t off, int64_t len, int peer);
int ct_copy(ct_sched *s, int dbuf, int64_t doff, int sbuf, int64_t soff, int64_t len);
/* right = 0: dst = src op dst; right = 1: dst = dst op src (src may be clobbered) */
int ct_reduce(ct_sched *s, int right, int dbuf, int64_t doff, int sbuf, int64_t soff, int64_t len);
/* the channel of the messages created from now on (0 at first) */
void ct_set_chan(ct_sched *s, int chan);
/* the next step created also depends on step d (d < 0 is ignored) */
void ct_next_dep(ct_sched *s, int d);
/* drop the builder's state; CT_OK or CT_ERR_NOMEM */
int ct_sched_finish(ct_sched *s);

int ct_set_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* near-equal split of n items into k parts: part i is [ct_part_lo(n,k,i), ct_part_lo(n,k,i+1)) */
static inline int64_t ct_part_lo(int64_t n, int64_t k, int64_t i)
{
    return (n / k) * i + (i < n % k ? i : n % k);
}

#endif
