// Core-to-core probe (not part of atomr): the round trip of one cache line between two threads
// pinned to CPUs a and b (an atomic counter bumped in turn), and the cost of one thread reading
// 64 lines the other just wrote, per line. For the GPU machine's 32 vCPUs: what a hand-off
// between a caller and the progress thread costs per line, by pair of CPUs.
//   c2c [a b]...   (default: 0 with every other CPU)
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {
void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (pthread_setaffinity_np(pthread_self(), sizeof(s), &s) != 0) std::abort();
}
struct alignas(64) line {
  std::atomic<long> v{0};
};
constexpr int k_lines = 64;
line lines[k_lines];
line turn;

// Round trip ns for one line; then ns per line for a burst of k_lines written by a, read by b.
std::pair<double, double> measure(int a, int b) {
  constexpr long k_trips = 200000, k_bursts = 20000;
  turn.v = 0;
  std::thread other([&] {
    pin(b);
    for (long i = 0; i < k_trips; ++i) {
      while (turn.v.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      turn.v.store(2 * i + 2, std::memory_order_release);
    }
    for (long i = 0; i < k_bursts; ++i) {
      while (turn.v.load(std::memory_order_acquire) != 2 * k_trips + 2 * i + 1) {
      }
      long sum = 0;
      for (auto& l : lines) sum += l.v.load(std::memory_order_relaxed);
      if (sum < 0) std::abort();
      turn.v.store(2 * k_trips + 2 * i + 2, std::memory_order_release);
    }
  });
  pin(a);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < k_trips; ++i) {
    turn.v.store(2 * i + 1, std::memory_order_release);
    while (turn.v.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  for (long i = 0; i < k_bursts; ++i) {
    for (auto& l : lines) l.v.store(i, std::memory_order_relaxed);
    turn.v.store(2 * k_trips + 2 * i + 1, std::memory_order_release);
    while (turn.v.load(std::memory_order_acquire) != 2 * k_trips + 2 * i + 2) {
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  other.join();
  const double trip = std::chrono::duration<double, std::nano>(t1 - t0).count() / k_trips;
  const double burst = std::chrono::duration<double, std::nano>(t2 - t1).count() / k_bursts;
  return {trip, (burst - trip) / k_lines};
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> pairs;
  for (int i = 1; i + 1 < argc; i += 2) pairs.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
  if (pairs.empty()) {
    const int n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    for (int b = 1; b < n; ++b) pairs.push_back({0, b});
  }
  for (auto [a, b] : pairs) {
    auto [trip, per_line] = measure(a, b);
    std::printf("cpus %2d %2d: round trip %7.1f ns, burst of %d lines %6.1f ns a line\n", a, b, trip, k_lines,
                per_line);
  }
}
