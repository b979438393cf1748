// A rank's own checks: its device starts, allocates, runs a kernel and copies bytes back
// unchanged; how fast it copies; pinned host<->device bandwidth; CPU binding and NUMA locality.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <span>

#include "atomr/local/devices.hpp"
#include "atomr/local/topology/irq_cpus.hpp"
#include "doctor_parts.hpp"
#if ATOMR_HAVE_CUDA
#include "add_one.hpp"
#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::cluster::doctor::detail {
namespace {

std::vector<int> my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The fastest of the repetitions that fit `slice` (at least `min_reps`): a repetition that lost its
// CPU to another process is slower, never faster, than the device.
template <typename F>
result<double> fastest_seconds(F&& once, clock::duration slice, int min_reps, int max_reps) {
  double best = 0;
  const auto start = clock::now();
  for (int i = 0; i < max_reps && (i < min_reps || clock::now() - start < slice); ++i) {
    const auto t0 = clock::now();
    ATOMR_TRY(once());
    const double s = seconds_of(clock::now() - t0);
    if (i == 0 || s < best) best = s;
  }
  return best;
}

result<void> device_checks(const local::device& dev, const options& opts, rank_result& r, clock::duration slice) {
  const std::size_t words = opts.check_bytes / 4;
  const double gb = static_cast<double>(words * 4) / 1e9;
  auto a = dev.allocate<std::uint32_t>(words).get();
  if (!a) return a.error_value().with_context("allocating " + std::to_string(words * 4) + " bytes");
  auto b = dev.allocate<std::uint32_t>(words).get();
  if (!b) return b.error_value().with_context("allocating " + std::to_string(words * 4) + " bytes");
  std::vector<std::uint32_t> host(words);
  for (std::size_t i = 0; i < words; ++i) host[i] = pattern_word(r.rank, i);
  if (auto u = dev.upload(*a, std::span<const std::uint32_t>(host)).get(); !u) {
    return u.error_value().with_context("uploading");
  }
  if (auto c = dev.copy(*b, *a).get(); !c) return c.error_value().with_context("copying on the device");
  auto kernel = dev.run(
                       [buf = *b, words](const local::stream_context& ctx) -> result<void> {
                         ATOMR_ASSIGN_OR_RETURN(std::uint32_t * p, buf.data());
#if ATOMR_HAVE_CUDA
                         if (ctx.kind == local::device_kind::cuda) {
                           return ATOMR_CUDA_CHECK(launch_add_one(p, words, static_cast<cudaStream_t>(ctx.stream)));
                         }
#endif
                         (void)ctx;
                         for (std::size_t i = 0; i < words; ++i) p[i] += 1;
                         return ok();
                       },
                       {b->block()})
                    .get();
  if (!kernel) return kernel.error_value().with_context("running a kernel");
  std::vector<std::uint32_t> back(words);
  if (auto d = dev.download(*b, std::span<std::uint32_t>(back)).get(); !d) {
    return d.error_value().with_context("downloading");
  }
  for (std::size_t i = 0; i < words; ++i) {
    if (back[i] != host[i] + 1) {
      return error(errc::unavailable, "word " + std::to_string(i) + " of " + std::to_string(words) + " came back as " +
                                          std::to_string(back[i]) + ", expected " + std::to_string(host[i] + 1) +
                                          " (upload, device copy, kernel, download)");
    }
  }
  ATOMR_ASSIGN_OR_RETURN(const double copy_s,
                         fastest_seconds([&] { return dev.copy(*b, *a).get(); }, slice / 2, 3, 200));
  r.device_copy_gbps = gb / copy_s;
#if ATOMR_HAVE_CUDA
  if (dev.kind() == local::device_kind::cuda) {
    void* pinned = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocHost(&pinned, words * 4)));
    std::shared_ptr<void> keep(pinned, [](void* p) { cudaFreeHost(p); });
    auto transfer = [&](bool to_device) {
      return dev
          .run(
              [&, buf = *b](const local::stream_context& ctx) -> result<void> {
                ATOMR_ASSIGN_OR_RETURN(std::uint32_t * p, buf.data());
                const auto stream = static_cast<cudaStream_t>(ctx.stream);
                return to_device
                           ? ATOMR_CUDA_CHECK(cudaMemcpyAsync(p, pinned, words * 4, cudaMemcpyHostToDevice, stream))
                           : ATOMR_CUDA_CHECK(cudaMemcpyAsync(pinned, p, words * 4, cudaMemcpyDeviceToHost, stream));
              },
              {b->block()})
          .get();
    };
    ATOMR_ASSIGN_OR_RETURN(const double h2d_s, fastest_seconds([&] { return transfer(true); }, slice / 4, 3, 100));
    ATOMR_ASSIGN_OR_RETURN(const double d2h_s, fastest_seconds([&] { return transfer(false); }, slice / 4, 3, 100));
    r.h2d_gbps = gb / h2d_s;
    r.d2h_gbps = gb / d2h_s;
  }
