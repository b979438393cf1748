// The actor benchmark's results (see bench_actors.cpp).
#pragma once

#include <string>
#include <vector>

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

struct actor_results {
  std::vector<throughput_case> throughput;
  std::vector<latency_case> latency;
};

actor_results run_actor_benchmarks(long long messages, int producers, int round_trips);

}  // namespace atomr::apps::bench
