// A budget of log lines per time window, for warnings that a peer or a flood of bad input can
// trigger once per message (dead letters, malformed requests): the first lines of each window are
// written, the rest are counted, and the next written line says how many were left out. A log that
// floods costs more than the fault it reports (millions of lines a second fill a disk).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

namespace atomr {

class log_budget {
 public:
  using clock = std::chrono::steady_clock;

  log_budget(std::uint32_t lines_per_window, clock::duration window) : per_window_(lines_per_window), window_(window) {}

  // Whether a line may be written now. If it may: how many lines were left out before it (write that
  // number with it when it is not 0); if not: nullopt, and this one is counted as left out.
  std::optional<std::uint64_t> admit(clock::time_point now = clock::now()) {
    std::lock_guard lock(mutex_);
    if (!started_ || now - window_start_ >= window_) {
      started_ = true;
      window_start_ = now;
      used_ = 0;
    }
    if (used_ == per_window_) {
      ++left_out_;
      return std::nullopt;
    }
    ++used_;
    const std::uint64_t left_out = left_out_;
    left_out_ = 0;
    return left_out;
  }

 private:
  std::mutex mutex_;
  const std::uint32_t per_window_;
  const clock::duration window_;
  bool started_ = false;
  clock::time_point window_start_{};
  std::uint32_t used_ = 0;
  std::uint64_t left_out_ = 0;
};

}  // namespace atomr
