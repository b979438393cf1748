// The actor benchmark's results (see bench_actors.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::apps::bench {

struct throughput_case {
  std::string name;
  int producers = 1;
  long long messages = 0;
  double atomr_msgs_per_s = 0;
  double raw_msgs_per_s = 0;  // the same moodycamel queue pushed and popped directly
};

struct latency_case {
  std::string name;
  int samples = 0;
  double atomr_p50_us = 0, atomr_p99_us = 0;
  double raw_p50_us = 0, raw_p99_us = 0;
};

// A coroutine form beside its callback form (then()), timed in the same run: mean time per
// operation of each.
struct coroutine_case {
  std::string name;
  long long operations = 0;
  double callback_us = 0;
  double coroutine_us = 0;
};

struct actor_results {
  std::vector<throughput_case> throughput;
  std::vector<latency_case> latency;
  std::vector<coroutine_case> coroutines;
};

actor_results run_actor_benchmarks(long long messages, int producers, int round_trips);
// Under mpirun -n 2, every rank: the awaited remote ask beside then(); rank 0 gets the case.
result<std::optional<coroutine_case>> run_remote_ask_case(int round_trips);

}  // namespace atomr::apps::bench
