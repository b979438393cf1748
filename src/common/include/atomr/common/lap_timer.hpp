// Milliseconds since the last lap (or since the timer was made): for the debug lines that say
// where a run of steps spent its time (a world's creation, an NCCL backend's start and end).
#pragma once

#include <chrono>

namespace atomr {

class lap_timer {
 public:
  double lap() noexcept {
    const auto now = clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - mark_).count();
    mark_ = now;
    return ms;
  }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point mark_ = clock::now();
};

}  // namespace atomr
