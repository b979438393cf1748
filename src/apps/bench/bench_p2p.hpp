// The peer-copy benchmark's results (see bench_p2p.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::apps::bench {

struct p2p_row {
  std::size_t bytes = 0;
  int iterations = 0;
  double raw_gbps = 0, atomr_gbps = 0;  // back-to-back copies, then one wait
  double raw_us = 0, atomr_us = 0;      // one copy at a time, each waited for
  // Of atomr's copies, the share its caller enqueued itself (the device's inline lane; the rest
  // went by mail to the device thread), back to back and one at a time.
  double bw_inline = 0, lat_inline = 0;
};

// GPU `src` to GPU `dst`, sizes from min_bytes to max_bytes, multiplying by `factor`.
result<std::vector<p2p_row>> run_p2p_benchmarks(int src, int dst, std::size_t min_bytes, std::size_t max_bytes,
                                                std::size_t factor);

}  // namespace atomr::apps::bench
