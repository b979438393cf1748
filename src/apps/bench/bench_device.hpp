// The device round-trip benchmark's results (see bench_device.cpp).
#pragma once

#include <string>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/local/devices.hpp"

namespace atomr::apps::bench {

struct device_case {
  std::string name;
  std::size_t bytes = 0;
  double raw_us = 0;    // the direct call(s), waited for
  double atomr_us = 0;  // the same through the device actor, future waited for
};

// An empty run() split at the threads it crosses (medians, us): the caller to the device actor's
// thread running the work, from there to the completion seen (event recorded, the completion
// waiter seeing it, the future settled on that thread), and to the caller seeing the result.
struct device_hops {
  double to_actor = 0, to_done = 0, to_caller = 0;
};
result<device_hops> run_device_hops(local::device_kind kind, int index);

// Round trips on device `index` of `kind`: allocate+free, upload and download of 4 KiB and 64 MiB
// (pageable host memory, as users pass it), and an empty run(). Raw: the CUDA runtime calls on a
// stream of its own (or malloc/memcpy on the host kind).
result<std::vector<device_case>> run_device_benchmarks(local::device_kind kind, int index);

}  // namespace atomr::apps::bench
