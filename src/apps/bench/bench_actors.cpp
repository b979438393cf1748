// `atomr bench actors`: tell throughput (1 and N producers into one actor), ask round-trip latency
// between two actors on different threads, and wake-up latency of a parked actor. Each against the
// raw baseline in the same run: the same moodycamel queue pushed and popped directly by plain
// threads (the consumer spinning on try_dequeue, or parked on the same semaphore for wake-up).
#include "bench/bench_actors.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <variant>

#include "atomr/local/actors.hpp"
#include "bench/measure.hpp"

namespace atomr::apps::bench {
namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace al = atomr::local;

double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// --- tell throughput --------------------------------------------------------------------------

struct item {
  std::uint64_t value;
};
struct expect {
  long long count;
  al::reply_to<long long> done;
};
using sink_msg = std::variant<item, expect>;

// Counts items; answers `expect` once that many have arrived.
class sink : public al::actor<sink_msg> {
 public:
  void receive(sink_msg& m) override {
    if (auto* i = std::get_if<item>(&m)) {
      ++count_;
      sum_ += i->value;
    } else {
      pending_.emplace(std::move(std::get<expect>(m)));
    }
    if (pending_ && count_ >= pending_->count) {
      keep(sum_);
      pending_->done.send(count_);
      pending_.reset();
    }
  }

 private:
  long long count_ = 0;
  std::uint64_t sum_ = 0;
  std::optional<expect> pending_;
};

double atomr_tell_rate(al::dispatch_kind kind, int producers, long long messages) {
  al::actor_system sys(al::system_config{.pool_threads = 1});
  auto s = sys.spawn<sink>({.dispatch = kind}).value();
  auto done = s.ask<long long>([&](auto r) { return expect{messages, std::move(r)}; }, 600s);
  const long long per = messages / producers;
  std::vector<std::thread> threads;
  const auto t0 = clock::now();
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (long long i = 0; i < per; ++i) (void)s.tell(item{static_cast<std::uint64_t>(i + p)});
    });
  }
  for (auto& t : threads) t.join();
  const auto received = done.get();
  const double secs = seconds_since(t0);
  return received ? static_cast<double>(*received) / secs : 0.0;
}

double raw_queue_rate(int producers, long long messages) {
  moodycamel::ConcurrentQueue<item> q;
  const long long per = messages / producers;
  const long long total = per * producers;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (long long i = 0; i < per; ++i) q.enqueue(item{static_cast<std::uint64_t>(i + p)});
    });
  }
  const auto t0 = clock::now();
  go.store(true, std::memory_order_release);
  std::uint64_t sum = 0;
  item it{};
  moodycamel::ConsumerToken token(q);
  for (long long got = 0; got < total;) {
    if (q.try_dequeue(token, it)) {
      sum += it.value;
      ++got;
    }
  }
  const double secs = seconds_since(t0);
  keep(sum);
  for (auto& t : threads) t.join();
  return static_cast<double>(total) / secs;
}

// --- ask round trip ------------------------------------------------------------------------------

struct ping {
  al::reply_to<clock::time_point> reply;
};
class ponger : public al::actor<std::variant<ping>> {
 public:
  void receive(std::variant<ping>& m) override { std::get<ping>(m).reply.send(clock::now()); }
};

struct run_pings {
  int count;
  al::actor_ref<std::variant<ping>> target;
  al::reply_to<std::vector<double>> done;
};
struct pong {
  clock::time_point sent;
};
using pinger_msg = std::variant<run_pings, pong>;

// Asks the ponger, gets the reply as a message through the future's continuation, asks again.
class pinger : public al::actor<pinger_msg> {
 public:
  void receive(pinger_msg& m) override {
    if (auto* r = std::get_if<run_pings>(&m)) {
      job_.emplace(std::move(*r));
      samples_.reserve(static_cast<std::size_t>(job_->count));
      next();
      return;
    }
    samples_.push_back(std::chrono::duration<double, std::micro>(clock::now() - std::get<pong>(m).sent).count());
    if (static_cast<int>(samples_.size()) == job_->count) {
      job_->done.send(std::move(samples_));
      job_.reset();
    } else {
      next();
    }
  }

 private:
  void next() {
    const auto sent = clock::now();
    auto self = context().self();
    job_->target.ask<clock::time_point>([](auto r) { return ping{std::move(r)}; }, 10s)
        .then([self, sent](const result<clock::time_point>&) { (void)self.tell(pong{sent}); });
  }
  std::optional<run_pings> job_;
  std::vector<double> samples_;
};

