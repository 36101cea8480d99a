/* The library's state: the topology, loaded on the first call after MPI_Init, the back end it
 * chose, and the channels' attribute; freed at MPI_Finalize. */
#include "mps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mps_state state;
static int loaded;              /* 1 loaded, -1 failed (load_rc/load_detail say why) */
static int load_rc;
static char load_detail[1024];

const char *MPS_Backend_name(void)
{
    if (loaded == 1)
        return state.be->name;
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin && mps_native_wanted() ? mps_native_backend.name : mps_emps_backend.name;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, with MPI still usable: pools the
 * application left are freed there (their receives cancelled, memory given back) */
static int self_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)val, (void)extra;
    if (state.free_pools)
        state.free_pools(&state);
    mps_nat_free_all();     /* after the pools: collective over each channel's ends */
    mps_topo_free(&state.topo);
    MPI_Comm_free_keyval(&state.comm_keyval);
    MPI_Comm_free_keyval(&keyval);
    loaded = 0;
    return MPI_SUCCESS;
}

static int chan_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    mps_channel *ch = val;
    if (ch->rcv_pool)       /* the pool outlives its communicator: it no longer selects by it */
        ch->rcv_pool->chan = NULL;
    free(ch);
    return MPI_SUCCESS;
}

mps_state *mps_get_state(int *rc)
{
    if (loaded == 1)
        return &state;
    if (loaded == -1) {
        *rc = mps_error(load_rc, "%s", load_detail);
        return NULL;
    }
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) {
        *rc = mps_error(MPS_ERR_MPI, "MPS is used between MPI_Init and MPI_Finalize");
        return NULL;
    }
    const char *path = getenv("MPS_TOPOLOGY"), *be = getenv("MPS_BACKEND");
    char err[sizeof(load_detail)];
    if (be && *be && strcmp(be, "emps") && strcmp(be, "native")) {
        snprintf(err, sizeof(err), "MPS_BACKEND=%.64s: neither emps nor native", be);
        load_rc = MPS_ERR_ARG;
    } else if (!path || !*path) {
        snprintf(err, sizeof(err), "MPS_TOPOLOGY is not set: start the program with mpsrun TOPOLOGY -- PROGRAM");
        load_rc = MPS_ERR_TOPOLOGY;
    } else if (mps_topo_load(path, &state.topo, err, sizeof(err))) {
        load_rc = MPS_ERR_TOPOLOGY;
    } else {
        MPI_Comm_rank(MPI_COMM_WORLD, &state.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &state.size);
        if (state.size != state.topo.nprocs) {
            snprintf(err, sizeof(err), "%s declares %d processes but MPI_COMM_WORLD has %d", path,
                     state.topo.nprocs, state.size);
            load_rc = MPS_ERR_TOPOLOGY;
            mps_topo_free(&state.topo);
        } else {
            int self_key;
            /* native where the library is amlapi (MPS_BACKEND=emps|native forces one) */
            state.be = mps_native_wanted() ? &mps_native_backend : &mps_emps_backend;
            MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, chan_delete, &state.comm_keyval, NULL);
            MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_key, NULL);
            MPI_Comm_set_attr(MPI_COMM_SELF, self_key, NULL);
            loaded = 1;
            return &state;
        }
    }
    /* the same answer on every later call: the file is not read again */
    snprintf(load_detail, sizeof(load_detail), "%s", err);
    loaded = -1;
    *rc = mps_error(load_rc, "%s", load_detail);
    return NULL;
}

mps_channel *mps_channel_of(mps_state *s, MPI_Comm comm)
{
    void *val = NULL;
    int flag = 0;
    if (comm == MPI_COMM_NULL)
        return NULL;
    if (MPI_Comm_get_attr(comm, s->comm_keyval, &val, &flag) != MPI_SUCCESS || !flag)
        return NULL;
    return val;
}
