// CUDA build: devices from the CUDA runtime.
#include <cuda_runtime_api.h>

#include <array>

#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/devices.hpp"

namespace atomr::local {

result<device_probe> probe_cuda_devices() {
  device_probe probe;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  // These mean "no usable GPU here", which is a normal state on CI machines and login nodes.
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorNotSupported ||
      status == cudaErrorSystemNotReady || status == cudaErrorCompatNotSupportedOnDevice) {
    cudaGetLastError();
    const std::string cuda_says = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
    probe.absent_reason = status == cudaErrorInsufficientDriver
                              ? "no usable NVIDIA driver for this CUDA runtime; CUDA says: " + cuda_says
                              : cuda_says;
    return probe;
  }
  ATOMR_TRY(ATOMR_CUDA_CHECK(status));
  for (int d = 0; d < count; ++d) {
    context::scoped_device bound(d);
    cudaDeviceProp prop{};
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGetDeviceProperties(&prop, d)));
    std::array<char, 32> bus{};
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), d)));
    device_info info;
    info.index = d;
    info.kind = device_kind::cuda;
    info.name = prop.name;
    info.total_memory = prop.totalGlobalMem;
    info.pci_bus_id = bus.data();
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    probe.devices.push_back(std::move(info));
  }
  if (count == 0) probe.absent_reason = "the CUDA runtime reports 0 devices";
  return probe;
}

}  // namespace atomr::local
