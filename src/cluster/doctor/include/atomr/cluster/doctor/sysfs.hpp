// What sysfs says about the links a rank's measurements should reach: the PCIe link of its GPU
// (generation and width), its NICs' rates, and the NUMA nodes of its CPUs and devices. Every
// reader takes the sysfs root, so tests can hand in a tree of their own; a missing file reads as
// "unknown" (0 or -1), never as an error.
#pragma once

#include <string>
#include <vector>

namespace atomr::cluster::doctor {

struct pcie_link {
  double speed_gts = 0;  // current_link_speed (a GPU lowers it while idle)
  int width = 0;         // current_link_width
  double max_speed_gts = 0;
  int max_width = 0;

  int generation() const;  // of max_speed_gts: 2.5 -> 1, 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6; 0 unknown
  // What the link carries per direction at its maximum speed and current width, GB/s, after the
  // line encoding (8b/10b to gen 2, 128b/130b from gen 3, 242/256 FLITs from gen 6); 0 unknown.
  double expected_gbps() const;

  template <typename A>
  void serialize(A& ar) {
    ar(speed_gts, width, max_speed_gts, max_width);
  }
};

struct nic {
  std::string name;
  int speed_mbps = 0;     // 0 unknown (virtual devices often report none, or a made-up one)
  bool physical = false;  // backed by a device (not veth, bridge, tun)
  int numa = -1;

  template <typename A>
  void serialize(A& ar) {
    ar(name, speed_mbps, physical, numa);
  }
};

// `bus_id` as CUDA prints it ("0000:3B:00.0"; case does not matter).
pcie_link read_pcie_link(const std::string& sysfs, const std::string& bus_id);
int read_pci_numa(const std::string& sysfs, const std::string& bus_id);

// The interfaces that are up, loopback left out, fastest physical first.
std::vector<nic> read_nics(const std::string& sysfs);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; malformed parts are skipped.
std::vector<int> parse_cpu_list(const std::string& text);
// (The reverse is local::cpu_list_text.)
// The NUMA nodes that hold any of `cpus`, ascending.
std::vector<int> numa_nodes_of(const std::string& sysfs, const std::vector<int>& cpus);

}  // namespace atomr::cluster::doctor
