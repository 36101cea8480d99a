/* Process names and channels: the topology's names at run time. A channel is a communicator
 * of the link's two ends, with the back end's checks and (native) its arena. */
#include "mps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
