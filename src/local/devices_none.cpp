// Build without CUDA: there are never CUDA devices.
#include "atomr/local/devices.hpp"

namespace atomr::local {

result<device_probe> probe_cuda_devices() {
  device_probe probe;
  probe.absent_reason = "atomr was built without CUDA (ATOMR_CUDA=OFF or no toolkit at configure time)";
  return probe;
}

}  // namespace atomr::local
