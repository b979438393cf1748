// Rank 0's half of the doctor: pairs from both directions' numbers, their classes and models, and
// the verdict lines.
#include <algorithm>
#include <cstdio>
#include <map>

#include "atomr/cluster/doctor.hpp"
#include "atomr/cluster/doctor/classify.hpp"

namespace atomr::cluster::doctor {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3f", v);
  return buf;
}

std::string percent(double share) { return std::to_string(static_cast<int>(share * 100 + 0.5)) + " %"; }

std::string class_of(const report& r, const pair_result& p, double& model_gbps) {
  const auto& ra = r.rank_results[static_cast<std::size_t>(p.a)];
  const auto& rb = r.rank_results[static_cast<std::size_t>(p.b)];
  const bool same_node = ra.node == rb.node;
  const std::string where = same_node ? "shared memory" : "the network";
  std::string cls;
  if (p.route == "cuda_ipc") {
    cls = "CUDA IPC within a node";
  } else if (p.route == "nccl") {
    cls = same_node ? "NCCL within a node" : "NCCL over the network";
  } else if (ra.gpu || rb.gpu) {
    cls = "staged through host memory, MPI over " + where;
  } else {
    cls = "MPI over " + where;
  }
  model_gbps = 0;
  if (!same_node && ra.net.physical && rb.net.physical && ra.net.speed_mbps > 0 && rb.net.speed_mbps > 0) {
    const int mbps = std::min(ra.net.speed_mbps, rb.net.speed_mbps);
    cls += " (" + num(mbps / 1000.0) + " Gb/s NIC)";
    // NCCL's transports reach the NIC's rate with large messages; MPI over TCP sockets reaches a
    // fraction of it that depends on the stack, so it is judged against its peers instead.
    if (p.route == "nccl") model_gbps = mbps / 8000.0;
  }
  return cls;
}

std::string rank_place(const rank_result& r) { return r.hostname + " " + r.device_label(); }

std::string rank_name(const rank_result& r) { return "rank " + std::to_string(r.rank) + " (" + rank_place(r) + ")"; }

void judge_ranks(report& r) {
  std::vector<sample> copies;
  std::vector<sample> h2d, d2h;
  for (const auto& rr : r.rank_results) {
    copies.push_back({rr.device_name, rr.failure.empty() ? rr.device_copy_gbps : 0, 0});
    h2d.push_back({"pcie", rr.h2d_gbps, rr.pcie.expected_gbps()});
    d2h.push_back({"pcie", rr.d2h_gbps, rr.pcie.expected_gbps()});
  }
  const classifier_options opts{r.used.fraction, 3};
  const auto copy_j = judge(copies, better::higher, opts);
  const auto h2d_j = judge(h2d, better::higher, opts);
  const auto d2h_j = judge(d2h, better::higher, opts);
  for (std::size_t i = 0; i < r.rank_results.size(); ++i) {
    const auto& rr = r.rank_results[i];
    auto add = [&](std::string text) {
      r.findings.push_back({"rank", rr.rank, -1, rr.node, rank_name(rr) + ": " + text});
    };
    if (!rr.failure.empty()) {
      add(rr.failure);
      continue;
    }
    if (copy_j[i].outlier) {
      add("device copies at " + num(rr.device_copy_gbps) + " GB/s, " + percent(copy_j[i].share) +
          " of the healthy level of its kind (" + num(copy_j[i].reference) + ", " + rr.device_name + ", " +
          std::to_string(copy_j[i].class_size) + " ranks)");
    }
    const auto pcie = "PCIe gen" + std::to_string(rr.pcie.generation()) + " x" + std::to_string(rr.pcie.width);
    for (const auto& [name, value, j] :
         {std::tuple{"host to device", rr.h2d_gbps, h2d_j[i]}, std::tuple{"device to host", rr.d2h_gbps, d2h_j[i]}}) {
      if (j.outlier) {
        add(std::string(name) + " from pinned memory at " + num(value) + " GB/s, " + percent(j.share) +
            " of what its " + pcie + " link carries (" + num(j.reference) + ")");
      }
    }
    if (rr.gpu && rr.pcie.width > 0 && rr.pcie.max_width > rr.pcie.width) {
      add("its PCIe link runs " + std::to_string(rr.pcie.width) + " lanes of " + std::to_string(rr.pcie.max_width));
    }
    if (rr.gpu && rr.bound && rr.gpu_numa >= 0 && !rr.cpu_numa.empty() &&
        std::find(rr.cpu_numa.begin(), rr.cpu_numa.end(), rr.gpu_numa) == rr.cpu_numa.end()) {
      add("bound to cpus " + rr.cpus + " (NUMA " + std::to_string(rr.cpu_numa.front()) + "), away from its GPU (NUMA " +
          std::to_string(rr.gpu_numa) + ")");
    }
  }
}

}  // namespace

