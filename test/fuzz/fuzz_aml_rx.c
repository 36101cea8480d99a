/*
 * libFuzzer target: aml's packet validation and dispatch (aml_rx), as a peer's packets reach
 * it from a transport. One aml_t of 4 ranks (this one is rank 0), built with a sink in place
 * of aml_ucx.c: it takes every send and data move at once and moves nothing, so the target
 * never talks to anyone and every reply, DONE or token the input provokes is dropped.
 *
 * An input is a sequence of packets, each: 1 byte kind (bits 0-1: who the transport says sent
 * it: 0 the header alone says, 1 rank 1, 2 rank 2, 3 nobody of the job, i.e. a UCX packet
 * without a token of ours), 2 bytes header length (mod 2048), 2 bytes data length, then the
 * header and data bytes (cut at the input's end). Each is copied into a buffer of exactly its
 * size, so that AddressSanitizer sees any read past it. State carries over from packet to
 * packet, as in a process: stashed early packets, eager messages under assembly, deferred
 * rendezvous messages (the handler defers messages of odd length; they are rejected after
 * the input).
 *
 * A malformed packet must end in aml's fatal path (a process would end there): the fatal
 * callback jumps back here, and the aml_t, whose state the packet may have left half
 * changed, is replaced by a fresh one. Anything else AddressSanitizer or
 * UndefinedBehaviorSanitizer sees is a bug.
 */
#include "aml_impl.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NRANKS 4
#define NHANDLERS 4
#define NDEFER 64

static aml_t *aml;
static jmp_buf on_fatal;
static int in_input;
static void *cur_hdr, *cur_data;
static char land[1 << 16];
static aml_handle_t deferred[NDEFER];
static int ndeferred;

static void fatal_cb(void *arg, const char *msg)
{
    (void) arg;
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "fatal: %s\n", msg);
    if (in_input)
        longjmp(on_fatal, 1);
    abort();
}

/* ---- the receiver ---------------------------------------------------------------------- */

static void unpack_drop(void *arg, size_t offset, const void *data, size_t len)
{
    /* touch every byte handed over: a piece outside its packet shows */
    volatile unsigned char x = 0;
    for (size_t i = 0; i < len; i++)
        x ^= ((const unsigned char *) data)[i];
    (void) x;
}

static int handler(aml_t * a, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    if (info->data || !info->msg_len)
        return 0;
    if (info->msg != AML_HANDLE_NONE && (info->msg_len & 1) && ndeferred < NDEFER) {
        recv->defer = 1;
        deferred[ndeferred++] = info->msg;
        return 0;
    }
    if (info->msg_len <= sizeof(land)) {
        recv->buf = land;
    } else {
        /* as MPI's receive into a datatype: only as many bytes as the receive holds */
        recv->unpack = unpack_drop;
        recv->partial = 1;
        recv->want = sizeof(land);
    }
    return 0;
}

/* A size no allocation can satisfy gets NULL, as from malloc, not a report: aml must then stop
 * in its fatal path. No leak checks: a packet found malformed after its record exists (a
 * handler's own check, a later packet of a message) leaves that record to the process's end,
 * which is the very next thing in a real process; the unit tests run under LeakSanitizer. */
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:detect_leaks=0";
}

static void setup(void)
{
    aml_config_t cfg;
    const void *a;
    size_t alen;
    char *table;

    aml_config_default(&cfg);
    cfg.rank = 0;
    cfg.size = NRANKS;
    cfg.fatal = fatal_cb;
    cfg.keepalive_ms = 0;
    if (aml_init(&cfg, &aml) != AML_OK || aml_local_address(aml, &a, &alen) != AML_OK)
        abort();
    /* every rank at this process's own address: the endpoints are made, never used */
    table = malloc(NRANKS * alen);
    if (!table)
        abort();
    for (int i = 0; i < NRANKS; i++)
        memcpy(table + (size_t) i * alen, a, alen);
    if (aml_connect(aml, table, alen) != AML_OK)
        abort();
    free(table);
    for (unsigned h = 0; h < NHANDLERS; h++)
        if (aml_register_handler(aml, h, handler, NULL) != AML_OK)
            abort();
    ndeferred = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setup();
    return 0;
}

static const int64_t senders[4] = { -1, 1, 2, AML_TPORT_SRC_STRANGER };

int LLVMFuzzerTestOneInput(const uint8_t * b, size_t n)
{
    if (setjmp(on_fatal)) {
        /* a malformed packet: the process would have ended here */
        in_input = 0;
        free(cur_hdr);
        free(cur_data);
        cur_hdr = cur_data = NULL;
        aml->in_dispatch = 0;
        aml->connected = false;         /* no finalize rounds with peers that are not there */
        aml_finalize(aml);
        setup();
        return 0;
    }
    in_input = 1;
    while (n >= 5) {
        int64_t src = senders[b[0] & 3];
        size_t hlen = (size_t) (b[1] | b[2] << 8) % 2048, dlen = (size_t) (b[3] | b[4] << 8);
        b += 5;
        n -= 5;
        if (hlen > n)
            hlen = n;
        if (dlen > n - hlen)
            dlen = n - hlen;
        cur_hdr = malloc(hlen ? hlen : 1);
        cur_data = dlen ? malloc(dlen) : NULL;
        if (!cur_hdr || (dlen && !cur_data))
            abort();
        memcpy(cur_hdr, b, hlen);
        if (dlen)
            memcpy(cur_data, b + hlen, dlen);
        b += hlen + dlen;
        n -= hlen + dlen;
        aml_rx(aml, cur_hdr, hlen, cur_data, dlen, 0, src);
        free(cur_hdr);
        free(cur_data);
        cur_hdr = cur_data = NULL;
    }
    for (int i = 0; i < ndeferred; i++)
        aml_reject(aml, deferred[i]);
    ndeferred = 0;
    in_input = 0;
    return 0;
}
