// The doctor's pure parts: the tournament that orders the pair measurements, the classifier that
// judges them, and the sysfs readers (on a tree made here).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "atomr/cluster/doctor.hpp"
#include "atomr/cluster/doctor/classify.hpp"
#include "atomr/cluster/doctor/schedule.hpp"
#include "atomr/cluster/doctor/sysfs.hpp"
#include "atomr/local/topology/irq_cpus.hpp"

namespace dr = atomr::cluster::doctor;

TEST(DoctorTournament, EveryPairOnceAndEachRankOncePerRound) {
  for (int p = 0; p <= 17; ++p) {
    const auto rounds = dr::tournament(p);
    const int expected_rounds = p < 2 ? 0 : (p % 2 ? p : p - 1);
    ASSERT_EQ(static_cast<int>(rounds.size()), expected_rounds) << p << " ranks";
    std::set<std::pair<int, int>> met;
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      std::set<int> busy;
      for (const auto& [a, b] : rounds[r]) {
        EXPECT_LT(a, b);
        EXPECT_GE(a, 0);
        EXPECT_LT(b, p);
        EXPECT_TRUE(busy.insert(a).second) << "rank " << a << " twice in round " << r << " of " << p;
        EXPECT_TRUE(busy.insert(b).second) << "rank " << b << " twice in round " << r << " of " << p;
        EXPECT_TRUE(met.insert({a, b}).second) << a << "<->" << b << " met twice, " << p << " ranks";
      }
      // Even counts pair everyone every round; odd ones leave exactly one rank out.
      EXPECT_EQ(static_cast<int>(busy.size()), p % 2 ? p - 1 : p) << "round " << r << " of " << p;
    }
    EXPECT_EQ(static_cast<int>(met.size()), p * (p - 1) / 2) << p << " ranks";
  }
}

TEST(DoctorTournament, PartnersAreSymmetricAndByesAreMinusOne) {
  const auto rounds = dr::tournament(5);
  std::vector<int> byes(5, 0);
  for (int r = 0; r < 5; ++r) {
    for (int rank = 0; rank < 5; ++rank) {
      const int peer = dr::partner_in(rounds, r, rank);
      if (peer < 0) {
        ++byes[static_cast<std::size_t>(rank)];
        continue;
      }
      EXPECT_EQ(dr::partner_in(rounds, r, peer), rank);
    }
  }
  EXPECT_EQ(byes, std::vector<int>(5, 1));
  EXPECT_EQ(dr::partner_in(rounds, 5, 0), -1);
  EXPECT_EQ(dr::partner_in(rounds, -1, 0), -1);
}

TEST(DoctorClassifier, HealthyLevelIsTheMedianOfTheBetterHalf) {
  EXPECT_DOUBLE_EQ(dr::healthy_level({}, dr::better::higher), 0);
  EXPECT_DOUBLE_EQ(dr::healthy_level({5}, dr::better::higher), 5);
  // Three hosts, one slow: two of three pairs are slow. A plain median would be a slow pair; the
  // better half (the middle value with the fast one) leaves the slow pairs at 6 %.
  EXPECT_DOUBLE_EQ(dr::healthy_level({0.05, 1.6, 0.05}, dr::better::higher), 0.825);
  EXPECT_DOUBLE_EQ(dr::healthy_level({1, 2, 3, 4, 5, 6}, dr::better::higher), 5);
  EXPECT_DOUBLE_EQ(dr::healthy_level({1, 2, 3, 4, 5, 6}, dr::better::lower), 2);
  EXPECT_DOUBLE_EQ(dr::healthy_level({10, 20, 30, 40}, dr::better::higher), 35);
}

TEST(DoctorClassifier, OutliersBelowTheFractionOfTheirClassOnly) {
  const std::vector<dr::sample> s{{"net", 1.6, 0}, {"net", 1.5, 0}, {"net", 0.05, 0},
                                  {"net", 1.0, 0}, {"shm", 9.0, 0}, {"shm", 3.0, 0}};  // shm: two samples, not judged
  const auto j = dr::judge(s, dr::better::higher, {0.6, 3});
  ASSERT_EQ(j.size(), s.size());
  EXPECT_DOUBLE_EQ(j[0].reference, 1.55);
  EXPECT_FALSE(j[0].outlier);
  EXPECT_FALSE(j[1].outlier);
  EXPECT_TRUE(j[2].outlier);
  EXPECT_NEAR(j[2].share, 0.05 / 1.55, 1e-12);
  EXPECT_FALSE(j[3].outlier);  // 65 % of 1.55
  EXPECT_EQ(j[3].class_size, 4u);
  EXPECT_FALSE(j[4].judged);
  EXPECT_FALSE(j[5].judged);
  EXPECT_FALSE(j[5].outlier);
}

