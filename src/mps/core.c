/* MPS state (the topology, loaded on first use), error reporting, process names and channels. */
#define _GNU_SOURCE
#include "mps_impl.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char detail[1024];
static mps_state state;
static int loaded;              /* 1 loaded, -1 failed (load_rc/load_detail say why) */
static int load_rc;
static char load_detail[1024];

int mps_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return code;
}

int mps_mpi_error(const char *call, int mpi_rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(mpi_rc, msg, &len);
    return mps_error(MPS_ERR_MPI, "%s failed: %s", call, msg);
}

void mps_relax(void)
{
    /* spin a little (a message is often microseconds away), then let another process of the
     * same core run. Every 64th poll is a guess: against a yield at every poll, an A/B on a
     * host loaded by other jobs showed no difference either way (5 runs, 64 KiB-1 MiB). */
    static _Thread_local unsigned polls;
    if ((++polls & 63) == 0)
        sched_yield();
}

const char *MPS_Error_detail(void)
{
    return detail;
}

const char *MPS_Error_string(int code)
{
    static const char *const s[] = {
        [MPS_SUCCESS] = "success",
        [MPS_EEMPTY] = "no buffer available now (EEMPTY)",
        [MPS_ERR_TIMEOUT] = "timed out",
        [MPS_ERR_ARG] = "invalid argument",
        [MPS_ERR_TOPOLOGY] = "topology error",
        [MPS_ERR_NAME] = "unknown or mismatched process or link name",
        [MPS_ERR_MEDIUM] = "medium not provided by this back end",
        [MPS_ERR_POOL] = "not a live pool",
        [MPS_ERR_BUF_FOREIGN] = "buffer of another pool",
        [MPS_ERR_BUF_UNKNOWN] = "not a pool buffer",
        [MPS_ERR_BUF_NOT_OWNED] = "buffer not owned by the application (released twice?)",
        [MPS_ERR_BUSY] = "transfers in flight or buffers held by the application",
        [MPS_ERR_COMM] = "not an MPS channel communicator",
        [MPS_ERR_MPI] = "MPI call failed",
        [MPS_ERR_NOMEM] = "out of memory",
        [MPS_ERR_TRUNCATE] = "message larger than the pool's buffers",
    };
    return code >= 0 && code <= MPS_ERR_LAST ? s[code] : "unknown MPS error code";
}

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
    mps_pools_free_all(&state);
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

int MPS_Process_get_name(int rank, char *name)
{
    int rc;
    mps_state *s = mps_get_state(&rc);
    if (!s)
        return rc;
    if (!name)
        return mps_error(MPS_ERR_ARG, "MPS_Process_get_name: name is NULL");
    if (rank < 0 || rank >= s->size)
        return mps_error(MPS_ERR_NAME, "MPS_Process_get_name: no rank %d in MPI_COMM_WORLD (0 to %d)", rank,
                         s->size - 1);
    snprintf(name, MPS_MAX_NAME, "%s", s->topo.procs[rank].name);
    return MPS_SUCCESS;
}

int MPS_Process_get_rank(const char *name, int *rank)
{
    int rc;
    mps_state *s = mps_get_state(&rc);
    if (!s)
        return rc;
    if (!name || !rank)
        return mps_error(MPS_ERR_ARG, "MPS_Process_get_rank: NULL argument");
    int i = mps_topo_find_process(&s->topo, name);
    if (i < 0)
        return mps_error(MPS_ERR_NAME, "MPS_Process_get_rank: %s declares no process '%.*s'", s->topo.file,
                         MPS_MAX_NAME, name);
    *rank = i;
    return MPS_SUCCESS;
}

int MPS_Channel_create(const char *chan_name, const char *rendpoint, MPI_Comm *comm, int *lrank, int *rrank)
{
    int rc;
    mps_state *s = mps_get_state(&rc);
    if (!s)
        return rc;
    if (!chan_name || !rendpoint || !comm || !lrank || !rrank)
        return mps_error(MPS_ERR_ARG, "MPS_Channel_create: NULL argument");
    const mps_topo *t = &s->topo;
    int li = mps_topo_find_link(t, chan_name);
    if (li < 0)
        return mps_error(MPS_ERR_NAME, "MPS_Channel_create: %s declares no link '%.*s'", t->file, MPS_MAX_NAME,
                         chan_name);
    const mps_topo_link *l = &t->links[li];
    int remote = mps_topo_find_process(t, rendpoint);
    if (remote < 0)
        return mps_error(MPS_ERR_NAME, "MPS_Channel_create: link '%s': %s declares no process '%.*s'", l->name,
                         t->file, MPS_MAX_NAME, rendpoint);
    int me = s->rank;
    if (!((l->end[0] == me && l->end[1] == remote) || (l->end[1] == me && l->end[0] == remote)))
        return mps_error(MPS_ERR_NAME, "MPS_Channel_create: link '%s' (%s:%d) joins %s and %s, not %s (this process) and %s",
                         l->name, t->file, l->line, t->procs[l->end[0]].name, t->procs[l->end[1]].name,
                         t->procs[me].name, rendpoint);
    if ((rc = s->be->medium_check(t, l)) != MPS_SUCCESS)
        return rc;

    MPI_Group world, pair;
    MPI_Comm c;
    int ranks[2] = {l->end[0], l->end[1]};
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 2, ranks, &pair);
    /* collective over the two ends only; the link's index keeps concurrent creations apart */
    int mrc = MPI_Comm_create_group(MPI_COMM_WORLD, pair, li, &c);
    MPI_Group_free(&pair);
    MPI_Group_free(&world);
    if (mrc != MPI_SUCCESS)
        return mps_mpi_error("MPI_Comm_create_group", mrc);
    if ((rc = s->be->channel_check(t, l, c)) != MPS_SUCCESS) {
        MPI_Comm_free(&c);
        return rc;
    }
    mps_channel *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        MPI_Comm_free(&c);
        return mps_error(MPS_ERR_NOMEM, "MPS_Channel_create: out of memory");
    }
    ch->link = li;
    ch->lrank = l->end[0] == me ? 0 : 1;
    ch->rrank = 1 - ch->lrank;
    /* the native back end's arena, made once per channel (collective over its two ends) */
    if ((rc = mps_nat_chan_open(s, ch, l, c)) != MPS_SUCCESS) {
        free(ch);
        MPI_Comm_free(&c);
        return rc;
    }
    if (!ch->nat && s->be == &mps_native_backend && !strcmp(l->medium, "shm")) {
        /* shm promises zero copy; the host check above passed, so the window was refused */
        free(ch);
        MPI_Comm_free(&c);
        return mps_error(MPS_ERR_MEDIUM, "MPS_Channel_create: link '%s' (%s:%d): medium shm, but no shared-memory "
                         "arena could be made between its ends (%s)", l->name, t->file, l->line,
                         *mps_nat_refusal() ? mps_nat_refusal() : "the other end refused it");
    }
    MPI_Comm_set_attr(c, s->comm_keyval, ch);
    *comm = c;
    *lrank = ch->lrank;
    *rrank = ch->rrank;
    return MPS_SUCCESS;
}
