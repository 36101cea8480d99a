/* Alltoall dimension by dimension: in phase i every rank exchanges, with each rank of its
 * line in dimension o_i, everything it holds for destinations at that rank's position. After
 * the last phase each rank holds what every rank sent it. The bytes cross the same links as
 * with direct messages under dimension-order routing (a message to (dx, dy, dz) goes dx hops
 * in x, then dy in y...), but each rank sends (n-1) messages per phase instead of P-1, so a
 * simulator (and a network with per-message costs) handles 512 ranks easily.
 *
 * The data is cut into three parts that take the dimensions in rotated orders, and all parts
 * move phase by phase in step (a phase's sends wait for the previous phase of every part), so
 * at any time each dimension carries one part. A message to the rank half a ring away goes
 * half direct and half the other way round through a relay (SimGrid routes every such
 * message up except from the middle position, which would load the up links 25 % (ring of
 * 8) to 50 % (ring of 4) above the others).
 *
 * Layout of part j's P slots (each part_len elements): a slot index is a mixed-radix number
 * whose digit l (dimension o_l, o_0 fastest) is, before phase l, the destination's coordinate
 * and, after it, the source's. */
#include "ct_algo_int.h"

#include <stdlib.h>

int ct_alltoall_dims(ct_sched *s, const ct_topo *t, int me, int64_t count, size_t elem_size,
                     const ct_params *p)
{
    (void) p;
    if (count < 0 || me < 0 || me >= t->nranks)
        return ct_set_error(CT_ERR_INVALID, "alltoall: bad count or rank");
    int P = t->nranks;
    int rc = ct_sched_init(s, me, P, elem_size);
    if (rc)
        return rc;
    int a[3], k = ct_active_dims(t, a);
    int nparts = k ? k : 1;
    const int *mc = t->coords[me];
    int ord[3][CT_MAXDIMS], L = 0, stride[3][CT_MAXDIMS + 1];
    int64_t plen[3], base[3], tmpbase = 0;
    for (int j = 0; j < nparts; j++) {
        L = 0;
        if (t->dims[3] > 1)
            ord[j][L++] = 3;
        for (int i = 0; i < k; i++)
            ord[j][L++] = a[(i + j) % k];
        stride[j][0] = 1;
        for (int i = 0; i < L; i++)
            stride[j][i + 1] = stride[j][i] * t->dims[ord[j][i]];
        plen[j] = ct_part_lo(count, nparts, j + 1) - ct_part_lo(count, nparts, j);
        /* per part: slots A, a send area and a receive area, P slots each, and relay space */
        base[j] = tmpbase;
        tmpbase += 5 * (int64_t) P * plen[j];
    }
    /* initial: my block for destination r into slot (r's coordinates) */
    for (int j = 0; j < nparts; j++) {
        if (!plen[j])
            continue;
        for (int r = 0; r < P; r++) {
            int slot = 0;
            for (int i = 0; i < L; i++)
                slot += t->coords[r][ord[j][i]] * stride[j][i];
            ct_copy(s, CT_BUF_TMP, base[j] + (int64_t) slot * plen[j], CT_BUF_SEND,
                    (int64_t) r * count + ct_part_lo(count, nparts, j), plen[j]);
        }
    }
    int sync0 = 0, sync1 = 0;
    for (int i = 0; i < L; i++) {
        int first = s->nsteps;
        for (int j = 0; j < nparts; j++) {
            if (!plen[j])
                continue;
            int d = ord[j][i], n = t->dims[d], pos = mc[d], st = stride[j][i];
            int per = P / n;            /* slots per peer */
            int64_t A = base[j], SA = A + (int64_t) P * plen[j], RA = SA + (int64_t) P * plen[j];
            int64_t RL = RA + (int64_t) P * plen[j];
            int tie_ok = t->wrap[d] && n > 2 && n % 2 == 0 && d < 3;
            ct_set_chan(s, j);
            for (int dq = 1; dq < n; dq++) {
                int q = (pos + dq) % n, from = (pos - dq + n) % n;
                int64_t msg = (int64_t) per * plen[j];
                /* pack the slots with digit i = q */
                for (int kk = 0; kk < per; kk++) {
                    int lo = kk % st, hi = kk / st;
                    int slot = lo + q * st + hi * st * n;
                    ct_copy(s, CT_BUF_TMP, SA + ((int64_t) q * per + kk) * plen[j], CT_BUF_TMP,
                            A + (int64_t) slot * plen[j], plen[j]);
                }
                int64_t h = (tie_ok && dq == n / 2) ? msg / 2 : msg;
                int to = ct_rank_with(t, me, d, q), fr = ct_rank_with(t, me, d, from);
                for (int x = sync0; x < sync1; x++)
                    ct_next_dep(s, x);
                ct_send(s, CT_BUF_TMP, SA + (int64_t) q * per * plen[j], h, to);
                ct_recv(s, CT_BUF_TMP, RA + (int64_t) from * per * plen[j], h, fr);
                if (h != msg) {
                    /* The other half goes the other way round, through a relay: the rank
                     * n/2 - 1 below (n/2 - 1 above for the middle position, whose direct
                     * half SimGrid already routes down), which passes it on the one hop
                     * left. Then both directions of every link carry the same load. */
                    int half = n / 2;
#define CT_REL(x) ((x) == half ? ((x) + half - 1) % n : ((x) - (half - 1) + n) % n)
                    int64_t hoff = SA + (int64_t) q * per * plen[j] + h, hl = msg - h;
                    ct_set_chan(s, 4 + j);
                    for (int x = sync0; x < sync1; x++)
                        ct_next_dep(s, x);
                    ct_send(s, CT_BUF_TMP, hoff, hl, ct_rank_with(t, me, d, CT_REL(pos)));
                    /* the ranks I relay for */
                    int rf[2], nrf = 0;
                    int s1 = (pos + half - 1) % n, s2 = (pos - (half - 1) + n) % n;
                    if (CT_REL(s1) == pos)
                        rf[nrf++] = s1;
                    if (s2 != s1 && CT_REL(s2) == pos)
                        rf[nrf++] = s2;
                    for (int x = 0; x < nrf; x++)
                        ct_recv(s, CT_BUF_TMP, RL + x * hl, hl, ct_rank_with(t, me, d, rf[x]));
                    for (int x = 0; x < nrf; x++)
                        ct_send(s, CT_BUF_TMP, RL + x * hl, hl, ct_rank_with(t, me, d, (rf[x] + half) % n));
                    ct_recv(s, CT_BUF_TMP, RA + (int64_t) from * per * plen[j] + h, hl,
                            ct_rank_with(t, me, d, CT_REL(from)));
#undef CT_REL
                    ct_set_chan(s, j);
                }
            }
            /* unpack: peer `from`'s slots go to digit i = from (now the source's coordinate) */
            for (int dq = 1; dq < n; dq++) {
                int from = (pos - dq + n) % n;
                for (int kk = 0; kk < per; kk++) {
                    int lo = kk % st, hi = kk / st;
                    int slot = lo + from * st + hi * st * n;
                    ct_copy(s, CT_BUF_TMP, A + (int64_t) slot * plen[j], CT_BUF_TMP,
                            RA + ((int64_t) from * per + kk) * plen[j], plen[j]);
                }
            }
        }
        sync0 = first, sync1 = s->nsteps;
    }
    /* final: slot (s's coordinates) holds what s sent me */
    for (int j = 0; j < nparts; j++) {
        if (!plen[j])
            continue;
        for (int r = 0; r < P; r++) {
            int slot = 0;
            for (int i = 0; i < L; i++)
                slot += t->coords[r][ord[j][i]] * stride[j][i];
            ct_copy(s, CT_BUF_RECV, (int64_t) r * count + ct_part_lo(count, nparts, j), CT_BUF_TMP,
                    base[j] + (int64_t) slot * plen[j], plen[j]);
        }
    }
    return ct_sched_finish(s);
}
