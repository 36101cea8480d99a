/*
 * amlapi netmod: checking the CVARs at init. Every integer CVAR against its range
 * (amlapi_cvar_range.h), and a string CVAR against its choices; either names the variable in
 * MPI_Init's error.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_cvar_range.h"

static const struct {
    const char *name;
    const int *value;
    int lo, hi, zero;
} ranges[] = {
#define ROW(n, lo, hi, zero) { "MPIR_CVAR_" #n, &MPIR_CVAR_##n, lo, hi, zero },
    MPIDI_AMLAPI_CVAR_RANGES(ROW)
#undef ROW
};

int MPIDI_AMLAPI_cvar_check(void)
{
    int mpi_errno = MPI_SUCCESS;
    char buf[80];
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        int v = *ranges[i].value;
        if ((v == 0 && ranges[i].zero) || (v >= ranges[i].lo && v <= ranges[i].hi))
            continue;
        if (ranges[i].hi == INT_MAX)
            snprintf(buf, sizeof(buf), "%d (must be %s%d or more)", v,
                     ranges[i].zero ? "0 or " : "", ranges[i].lo);
        else
            snprintf(buf, sizeof(buf), "%d (must be %s%d to %d)", v,
                     ranges[i].zero ? "0 or " : "", ranges[i].lo, ranges[i].hi);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s",
                             ranges[i].name, buf);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_cvar_choice(const char *name, const char *value, const char *const *choices,
                             int *index)
{
    int mpi_errno = MPI_SUCCESS;
    char buf[160];
    size_t n = 0;
    if (!value)
        value = choices[0];     /* unset: the default, which comes first */
    for (int i = 0; choices[i]; i++)
        if (!strcmp(value, choices[i])) {
            *index = i;
            return MPI_SUCCESS;
        }
    n = snprintf(buf, sizeof(buf), "%s (use one of:", value);
    for (int i = 0; choices[i] && n < sizeof(buf); i++)
        n += snprintf(buf + n, sizeof(buf) - n, " %s", choices[i]);
    if (n < sizeof(buf))
        snprintf(buf + n, sizeof(buf) - n, ")");
    MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_cvar", "**amlapi_cvar %s %s", name,
                         buf);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
