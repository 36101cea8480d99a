/*
 * For maint/test-slurm: how many nodes MPICH sees, however the job was launched (srun, or
 * mpiexec inside salloc). Counts the nodes of MPICH's node map (one MPI_COMM_TYPE_SHARED
 * communicator per node) and the distinct processor names (hostnames), prints both with each
 * rank's host, and exits non-zero unless both equal argv[1] (when given): a launcher whose
 * PMI gives MPICH no node map, or a wrong one, shows as a wrong count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, len, shrank, first, nodes = 0, names = 0, bad = 0;
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    MPI_Comm shm;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* nodes of the node map: the ranks that are first on their node */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm);
    MPI_Comm_rank(shm, &shrank);
    first = shrank == 0;
    MPI_Allreduce(&first, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    /* distinct hostnames, counted at rank 0 */
    MPI_Get_processor_name(name, &len);
    char *all = rank == 0 ? malloc((size_t) size * MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < size; i++) {
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = !strcmp(all + (size_t) i * MPI_MAX_PROCESSOR_NAME,
                               all + (size_t) j * MPI_MAX_PROCESSOR_NAME);
            names += !seen;
            printf("nodes: rank %d on %s\n", i, all + (size_t) i * MPI_MAX_PROCESSOR_NAME);
        }
        printf("nodes: %d ranks, %d nodes in MPICH's node map, %d distinct hostnames\n", size,
               nodes, names);
        if (argc > 1 && (nodes != atoi(argv[1]) || names != atoi(argv[1]))) {
            printf("nodes: FAILED: expected %d nodes\n", atoi(argv[1]));
            bad = 1;
        }
        free(all);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&shm);
    MPI_Finalize();
    return bad;
}
