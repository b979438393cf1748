// Every rank puts numbers that depend on its rank into a buffer, and one all_reduce leaves their
// sum in every rank's buffer. Then four buffers are summed by one submit_group, as a training step
// sums its gradient buckets. Every rank checks every element. On GPUs the world runs on NCCL; where
// no GPU is visible, the same code runs on the host backend, over MPI.
//
//   mpirun -n 2 build/release/bin/atomr-example-all-reduce
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "atomr/cluster/device_plan.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/local/devices.hpp"

namespace example {
namespace al = atomr::local;
namespace ac = atomr::cluster;

// Element i of buffer b is weight * (i % 10 + b). Rank r puts in weight r + 1, so the sum over n
// ranks has weight n(n + 1) / 2: a rank left out or counted twice, or two buffers of a group
// swapped, shows as a wrong element.
float element(int weight, std::size_t b, std::size_t i) {
  return static_cast<float>(weight) * static_cast<float>(i % 10 + b);
}

// NCCL takes one GPU per rank: choose_devices shares a node's GPUs out among its ranks, and says so
// where there are too few. No GPU visible: the host device.
atomr::result<al::device> start_device(al::actor_system& system, const ac::node_identity& id) {
  ATOMR_ASSIGN_OR_RETURN(auto probe, al::probe_cuda_devices());
  const int gpus = static_cast<int>(probe.devices.size());
  ATOMR_ASSIGN_OR_RETURN(auto mine, ac::choose_devices({.per_rank = 1}, id.local_rank, id.local_size, gpus));
  if (mine.empty()) return al::device::start(system, 0, al::device_kind::host);
  return al::device::start(system, mine[0], al::device_kind::cuda);
}

atomr::result<al::gpu_ref<float>> filled(const al::device& dev, std::size_t n, int weight, std::size_t b) {
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = element(weight, b, i);
  ATOMR_ASSIGN_OR_RETURN(auto buf, dev.allocate<float>(n).get());
  ATOMR_TRY(dev.upload(buf, std::span<const float>(host)).get());  // `host` must outlive the copy
  return buf;
}

// A wrong sum is a broken promise of atomr's, hence errc::internal.
atomr::result<void> check(const al::device& dev, const al::gpu_ref<float>& buf, int rank, int weight, std::size_t b) {
  std::vector<float> host(buf.size());
  ATOMR_TRY(dev.download(buf, std::span<float>(host)).get());
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] == element(weight, b, i)) continue;
    const auto where =
        "rank " + std::to_string(rank) + ", buffer " + std::to_string(b) + ", element " + std::to_string(i);
    return atomr::error(atomr::errc::internal, where + " does not hold the sum over all ranks");
  }
  return atomr::ok();
}

atomr::result<void> run(const ac::mpi_session& session) {
  al::actor_system system;
  ATOMR_ASSIGN_OR_RETURN(auto dev, start_device(system, session.identity()));
  ATOMR_ASSIGN_OR_RETURN(auto options, ac::world_options::from_environment());  // ATOMR_COLL_*
  // Collective: every rank creates the world, then makes the same calls on it in the same order.
  ATOMR_ASSIGN_OR_RETURN(auto world, ac::world::create(session.world(), {dev}, options));
  const int ranks = world->size();
  const int rank = world->rank();

  std::vector<al::gpu_ref<float>> buffers;
  ATOMR_ASSIGN_OR_RETURN(auto large, filled(dev, 1 << 20, rank + 1, 0));
  ATOMR_TRY(world->all_reduce(large, ac::reduce_op::sum).get());  // in place
  buffers.push_back(large);

  // Collectives that belong together go as one group: one call, one future, and the small
  // all_reduces packed into one.
  std::vector<ac::coll_spec> group;
  for (std::size_t b = 1; b <= 4; ++b) {
    ATOMR_ASSIGN_OR_RETURN(auto bucket, filled(dev, 1000 * b, rank + 1, b));
    group.push_back(ac::all_reduce_spec(bucket, ac::reduce_op::sum));
    buffers.push_back(bucket);
  }
  ATOMR_TRY(world->submit_group(std::move(group)).get());

  for (std::size_t b = 0; b < buffers.size(); ++b) ATOMR_TRY(check(dev, buffers[b], rank, ranks * (ranks + 1) / 2, b));
  if (rank == 0) {
    std::printf("%d rank(s), %s backend: an all_reduce of %zu floats and a group of %zu, every element right\n", ranks,
                std::string(ac::to_string(world->backend())).c_str(), large.size(), buffers.size() - 1);
  }
  return atomr::ok();
}
}  // namespace example

int main(int argc, char** argv) {
  auto session = atomr::cluster::mpi_session::start(&argc, &argv);
  auto done = session ? example::run(**session) : atomr::result<void>(session.error_value());
  if (done) return 0;
  std::fprintf(stderr, "all_reduce: %s\n", done.error_value().describe().c_str());
  return 1;
}
