/* libFuzzer target: coll_torus's mapping-file parser (MPIR_CVAR_AMLAPI_TORUS_MAP_FILE). The
 * first byte gives the number of ranks (1..64); the second, when it is '@', says a shape
 * follows on the first line; the rest is the file. A topology that parses must be a bijection
 * onto its extents. */
#define _GNU_SOURCE
#include "coll_torus.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int nranks = data[0] % 64 + 1;
    data++, size--;
    char shape[64] = "", *sp = NULL;
    if (data[0] == '@') {
        size_t n = 1;
        while (n < size && n < sizeof(shape) && data[n] != '\n')
            n++;
        memcpy(shape, data + 1, n - 1);
        shape[n - 1] = 0;
        sp = shape;
        data += n, size -= n;
    }
    FILE *f = fmemopen((void *) data, size, "r");
    if (!f)
        return 0;
    ct_topo t;
    if (ct_topo_from_stream(&t, f, "fuzz", nranks, sp) == CT_OK) {
        char *seen = calloc((size_t) t.nranks, 1);
        if (t.nranks != nranks || !seen)
            abort();
        for (int r = 0; r < t.nranks; r++) {
            int rr = ct_topo_rank(&t, t.coords[r]);
            if (rr != r || seen[r]++)
                abort();
        }
        free(seen);
        ct_topo_free(&t);
    }
    fclose(f);
    return 0;
}
