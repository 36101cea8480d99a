// A C++ MPI program of the common kind, built with mpicxx: templates map C++ types to MPI
// datatypes, the standard library holds the data, std::thread workers communicate under
// MPI_THREAD_MULTIPLE, and MPI lives in a global "environment" object whose destructor calls
// MPI_Finalize, so finalize runs inside exit() among the static destructors (as in BAGEL).
// The job must end with status 0; rank 0 prints " No Errors" from the destructor (MPICH's
// MTest convention), and nothing else is printed; a failure is a message and an abort.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

template <typename T> struct mpi_type;
template <> struct mpi_type<int> { static MPI_Datatype get() { return MPI_INT; } };
template <> struct mpi_type<double> { static MPI_Datatype get() { return MPI_DOUBLE; } };
template <> struct mpi_type<long long> { static MPI_Datatype get() { return MPI_LONG_LONG; } };

class Environment {
  public:
    void init(int *argc, char ***argv)
    {
        int provided;
        MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE)
            fail("MPI_THREAD_MULTIPLE not provided");
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    ~Environment()
    {
        int flag = 0;
        MPI_Initialized(&flag);
        if (!flag)
            return;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        MPI_Finalized(&flag);
        if (!flag)
            fail("MPI_Finalize did not finalize");
        if (rank_ == 0)
            std::printf(" No Errors\n");
        std::fflush(stdout);
    }
    int rank() const { return rank_; }
    int size() const { return size_; }
    [[noreturn]] void fail(const std::string &what) const
    {
        std::fprintf(stderr, "rank %d: %s\n", rank_, what.c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::abort();
    }

  private:
    int rank_ = -1, size_ = 0;
};

static Environment env;     // constructed before main, destroyed inside exit()

template <typename T> std::vector<T> allreduce_sum(const std::vector<T> &in)
{
    std::vector<T> out(in.size());
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), mpi_type<T>::get(),
                  MPI_SUM, MPI_COMM_WORLD);
    return out;
}

template <typename T> void check_allreduce(std::size_t n)
{
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; i++)
        v[i] = static_cast<T>(env.rank() + 1) * static_cast<T>(i % 7);
    std::vector<T> s = allreduce_sum(v);
    T ranks = static_cast<T>(env.size() * (env.size() + 1) / 2);
    for (std::size_t i = 0; i < n; i++)
        if (s[i] != ranks * static_cast<T>(i % 7))
            env.fail("allreduce: wrong element " + std::to_string(i));
}

// each thread exchanges with the next and previous rank on its own communicator
static void worker(MPI_Comm comm, int id, std::map<int, long long> &got)
{
    int next = (env.rank() + 1) % env.size(), prev = (env.rank() + env.size() - 1) % env.size();
    std::vector<long long> out(1000 + id), in(out.size());
    for (int round = 0; round < 50; round++) {
        std::iota(out.begin(), out.end(), static_cast<long long>(env.rank() * 100000 + round));
        MPI_Sendrecv(out.data(), static_cast<int>(out.size()), MPI_LONG_LONG, next, id,
                     in.data(), static_cast<int>(in.size()), MPI_LONG_LONG, prev, id, comm,
                     MPI_STATUS_IGNORE);
        if (in[0] != prev * 100000 + round || in.back() != in[0] + static_cast<long long>(in.size()) - 1)
            env.fail("thread " + std::to_string(id) + ": wrong data in round " + std::to_string(round));
    }
    got[id] = std::accumulate(in.begin(), in.end(), 0LL);
}

int main(int argc, char **argv)
{
    env.init(&argc, &argv);
    check_allreduce<int>(100);
    check_allreduce<double>(5000);
    check_allreduce<long long>(3);

    const int nthreads = 2;
    std::vector<MPI_Comm> comms(nthreads);
    for (auto &c : comms)
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    std::vector<std::map<int, long long>> got(nthreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; t++)
        threads.emplace_back(worker, comms[t], t, std::ref(got[t]));
    for (auto &t : threads)
        t.join();
    for (auto &c : comms)
        MPI_Comm_free(&c);
    for (int t = 0; t < nthreads; t++)
        if (got[t].size() != 1)
            env.fail("thread " + std::to_string(t) + " recorded nothing");
    return 0;       // MPI_Finalize runs in ~Environment, inside exit()
}
