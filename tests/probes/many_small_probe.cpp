// Probe (not a test): the engine's own cost for many small all_reduces handed over in one
// submit_all call, in a loop long enough to profile (perf record, callgrind). Host devices and
// the host backend, or with --gpu the rank's GPU and NCCL. Prints the median time per call and
// the median time until submit_all returned (the caller's own part: making and handing over).
//   mpirun -np 1 many_small_probe [rounds] [count] [bytes] [--gpu]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "atomr/cluster/world.hpp"

namespace {
namespace al = atomr::local;
namespace ac = atomr::cluster;
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool gpu = std::find(args.begin(), args.end(), "--gpu") != args.end();
  std::erase(args, "--gpu");
  const int rounds = args.size() > 0 ? std::atoi(args[0].c_str()) : 200;
  const int count = args.size() > 1 ? std::atoi(args[1].c_str()) : 1000;
  const std::size_t bytes = args.size() > 2 ? std::strtoull(args[2].c_str(), nullptr, 10) : 2048;
  int code = 0;
  {
    al::actor_system sys;
    // One GPU per rank on a node: the node-local rank's.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    auto dev = al::device::start(sys, gpu ? local : 0, gpu ? al::device_kind::cuda : al::device_kind::host);
    if (!dev) {
      std::fprintf(stderr, "device: %s\n", dev.error_value().describe().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    auto w = ac::world::create(MPI_COMM_WORLD, {*dev}, {});
    if (!w) {
      std::fprintf(stderr, "world: %s\n", w.error_value().describe().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::vector<al::gpu_ref<float>> bufs;
    for (int i = 0; i < count; ++i) {
      bufs.push_back(dev->allocate<float>(bytes / sizeof(float)).get().value());
      (void)dev->fill_bytes(bufs.back(), 0).get();
    }
    std::vector<double> times;
    std::vector<double> made;  // until submit_all returned: the caller's own part
    for (int r = 0; r < rounds; ++r) {
      std::vector<ac::coll_spec> specs;
      specs.reserve(bufs.size());
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& b : bufs) {
        specs.push_back(
            {ac::coll_kind::all_reduce, al::dtype::f32, {ac::reduce_op::sum, 0, 0}, {b.block()}, {b.block()}});
      }
      auto pending = (*w)->submit_all(std::move(specs));
      made.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      for (auto& f : pending) {
        if (!f.get()) code = 1;
      }
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    std::sort(made.begin(), made.end());
    if (rank == 0) {
      std::printf(
          "many_small_probe: %d x %zu B, %d rounds: median %.1f us, min %.1f us; submit_all returned after %.1f us "
          "(median)\n",
          count, bytes, rounds, times[times.size() / 2], times.front(), made[made.size() / 2]);
    }
  }
  MPI_Finalize();
  return code;
}