void judge_report(report& r, const std::vector<edge_result>& edges) {
  judge_ranks(r);

  std::map<std::pair<int, int>, pair_result> pairs;
  for (const auto& e : edges) {
    const int a = std::min(e.owner, e.fetcher), b = std::max(e.owner, e.fetcher);
    auto& p = pairs[{a, b}];
    p.a = a;
    p.b = b;
    p.route = e.route;
    p.bytes = e.bytes;
    (e.owner == a ? p.gbps_ab : p.gbps_ba) = e.gbps;
    if (!e.failure.empty()) p.failure += (p.failure.empty() ? "" : "; ") + e.failure;
    const bool first = p.latency_us == 0 && p.gbps == 0;
    p.gbps = first ? e.gbps : std::min(p.gbps, e.gbps);
    p.raw_gbps = first ? e.raw_gbps : std::min(p.raw_gbps, e.raw_gbps);
    p.latency_us = std::max(p.latency_us, e.latency_us);
    p.raw_latency_us = std::max(p.raw_latency_us, e.raw_latency_us);
  }
  std::vector<sample> bw, lat;
  for (auto& [key, p] : pairs) {
    p.cls = class_of(r, p, p.model_gbps);
    const bool ok = p.failure.empty();
    // The link is judged by the fastest transfer over it, fetch or raw: either measures the same path.
    p.link_gbps = std::max(p.gbps, p.raw_gbps);
    bw.push_back({p.cls, ok ? p.link_gbps : 0, p.model_gbps});
    p.link_latency_us = p.raw_latency_us > 0 ? std::min(p.latency_us, p.raw_latency_us) : p.latency_us;
    lat.push_back({p.cls, ok ? p.link_latency_us : 0, 0});
    r.pairs.push_back(p);
  }
  const auto bw_j = judge(bw, better::higher, {r.used.fraction, 3});
  const auto lat_j = judge(lat, better::lower, {k_latency_fraction, 3});
  std::vector<pair_verdict> verdicts;
  for (std::size_t i = 0; i < r.pairs.size(); ++i) {
    auto& p = r.pairs[i];
    const auto& ra = r.rank_results[static_cast<std::size_t>(p.a)];
    const auto& rb = r.rank_results[static_cast<std::size_t>(p.b)];
    p.reference_gbps = bw_j[i].reference;
    p.share = bw_j[i].share;
    p.by_model = bw_j[i].by_model;
    p.outlier = bw_j[i].outlier;
    p.latency_outlier = lat_j[i].outlier && p.link_latency_us - lat_j[i].reference > k_latency_floor_us;
    p.reference_latency_us = lat_j[i].reference;
    verdicts.push_back({ra.node, rb.node, p.outlier || !p.failure.empty()});
    const std::string head = "pair " + std::to_string(p.a) + "<->" + std::to_string(p.b) + " (" + rank_place(ra) +
                             " -> " + rank_place(rb) + ", " + p.cls + "): ";
    auto add = [&](std::string text) { r.findings.push_back({"pair", p.a, p.b, -1, head + text}); };
    if (!p.failure.empty()) {
      add("failed: " + p.failure);
      continue;
    }
    if (p.outlier) {
      add(num(p.link_gbps) + " GB/s, " + percent(p.share) +
          (p.by_model
               ? " of what its NIC carries (" + num(p.reference_gbps) + ")"
               : " of the healthy level of its class (" + num(p.reference_gbps) +
                     ", the median of the faster half of its " + std::to_string(bw_j[i].class_size) + " pairs)"));
    }
    if (p.latency_outlier) {
      add(num(p.link_latency_us) + " us for " + std::to_string(r.used.latency_bytes) + " bytes, " +
          num(p.link_latency_us / p.reference_latency_us) + " times the healthy level of its class (" +
          num(p.reference_latency_us) + " us)");
    }
  }
  for (const int node : suspect_nodes(verdicts)) {
    int bad = 0, all = 0;
    std::string host;
    for (const auto& v : verdicts) {
      if (v.node_a == v.node_b || (v.node_a != node && v.node_b != node)) continue;
      ++all;
      bad += v.outlier ? 1 : 0;
    }
    for (const auto& rr : r.rank_results) {
      if (rr.node == node) host = rr.hostname;
    }
    r.findings.push_back({"node", -1, -1, node,
                          "node " + host + ": " + std::to_string(bad) + " of its " + std::to_string(all) +
                              " pairs to other nodes are slow or failed; what they share is its link to the network "
                              "(NIC, cable, switch port) or the node itself"});
  }
  for (const auto& c : r.collectives) {
    if (!c.failure.empty()) {
      r.findings.push_back(
          {"collective", -1, -1, -1, c.op + " of " + std::to_string(c.bytes) + " bytes failed: " + c.failure});
    }
  }
}

}  // namespace atomr::cluster::doctor
