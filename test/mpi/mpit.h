/*
 * MPI_T helpers shared by the tests in test/mpi: the amlapi limits read from the library
 * (control variables) and the per-protocol message counters (performance variables, category
 * AMLAPI), so that a test asserts which protocol a message took instead of assuming it from
 * constants. Each test defines `rank` and `errs` and an ERR(...) macro before including this.
 * Call mpit_init() after MPI_Init and mpit_finalize() before MPI_Finalize.
 */
#ifndef AMLAPI_TEST_MPIT_H
#define AMLAPI_TEST_MPIT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_T_pvar_session mpit_session;

static inline void mpit_init(void)
{
    int provided;
    MPI_Query_thread(&provided);
    MPI_T_init_thread(provided, &provided);
    MPI_T_pvar_session_create(&mpit_session);
}

static inline void mpit_finalize(void)
{
    MPI_T_pvar_session_free(&mpit_session);
    MPI_T_finalize();
}

/* An int control variable; -1 (and an error) if the library does not have it. */
static inline int cvar_int(const char *name)
{
    int idx, count, v = -1;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) {
        ERR("control variable %s not found", name);
        return -1;
    }
    MPI_T_cvar_handle_alloc(idx, NULL, &h, &count);
    MPI_T_cvar_read(h, &v);
    MPI_T_cvar_handle_free(&h);
    return v;
}

/* A string control variable's value as MPICH parsed it from the environment: MPICH 4.0.2's
 * MPI_T_cvar_read of a string variable returns a copy of its default, not the value in use, so
 * read the environment in MPICH's own order (a later name overrides an earlier one). */
static inline const char *cvar_env_str(const char *suffix, const char *dflt)
{
    static const char *const prefixes[] = { "MPICH_", "MPIR_PARAM_", "MPIR_CVAR_" };
    const char *v = dflt;
    char name[128];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "%s%s", prefixes[i], suffix);
        if (getenv(name))
            v = getenv(name);
    }
    return v;
}

/* A counter or level performance variable of the AMLAPI category; 0 (and an error) if absent.
 * amlapi's variables are continuous: no start needed. */
static inline unsigned long long pvar_read(const char *name)
{
    static const int classes[] = { MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_LEVEL,
        MPI_T_PVAR_CLASS_HIGHWATERMARK
    };
    int idx = -1, count;
    unsigned long long v = 0;
    MPI_T_pvar_handle h;
    for (unsigned i = 0; i < sizeof(classes) / sizeof(classes[0]) && idx < 0; i++)
        if (MPI_T_pvar_get_index(name, classes[i], &idx) != MPI_SUCCESS)
            idx = -1;
    if (idx < 0) {
        ERR("performance variable %s not found", name);
        return 0;
    }
    MPI_T_pvar_handle_alloc(mpit_session, idx, NULL, &h, &count);
    MPI_T_pvar_read(mpit_session, h, &v);
    MPI_T_pvar_handle_free(mpit_session, &h);
    return v;
}

/* aml's protocols, in the order of the amlapi_msgs_* counters below */
enum { P_ONEPACKET, P_EAGER, P_ADAPTIVE, P_RNDV, P_COUNT };
static const char *const proto_name[P_COUNT] = { "onepacket", "eager", "adaptive", "rndv" };

/* messages this rank has sent with each protocol so far */
static inline void proto_counts(unsigned long long c[P_COUNT])
{
    static const char *const names[P_COUNT] = { "amlapi_msgs_onepacket", "amlapi_msgs_eager",
        "amlapi_msgs_adaptive", "amlapi_msgs_rndv"
    };
    for (int i = 0; i < P_COUNT; i++)
        c[i] = pvar_read(names[i]);
}

/* The limits the library runs with. onepacket is the largest MPI message that goes in one
 * packet: the packet less aml's 8-byte compact header and the 16-byte MPI envelope (the
 * 12-byte envelope without message id is used only for messages up to aml's inline limit, far
 * below this). */
