// MPICH 4.0.2's C++ bindings (MPI::, deprecated since MPI-2.2 but still built, as Debian
// builds them): a program using them needs the C++ library too (libmpicxx, libmpichcxx.so.12
// under Debian's name), which make check's ABI test loads from our install alone. Prints
// " No Errors" from rank 0 (" Found N errors" on any error: MPICH's MTest convention).
#include <mpi.h>
#include <cstdio>

int main(int argc, char **argv)
{
    MPI::Init(argc, argv);
    int rank = MPI::COMM_WORLD.Get_rank(), size = MPI::COMM_WORLD.Get_size();
    int one = 1, sum = 0;
    MPI::COMM_WORLD.Allreduce(&one, &sum, 1, MPI::INT, MPI::SUM);
    int token = rank;
    if (size > 1)
        MPI::COMM_WORLD.Sendrecv_replace(&token, 1, MPI::INT, (rank + 1) % size, 0,
                                         (rank + size - 1) % size, 0);
    int errs = (sum != size) + (token != (rank + size - 1) % size);
    int total = 0;
    MPI::COMM_WORLD.Reduce(&errs, &total, 1, MPI::INT, MPI::SUM, 0);
    if (rank == 0)
        std::printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI::Finalize();
    return total != 0;
}
