#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "atomr/local/devices.hpp"
#include "atomr/local/topology/irq_cpus.hpp"
#include "atomr/local/topology/p2p_graph.hpp"

namespace atomr::local {
namespace {

// A synthetic machine: `n` GPUs, their packages, and a rule for each ordered pair.
class fake_probe final : public topology_probe {
 public:
  fake_probe(int n, std::function<int(int)> package_of, std::function<pair_probe(int, int)> pair_rule)
      : n_(n), package_of_(std::move(package_of)), rule_(std::move(pair_rule)) {}

  result<machine_summary> machine() override { return machine_summary{"fake", 2, 2, 64, {"0-31", "32-63"}}; }
  result<std::vector<gpu_locality>> gpus() override {
    std::vector<gpu_locality> out;
    for (int d = 0; d < n_; ++d) {
      const int pkg = package_of_(d);
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + d);
      out.push_back({d, "Fake GPU", bus, pkg, pkg, pkg == 0 ? "0-31" : "32-63", {}});
    }
    return out;
  }
  result<pair_probe> pair(int a, int b) override { return rule_(a, b); }

 private:
  int n_;
  std::function<int(int)> package_of_;
  std::function<pair_probe(int, int)> rule_;
};

p2p_graph build(fake_probe probe) {
  auto g = p2p_graph::build(probe);
  EXPECT_TRUE(g) << g.error_value();
  return std::move(g).value();
}

TEST(Topology, EightGpusOnNvSwitchFormOneNvlinkIsland) {
  auto g = build(fake_probe(
      8, [](int) { return 0; },
      [](int, int) {
        return pair_probe{true, 0, true};
      }));
  ASSERT_EQ(g.edges().size(), 28u);
  for (const auto& e : g.edges()) {
    EXPECT_EQ(e.kind, link_kind::nvlink);
    EXPECT_TRUE(e.access);
  }
  ASSERT_EQ(g.islands().size(), 1u);
  EXPECT_EQ(g.islands()[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(g.can_access(7, 0));
  EXPECT_NE(g.matrix().find("GPU0  X     NV    NV"), std::string::npos) << g.matrix();
}

TEST(Topology, TwoPcieIslandsOfFour) {
  const auto package = [](int d) { return d < 4 ? 0 : 1; };
  auto g = build(fake_probe(8, package, [&](int a, int b) {
    return package(a) == package(b) ? pair_probe{true, 1, false} : pair_probe{};
  }));
  ASSERT_EQ(g.islands().size(), 2u);
  EXPECT_EQ(g.islands()[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.islands()[1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(g.edge(0, 1)->kind, link_kind::pcie);
  EXPECT_EQ(g.edge(1, 0)->kind, link_kind::pcie);
  EXPECT_EQ(g.edge(4, 7)->performance_rank, 1);
  const auto* across = g.edge(2, 5);
  ASSERT_NE(across, nullptr);
  EXPECT_FALSE(across->access);
  EXPECT_EQ(across->kind, link_kind::cross_socket);
  EXPECT_FALSE(g.can_access(3, 4));
  EXPECT_EQ(g.gpus()[5].cpus, "32-63");
  EXPECT_NE(g.matrix().find("islands: {GPU0,GPU1,GPU2,GPU3} {GPU4,GPU5,GPU6,GPU7}"), std::string::npos) << g.matrix();
}

TEST(Topology, AccessInOneDirectionOnlyIsNoAccess) {
  auto g = build(fake_probe(
      2, [](int) { return 0; },
      [](int a, int) {
        return a == 0 ? pair_probe{true, 0, false} : pair_probe{};
      }));
  EXPECT_FALSE(g.can_access(0, 1));
  EXPECT_EQ(g.islands().size(), 2u);
}

TEST(Topology, OneGpuAndNoGpu) {
  auto one = build(fake_probe(
      1, [](int) { return 0; }, [](int, int) { return pair_probe{}; }));
  EXPECT_TRUE(one.edges().empty());
  ASSERT_EQ(one.islands().size(), 1u);
  EXPECT_TRUE(one.can_access(0, 0));
  EXPECT_FALSE(one.can_access(0, 1));

  auto none = build(fake_probe(
      0, [](int) { return 0; }, [](int, int) { return pair_probe{}; }));
  EXPECT_TRUE(none.gpus().empty());
  EXPECT_TRUE(none.islands().empty());
  EXPECT_NE(none.matrix().find("no GPUs visible"), std::string::npos);
  EXPECT_NE(none.matrix().find("NUMA 1: CPUs 32-63"), std::string::npos);
}

TEST(Topology, JsonAndDotDescribeTheGraph) {
  const auto package = [](int d) { return d < 2 ? 0 : 1; };
  auto g = build(fake_probe(4, package, [&](int a, int b) {
    return package(a) == package(b) ? pair_probe{true, 0, true} : pair_probe{true, 2, false};
  }));
  const auto j = nlohmann::json::parse(g.json());
  EXPECT_EQ(j["machine"]["numa_nodes"], 2);
  ASSERT_EQ(j["gpus"].size(), 4u);
  EXPECT_EQ(j["gpus"][3]["pci_bus_id"], "0000:13:00.0");
  ASSERT_EQ(j["edges"].size(), 6u);
  EXPECT_EQ(j["edges"][0]["kind"], "nvlink");        // 0-1, same package, atomics
  EXPECT_EQ(j["edges"][1]["kind"], "cross_socket");  // 0-2
  EXPECT_EQ(j["islands"].size(), 1u);
  const auto dot = g.dot();
  EXPECT_NE(dot.find("gpu0 -- gpu1 [label=\"nvlink\", penwidth=3];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("gpu1 -- gpu3 [label=\"cross_socket\"];"), std::string::npos) << dot;
}

TEST(Topology, ThisMachine) {
  auto probe = make_system_probe();
  auto g = p2p_graph::build(*probe);
  ASSERT_TRUE(g) << g.error_value();
  EXPECT_GE(g->machine().cores, 1);
  EXPECT_GE(g->machine().numa_nodes, 1);
  EXPECT_EQ(g->machine().numa_cpus.size(), static_cast<std::size_t>(g->machine().numa_nodes));
  EXPECT_EQ(g->gpus().size(), probe_cuda_devices()->devices.size());
}

}  // namespace
}  // namespace atomr::local

// --- Interrupt CPUs (atomr::local::interrupt_cpus) ------------------------------------------------------

namespace {

// A proc directory of its own: interrupts and each IRQ's affinity files.
class fake_proc {
 public:
  fake_proc() {
    char tmpl[] = "/tmp/atomr_proc_XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~fake_proc() { std::filesystem::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const auto path = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

constexpr const char* k_interrupts =
    "           CPU0       CPU1       CPU2       CPU3\n"
    "  42:          0          0       3228          0  PCI-MSIX-0000:00:07.0    0-edge      nvidia\n"
    "  43:          0          0          0       3442  PCI-MSIX-0000:00:06.0    0-edge      nvidia\n"
    "  44:          0          0          0          0  PCI-MSIX-0000:00:07.0    1-edge      nvidia\n"
    "  45:          0          0          0          0  PCI-MSIX-0000:00:06.0    1-edge      nvidia\n"
    " NMI:          0          0          0          0   Non-maskable interrupts\n";

}  // namespace

TEST(InterruptCpus, ParsesCpuLists) {
  EXPECT_EQ(atomr::local::parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(atomr::local::parse_cpu_list("14"), (std::vector<int>{14}));
  EXPECT_TRUE(atomr::local::parse_cpu_list("").empty());
  EXPECT_TRUE(atomr::local::parse_cpu_list("3-1").empty());
  EXPECT_TRUE(atomr::local::parse_cpu_list("a,b").empty());
  EXPECT_TRUE(atomr::local::parse_cpu_list("0-99999999").empty());
}

TEST(InterruptCpus, WritesCpuListsBack) {
  EXPECT_EQ(atomr::local::cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(atomr::local::cpu_list_text({17, 20}), "17,20");
  EXPECT_EQ(atomr::local::cpu_list_text({}), "");
  EXPECT_EQ(atomr::local::parse_cpu_list(atomr::local::cpu_list_text({4, 5, 6, 9})), (std::vector<int>{4, 5, 6, 9}));
}

TEST(InterruptCpus, TakesTheFiredVectorsOfTheDevice) {
  fake_proc proc;
  proc.write("interrupts", k_interrupts);
  proc.write("irq/42/effective_affinity_list", "2\n");
  proc.write("irq/43/effective_affinity_list", "3\n");
  proc.write("irq/44/effective_affinity_list", "1\n");  // never fired: not counted
  EXPECT_EQ(atomr::local::interrupt_cpus("0000:00:07.0", proc.root()), (std::vector<int>{2}));
  EXPECT_EQ(atomr::local::interrupt_cpus("0000:00:06.0", proc.root()), (std::vector<int>{3}));
  EXPECT_TRUE(atomr::local::interrupt_cpus("0000:00:08.0", proc.root()).empty());
  EXPECT_TRUE(atomr::local::interrupt_cpus("", proc.root()).empty());
}

TEST(InterruptCpus, FirstVectorWhereNoneFiredAndNarrowAffinityOnly) {
  fake_proc proc;
  proc.write("interrupts",
             "           CPU0       CPU1\n"
             "  50:          0          0  PCI-MSIX-0000:3B:00.0    0-edge      nvidia\n"
             "  51:          0          0  PCI-MSIX-0000:3B:00.0    1-edge      nvidia\n");
  proc.write("irq/50/smp_affinity_list", "1\n");  // no effective affinity file: the allowed one
  proc.write("irq/51/effective_affinity_list", "0\n");
  EXPECT_EQ(atomr::local::interrupt_cpus("0000:3b:00.0", proc.root()), (std::vector<int>{1}));
}

TEST(InterruptCpus, EveryGpusInterruptsCount) {
  fake_proc proc;
  proc.write("interrupts", k_interrupts);
  proc.write("irq/42/effective_affinity_list", "2\n");
  proc.write("irq/43/effective_affinity_list", "3\n");
  // Another rank's GPU (00:06.0, not in the list) takes CPU 3: avoided as well.
  EXPECT_EQ(atomr::local::gpu_interrupt_cpus({"0000:00:07.0"}, proc.root()), (std::vector<int>{2, 3}));
  EXPECT_EQ(atomr::local::interrupt_cpus("NVIDIA", proc.root()), (std::vector<int>{2, 3}));
}

TEST(InterruptCpus, MissingProcSaysNothing) {
  EXPECT_TRUE(atomr::local::interrupt_cpus("0000:00:07.0", "/nonexistent/proc").empty());
}

TEST(InterruptCpus, AvoidKeepsAtLeastOneCpu) {
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &before)) allowed.push_back(c);
  }
  // Every allowed CPU: nothing is taken (the thread must run somewhere).
  EXPECT_TRUE(atomr::local::avoid_cpus(allowed).empty());
  if (allowed.size() >= 2) {
    EXPECT_EQ(atomr::local::avoid_cpus({allowed.front()}), (std::vector<int>{allowed.front()}));
    cpu_set_t after;
    CPU_ZERO(&after);
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
    EXPECT_FALSE(CPU_ISSET(allowed.front(), &after));
    EXPECT_EQ(CPU_COUNT(&after), CPU_COUNT(&before) - 1);
  }
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
}
