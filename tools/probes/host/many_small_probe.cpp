// Probe (not a test): the engine's own cost for many small all_reduces handed over in one
// per-request group, in a loop long enough to profile (perf record, callgrind). Host devices and
// the host backend, or with --gpu the rank's GPU and NCCL. Prints the median time per call and
// the median time until submit_group(each_request) returned (the caller's own part: making and handing over).
//   mpirun -np 1 many_small_probe [rounds] [count] [bytes] [--gpu] [--gap] [--braced]
//          [--each | --group | --prepared | --buffers]
// --each: every request by a call of its own (world::all_reduce), not one per-request group.
// --group: one submit_group call (one future for the call); from the third round on it is
// submitted as the kept prepared call (world_options::group_cache) unless ATOMR_COLL_GROUP_CACHE=0.
// --buffers: one world::submit_group (buffers) call on the buffers (no specs made where it repeats a
// kept call).
// --prepared: the call prepared once (world::prepare_group) and submitted each round
// (world::submit_prepared).
// --braced: each spec made as a braced list, {..., {b.block()}, {b.block()}}, rather than by
// cluster::all_reduce_spec (which takes each buffer's reference once, not three times).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "atomr/cluster/world.hpp"
#include "atomr/local/devices.hpp"

namespace {
namespace al = atomr::local;
namespace ac = atomr::cluster;

// Each thread's CPU time so far (user and system, in clock ticks), from /proc.
std::map<int, long> thread_ticks() {
  std::map<int, long> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream st(e.path() / "stat");
    std::string line;
    std::getline(st, line);
    const auto close = line.rfind(')');  // (the name may hold spaces)
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    long ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i >= 14) ticks += std::stol(field);  // utime, stime
    }
    out[std::stoi(e.path().filename().string())] = ticks;
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool gpu = std::find(args.begin(), args.end(), "--gpu") != args.end();
  std::erase(args, "--gpu");
  // --gap: the ranks meet (MPI_Barrier) and sleep 2 ms between calls, so that each call finds the
  // engine idle, as a training step's gradients find it after the step's compute.
  const bool gap = std::find(args.begin(), args.end(), "--gap") != args.end();
  std::erase(args, "--gap");
  const bool each = std::find(args.begin(), args.end(), "--each") != args.end();
  std::erase(args, "--each");
  const bool group = std::find(args.begin(), args.end(), "--group") != args.end();
  std::erase(args, "--group");
  const bool prepared = std::find(args.begin(), args.end(), "--prepared") != args.end();
  std::erase(args, "--prepared");
  const bool by_buffers = std::find(args.begin(), args.end(), "--buffers") != args.end();
  std::erase(args, "--buffers");
  const bool braced = std::find(args.begin(), args.end(), "--braced") != args.end();
  std::erase(args, "--braced");
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
    // (Modulo the GPUs it sees: two ranks on one GPU under launch/own-nccl-host share it.)
    const auto gpus = gpu ? al::probe_cuda_devices() : atomr::result<al::device_probe>(al::device_probe{});
    const int visible = gpus ? static_cast<int>(gpus->devices.size()) : 0;
    const int index = gpu && visible > 0 ? local % visible : 0;
    auto dev = al::device::start(sys, index, gpu ? al::device_kind::cuda : al::device_kind::host);
    if (!dev) {
      std::fprintf(stderr, "device: %s\n", dev.error_value().describe().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    // (The world's settings from the environment, as atomr's commands take them: ATOMR_COLL_*.)
    auto options = ac::world_options::from_environment();
    if (!options) {
      std::fprintf(stderr, "options: %s\n", options.error_value().describe().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    auto w = ac::world::create(MPI_COMM_WORLD, {*dev}, *options);
    if (!w) {
      std::fprintf(stderr, "world: %s\n", w.error_value().describe().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::vector<al::gpu_ref<float>> bufs;
    for (int i = 0; i < count; ++i) {
      bufs.push_back(dev->allocate<float>(bytes / sizeof(float)).get().value());
      (void)dev->fill_bytes(bufs.back(), 0).get();
    }
    std::optional<ac::group_call> call;
    if (prepared) {
      std::vector<ac::coll_spec> specs;
      for (const auto& b : bufs) specs.push_back(ac::all_reduce_spec(b));
      auto made_call = (*w)->prepare_group(std::move(specs));
      if (!made_call) {
        std::fprintf(stderr, "prepare_group: %s\n", made_call.error_value().describe().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      call = std::move(made_call).value();
    }
    std::vector<double> times;
    std::vector<double> made;  // until submit_group(each_request) returned: the caller's own part
    // CPU time over the rounds, per thread: against the wall time, whether the rank's threads
    // were busy or waiting (on the 2-core machine the ranks share the cores).
    const auto threads0 = thread_ticks();
    const auto wall0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) {
      if (gap) {
        MPI_Barrier(MPI_COMM_WORLD);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::vector<ac::coll_spec> specs;
      specs.reserve(bufs.size());
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<ac::future<void>> pending;
      if (call) {
        pending.push_back((*w)->submit_prepared(*call));
      } else if (by_buffers) {
        pending.push_back((*w)->submit_group(std::span<const al::gpu_ref<float>>(bufs), ac::reduce_op::sum));
      } else if (each) {
        pending.reserve(bufs.size());
        for (const auto& b : bufs) pending.push_back((*w)->all_reduce(b, ac::reduce_op::sum));
      } else {
        if (braced) {
          for (const auto& b : bufs) {
            specs.push_back(
                {ac::coll_kind::all_reduce, al::dtype::f32, {ac::reduce_op::sum, 0, 0}, {b.block()}, {b.block()}});
          }
        } else {
          for (const auto& b : bufs) specs.push_back(ac::all_reduce_spec(b));
        }
        if (group) {
          pending.push_back((*w)->submit_group(std::move(specs)));
        } else {
          pending = (*w)->submit_group(std::move(specs), ac::each_request);
        }
      }
      made.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      for (auto& f : pending) {
        if (!f.get()) code = 1;
      }
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    double cpu = 0;
    const double tick_us = 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
    for (const auto& [tid, ticks] : thread_ticks()) {
      const auto it = threads0.find(tid);
      const double us = static_cast<double>(ticks - (it == threads0.end() ? 0 : it->second)) * tick_us / rounds;
      cpu += us;
      if (us > 0) std::fprintf(stderr, "rank %d thread %d: %.1f us of CPU a call\n", rank, tid, us);
    }
    const double wall =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0).count() / rounds;
    std::sort(times.begin(), times.end());
    std::sort(made.begin(), made.end());
    if (rank == 0) {
      std::printf(
          "many_small_probe: %d x %zu B, %d rounds: median %.1f us, min %.1f us; submit_group(each_request) returned "
          "after %.1f us "
          "(median); this rank's CPU time %.1f us a call (mean), wall %.1f us\n",
          count, bytes, rounds, times[times.size() / 2], times.front(), made[made.size() / 2], cpu, wall);
      // What the engine did for them, per call: exchanges (agreements) and backend calls.
      const auto s = (*w)->stats();
      std::printf(
          "many_small_probe: per call: %.2f agreements, %.2f issues, %.2f packed; %llu calls as a kept prepared call\n",
          static_cast<double>(s.agreements) / rounds, static_cast<double>(s.issues) / rounds,
          static_cast<double>(s.packed) / rounds, static_cast<unsigned long long>(s.group_repeats));
    }
  }
  MPI_Finalize();
  return code;
}
