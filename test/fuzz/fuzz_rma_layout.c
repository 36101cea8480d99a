/* libFuzzer target: the layout of a derived target datatype that a native RMA request carries
 * (src/ch4/netmod/amlapi/amlapi_rma_layout.h), checked as the target checks it. The input is
 * the rest of the request as a peer chooses it: the basic element's size, the element count,
 * the window offset and the window's size (8 bytes each), then the layout's wire bytes. Every
 * layout the checks accept is applied to a window buffer of that size: AddressSanitizer stops
 * on any byte outside it. (Elements may overlap, as MPI allows a target datatype to.) */
#include "amlapi_rma_layout.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t bsize, count, off, win_size, nbytes, a, b;
    int64_t lo, hi;
    MPIDI_AMLAPI_layout_t *l;
    const char *why;

    if (size < 32)
        return 0;
    memcpy(&bsize, data, 8);
    memcpy(&count, data + 8, 8);
    memcpy(&off, data + 16, 8);
    memcpy(&win_size, data + 24, 8);
    bsize = bsize % 65;         /* the target's basic types: 0 (refused) to 64 bytes */
    win_size %= 1 << 16;
    why = MPIDI_AMLAPI_layout_parse(data + 32, size - 32, bsize, &l);
    if (why) {
        if (l || !why[0])
            abort();
        return 0;
    }
    if (!l || l->n == 0 || l->size == 0 || l->size % bsize || l->hi <= l->lo)
        abort();
    why = MPIDI_AMLAPI_layout_span(l, count, &lo, &hi, &nbytes);
    if (!why && nbytes > 0)
        why = MPIDI_AMLAPI_layout_place(off, lo, hi, &a, &b);
    /* the window check of amlapi_rma_am.c's in_window for a window of win_size bytes */
    if (!why && nbytes > 0 && b > win_size)
        why = "outside the window";
    if (!why && nbytes > 0) {
        char *win, *packed;
        if (a >= b || nbytes > MPIDI_AMLAPI_LAYOUT_MAX_LEN)
            abort();
        if (nbytes <= (1 << 20) && (win = malloc(win_size)) != NULL) {
            packed = calloc(1, nbytes);
            if (packed) {
                /* the request's offset names where element 0 starts */
                char *base = (char *) ((uintptr_t) win + off);  /* as amlapi_rma_am.c */
                MPIDI_AMLAPI_layout_scatter(l, count, base, packed);
                MPIDI_AMLAPI_layout_gather(l, count, base, packed);
                free(packed);
            }
            free(win);
        }
    }
    MPIDI_AMLAPI_layout_release(l);
    return 0;
}
