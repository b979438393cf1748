// `atomr doctor`: names the slow or broken part of a job (a rank's device, a link between two
// ranks, a node) before the job pays for it. Collective over a session's world: every rank runs
//
//   1. its own checks: the device starts, allocates, runs a kernel and copies the bytes back
//      unchanged; device memory bandwidth; pinned host<->device bandwidth against its PCIe link;
//      its CPU binding and NUMA locality against its GPU and NIC;
//   2. every pair of ranks whose device started, one pair per rank at a time (a round-robin
//      tournament), over the path a buffer fetch takes between them (buffer_registry), each beside
//      a raw transfer of the same bytes over the same path in the same round;
//      pairs far below their class get a second look, to tell a slow link from a busy moment;
//   3. the world's collectives at a few sizes, beside the raw MPI collective on host devices.
//
// Rank 0 judges the numbers (classify.hpp): against the link's model where one applies, else
// against the healthy level of their class in this job, and names every outlier or failure.
// Threads: the caller's, plus what the router, the buffer registry and the world start.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "atomr/cluster/doctor/sysfs.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster::doctor {

enum class device_choice : std::uint8_t { automatic, cuda, host };

struct options {
  std::chrono::milliseconds budget{30'000};  // the whole run; each phase stops measuring at its share
  bool quick = false;                        // smaller buffers and fewer sizes
  device_choice device = device_choice::automatic;
  double fraction = 0.6;  // an outlier reaches less than this share of its reference
  std::string sysfs = "/sys";

  // Sizes, set from `quick` by for_mode().
  std::size_t check_bytes = 0;    // the device checks' buffers
  std::size_t pair_bytes = 0;     // a pair's bandwidth transfer
  std::size_t latency_bytes = 8;  // a pair's latency transfer
  std::vector<std::size_t> coll_bytes;

  void for_mode();

  template <typename A>
  void serialize(A& ar) {
    // (Plain integers on the wire: the archive takes no durations or enums.)
    std::int64_t ms = budget.count();
    auto choice = static_cast<std::uint8_t>(device);
    std::uint64_t sizes[3] = {check_bytes, pair_bytes, latency_bytes};
    std::vector<std::uint64_t> colls(coll_bytes.begin(), coll_bytes.end());
    ar(ms, quick, choice, fraction, sysfs, sizes[0], sizes[1], sizes[2], colls);
    budget = std::chrono::milliseconds(ms);
    device = static_cast<device_choice>(choice);
    check_bytes = sizes[0];
    pair_bytes = sizes[1];
    latency_bytes = sizes[2];
    coll_bytes.assign(colls.begin(), colls.end());
  }
};

struct rank_result {
  int rank = 0;
  int node = 0;
  std::string hostname;
  int local_rank = 0;
  bool gpu = false;
  int device_index = 0;
  std::string device_name;    // "NVIDIA H200" or "host memory"
  std::string no_gpu_reason;  // why the rank runs on the host device
  std::string failure;        // the first check that failed, and why; empty when all passed
  double device_copy_gbps = 0;
  double h2d_gbps = 0, d2h_gbps = 0;  // pinned host memory (GPU only)
  pcie_link pcie;
  int gpu_numa = -1;
  std::string cpus;
  int cpu_count = 0;
  bool bound = false;  // to fewer CPUs than the node has
  std::vector<int> cpu_numa;
  nic net;
  double seconds = 0;

  std::string device_label() const;  // "GPU 3" or "host device"

  template <typename A>
  void serialize(A& ar) {
    ar(rank, node, hostname, local_rank, gpu, device_index, device_name, no_gpu_reason, failure, device_copy_gbps,
       h2d_gbps, d2h_gbps, pcie, gpu_numa, cpus, cpu_count, bound, cpu_numa, net, seconds);
  }
};

// One direction of a pair: `fetcher` fetches a buffer `owner` exported.
struct edge_result {
  int owner = 0;
  int fetcher = 0;
  std::string route;  // fetch_route's name
  std::size_t bytes = 0;
  double latency_us = 0, raw_latency_us = 0;  // the fastest of the repetitions (0: not measured)
  double gbps = 0, raw_gbps = 0;
  int repetitions = 0;
  std::string failure;

  template <typename A>
  void serialize(A& ar) {
    ar(owner, fetcher, route, bytes, latency_us, raw_latency_us, gbps, raw_gbps, repetitions, failure);
  }
};

struct coll_result {
  std::string op;
  std::size_t bytes = 0;
  int repetitions = 0;
  double us = 0, raw_us = 0;  // the fastest repetition (raw 0: not measured on this backend)
  double bus_gbps = 0;
  std::string failure;

  template <typename A>
  void serialize(A& ar) {
    ar(op, bytes, repetitions, us, raw_us, bus_gbps, failure);
  }
};

// A pair as judged: both directions, its class and what it was compared with.
struct pair_result {
  int a = 0, b = 0;
  std::string cls;  // "MPI over the network", "MPI over shared memory", "NCCL over the network", ...
  std::string route;
  std::size_t bytes = 0;
  double gbps = 0, raw_gbps = 0;              // the slower direction
  double latency_us = 0, raw_latency_us = 0;  // the slower direction
  double gbps_ab = 0, gbps_ba = 0;            // a's buffer fetched by b, and the reverse
  double link_gbps = 0;                       // what the link is judged by: max(gbps, raw_gbps)
  double link_latency_us = 0;                 // and min(latency_us, raw_latency_us)
  double model_gbps = 0;                      // the link's model, where one applies
  double reference_gbps = 0, share = 0;       // what gbps was judged against, gbps / reference
  bool by_model = false;
  bool outlier = false;
  bool latency_outlier = false;
  double reference_latency_us = 0;
  std::string failure;
};

struct finding {
  std::string what;  // "rank", "pair", "node", "collective"
  int rank = -1, peer = -1, node = -1;
  std::string text;  // the verdict line
};

struct report {
  int ranks = 0;
  int nodes = 0;
  int rounds = 0;
  double seconds = 0;
  options used;
  std::vector<rank_result> rank_results;
  std::vector<pair_result> pairs;
  std::vector<coll_result> collectives;
  std::vector<finding> findings;
  bool healthy() const { return findings.empty(); }
};

// Collective over session.world(); `opts` counts on rank 0 (the others take its options, so the
// ranks agree on sizes and budget), except `device`, which each rank keeps. On rank 0 the result
// holds the judged report; elsewhere an empty one.
result<report> run(const mpi_session& session, options opts);

// Rank 0's half: pairs and findings from the gathered numbers (pure; doctor_test feeds it).
void judge_report(report& r, const std::vector<edge_result>& edges);

}  // namespace atomr::cluster::doctor
