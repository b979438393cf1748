// What the P2P graph is built from, behind an interface so tests can feed synthetic machines:
// the GPUs this process sees with their PCI locality (from hwloc), and what the CUDA runtime says
// about each ordered GPU pair (cudaDeviceCanAccessPeer / cudaDeviceGetP2PAttribute).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::local {

struct gpu_locality {
  int device = -1;                // CUDA ordinal in this process
  std::string name;               // "NVIDIA H200"
  std::string pci_bus_id;         // "0000:18:00.0"
  int numa_node = -1;             // hwloc logical index of the nearest NUMA node; -1 unknown
  int package = -1;               // CPU socket; -1 unknown
  std::string cpus;               // nearest CPUs as a list, "0-15,32-47"
  std::vector<std::string> nics;  // network/InfiniBand devices under the same host bridge

  template <typename A>
  void serialize(A& ar) {
    ar(device, name, pci_bus_id, numa_node, package, cpus, nics);
  }
};

struct pair_probe {
  bool access = false;        // cudaDeviceCanAccessPeer(a, b)
  int performance_rank = -1;  // cudaDevP2PAttrPerformanceRank; lower is better; -1 without access
  bool native_atomics = false;
};

struct machine_summary {
  std::string hostname;
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  std::vector<std::string> numa_cpus;  // per NUMA node, its CPUs as a list

  template <typename A>
  void serialize(A& ar) {
    ar(hostname, packages, numa_nodes, cores, numa_cpus);
  }
};

class topology_probe {
 public:
  virtual ~topology_probe() = default;
  virtual result<machine_summary> machine() = 0;
  virtual result<std::vector<gpu_locality>> gpus() = 0;
  virtual result<pair_probe> pair(int a, int b) = 0;
};

// This machine: hwloc for CPUs, NUMA and PCI locality; the CUDA runtime for GPUs and their pairs.
// Without CUDA (or without a GPU) gpus() is empty.
std::unique_ptr<topology_probe> make_system_probe();

}  // namespace atomr::local
