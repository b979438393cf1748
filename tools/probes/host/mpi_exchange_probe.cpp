// A probe, not a test: what an 8 B all_reduce between 2 ranks costs through
// each MPI path atomr could take, under MPI_THREAD_MULTIPLE as atomr initializes MPI: a blocking
// MPI_Allreduce; MPI_Iallreduce polled with MPI_Test; the point-to-point exchange of atomr's
// host all_reduce (MPI_Irecv + MPI_Isend, polled with MPI_Testall or MPI_Testsome, or waited with
// MPI_Waitall); and the same exchange with persistent requests (MPI_Recv_init/MPI_Send_init,
// MPI_Startall). Median of 7 runs of 20,000 operations each, in us per operation.
//   mpirun -np 2 --bind-to none mpi_exchange_probe
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "%s failed (%d)\n", what, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

double per_op_us(const std::function<void()>& op, int n) {
  std::vector<double> runs;
  for (int rep = 0; rep < 7; ++rep) {
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) op();
    runs.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "mpi_exchange_probe needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  const int peer = 1 - rank;
  const int n = 20000;
  double data[1] = {1.0}, in[1] = {0.0};
  struct row {
    const char* name;
    double us;
  };
  std::vector<row> rows;
  rows.push_back(
      {"MPI_Allreduce (blocking)",
       per_op_us(
           [&] { check(MPI_Allreduce(MPI_IN_PLACE, data, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce"); },
           n)});
  rows.push_back({"MPI_Iallreduce + MPI_Test loop", per_op_us(
                                                        [&] {
                                                          MPI_Request q;
                                                          check(MPI_Iallreduce(MPI_IN_PLACE, data, 1, MPI_DOUBLE,
                                                                               MPI_SUM, MPI_COMM_WORLD, &q),
                                                                "Iallreduce");
                                                          int done = 0;
                                                          while (!done)
                                                            check(MPI_Test(&q, &done, MPI_STATUS_IGNORE), "MPI_Test");
                                                        },
                                                        n)});
  auto exchange = [&](int how) {
    MPI_Request q[2];
    check(MPI_Irecv(in, 1, MPI_DOUBLE, peer, 5, MPI_COMM_WORLD, &q[0]), "MPI_Irecv");
    check(MPI_Isend(data, 1, MPI_DOUBLE, peer, 5, MPI_COMM_WORLD, &q[1]), "MPI_Isend");
    if (how == 0) {
      check(MPI_Waitall(2, q, MPI_STATUSES_IGNORE), "MPI_Waitall");
    } else if (how == 1) {
      int done = 0;
      while (!done) check(MPI_Testall(2, q, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    } else {
      int left = 2, outcount = 0, idx[2];
      while (left > 0) {
        check(MPI_Testsome(2, q, &outcount, idx, MPI_STATUSES_IGNORE), "MPI_Testsome");
        if (outcount != MPI_UNDEFINED) left -= outcount;
      }
    }
    check(MPI_Reduce_local(in, data, 1, MPI_DOUBLE, MPI_SUM), "MPI_Reduce_local");
  };
  rows.push_back({"Irecv + Isend + Waitall", per_op_us([&] { exchange(0); }, n)});
  rows.push_back({"Irecv + Isend + Testall loop", per_op_us([&] { exchange(1); }, n)});
  rows.push_back({"Irecv + Isend + Testsome loop", per_op_us([&] { exchange(2); }, n)});
  MPI_Request persistent[2];
  check(MPI_Recv_init(in, 1, MPI_DOUBLE, peer, 6, MPI_COMM_WORLD, &persistent[0]), "MPI_Recv_init");
  check(MPI_Send_init(data, 1, MPI_DOUBLE, peer, 6, MPI_COMM_WORLD, &persistent[1]), "MPI_Send_init");
  rows.push_back({"persistent: Startall + Testall loop",
                  per_op_us(
                      [&] {
                        check(MPI_Startall(2, persistent), "MPI_Startall");
                        int done = 0;
                        while (!done) check(MPI_Testall(2, persistent, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
                        check(MPI_Reduce_local(in, data, 1, MPI_DOUBLE, MPI_SUM), "MPI_Reduce_local");
                      },
                      n)});
  MPI_Request_free(&persistent[0]);
  MPI_Request_free(&persistent[1]);
  if (rank == 0) {
    std::printf("8 B all_reduce between 2 ranks, MPI_THREAD_MULTIPLE (provided %d), median us per operation:\n",
                provided);
    for (const auto& r : rows) std::printf("  %-40s %7.3f\n", r.name, r.us);
  }
  MPI_Finalize();
  return 0;
}
