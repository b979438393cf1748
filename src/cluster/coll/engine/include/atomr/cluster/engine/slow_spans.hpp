// ATOMR_TRACE: the world engine's progress loop phases (and callers' assisting turns) that took
// longer than k_slow_span, counted per phase with the longest, logged when the world ends: a
// request whose completion was seen late shows where the looking thread was instead. Written by
// whichever thread ran the phase; counted with atomics, the kept spans under their own lock.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "atomr/cluster/request_trace.hpp"

namespace atomr::cluster::detail {

enum class slow_phase : std::uint8_t {
  idle_spin,
  keep_off,
  sleep,
  lock_missed,
  tasks,
  take_inbox,
  issue_ready,
  complete,
  health,
  resolve_free,
  assist,
  query,   // one backend test() of a traced request (inside complete)
  fulfil,  // one traced request's future fulfilled (inside complete)
  count
};
inline constexpr auto k_slow_span = std::chrono::microseconds(10);
struct slow_span_counts {
  static constexpr std::size_t n = static_cast<std::size_t>(slow_phase::count);
  std::array<std::atomic<std::uint64_t>, n> count{}, longest_ns{};
  // The last k_kept slow spans, for the timeline (a text file beside it: <path>.spans).
  struct kept_span {
    std::int64_t start_ns;
    std::int64_t ns;
    std::int32_t thread;
    slow_phase phase;
  };
  static constexpr std::size_t k_kept = 16384;
  mutable std::mutex kept_mutex;
  std::vector<kept_span> kept;
  std::size_t kept_next = 0;
  void note(slow_phase p, std::chrono::steady_clock::duration d) {
    if (d < k_slow_span) return;
    {
      const auto end = std::chrono::steady_clock::now().time_since_epoch();
      const kept_span k{std::chrono::duration_cast<std::chrono::nanoseconds>(end - d).count(),
                        std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(), this_thread_id(), p};
      std::lock_guard lock(kept_mutex);
      if (kept.size() < k_kept) {
        kept.push_back(k);
      } else {
        kept[kept_next] = k;
        kept_next = (kept_next + 1) % k_kept;
      }
    }
    const auto i = static_cast<std::size_t>(p);
    count[i].fetch_add(1, std::memory_order_relaxed);
    const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    auto seen = longest_ns[i].load(std::memory_order_relaxed);
    while (ns > seen && !longest_ns[i].compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }
  std::string describe() const;
  // (Spaces become '_' in the spans file.)
  static constexpr std::array<const char*, n> names{"idle_spin",  "keep_off", "sleep",    "lock_missed", "tasks",
                                                    "take_inbox", "issue",    "complete", "health",      "resolve_free",
                                                    "assist",     "query",    "fulfil"};
};

}  // namespace atomr::cluster::detail
