/*
 * Preloaded by maint/test-apps into every ScaLAPACK tester it runs: sets the EST argument of
 * ScaLAPACK's p?lacon to zero before the library's own routine runs. Remove it (and its use in
 * maint/test-apps) once Debian ships ScaLAPACK 2.2.3 or later.
 *
 * The bug, in ScaLAPACK 2.2.1 (Debian 12's libscalapack-mpich2.2 and -openmpi2.2):
 * p?lacon estimates a distributed matrix's 1-norm by reverse communication, the caller
 * calling it again after each product until KASE comes back 0 with the estimate in EST. On
 * every entry it copies EST into the estimate it keeps between calls, and after the second
 * product compares the new estimate with that copy to decide whether to iterate again. But
 * EST is an output argument, and its callers in the iterative refinement (p?gerfs, LU;
 * p?porfs, Cholesky) leave it uninitialised: each rank of a process column compares
 * whatever its stack held, the column's ranks can take different branches, and they wait in
 * different BLACS collectives for good. The LU and Cholesky testers (x?lu, x?llt) hang
 * intermittently that way on every MPI: ours in both modes, Debian's MPICH, Open MPI.
 *
 * Upstream: Reference-ScaLAPACK/scalapack issue #121, "LU, LLT tests deadlocks and fails"
 * (reported on Debian 12 with Open MPI), fixed by pull request #122, "Fix uninitialized EST
 * in Placon" (commit aed609a: EST is set to zero on entry to all four p?lacon), first
 * released in ScaLAPACK 2.2.3. This file does the same from outside the library, on every
 * call as the fixed routine does.
 *
 * Fortran passes every argument by reference, and p?lacon has no CHARACTER argument (so no
 * hidden lengths): for the real routines EST is the 11th of 12 arguments
 *   (N, V, IV, JV, DESCV, X, IX, JX, DESCX, ISGN, EST, KASE),
 * for the complex ones, which take no ISGN, the 10th of 11. EST is REAL in ps/pc and DOUBLE
 * PRECISION in pd/pz. The library's routine is the next definition after this one
 * (dlsym(RTLD_NEXT)); a process that does not load ScaLAPACK never calls these.
 *
 * Build: gcc -shared -fPIC -O2 -Wall -Werror -o scalapack_lacon_est.so scalapack_lacon_est.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void real_lacon_fn(void *n, void *v, void *iv, void *jv, void *descv, void *x, void *ix,
                           void *jx, void *descx, void *isgn, void *est, void *kase);
typedef void cplx_lacon_fn(void *n, void *v, void *iv, void *jv, void *descv, void *x, void *ix,
                           void *jx, void *descx, void *est, void *kase);

/* the library's definition of NAME; a preload without ScaLAPACK behind it is a setup error */
static void *next_definition(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        fprintf(stderr, "scalapack_lacon_est: no %s after this library (%s)\n", name, dlerror());
        abort();
    }
    return fn;
}

#define REAL_LACON(name, est_type)                                                          \
    void name(void *n, void *v, void *iv, void *jv, void *descv, void *x, void *ix, void *jx, \
              void *descx, void *isgn, est_type *est, void *kase)                           \
    {                                                                                       \
        static real_lacon_fn *lib;                                                          \
        if (!lib)                                                                           \
            lib = (real_lacon_fn *) next_definition(#name);                                 \
        *est = 0;                                                                           \
        lib(n, v, iv, jv, descv, x, ix, jx, descx, isgn, est, kase);                        \
    }

#define CPLX_LACON(name, est_type)                                                          \
    void name(void *n, void *v, void *iv, void *jv, void *descv, void *x, void *ix, void *jx, \
              void *descx, est_type *est, void *kase)                                       \
    {                                                                                       \
        static cplx_lacon_fn *lib;                                                          \
        if (!lib)                                                                           \
            lib = (cplx_lacon_fn *) next_definition(#name);                                 \
        *est = 0;                                                                           \
        lib(n, v, iv, jv, descv, x, ix, jx, descx, est, kase);                              \
    }

/* prototypes, for -Wmissing-prototypes builds */
void pslacon_(void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
              float *, void *);
void pdlacon_(void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,
              double *, void *);
void pclacon_(void *, void *, void *, void *, void *, void *, void *, void *, void *, float *,
              void *);
void pzlacon_(void *, void *, void *, void *, void *, void *, void *, void *, void *, double *,
              void *);

REAL_LACON(pslacon_, float)
REAL_LACON(pdlacon_, double)
CPLX_LACON(pclacon_, float)
CPLX_LACON(pzlacon_, double)