#endif
  return ok();
}

}  // namespace

result<double> measure_copy(const local::device& dev, const options& opts, clock::duration slice) {
  const std::size_t words = opts.check_bytes / 4;
  ATOMR_ASSIGN_OR_RETURN(auto a, dev.allocate<std::uint32_t>(words).get());
  ATOMR_ASSIGN_OR_RETURN(auto b, dev.allocate<std::uint32_t>(words).get());
  ATOMR_ASSIGN_OR_RETURN(const double s, fastest_seconds([&] { return dev.copy(b, a).get(); }, slice, 3, 200));
  return static_cast<double>(words * 4) / 1e9 / s;
}

double seconds_of(clock::duration d) { return std::chrono::duration<double>(d).count(); }

rank_result check_rank(local::actor_system& system, const options& opts, const node_identity& id,
                       std::optional<local::device>& started, clock::duration slice) {
  const auto t0 = clock::now();
  rank_result r;
  r.rank = id.world_rank;
  r.node = id.node_id;
  r.hostname = id.hostname;
  r.local_rank = id.local_rank;
  const auto cpus = my_cpus();
  r.cpus = local::cpu_list_text(cpus);
  r.cpu_count = static_cast<int>(cpus.size());
  r.bound = static_cast<long>(cpus.size()) < sysconf(_SC_NPROCESSORS_ONLN);
  r.cpu_numa = numa_nodes_of(opts.sysfs, cpus);
  if (auto nics = read_nics(opts.sysfs); !nics.empty()) r.net = nics.front();

  const auto probe = local::probe_cuda_devices();
  const int visible = probe ? static_cast<int>(probe->devices.size()) : 0;
  r.gpu = opts.device == device_choice::cuda || (opts.device == device_choice::automatic && visible > 0);
  if (r.gpu) {
    r.device_index = visible > 0 ? id.local_rank % visible : 0;
    if (visible > 0) {
      const auto& info = probe->devices[static_cast<std::size_t>(r.device_index)];
      r.device_name = info.name;
      r.pcie = read_pcie_link(opts.sysfs, info.pci_bus_id);
      r.gpu_numa = read_pci_numa(opts.sysfs, info.pci_bus_id);
    } else {
      r.device_name = "GPU";
    }
  } else {
    r.device_name = "host memory";
    r.no_gpu_reason = probe ? probe->absent_reason : probe.error_value().describe();
    if (opts.device == device_choice::host) r.no_gpu_reason = "--device host";
  }
  auto dev = local::device::start(system, r.device_index, r.gpu ? local::device_kind::cuda : local::device_kind::host);
  // A device actor whose backend fails to start stops at once; its first answer says so.
  std::string cannot_start;
  if (!dev) {
    cannot_start = dev.error_value().describe();
  } else if (auto alive = dev->stats().get(); !alive) {
    auto end = dev->on_terminated().get();
    cannot_start = end && end->reason ? end->reason->describe() : alive.error_value().describe();
  }
  if (!cannot_start.empty()) {
    r.failure = "device cannot start: " + cannot_start;
    if (r.gpu && visible == 0) r.failure += " (no GPU visible: " + (probe ? probe->absent_reason : std::string()) + ")";
  } else if (auto checked = device_checks(*dev, opts, r, slice); !checked) {
    r.failure = "device check failed: " + checked.error_value().describe();
  } else {
    started = *dev;
  }
  r.seconds = seconds_of(clock::now() - t0);
  return r;
}

}  // namespace atomr::cluster::doctor::detail
