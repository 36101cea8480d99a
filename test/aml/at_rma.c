/*
 * aml's unit tests of one-sided operations: put, get and rmw on registered memory with fences
 * and gfence, and direct put/get on exposed memory through keys passed as messages.
 */
#include "at.h"

static size_t fence_check_bad = 1;
static int fence_check_seen;
static int fence_check_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                               aml_recv_t * recv)
{
    (void) aml;
    (void) recv;
    fence_check_bad = first_bad(ctx, 1 << 20, info->src, 77);
    fence_check_seen = 1;
    return 0;
}

/* direct put/get: keys exchanged as active messages (handler 8), then puts and gets with no
 * message at the target, checked byte by byte; the range is checked at the origin */
static unsigned char dkeys[16][1024];
static size_t dkey_len[16];
static int dkeys_seen;

static void dkey_landed(aml_t * aml, void *arg)
{
    (void) aml;
    (void) arg;
    dkeys_seen++;
}

static int dkey_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    (void) ctx;
    if (info->src < 0 || info->src >= 16 || info->msg_len > sizeof(dkeys[0]))
        return -1;      /* not a key: the test fails waiting for it */
    dkey_len[info->src] = info->msg_len;
    recv->buf = dkeys[info->src];
    recv->compl_fn = dkey_landed;
    return 0;
}

int t_direct(rank_ctx_t * c)
{
    const size_t region = 4 << 20;
    unsigned char *win = calloc(1, region), *local = malloc(region);
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    static const size_t psz[] = { 8, 5000, 70000, 3 << 20 };
    aml_xmem_t *m;
    aml_xkey_t *k;
    aml_cntr_t done;
    const void *key;
    size_t key_len;
    uintptr_t bases[16];
    int rc;

    CHECK(c->size <= 16, "at most 16 ranks");
    CHECK_OK(aml_cntr_init(c->aml, &done, 0));
    CHECK_OK(aml_register_handler(c->aml, 8, dkey_handler, NULL));
    CHECK(aml_xmem_expose(c->aml, win, 0, &m) == AML_ERR_INVAL, "exposing 0 bytes");
    CHECK_OK(aml_xmem_expose(c->aml, win, region, &m));
    CHECK_OK(aml_xmem_key(c->aml, m, &key, &key_len));
    CHECK(key_len <= sizeof(dkeys[0]), "a %zu-byte key", key_len);
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) win, bases));
    /* a keyless read of an address the peer published (aml_peer_read): on a node with single
     * copy, from every vnode peer; refused to a UCX peer, and refused alike for 0 bytes */
    fill(win + 8192, 70000, c->rank, 77);
    CHECK_OK(aml_barrier(c->aml));
    rc = aml_peer_read(c->aml, left, local, bases[left] + 8192, 70000);
    CHECK(rc == AML_OK || rc == AML_ERR_NOT_SUPPORTED, "aml_peer_read: %d", rc);
    CHECK(aml_peer_read(c->aml, left, NULL, 0, 0) == rc, "a 0-byte read answers otherwise");
    CHECK(rc == AML_ERR_NOT_SUPPORTED || getenv("AML_TEST_VNODE") != NULL,
          "a UCX peer read by single copy");
    if (rc == AML_OK)
        CHECK(first_bad(local, 70000, left, 77) == (size_t) -1, "aml_peer_read: byte %zu",
              first_bad(local, 70000, left, 77));
    CHECK(aml_peer_read(c->aml, c->size, local, bases[left], 8) == AML_ERR_INVAL,
          "a read from a peer that does not exist");
    CHECK_OK(aml_barrier(c->aml));
    memset(win, 0, 8192 + 70000);
    dkeys_seen = 0;
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_amsend(c->aml, right, 8, NULL, 0, key, key_len, NULL, NULL, NULL));
    while (dkeys_seen < 1)
        aml_progress(c->aml);
    CHECK_OK(aml_barrier(c->aml));
    CHECK(aml_xkey_open(c->aml, left, dkeys[left], 3, &k) == AML_ERR_INVAL, "a short key");
    rc = aml_xkey_open(c->aml, left, dkeys[left], dkey_len[left], &k);
    if (rc == AML_ERR_NOT_SUPPORTED) {
        /* a vnode peer on a node without single copy: aml_put/aml_get are the way there */
        CHECK(getenv("AML_TEST_VNODE") != NULL, "direct access refused to a UCX peer");
        CHECK_OK(aml_barrier(c->aml));
        CHECK_OK(aml_xmem_withdraw(c->aml, m));
        free(win);
        free(local);
        return 0;
    }
    CHECK_OK(rc);
    /* single copy is the kernel's, RMA over UCX's tcp the peer's progress; UCX picks shared
     * memory and cma between processes of one node unless told tcp only */
    {
        const char *tls = getenv("UCX_TLS");
        int want = getenv("AML_TEST_VNODE") == NULL && tls && !strcmp(tls, "tcp");
        CHECK(aml_xkey_soft(c->aml, k) == want, "aml_xkey_soft says %d, want %d (UCX_TLS %s)",
              aml_xkey_soft(c->aml, k), want, tls ? tls : "unset");
        CHECK(aml_xkey_soft(c->aml, k) == want, "asked again, aml_xkey_soft changed its answer");
    }

    /* we write into our left neighbour's memory and read it back; our right neighbour
     * writes ours */
    for (size_t i = 0; i < sizeof(psz) / sizeof(psz[0]); i++) {
        size_t n = psz[i], off = 64 * i;
        fill(local, n, c->rank, i);
        CHECK_OK(aml_put_direct(c->aml, k, bases[left] + off, local, n, &done, NULL, NULL));
        CHECK_OK(aml_cntr_wait(c->aml, &done, 1));
        CHECK_OK(aml_barrier(c->aml));
        CHECK(first_bad(win + off, n, right, i) == (size_t) -1, "direct put of %zu bytes from "
              "%d: byte %zu", n, right, first_bad(win + off, n, right, i));
        memset(local, 0, n);
        CHECK_OK(aml_get_direct(c->aml, k, bases[left] + off, local, n, &done, NULL, NULL));
        CHECK_OK(aml_cntr_wait(c->aml, &done, 1));
        CHECK(first_bad(local, n, c->rank, i) == (size_t) -1, "direct get of %zu bytes", n);
        CHECK_OK(aml_barrier(c->aml));
    }
    /* many at once, then a fence: every one is in place when it returns */
    for (int i = 0; i < 64; i++) {
        fill(local + 4096 * i, 4096, c->rank, 100 + i);
        CHECK_OK(aml_put_direct(c->aml, k, bases[left] + 4096 * i, local + 4096 * i, 4096,
                                NULL, NULL, NULL));
    }
    CHECK_OK(aml_fence(c->aml, left));
    CHECK_OK(aml_barrier(c->aml));
    for (int i = 0; i < 64; i++)
        CHECK(first_bad(win + 4096 * i, 4096, right, 100 + i) == (size_t) -1,
              "put %d of 64 from %d not in place after the fence", i, right);
    /* outside the exposed memory: refused at the origin */
    CHECK(aml_put_direct(c->aml, k, bases[left] + region - 4, local, 8, NULL, NULL, NULL) ==
          AML_ERR_RANGE, "a put past the end");
    CHECK(aml_get_direct(c->aml, k, bases[left] - 8, local, 8, NULL, NULL, NULL) ==
          AML_ERR_RANGE, "a get before the start");
    CHECK_OK(aml_barrier(c->aml));
    aml_xkey_close(c->aml, k);
    CHECK_OK(aml_xmem_withdraw(c->aml, m));
    free(win);
    free(local);
    return 0;
}

