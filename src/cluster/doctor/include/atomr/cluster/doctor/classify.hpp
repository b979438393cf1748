// Which measurements are far from what they should be (pure functions; the doctor's verdict).
// Two bases, in this order:
// - a model: where the link's rate is known (PCIe generation x width, a physical NIC's speed), a
//   sample is judged against that rate;
// - the job's own distribution: otherwise a sample is judged against the healthy level of its
//   class, the median of the class's better half. A plain median would not do: a slow host is in
//   two of the three pairs of a three-host job, so the median would be a slow pair.
// A class with fewer than `min_class` samples and no model is not judged.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace atomr::cluster::doctor {

enum class better { higher, lower };  // bandwidth is better higher, latency lower

struct sample {
  std::string cls;   // only samples of one class are compared with each other
  double value = 0;  // a sample <= 0 is a failed measurement, judged elsewhere
  double model = 0;  // what the link's model expects, in the unit of `value`; 0: no model
};

struct judgement {
  bool judged = false;  // false: no model and too few samples of its class
  bool outlier = false;
  bool by_model = false;
  double reference = 0;  // the model's value or the class's healthy level
  double share = 0;      // value / reference (higher better) or reference / value (lower better)
  std::size_t class_size = 0;
};

struct classifier_options {
  double fraction = 0.6;      // an outlier's share is below this
  std::size_t min_class = 3;  // samples a class needs to be judged by its distribution
};

// The median of the better half of `values` (the upper half when higher is better).
double healthy_level(std::vector<double> values, better b);

// One judgement per sample, in order.
std::vector<judgement> judge(std::span<const sample> samples, better b, const classifier_options& options);

// Latency is judged more loosely than bandwidth (4 times the healthy level): on a busy host a
// small transfer waits for a CPU far more often than a large one is slowed, and a slow link shows
// in its bandwidth first.
inline constexpr double k_latency_fraction = 0.25;
// ... and only when it is this much above the healthy level, microseconds: a wait for a CPU of a
// host that runs more ranks than it has cores costs tens of microseconds.
inline constexpr double k_latency_floor_us = 100;

// A pair of ranks with their nodes, and whether the pair was judged an outlier.
struct pair_verdict {
  int node_a = 0;
  int node_b = 0;
  bool outlier = false;
};

// The nodes whose pairs to other nodes are nearly all outliers (at least 3 of 4, and at least 2),
// in ascending order: a slow NIC or cable of one node shows as every pair that crosses it.
std::vector<int> suspect_nodes(std::span<const pair_verdict> pairs);

}  // namespace atomr::cluster::doctor
