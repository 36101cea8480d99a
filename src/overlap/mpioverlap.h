/* mpioverlap.h: compile-time injection of libmpioverlap (Natvig and Elster 2006, §2.2's overriding
 * mpi.h).
 *
 *   mpicc -include mpioverlap.h prog.c -L$PREFIX/lib -Wl,-rpath,$PREFIX/lib -lmpioverlap
 * or the wrapper: mpioverlapcc prog.c (same thing, with $MPICC or mpicc underneath).
 *
 * The calls the library converts are renamed to its own entry points, so they reach it even
 * where MPI is linked statically or the symbol would otherwise bind elsewhere; every other
 * call it wraps (completion before collectives, system calls, sigaction) binds to it by link
 * order, libmpioverlap coming before libmpi and libc. */
#ifndef MPIOVERLAP_H
#define MPIOVERLAP_H
#include <mpi.h>
#ifdef __cplusplus
extern "C" {
#endif
int mpioverlap_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm);
int mpioverlap_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                    MPI_Comm comm, MPI_Status *status);
int mpioverlap_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                        int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        int source, int recvtag, MPI_Comm comm, MPI_Status *status);
#ifdef __cplusplus
}
#endif
#define MPI_Send mpioverlap_Send
#define MPI_Recv mpioverlap_Recv
#define MPI_Sendrecv mpioverlap_Sendrecv
#define MPIOVERLAP_COMPILED_IN 1
#endif
