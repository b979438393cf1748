#include "atomr/cluster/doctor/classify.hpp"

#include <algorithm>
#include <map>

namespace atomr::cluster::doctor {

double healthy_level(std::vector<double> values, better b) {
  if (values.empty()) return 0;
  if (b == better::higher) {
    std::sort(values.begin(), values.end(), std::greater<>());
  } else {
    std::sort(values.begin(), values.end());
  }
  // The better half, the middle value included when the count is odd.
  const std::size_t half = (values.size() + 1) / 2;
  const std::size_t mid = half / 2;
  return half % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::vector<judgement> judge(std::span<const sample> samples, better b, const classifier_options& options) {
  std::map<std::string, std::vector<double>> classes;
  for (const auto& s : samples) {
    if (s.value > 0) classes[s.cls].push_back(s.value);
  }
  std::map<std::string, double> level;
  for (const auto& [cls, values] : classes) level[cls] = healthy_level(values, b);

  std::vector<judgement> out(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    auto& j = out[i];
    const auto it = classes.find(s.cls);
    j.class_size = it == classes.end() ? 0 : it->second.size();
    if (s.value <= 0) continue;
    if (s.model > 0) {
      j.by_model = true;
      j.reference = s.model;
    } else if (j.class_size >= options.min_class) {
      j.reference = level[s.cls];
    } else {
      continue;
    }
    j.judged = true;
    j.share = b == better::higher ? s.value / j.reference : j.reference / s.value;
    j.outlier = j.share < options.fraction;
  }
  return out;
}

std::vector<int> suspect_nodes(std::span<const pair_verdict> pairs) {
  std::map<int, std::pair<int, int>> per_node;  // node -> (outliers, pairs) to other nodes
  for (const auto& p : pairs) {
    if (p.node_a == p.node_b) continue;
    for (const int n : {p.node_a, p.node_b}) {
      auto& [bad, all] = per_node[n];
      ++all;
      if (p.outlier) ++bad;
    }
  }
  std::vector<int> out;
  for (const auto& [node, counts] : per_node) {
    const auto [bad, all] = counts;
    if (bad >= 2 && 4 * bad >= 3 * all) out.push_back(node);
  }
  return out;
}

}  // namespace atomr::cluster::doctor
