// Polling loops that wait a few microseconds for another thread (a reply, a completion): where
// cores are plentiful the poller spins with the CPU's pause hint, which notices a change within
// tens of nanoseconds; where they are scarce it yields, so the thread it waits for gets to run. A
// yield is a system call (about 1 us on a VM), which is why it is not used where it is not needed.
// Scarce means fewer than k_plenty CPUs for this rank: the CPUs in the process's affinity mask,
// shared by the node's ranks when the mask is the whole machine (unbound ranks: 16 ranks on 16
// cores have one each, and with two spinning threads per rank a pause-spin holds cores that the
// awaited thread needs for a whole time slice: an 8 B all_reduce took 0.9 ms instead of 14 us).
// The node's rank count comes from the launcher's environment (Open MPI, MPICH, Slurm). Decided
// once per process.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "atomr/common/launch_env.hpp"
#include "atomr/common/tunables.hpp"

namespace atomr {

class spin_relax {
 public:
  static constexpr unsigned k_plenty = 4;

  // One wait between two looks.
  void operator()() const noexcept {
    if (plenty_) {
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
  // plenty(), read once for this object: loops call it between every two looks.
  bool plenty_here() const noexcept { return plenty_; }
  // ATOMR_SPIN=pause or yield overrides the count (auto, the default, or anything else: the
  // count decides): the test command runs the world's tests at 4 ranks spinning on its 2 cores,
  // the way they run on a GPU host with a core per rank, where some hangs show only so.
  static bool plenty() noexcept {
    static const bool value = [] {
      const auto mode = tunable_value(tunables::spin);
      if (mode == "pause") return true;
      if (mode == "yield") return false;
      return cpus_per_rank() >= k_plenty;
    }();
    return value;
  }
  // The CPUs this rank may count on (see above).
  static unsigned cpus_per_rank() noexcept {
    cpu_set_t set;
    CPU_ZERO(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::thread::hardware_concurrency();
    const auto mask = static_cast<unsigned>(CPU_COUNT(&set));
    const unsigned local = atomr::ranks_on_this_node();
    return online > 0 && mask >= static_cast<unsigned>(online) && local > 1 ? std::max(1u, mask / local) : mask;
  }

 private:
  bool plenty_ = plenty();
};

}  // namespace atomr
