// `atomr bench actors`: tell throughput (1 and N producers into one actor), ask round-trip latency
// between two actors on different threads, and wake-up latency of a parked actor. Each against the
// raw baseline in the same run: the same moodycamel queue pushed and popped directly by plain
// threads (the consumer spinning on try_dequeue, or parked on the same semaphore for wake-up).
// Then the coroutine forms, each beside its callback form (then()) in the same run: co_await of a
// ready future, an awaited ask between two actors, and a device chain on the host device.
#include "bench/bench_actors.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <variant>

#include "atomr/local/actors.hpp"
#include "atomr/local/device/device.hpp"
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

// --- coroutines beside callbacks ---------------------------------------------------------------

// A ready future, awaited `n` times by one coroutine / given `n` continuations (each runs at once).
double ready_await_us(long long n) {
  al::promise<int> p;
  p.set_value(1);
  const al::future<int> f = p.get_future();
  auto body = [](const al::future<int>& ready, long long count) -> al::task<long long> {
    long long sum = 0;
    for (long long i = 0; i < count; ++i) {
      auto v = co_await ready;
      sum += *v;
    }
    co_return sum;
  };
  const auto t0 = clock::now();
  keep(body(f, n).get().value_or(0));
  return seconds_since(t0) * 1e6 / static_cast<double>(n);
}
double ready_then_us(long long n) {
  al::promise<int> p;
  p.set_value(1);
  const al::future<int> f = p.get_future();
  long long sum = 0;
  const auto t0 = clock::now();
  for (long long i = 0; i < n; ++i) f.then([&sum](const result<int>& v) { sum += *v; });
  const double us = seconds_since(t0) * 1e6 / static_cast<double>(n);
  keep(sum);
  return us;
}

// The ask round trip of `pinger` (then(), the reply told back as a message), as a coroutine: one
// handler awaits each ask in turn and resumes on its own actor's thread.
struct run_awaited_pings {
  int count;
  al::actor_ref<std::variant<ping>> target;
  al::reply_to<std::vector<double>> done;
};
class awaiting_pinger : public al::coroutine_actor<std::variant<run_awaited_pings>> {
  al::task<void> handle(std::variant<run_awaited_pings> m) override {
    auto& job = std::get<run_awaited_pings>(m);
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(job.count));
    for (int i = 0; i < job.count; ++i) {
      const auto sent = clock::now();
      (void)co_await job.target.ask<clock::time_point>([](auto r) { return ping{std::move(r)}; }, 10s);
      samples.push_back(std::chrono::duration<double, std::micro>(clock::now() - sent).count());
    }
    job.done.send(std::move(samples));
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

double awaited_ask_us(int round_trips) {
  al::actor_system sys(al::system_config{.pool_threads = 1});
  auto b = sys.spawn<ponger>({.dispatch = al::dispatch_kind::dedicated}).value();
  auto a = sys.spawn<awaiting_pinger>({.dispatch = al::dispatch_kind::dedicated}).value();
  auto samples = a.ask<std::vector<double>>(
                      [&](auto r) {
                        return run_awaited_pings{round_trips, b, std::move(r)};
                      },
                      600s)
                     .get();
  return mean(samples.value_or(std::vector<double>{}));
}

// allocate + upload + run + download on the host device, `n` times, each waited for: nested then()
// continuations with the state they share, against one coroutine.
constexpr std::size_t k_chain_floats = 1024;

result<void> scale(const al::gpu_ref<float>& buf) {
  ATOMR_ASSIGN_OR_RETURN(float* p, buf.data());
  for (std::size_t i = 0; i < buf.size(); ++i) p[i] *= 2;
  return ok();
}

al::future<void> callback_chain(const al::device& dev, const std::vector<float>& in, std::vector<float>& out) {
  auto done = std::make_shared<al::promise<void>>();
  auto f = done->get_future();
  dev.allocate<float>(in.size()).then([dev, &in, &out, done](const result<al::gpu_ref<float>>& buf) {
    if (!buf) return (void)done->set_error(buf.error_value());
    dev.upload(*buf, std::span<const float>(in)).then([dev, buf = *buf, &out, done](const result<void>& up) {
      if (!up) return (void)done->set_error(up.error_value());
      dev.run([buf](const al::stream_context&) { return scale(buf); }, {buf.block()})
          .then([dev, buf, &out, done](const result<void>& ran) {
            if (!ran) return (void)done->set_error(ran.error_value());
            dev.download(buf, std::span<float>(out)).then([done](const result<void>& down) { done->set_result(down); });
          });
    });
  });
  return f;
}

al::task<void> coroutine_chain(al::device dev, const std::vector<float>& in, std::vector<float>& out) {
  ATOMR_CO_TRY(auto buf, co_await dev.allocate<float>(in.size()));
  ATOMR_CO_TRY_VOID(co_await dev.upload(buf, std::span<const float>(in)));
  std::vector<std::shared_ptr<al::buffer_block>> uses(1, buf.block());
  // Named, not written inside the co_await: see docs/guide/coroutines.md on GCC 12.
  auto work = [buf](const al::stream_context&) { return scale(buf); };
  ATOMR_CO_TRY_VOID(co_await dev.run(work, std::move(uses)));
  ATOMR_CO_TRY_VOID(co_await dev.download(buf, std::span<float>(out)));
}

template <typename Chain>
double chain_us(const al::device& dev, int n, Chain chain) {
  std::vector<float> in(k_chain_floats, 1.5f), out(k_chain_floats);
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    if (!al::future<void>(chain(dev, in, out)).get() || out[0] != 3.0f) return 0;
  }
  return seconds_since(t0) * 1e6 / n;
}

// The two forms alternate in `rounds` rounds, each its own best: the machine's drift lands on both.
template <typename A, typename B>
coroutine_case side_by_side(std::string name, long long ops, int rounds, A callback_form, B coroutine_form) {
  coroutine_case c{std::move(name), ops, 1e300, 1e300};
  for (int r = 0; r < rounds; ++r) {
    c.callback_us = std::min(c.callback_us, callback_form());
    c.coroutine_us = std::min(c.coroutine_us, coroutine_form());
  }
  return c;
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

  const long long ready_ops = 10'000'000;
  out.coroutines.push_back(side_by_side(
      "co_await of a ready future (then: a continuation run at once)", ready_ops, 5,
      [&] { return ready_then_us(ready_ops); }, [&] { return ready_await_us(ready_ops); }));
  const int asks = std::max(1000, round_trips / 5);
  out.coroutines.push_back(side_by_side(
      "ask round trip, actor -> actor: awaited vs then", asks, 5, [&] { return mean(atomr_ask_samples(asks)); },
      [&] { return awaited_ask_us(asks); }));
  al::actor_system sys;
  if (auto dev = al::device::start(sys, 0, al::device_kind::host)) {
    const int chains = std::max(500, round_trips / 20);
    out.coroutines.push_back(side_by_side(
        "host device allocate+upload+run+download (1024 floats)", chains, 5,
        [&] { return chain_us(*dev, chains, callback_chain); },
        [&] { return chain_us(*dev, chains, [](auto&&... a) { return coroutine_chain(a...); }); }));
  }
  return out;
}

}  // namespace atomr::apps::bench
