/* The plain-MPI executor of coll_torus schedules: MPI point-to-point only, so the same
 * generators run under any MPI and under SimGrid's SMPI. */
#ifndef CT_MPI_H
#define CT_MPI_H

#include <mpi.h>
#include "coll_torus.h"

/* Runs rank s->rank's schedule on comm (whose rank numbering is the schedule's). Messages are
 * tagged tag_base + channel (so tag_base + CT_MAXCHAN - 1 must be a valid tag, and no other
 * traffic of comm may use those tags meanwhile). sendbuf/recvbuf hold elements of dtype, a
 * contiguous datatype whose size is s->elem_size; sendbuf may equal recvbuf (MPI_IN_PLACE);
 * op is used by reductions (may be MPI_OP_NULL otherwise). Scratch is allocated here.
 * Returns MPI_SUCCESS or the failing call's error code. */
int ct_mpi_run(const ct_sched *s, MPI_Comm comm, int tag_base, const void *sendbuf,
               void *recvbuf, MPI_Datatype dtype, MPI_Op op);

#endif