TEST(DoctorClassifier, AModelJudgesAloneAndAFailedSampleIsLeftOut) {
  // A PCIe gen5 x16 link carries 63 GB/s; 20 GB/s is an outlier whatever its peers did.
  const std::vector<dr::sample> s{{"pcie", 20, 63}, {"pcie", 55, 63}, {"pcie", 0, 63}};
  const auto j = dr::judge(s, dr::better::higher, {0.6, 3});
  EXPECT_TRUE(j[0].by_model);
  EXPECT_TRUE(j[0].outlier);
  EXPECT_DOUBLE_EQ(j[0].reference, 63);
  EXPECT_FALSE(j[1].outlier);
  EXPECT_FALSE(j[2].judged);
  EXPECT_EQ(j[0].class_size, 2u);
}

TEST(DoctorClassifier, LatencyIsBetterLower) {
  const std::vector<dr::sample> s{{"net", 10, 0}, {"net", 12, 0}, {"net", 11, 0}, {"net", 60, 0}};
  const auto j = dr::judge(s, dr::better::lower, {dr::k_latency_fraction, 3});
  EXPECT_FALSE(j[0].outlier);
  EXPECT_FALSE(j[2].outlier);
  EXPECT_TRUE(j[3].outlier);
  EXPECT_NEAR(j[3].share, 10.5 / 60, 1e-12);
}

TEST(DoctorClassifier, NoOutlierAmongSeededNoise) {
  // Healthy links within +-25 % of each other: nobody is named, whatever the draw.
  std::mt19937 rng(59);
  std::uniform_real_distribution<double> noise(0.75, 1.25);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<dr::sample> s;
    for (int i = 0; i < 28; ++i) s.push_back({"net", 1.6 * noise(rng), 0});
    for (const auto& j : dr::judge(s, dr::better::higher, {0.6, 3})) ASSERT_FALSE(j.outlier) << "trial " << trial;
  }
}

TEST(DoctorClassifier, SuspectNodeIsTheOneInEveryOutlier) {
  // Four nodes, node 3 slow: its three pairs are outliers, the others' single ones are not enough.
  std::vector<dr::pair_verdict> v;
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) v.push_back({a, b, b == 3});
  }
  EXPECT_EQ(dr::suspect_nodes(v), std::vector<int>{3});
  for (auto& p : v) p.outlier = false;
  EXPECT_TRUE(dr::suspect_nodes(v).empty());
  // Pairs within a node say nothing about its network link.
  EXPECT_TRUE(dr::suspect_nodes(std::vector<dr::pair_verdict>{{1, 1, true}, {1, 1, true}}).empty());
}

namespace {
struct fake_sysfs {
  std::filesystem::path root = std::filesystem::temp_directory_path() / ("doctor-sysfs-" + std::to_string(getpid()));
  fake_sysfs() { std::filesystem::remove_all(root); }
  ~fake_sysfs() { std::filesystem::remove_all(root); }
  void write(const std::string& rel, const std::string& text) const {
    const auto p = root / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text << '\n';
  }
};
}  // namespace

TEST(DoctorSysfs, PcieLinkAndItsExpectedRate) {
  fake_sysfs fs;
  fs.write("bus/pci/devices/0000:3b:00.0/current_link_speed", "32.0 GT/s PCIe");
  fs.write("bus/pci/devices/0000:3b:00.0/current_link_width", "8");
  fs.write("bus/pci/devices/0000:3b:00.0/max_link_speed", "32.0 GT/s PCIe");
  fs.write("bus/pci/devices/0000:3b:00.0/max_link_width", "16");
  fs.write("bus/pci/devices/0000:3b:00.0/numa_node", "1");
  const auto link = dr::read_pcie_link(fs.root.string(), "0000:3B:00.0");
  EXPECT_EQ(link.generation(), 5);
  EXPECT_EQ(link.width, 8);
  EXPECT_EQ(link.max_width, 16);
  EXPECT_NEAR(link.expected_gbps(), 32.0 * 8 * 128 / 130 / 8, 1e-9);
  EXPECT_EQ(dr::read_pci_numa(fs.root.string(), "0000:3b:00.0"), 1);
  EXPECT_EQ(dr::read_pcie_link(fs.root.string(), "0000:99:00.0").expected_gbps(), 0);
  dr::pcie_link gen3{8, 16, 8, 16};
  EXPECT_EQ(gen3.generation(), 3);
  dr::pcie_link gen1{2.5, 4, 2.5, 4};
  EXPECT_EQ(gen1.generation(), 1);
  EXPECT_DOUBLE_EQ(gen1.expected_gbps(), 2.5 * 4 * 0.8 / 8);
}

