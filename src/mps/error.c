/* Error reporting: every MPS call returns a code and leaves its detail, naming what to
 * change, in a per-thread string. The lowest layer: it calls nothing of MPS. */
#include "mps_impl.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char detail[1024];

int mps_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return code;
}

int mps_mpi_error(const char *call, int mpi_rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(mpi_rc, msg, &len);
    return mps_error(MPS_ERR_MPI, "%s failed: %s", call, msg);
}

const char *MPS_Error_detail(void)
{
    return detail;
}

const char *MPS_Error_string(int code)
{
    static const char *const s[] = {
        [MPS_SUCCESS] = "success",
        [MPS_EEMPTY] = "no buffer available now (EEMPTY)",
        [MPS_ERR_TIMEOUT] = "timed out",
        [MPS_ERR_ARG] = "invalid argument",
        [MPS_ERR_TOPOLOGY] = "topology error",
        [MPS_ERR_NAME] = "unknown or mismatched process or link name",
        [MPS_ERR_MEDIUM] = "medium not provided by this back end",
        [MPS_ERR_POOL] = "not a live pool",
        [MPS_ERR_BUF_FOREIGN] = "buffer of another pool",
        [MPS_ERR_BUF_UNKNOWN] = "not a pool buffer",
        [MPS_ERR_BUF_NOT_OWNED] = "buffer not owned by the application (released twice?)",
        [MPS_ERR_BUSY] = "transfers in flight or buffers held by the application",
        [MPS_ERR_COMM] = "not an MPS channel communicator",
        [MPS_ERR_MPI] = "MPI call failed",
        [MPS_ERR_NOMEM] = "out of memory",
        [MPS_ERR_TRUNCATE] = "message larger than the pool's buffers",
    };
    return code >= 0 && code <= MPS_ERR_LAST ? s[code] : "unknown MPS error code";
}
