// Which CUDA devices this rank drives. By default the visible devices are shared out by local
// rank, in NUMA order (hwloc locality), so local ranks 0..k-1 land on the GPUs of the first NUMA
// node; `atomr-launch --bind gpu` then pins each rank next to its GPU. Explicit options override.
// Indices are CUDA device ordinals as this process sees them (after CUDA_VISIBLE_DEVICES).
#pragma once

#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster {

struct device_request {
  bool host = false;                    // use no GPU: the host backend
  std::vector<int> explicit_devices{};  // exactly these (--devices 0,1)
  int per_rank = 0;                     // devices per rank; 0: as many as divide evenly, at least 1
};

// `numa_of_device[i]` is the NUMA node of visible device i (-1 unknown); may be empty.
// No visible device and no explicit request gives the host backend (an empty list).
result<std::vector<int>> choose_devices(const device_request& request, int local_rank, int local_size,
                                        int visible_count, const std::vector<int>& numa_of_device = {});

// "0,2" -> {0, 2}; a clear error for anything else.
result<std::vector<int>> parse_device_list(const std::string& text);

}  // namespace atomr::cluster
