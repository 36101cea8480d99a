/*
 * MPICH's MTest convention for our MPI programs, which test/check/mpi.test runs through
 * MPICH's runtests: a program passes when it exits 0 and all it printed is rank 0's
 * " No Errors" (" Found N errors" otherwise). What it measured, or which section it is in,
 * it prints only with MPITEST_VERBOSE set (not "0"), MTest's own variable.
 */
#ifndef MTEST_H_INCLUDED
#define MTEST_H_INCLUDED

#include <stdlib.h>
#include <string.h>

static inline int mtest_verbose(void)
{
    const char *v = getenv("MPITEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

#endif
