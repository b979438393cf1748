// Polling loops that wait a few microseconds for another thread (a reply, a completion): where
// cores are plentiful the poller spins with the CPU's pause hint, which notices a change within
// tens of nanoseconds; where they are scarce (fewer than k_plenty CPUs in the process's affinity
// mask, such as a 2-core CI machine, or a rank bound to one core by `mpirun --bind-to core`) it
// yields, so the thread it waits for gets to run. A yield is a system call (about 1 us on a VM),
// which is why it is not used where it is not needed. Decided once per process.
#pragma once

#include <sched.h>

#include <string>
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
  // The CPUs this process may run on, as a list ("0-7,16"), and how many.
  static std::string cpu_list(int* count = nullptr) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
    std::string out;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      int last = c;
      while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
      if (!out.empty()) out += ',';
      out += std::to_string(c);
      if (last > c) {
        out += '-';
        out += std::to_string(last);
      }
      n += last - c + 1;
      c = last;
    }
    if (count != nullptr) *count = n;
    return out;
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
