/*
 * amlapi netmod: the process's netmod state and the fatal error that ends the job naming its
 * cause. Every other file of the glue uses these; this file uses none of them.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_p2p_impl.h"
#include <stdarg.h>

MPIDI_AMLAPI_global_t MPIDI_AMLAPI_global;     /* filled by amlapi_init.c */
MPIDI_AMLAPI_p2p_t MPIDI_AMLAPI_p2p;   /* native point-to-point's queues (amlapi_p2p_init.c) */
MPIDI_AMLAPI_p2p_pvars_t MPIDI_AMLAPI_pv;

/* A malformed packet or a failed transport under a handler: end the job, naming it. */
void MPIDI_AMLAPI_fatal(const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    int n = snprintf(msg, sizeof(msg), "amlapi (rank %d): ", MPIR_Process.rank);
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
    va_end(ap);
    MPIDI_AMLAPI_fault_finalize();      /* this message says it all: no exit report */
    MPID_Abort(NULL, MPI_ERR_INTERN, 1, msg);
    abort();    /* MPID_Abort does not return */
}
