// What the examples need of a device: one per rank (a GPU where the node has them, shared out by
// local rank; else the host device), and a reduction that runs on either kind.
#pragma once

#include <string>

#include "atomr/local/device/device.hpp"
#include "atomr/local/devices.hpp"
#if ATOMR_HAVE_CUDA
#include "sum_kernel.hpp"
#endif

namespace example {
inline atomr::result<atomr::local::device> start_device(atomr::local::actor_system& system, int local_rank) {
  ATOMR_ASSIGN_OR_RETURN(auto probe, atomr::local::probe_cuda_devices());
  const int gpus = static_cast<int>(probe.devices.size());
  if (gpus == 0) return atomr::local::device::start(system, 0, atomr::local::device_kind::host);
  return atomr::local::device::start(system, local_rank % gpus, atomr::local::device_kind::cuda);
}

// Adds up `in` into out[0] on the device's stream: a CUDA kernel on a GPU, a loop on a host device
// (run on the device's thread).
inline atomr::result<void> sum_floats(const atomr::local::gpu_ref<float>& in, const atomr::local::gpu_ref<double>& out,
                                      [[maybe_unused]] const atomr::local::stream_context& ctx) {
  ATOMR_ASSIGN_OR_RETURN(float* values, in.data());
  ATOMR_ASSIGN_OR_RETURN(double* total, out.data());
#if ATOMR_HAVE_CUDA
  if (ctx.kind == atomr::local::device_kind::cuda) {
    const int e = launch_sum(values, in.size(), total, ctx.stream);
    return e == 0 ? atomr::ok() : atomr::error(atomr::errc::cuda, "sum kernel: CUDA error " + std::to_string(e));
  }
#endif
  *total = 0;
  for (std::size_t i = 0; i < in.size(); ++i) *total += values[i];
  return atomr::ok();
}
}  // namespace example
