/* The MPI/MPS example of the HPEC 2004 MPS poster, made a whole program. The poster's
 * lines are kept as printed (its MPS_buf_pool_init spelling included) with two exceptions:
 * the remote end is "proc2" on proc1 and "proc1" on proc2 (the poster shows the sender's
 * side), and MPI_Wait takes &req (the poster passes the request by value, which is no C
 * for MPI_Wait). The receiver's "Release buffer ..." is filled in: take the filled buffer
 * from the receive pool, check it, give it back.
 *
 * Run: mpsrun poster.topo -- ./poster */
#include <mps.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm com;
    MPI_Request req;
    MPI_Status status;
    MPS_pool_t pool;
    int lrank, rrank, bufsize = 0, bufcount = 0;    /* 0: the link's values from the topology */
    int *buf;
    char me[MPS_MAX_NAME];
    int wrank, sender, size, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (MPS_Process_get_name(wrank, me) != MPS_SUCCESS) {
        fprintf(stderr, "poster: %s\n", MPS_Error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    sender = !strcmp(me, "proc1");
    if (MPS_Channel_create("link1", sender ? "proc2" : "proc1", &com, &lrank, &rrank) != MPS_SUCCESS) {
        fprintf(stderr, "poster: %s\n", MPS_Error_detail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPS_buf_pool_init(com, (sender) ? MPS_SND : MPS_RCV, &bufsize, &bufcount, &pool);
    size = bufsize;
    if (sender) {
        MPS_Buf_get(pool, (void **)&buf);
        for (int i = 0; i < (int)(size / sizeof(int)); i++)     /* fill in with data */
            buf[i] = i * 7 + 1;
        MPI_Isend(buf, size/sizeof(int), MPI_INT, rrank, 99, com, &req);
        MPI_Wait(&req, &status);
        MPS_Buf_release(pool, buf);
    } else {
        int bytes, tag;
        MPS_Buf_get(pool, (void **)&buf);
        MPS_Buf_received(pool, buf, &bytes, &tag);
        for (int i = 0; i < (int)(size / sizeof(int)); i++)
            bad += buf[i] != i * 7 + 1;
        printf("%s (rank %d, lrank %d) received %d bytes with tag %d from rank %d of link1 in a pool buffer "
               "(%d x %d bytes, back end %s): %s\n", me, wrank, lrank, bytes, tag, rrank, bufcount, bufsize,
               MPS_Backend_name(), bad || bytes != size || tag != 99 ? "WRONG DATA" : "data ok");
        bad += bytes != size || tag != 99;
        MPS_Buf_release(pool, buf);
    }
    MPS_Buf_pool_finalize(pool);
    MPI_Finalize();
    return bad != 0;
}