struct limits {
    int packet, eager, credits;
    long onepacket;
    int rndv_as_eager;          /* every peer on this node and no single copy: vnode sends
                                 * rendezvous-size messages through its FIFOs, as eager */
};

static inline void read_limits(struct limits *l)
{
    l->packet = cvar_int("MPIR_CVAR_AMLAPI_PACKET_SIZE");
    l->eager = cvar_int("MPIR_CVAR_AMLAPI_EAGER_LIMIT");
    l->credits = cvar_int("MPIR_CVAR_AMLAPI_ADAPTIVE_CREDITS");
    l->onepacket = (long) l->packet - 8 - 16;
    {
        int size, rank, local = 0;
        MPI_Comm node;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        l->rndv_as_eager = size > 1 && pvar_read("amlapi_vnode_peers") == (unsigned) size - 1 &&
            !pvar_read("amlapi_vnode_single_copy");
        /* ranks 0 and 1, the pair the protocol checks use, talk through vnode when they share
         * a node (MPICH's node map, which MPIR_CVAR_NUM_CLIQUES splits) and vnode is on; with
         * single copy their eager limit is vnode's own. Every rank takes rank 0's answer:
         * the tests derive message sizes from it. */
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        if (rank <= 1 && size > 1) {
            int other = 1 - rank, g;
            MPI_Group wg, ng;
            MPI_Comm_group(MPI_COMM_WORLD, &wg);
            MPI_Comm_group(node, &ng);
            MPI_Group_translate_ranks(wg, 1, &other, ng, &g);
            local = g != MPI_UNDEFINED;
            MPI_Group_free(&wg);
            MPI_Group_free(&ng);
        }
        MPI_Comm_free(&node);
        MPI_Bcast(&local, 1, MPI_INT, 0, MPI_COMM_WORLD);       /* the same limit everywhere */
        if (local && pvar_read("amlapi_vnode_peers") > 0 && pvar_read("amlapi_vnode_single_copy")) {
            int v = cvar_int("MPIR_CVAR_AMLAPI_VNODE_SINGLE_COPY_THRESHOLD");
            if (v > 0)
                l->eager = v;
        }
    }
}

/* The protocol a standard-mode MPI message of n data bytes takes, for a sender holding
 * adaptive credits for its peer (a sender without one uses rendezvous instead). */
static inline int expected_proto(const struct limits *l, long n)
{
    if (n <= l->onepacket)
        return P_ONEPACKET;
    if (n > l->eager)
        return l->rndv_as_eager ? P_EAGER : P_RNDV;
    return l->credits ? P_ADAPTIVE : P_EAGER;
}

/* Cancels the send *req of n bytes (protocol proto) and asserts that amlapi's cancel
 * protocol ran: exactly one CANCEL_ACK came back, counted by amlapi_send_cancels_ok when the
 * receiver dropped the message (then MPI_Test_cancelled must say so) and by
 * amlapi_send_cancels_failed when it was too late. Returns MPI_Test_cancelled's flag. */
static inline int cancel_counted(MPI_Request * req, int proto, long n, const char *what)
{
    MPI_Status st;
    int flag;
    unsigned long long ok0 = pvar_read("amlapi_send_cancels_ok");
    unsigned long long no0 = pvar_read("amlapi_send_cancels_failed");
    MPI_Cancel(req);
    MPI_Wait(req, &st);
    MPI_Test_cancelled(&st, &flag);
    unsigned long long ok = pvar_read("amlapi_send_cancels_ok") - ok0;
    unsigned long long no = pvar_read("amlapi_send_cancels_failed") - no0;
    if (ok + no != 1 || ok != (unsigned long long) !!flag)
        ERR("cancel of a %s %s send of %ld bytes: cancelled %d, amlapi_send_cancels_ok +%llu, "
            "amlapi_send_cancels_failed +%llu (want one answer, agreeing)", what,
            proto_name[proto], n, flag, ok, no);
    return flag;
}

#endif /* AMLAPI_TEST_MPIT_H */