std::vector<double> atomr_ask_samples(int round_trips) {
  al::actor_system sys(al::system_config{.pool_threads = 1});
  auto b = sys.spawn<ponger>({.dispatch = al::dispatch_kind::dedicated}).value();
  auto a = sys.spawn<pinger>({.dispatch = al::dispatch_kind::dedicated}).value();
  auto samples = a.ask<std::vector<double>>(
                      [&](auto r) {
                        return run_pings{round_trips, b, std::move(r)};
                      },
                      600s)
                     .get();
  return samples ? *samples : std::vector<double>{};
}

// Two threads bouncing a timestamp through two moodycamel queues, spinning on try_dequeue.
std::vector<double> raw_ping_pong_samples(int round_trips) {
  moodycamel::ConcurrentQueue<clock::time_point> to_b;
  moodycamel::ConcurrentQueue<clock::time_point> to_a;
  std::thread b([&] {
    clock::time_point t;
    for (int i = 0; i < round_trips; ++i) {
      while (!to_b.try_dequeue(t)) {
      }
      to_a.enqueue(t);
    }
  });
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(round_trips));
  clock::time_point t;
  for (int i = 0; i < round_trips; ++i) {
    to_b.enqueue(clock::now());
    while (!to_a.try_dequeue(t)) {
    }
    samples.push_back(std::chrono::duration<double, std::micro>(clock::now() - t).count());
  }
  b.join();
  return samples;
}

// --- wake-up of a parked actor ----------------------------------------------------------------------

struct stamp {
  clock::time_point sent;
};
struct collect {
  al::reply_to<std::vector<double>> done;
};
using wake_msg = std::variant<stamp, collect>;
class wake_recorder : public al::actor<wake_msg> {
 public:
  void receive(wake_msg& m) override {
    if (auto* s = std::get_if<stamp>(&m)) {
      samples_.push_back(std::chrono::duration<double, std::micro>(clock::now() - s->sent).count());
    } else {
      std::get<collect>(m).done.send(std::move(samples_));
    }
  }

 private:
  std::vector<double> samples_;
};

// The pause lets the actor's thread finish spinning and sleep, so each tell measures a real wake-up.
constexpr auto k_park_pause = 3ms;

std::vector<double> atomr_wake_samples(int count) {
  al::actor_system sys(al::system_config{.pool_threads = 1});
  auto r = sys.spawn<wake_recorder>({.dispatch = al::dispatch_kind::dedicated}).value();
  for (int i = 0; i < count; ++i) {
    std::this_thread::sleep_for(k_park_pause);
    (void)r.tell(stamp{clock::now()});
  }
  return r.ask<std::vector<double>>([](auto d) { return collect{std::move(d)}; }, 60s)
      .get()
      .value_or(std::vector<double>{});
}

std::vector<double> raw_wake_samples(int count) {
  moodycamel::LightweightSemaphore sem(0, 20000);
  std::atomic<std::int64_t> sent_ns{0};
  std::vector<double> samples;
  std::thread waiter([&] {
    for (int i = 0; i < count; ++i) {
      sem.wait();
      const auto now = clock::now().time_since_epoch();
      samples.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() -
                                            sent_ns.load(std::memory_order_acquire)) /
                        1000.0);
    }
  });
  for (int i = 0; i < count; ++i) {
    std::this_thread::sleep_for(k_park_pause);
    sent_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count(),
                  std::memory_order_release);
    sem.signal();
  }
  waiter.join();
  return samples;
}

latency_case latency(std::string name, const std::vector<double>& atomr, const std::vector<double>& raw) {
  return {std::move(name),         static_cast<int>(atomr.size()), percentile(atomr, 0.5),
          percentile(atomr, 0.99), percentile(raw, 0.5),           percentile(raw, 0.99)};
}

}  // namespace

actor_results run_actor_benchmarks(long long messages, int producers, int round_trips) {
  actor_results out;
  out.throughput.push_back({"tell, 1 producer -> dedicated actor", 1, messages,
                            atomr_tell_rate(al::dispatch_kind::dedicated, 1, messages), raw_queue_rate(1, messages)});
  out.throughput.push_back({"tell, 1 producer -> pool actor", 1, messages,
                            atomr_tell_rate(al::dispatch_kind::pool, 1, messages), raw_queue_rate(1, messages)});
  out.throughput.push_back({"tell, " + std::to_string(producers) + " producers -> dedicated actor", producers, messages,
                            atomr_tell_rate(al::dispatch_kind::dedicated, producers, messages),
                            raw_queue_rate(producers, messages)});
  out.latency.push_back(
      latency("ask round trip, actor -> actor", atomr_ask_samples(round_trips), raw_ping_pong_samples(round_trips)));
  const int wakes = std::max(50, round_trips / 200);
  out.latency.push_back(latency("wake-up of a parked actor", atomr_wake_samples(wakes), raw_wake_samples(wakes)));
  return out;
}

}  // namespace atomr::apps::bench
