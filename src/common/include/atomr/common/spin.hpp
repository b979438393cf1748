// Polling loops that wait a few microseconds for another thread (a reply, a completion): where
// cores are plentiful the poller spins with the CPU's pause hint, which notices a change within
// tens of nanoseconds; where they are scarce (fewer than k_plenty CPUs in the process's affinity
// mask, such as a 2-core CI machine, or a rank bound to one core by `mpirun --bind-to core`) it
// yields, so the thread it waits for gets to run. A yield is a system call (about 1 us on a VM),
// which is why it is not used where it is not needed. Decided once per process.
#pragma once

#include <sched.h>

#include <thread>

namespace atomr {

class spin_relax {
 public:
  static constexpr unsigned k_plenty = 8;

  // One wait between two looks.
  void operator()() const noexcept {
    if (plenty()) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield" ::: "memory");
#endif
    } else {
      std::this_thread::yield();
    }
  }
  static bool plenty() noexcept {
    static const bool value = [] {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::thread::hardware_concurrency() >= k_plenty;
      return static_cast<unsigned>(CPU_COUNT(&set)) >= k_plenty;
    }();
    return value;
  }
};

}  // namespace atomr