/* put/get/rmw on registered memory, fences, gfence, address_init */
int t_rma(rank_ctx_t * c)
{
    const size_t region = 4 << 20;
    unsigned char *win = calloc(1, region), *local = malloc(region);
    int64_t *atom = calloc(4, sizeof(int64_t));
    uintptr_t bases[16], atoms[16];
    aml_cntr_t org, tgt, cmpl;
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    static const size_t psz[] = { 0, 8, 5000, 70000, 3 << 20 };

    CHECK_OK(aml_mem_register(c->aml, win, region));
    CHECK_OK(aml_mem_register(c->aml, atom, 4 * sizeof(int64_t)));
    CHECK_OK(aml_cntr_init(c->aml, &org, 0));
    CHECK_OK(aml_cntr_init(c->aml, &tgt, 0));
    CHECK_OK(aml_cntr_init(c->aml, &cmpl, 0));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) win, bases));
    CHECK_OK(aml_address_init(c->aml, (uintptr_t) atom, atoms));

    for (size_t k = 0; k < sizeof(psz) / sizeof(psz[0]); k++) {
        size_t n = psz[k];
        fill(local, n, c->rank, k);
        CHECK_OK(aml_put(c->aml, right, (void *) bases[right], local, n, NULL, &org, &cmpl));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK_OK(aml_cntr_wait(c->aml, &cmpl, 1));
        CHECK_OK(aml_gfence(c->aml));
        CHECK(first_bad(win, n, left, k) == (size_t) -1, "put of %zu bytes from %d", n, left);
        /* read back what our right neighbour got from us */
        memset(local, 0, n);
        CHECK_OK(aml_get(c->aml, right, (void *) bases[right], local, n, NULL, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(first_bad(local, n, c->rank, k) == (size_t) -1, "get of %zu bytes", n);
        CHECK_OK(aml_gfence(c->aml));
    }

    /* put + fence: once aml_fence returns the data is at the target. Checked by the target
     * itself, in the handler of a message sent after the fence (no gfence, no barrier, which
     * would hide a fence that does nothing): the 1 MiB put is a rendezvous still moving when
     * a no-op fence returns. */
    fill(local, 1 << 20, c->rank, 77);
    CHECK_OK(aml_register_handler(c->aml, 5, fence_check_handler, (void *) (win + 8)));
    CHECK_OK(aml_barrier(c->aml));      /* not test_barrier: debug_reorder may hold a packet
                                         * that only aml_progress sends */
    CHECK_OK(aml_put(c->aml, right, (char *) bases[right] + 8, local, 1 << 20, NULL, NULL, NULL));
    CHECK_OK(aml_fence(c->aml, right));
    CHECK_OK(aml_amsend(c->aml, right, 5, NULL, 0, NULL, 0, NULL, NULL, NULL));
    while (!fence_check_seen)
        aml_progress(c->aml);
    CHECK(fence_check_bad == (size_t) -1, "after the fence, byte %zu of the put from %d was "
          "not there", fence_check_bad, left);
    CHECK_OK(aml_gfence(c->aml));

    /* rmw: every rank adds 1..10 to rank 0's atom[0] (contended: the sum is exact), and
     * 1..10 to its right neighbour's atom[3], which only it touches: each previous value is
     * exact, the sum of the earlier operands */
    for (int i = 1; i <= 10; i++) {
        int64_t in[2] = { i, 0 }, prev = -1;
        CHECK_OK(aml_rmw(c->aml, 0, AML_RMW_FETCH_ADD, (int64_t *) atoms[0], in, &prev, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev >= 0 && prev <= 55 * c->size - i, "fetch-add returned %lld", (long long) prev);
        prev = -1;
        CHECK_OK(aml_rmw(c->aml, right, AML_RMW_FETCH_ADD, (int64_t *) atoms[right] + 3, in,
                         &prev, &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev == (int64_t) (i - 1) * i / 2, "fetch-add %d returned %lld, want %d", i,
              (long long) prev, (i - 1) * i / 2);
    }
    CHECK_OK(aml_gfence(c->aml));
    if (c->rank == 0)
        CHECK(atom[0] == 55 * c->size, "sum %lld, want %d", (long long) atom[0], 55 * c->size);
    CHECK(atom[3] == 55, "uncontended sum %lld, want 55", (long long) atom[3]);
    /* compare-and-swap: exactly one rank wins */
    {
        int64_t in[2] = { 0, c->rank + 1 }, prev = -1;
        CHECK_OK(aml_rmw(c->aml, 0, AML_RMW_CMP_SWAP, (int64_t *) atoms[0] + 1, in, &prev,
                         &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        int64_t won = prev == 0, wins[16];
        CHECK_OK(aml_address_init(c->aml, (uintptr_t) won, (uintptr_t *) wins));
        int64_t total = 0;
        for (int i = 0; i < c->size; i++)
            total += wins[i];
        CHECK(total == 1, "%lld ranks won the compare-and-swap", (long long) total);
    }
    /* swap */
    {
        int64_t in[2] = { 1000 + c->rank, 0 }, prev = -5;
        CHECK_OK(aml_rmw(c->aml, right, AML_RMW_SWAP, (int64_t *) atoms[right] + 2, in, &prev,
                         &org));
        CHECK_OK(aml_cntr_wait(c->aml, &org, 1));
        CHECK(prev == 0, "swap saw %lld", (long long) prev);
        CHECK_OK(aml_gfence(c->aml));
        CHECK(atom[2] == 1000 + left, "swap result %lld", (long long) atom[2]);
    }
    CHECK_OK(aml_barrier(c->aml));
    CHECK_OK(aml_mem_deregister(c->aml, win));
    CHECK(aml_mem_deregister(c->aml, win) == AML_ERR_RANGE, "double deregister");
    free(win);
    free(local);
    return 0;
}
