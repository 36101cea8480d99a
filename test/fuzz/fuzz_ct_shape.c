/* libFuzzer target: coll_torus's shape parser (MPIR_CVAR_AMLAPI_TORUS_SHAPE), its formatter,
 * and the default placement of N ranks on a parsed shape. */
#include "coll_torus.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[128];
    int dims[CT_MAXDIMS], wrap[CT_MAXDIMS];
    if (size >= sizeof(s))
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    if (ct_shape_parse(s, dims, wrap) != CT_OK)
        return 0;
    char buf[64];
    ct_shape_format(dims, wrap, buf, sizeof(buf));
    int d2[CT_MAXDIMS], w2[CT_MAXDIMS];
    /* what it prints parses back to the same shape */
    if (ct_shape_parse(buf, d2, w2) != CT_OK || memcmp(dims, d2, sizeof(dims)))
        abort();
    long cells = 1;
    for (int d = 0; d < CT_MAXDIMS; d++)
        cells *= dims[d];
    if (cells <= 4096) {        /* placing more ranks says nothing more of the parser */
        ct_topo t;
        if (ct_topo_default(&t, (int) cells, NULL, s) == CT_OK) {
            if (t.nranks != cells)
                abort();
            ct_topo_free(&t);
        }
    }
    return 0;
}
