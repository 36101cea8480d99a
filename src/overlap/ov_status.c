/* Statuses of deferred receives (MPI_Recv, MPI_Sendrecv, MPI_Sendrecv_replace with a status).
 *
 * The caller may read its status as soon as the call returns, but a deferred receive only
 * knows it at completion. Its public fields are known earlier when the receive names its
 * source and tag (no wildcard): MPI_SOURCE and MPI_TAG are exactly those. What is not known is
 * the count (a message may be shorter than the buffer) and the cancelled flag, and those are
 * hidden fields a portable program reads only through MPI: MPI_Get_count, MPI_Get_elements(_x)
 * and MPI_Test_cancelled, which the library wraps (ov_mpi.c). So the status is filled at once
 * with the source and tag and, as its count, a cookie (COOKIE_BASE + a sequence number, set
 * with MPI_Status_set_elements_x, far above any real message size). When one of those calls
 * reads a status carrying a cookie, the receive completes first if still in flight (it waits,
 * as a touch of its buffer would) and the call reads a copy holding the real count: the
 * answer is the one the blocking call would have given. Finished receives' counts are kept
 * in a ring, by sequence number, so a status copied or kept and read later still resolves.
 * Receives with MPI_ANY_SOURCE or MPI_ANY_TAG and a status stay blocking (ov_mpi.c): their
 * public fields are unknown until the message matches.
 *
 * The cookie is in the status's content, not tied to its address: struct copies work. The
 * caller's status is written only during its own call, never later (it may be on a stack
 * frame that is gone). A program that reads the hidden count fields directly (not portable)
 * would see the cookie. Recording runs from the fault handler too: no allocation. */
#define _GNU_SOURCE
#include "ov.h"

#include <stdlib.h>

#define OV_FIN 4096     /* finished receives remembered: a status older than that is lost */
#define COOKIE_BASE ((MPI_Count)1 << 60)

static struct fin {
    unsigned long long seq;
    MPI_Count bytes;
    int cancelled;
} fin[OV_FIN];
static unsigned long long next_seq;

unsigned long long ov_status_provisional(MPI_Status *st, int src, int tag)
{
    unsigned long long s = ++next_seq;
    st->MPI_SOURCE = src;
    st->MPI_TAG = tag;
    PMPI_Status_set_elements_x(st, MPI_BYTE, COOKIE_BASE + (MPI_Count)s);
    PMPI_Status_set_cancelled(st, 0);
    ov.status_any = 1;
    return s;
}

void ov_status_fill(MPI_Status *dst, const MPI_Status *real)
{
    /* field by field: MPI_ERROR is not the receive's to set (MPI_Recv leaves it alone) */
    MPI_Count c = 0;
    int canc = 0;
    PMPI_Get_elements_x(real, MPI_BYTE, &c);
    PMPI_Test_cancelled(real, &canc);
    dst->MPI_SOURCE = real->MPI_SOURCE;
    dst->MPI_TAG = real->MPI_TAG;
    PMPI_Status_set_elements_x(dst, MPI_BYTE, c);
    PMPI_Status_set_cancelled(dst, canc);
}

void ov_status_record(unsigned long long seq, const MPI_Status *real)
{
    struct fin *f = &fin[seq % OV_FIN];
    MPI_Count c = 0;
    int canc = 0;
    PMPI_Get_elements_x(real, MPI_BYTE, &c);
    PMPI_Test_cancelled(real, &canc);
    f->seq = seq;
    f->bytes = c;
    f->cancelled = canc;
}

unsigned long long ov_status_seq(const MPI_Status *st)
{
    if (!ov.status_any || !st || st == MPI_STATUS_IGNORE)
        return 0;
    MPI_Count c = 0;
    if (PMPI_Get_elements_x(st, MPI_BYTE, &c) != MPI_SUCCESS || c <= COOKIE_BASE ||
        c > COOKIE_BASE + (MPI_Count)next_seq)
        return 0;
    return (unsigned long long)(c - COOKIE_BASE);
}

/* The caller completed the receive first (ov_complete_status): its count is recorded */
const MPI_Status *ov_status_resolve(unsigned long long seq, const MPI_Status *st, MPI_Status *tmp)
{
    struct fin *f = &fin[seq % OV_FIN];
    if (f->seq != seq) {
        static const char m[] = "mpioverlap: a status was read after more than 4096 later deferred "
                                "receives with statuses; its count is no longer known\n";
        ov_say(m, sizeof m - 1);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    *tmp = *st;
    PMPI_Status_set_elements_x(tmp, MPI_BYTE, f->bytes);
    PMPI_Status_set_cancelled(tmp, f->cancelled);
    return tmp;
}