TEST(DoctorSysfs, NicsCpusAndNuma) {
  fake_sysfs fs;
  fs.write("class/net/lo/operstate", "unknown");
  fs.write("class/net/veth0/operstate", "up");
  fs.write("class/net/veth0/speed", "10000");
  fs.write("class/net/ib0/operstate", "up");
  fs.write("class/net/ib0/speed", "200000");
  fs.write("class/net/ib0/device/numa_node", "1");
  fs.write("class/net/eth9/operstate", "down");
  fs.write("devices/system/node/node0/cpulist", "0-3");
  fs.write("devices/system/node/node1/cpulist", "4-7");
  const auto nics = dr::read_nics(fs.root.string());
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].name, "ib0");
  EXPECT_TRUE(nics[0].physical);
  EXPECT_EQ(nics[0].speed_mbps, 200000);
  EXPECT_EQ(nics[0].numa, 1);
  EXPECT_EQ(nics[1].name, "veth0");
  EXPECT_FALSE(nics[1].physical);
  EXPECT_EQ(dr::parse_cpu_list("0-3,8,10-11,x,5-4"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(atomr::local::cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(dr::numa_nodes_of(fs.root.string(), {5, 6}), std::vector<int>{1});
  EXPECT_EQ(dr::numa_nodes_of(fs.root.string(), {3, 4}), (std::vector<int>{0, 1}));
}

namespace {
dr::rank_result host_rank(int rank, int node) {
  dr::rank_result r;
  r.rank = rank;
  r.node = node;
  r.hostname = "node" + std::to_string(node + 1);
  r.device_name = "host memory";
  r.device_copy_gbps = 10;
  return r;
}
dr::edge_result edge(int owner, int fetcher, double gbps) {
  return {owner, fetcher, "mpi_staged", 4 << 20, 30, 20, gbps, gbps, 2, ""};
}
}  // namespace

TEST(DoctorVerdict, NamesTheSlowNodeItsPairsAndAFailedRank) {
  dr::report r;
  r.used.for_mode();
  for (int i = 0; i < 5; ++i) r.rank_results.push_back(host_rank(i, i));
  r.rank_results[4].failure = "device cannot start: no GPU";
  std::vector<dr::edge_result> edges;
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      const double gbps = b == 3 ? 0.048 : 1.6;
      edges.push_back(edge(a, b, gbps));
      edges.push_back(edge(b, a, gbps));
    }
  }
  dr::judge_report(r, edges);
  ASSERT_EQ(r.pairs.size(), 6u);
  std::vector<std::string> texts;
  for (const auto& f : r.findings) texts.push_back(f.text);
  ASSERT_EQ(texts.size(), 5u) << ::testing::PrintToString(texts);
  EXPECT_EQ(texts[0], "rank 4 (node5 host device): device cannot start: no GPU");
  EXPECT_EQ(texts[1],
            "pair 0<->3 (node1 host device -> node4 host device, MPI over the network): 0.048 GB/s, 3 % of the healthy "
            "level of its class (1.60, the median of the faster half of its 6 pairs)");
  EXPECT_EQ(r.findings[2].rank, 1);
  EXPECT_EQ(r.findings[3].peer, 3);
  EXPECT_EQ(texts[4].rfind("node node4: 3 of its 3 pairs to other nodes are slow or failed", 0), 0u);
  EXPECT_TRUE(r.pairs[0].outlier == false && r.pairs[0].cls == "MPI over the network");
}

TEST(DoctorVerdict, HealthyJobHasNoFinding) {
  dr::report r;
  r.used.for_mode();
  for (int i = 0; i < 4; ++i) r.rank_results.push_back(host_rank(i, i / 2));
  std::vector<dr::edge_result> edges;
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      edges.push_back(edge(a, b, 1.5 + 0.01 * b));
      edges.push_back(edge(b, a, 1.5 + 0.01 * a));
    }
  }
  dr::judge_report(r, edges);
  EXPECT_TRUE(r.healthy());
  EXPECT_EQ(r.pairs[0].cls, "MPI over shared memory");  // ranks 0 and 1 share node 0
  EXPECT_EQ(r.pairs[1].cls, "MPI over the network");
}
