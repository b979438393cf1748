// Timing for the micro-benchmarks of `atomr bench`: runs a callable in batches until a time budget
// is spent, repeats that several times, and reports the median nanoseconds per call. Steady clock;
// the first repetition warms caches and allocators and is discarded.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace atomr::apps::bench {

// Keeps the compiler from deleting work whose result is otherwise unused.
template <typename T>
inline void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

struct measurement {
  double ns_per_op = 0;
  std::uint64_t ops = 0;
};

template <typename F>
measurement measure(F&& op, std::chrono::milliseconds per_repetition = std::chrono::milliseconds(40),
                    int repetitions = 7) {
  using clock = std::chrono::steady_clock;
  std::vector<double> samples;
  std::uint64_t total_ops = 0;
  std::uint64_t batch = 16;
  for (int rep = 0; rep <= repetitions; ++rep) {
    std::uint64_t ops = 0;
    const auto start = clock::now();
    auto now = start;
    while (now - start < per_repetition) {
      for (std::uint64_t i = 0; i < batch; ++i) op();
      ops += batch;
      now = clock::now();
      if (now - start < per_repetition / 10) batch *= 2;
    }
    if (rep == 0) continue;
    samples.push_back(std::chrono::duration<double, std::nano>(now - start).count() / static_cast<double>(ops));
    total_ops += ops;
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return {samples[samples.size() / 2], total_ops};
}

}  // namespace atomr::apps::bench
