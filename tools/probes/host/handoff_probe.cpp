// A probe, not a test: what hand-offs between threads cost on this machine: a
// clock read, a round trip between two spinning cores, two yielding threads, and a condition variable.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace {
void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

int main() {
  const int n = 1000000;
  auto t0 = std::chrono::steady_clock::now();
  long long sink = 0;
  for (int i = 0; i < n; ++i) sink += std::chrono::steady_clock::now().time_since_epoch().count() & 1;
  auto t1 = std::chrono::steady_clock::now();
  std::printf("steady_clock::now: %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  // spin hop round trip
  std::atomic<int> a{0};
  std::thread b([&] {
    for (int i = 0; i < 200000; ++i) {
      while (a.load() != 2 * i + 1) cpu_relax();
      a.store(2 * i + 2);
    }
  });
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200000; ++i) {
    a.store(2 * i + 1);
    while (a.load() != 2 * i + 2) cpu_relax();
  }
  t1 = std::chrono::steady_clock::now();
  b.join();
  std::printf("spin round trip: %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 200000);
  // yield-based
  std::atomic<int> y{0};
  std::thread c([&] {
    for (int i = 0; i < 100000; ++i) {
      while (y.load() != 2 * i + 1) std::this_thread::yield();
      y.store(2 * i + 2);
    }
  });
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; ++i) {
    y.store(2 * i + 1);
    while (y.load() != 2 * i + 2) std::this_thread::yield();
  }
  t1 = std::chrono::steady_clock::now();
  c.join();
  std::printf("yield round trip: %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 100000);
  // condvar
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  std::thread d([&] {
    for (int i = 0; i < 20000; ++i) {
      std::unique_lock l(m);
      cv.wait(l, [&] { return turn == 2 * i + 1; });
      turn = 2 * i + 2;
      cv.notify_all();
    }
  });
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) {
    std::unique_lock l(m);
    turn = 2 * i + 1;
    cv.notify_all();
    cv.wait(l, [&] { return turn == 2 * i + 2; });
  }
  t1 = std::chrono::steady_clock::now();
  d.join();
  std::printf("condvar round trip: %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 20000);
  return sink == 42;
}
