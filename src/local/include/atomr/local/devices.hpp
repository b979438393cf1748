// Which devices this process can see. CUDA devices come from the CUDA runtime (so they honor
// CUDA_VISIBLE_DEVICES); where none is visible (no GPU, no driver, or a build without CUDA) the
// probe says why and callers fall back to the host device kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::local {

enum class device_kind : std::uint8_t { cuda = 0, host = 1 };

struct device_info {
  int index = -1;  // CUDA ordinal within this process (after CUDA_VISIBLE_DEVICES); 0 for the host device
  device_kind kind = device_kind::host;
  std::string name;
  std::uint64_t total_memory = 0;  // bytes
  std::string pci_bus_id;          // "0000:3b:00.0"; empty for the host device
  int compute_major = 0;
  int compute_minor = 0;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(index, kind, name, total_memory, pci_bus_id, compute_major, compute_minor);
  }
};

struct device_probe {
  std::vector<device_info> devices;  // CUDA devices only
  std::string absent_reason;         // why `devices` is empty, e.g. "no CUDA-capable device is detected"
};

// Lists the CUDA devices visible to this process. "No GPU" is not an error: the result is then
// empty with absent_reason set. Errors are real failures (e.g. a device that cannot be queried).
result<device_probe> probe_cuda_devices();

// The host device kind: this machine's CPU and memory, as the device of a rank without a GPU.
device_info host_device();

}  // namespace atomr::local
