#include "atomr/cluster/nccl_warm_up.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "atomr/common/log.hpp"
#include "atomr/common/tunables.hpp"

#if ATOMR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm_backend.hpp"
#endif

namespace atomr::cluster {

#if ATOMR_HAVE_NCCL
namespace {

// The warm-up threads, by device; joined by wait_nccl_warm or at exit.
struct warm_ups {
  std::mutex mutex;
  std::map<int, std::thread> threads;
  ~warm_ups() {
    for (auto& [device, t] : threads) {
      if (t.joinable()) t.join();
    }
  }
};

warm_ups& registry() {
  static warm_ups r;
  return r;
}

void warm(int device) {
  const auto began = std::chrono::steady_clock::now();
  auto said = [&](const char* what, int code) {
    log::get("cluster")->debug("NCCL warm-up on device {}: {} failed ({}); the world's init loads the kernels", device,
                               what, code);
  };
  if (const auto e = cudaSetDevice(device); e != cudaSuccess) return said("cudaSetDevice", static_cast<int>(e));
  ncclUniqueId id{};
  if (const auto e = ncclGetUniqueId(&id); e != ncclSuccess) return said("ncclGetUniqueId", static_cast<int>(e));
  ncclComm_t comm = nullptr;
  if (const auto e = ncclCommInitRank(&comm, 1, id, 0); e != ncclSuccess) {
    return said("ncclCommInitRank", static_cast<int>(e));
  }
  if (const auto e = ncclCommDestroy(comm); e != ncclSuccess) said("ncclCommDestroy", static_cast<int>(e));
  log::get("cluster")->debug(
      "NCCL warm-up on device {}: a one-rank communicator made and destroyed in {:.1f} ms", device,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count());
}

}  // namespace

result<void> warm_nccl(std::span<const int> devices) {
  ATOMR_ASSIGN_OR_RETURN(const auto on, tunable_int(tunables::nccl_warm_up));
  if (on != 0 && on != 1) return error(errc::invalid_argument, "ATOMR_NCCL_WARM_UP takes 0 or 1");
  if (on == 0) return ok();
  // NCCL reads its parameters once: the world's choice must be in the environment before the
  // warm-up's first NCCL call, or the world would inherit NCCL's default.
  detail::connect_nccl_at_init();
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (const int d : devices) {
    if (r.threads.count(d) != 0) continue;
    r.threads.emplace(d, std::thread(warm, d));
  }
  return ok();
}

void wait_nccl_warm(int device) {
  auto& r = registry();
  std::thread t;
  {
    std::lock_guard lock(r.mutex);
    const auto it = r.threads.find(device);
    if (it == r.threads.end() || !it->second.joinable()) return;
    t = std::move(it->second);  // (the entry stays: the device is warmed once)
  }
  t.join();
}

#else

result<void> warm_nccl(std::span<const int>) {
  ATOMR_ASSIGN_OR_RETURN(const auto on, tunable_int(tunables::nccl_warm_up));
  if (on != 0 && on != 1) return error(errc::invalid_argument, "ATOMR_NCCL_WARM_UP takes 0 or 1");
  return ok();
}
void wait_nccl_warm(int) {}

#endif

}  // namespace atomr::cluster
