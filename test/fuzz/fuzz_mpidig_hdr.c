/* libFuzzer target: the checks of an MPIDIG header a peer sent
 * (src/ch4/netmod/amlapi/amlapi_am_hdr.h), as amlapi_am.c's handler makes them before MPIDIG
 * reads the header. The input chooses the handler's header shape (the struct's size, where its
 * 4- or 8-byte length field sits), the limit, a message length, then the header bytes. Every
 * header the check accepts is read as far as its handler would, from a buffer of exactly its
 * length (AddressSanitizer stops on a byte past it), and every allocation size it accepts is
 * checked to hold the record, the rounded header and the data. */
#include "amlapi_am_hdr.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    MPIDI_AMLAPI_am_hdr_desc_t d = { "fuzz", 0, 0, 0 };
    uint16_t fixed, var_at;
    uint64_t msg_len, rec, limit;
    size_t len, need, n;
    int64_t extra;
    volatile char sink = 0;
    char *hdr;
    int rc;

    if (size < 22)
        return 0;
    memcpy(&fixed, data, 2);
    memcpy(&var_at, data + 2, 2);
    memcpy(&msg_len, data + 5, 8);
    memcpy(&rec, data + 13, 8);
    d.fixed = fixed % 1025;     /* MPIDIG's header structs are well under AML_UHDR_LIMIT */
    d.var_size = (uint8_t) ((data[4] % 3) * 4);
    if (d.var_size && d.fixed < d.var_size)
        d.var_size = 0;
    d.var_at = d.var_size ? (uint16_t) (var_at % (d.fixed - d.var_size + 1)) : 0;
    limit = (uint64_t) data[21] * 8;    /* AML_UHDR_LIMIT is 1024 */
    rec %= 4096;                /* sizeof the receiver's record */
    len = size - 22;
    hdr = malloc(len ? len : 1);
    if (!hdr)
        return 0;
    memcpy(hdr, data + 22, len);

    rc = MPIDI_AMLAPI_am_hdr_need(&d, hdr, len, limit, &need, &extra);
    if (rc == 0) {
        /* accepted: the handler reads need bytes, all of them inside the header */
        if (need < d.fixed || need > len || (d.var_size && need - d.fixed > limit))
            abort();
        for (size_t i = 0; i < need; i++)
            sink ^= hdr[i];
    } else if (rc < 0) {
        if (!d.var_size || len < d.fixed || (extra >= 0 && (uint64_t) extra <= limit))
            abort();
    } else if (rc != 1 || need <= len) {
        abort();
    }

    if (MPIDI_AMLAPI_am_alloc_size((size_t) rec, len, (size_t) msg_len, &n) == 0) {
        unsigned __int128 want = (unsigned __int128) rec + ((len + 7) & ~(size_t) 7) + msg_len;
        if ((unsigned __int128) n != want)
            abort();
    } else if ((unsigned __int128) rec + ((len + 7) & ~(size_t) 7) + msg_len <= SIZE_MAX) {
        abort();        /* refused a size that fits */
    }
    free(hdr);
    (void) sink;
    return 0;
}
