// p2p_graph: how the GPUs of this process connect. Built from a topology_probe: an edge per GPU
// pair with its kind, the islands of GPUs that can reach each other directly, and each GPU's
// nearest CPUs and NUMA node. Immutable once built; safe to share between threads.
//
// Edge kinds: the CUDA runtime reports access, performance rank and native atomics but not the
// physical link, so the kind is inferred the way NCCL's topology reports read: native P2P atomics
// mean NVLink (PCIe peer traffic has none); otherwise GPUs under different CPU packages talk
// across the socket interconnect; otherwise PCIe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "atomr/local/topology/topology_probe.hpp"

namespace atomr::local {

enum class link_kind { nvlink, pcie, cross_socket };
std::string_view to_string(link_kind k);

struct p2p_edge {
  int a = -1;
  int b = -1;
  link_kind kind = link_kind::pcie;
  bool access = false;  // both directions
  int performance_rank = -1;
  bool native_atomics = false;

  template <typename A>
  void serialize(A& ar) {
    ar(a, b, kind, access, performance_rank, native_atomics);
  }
};

class p2p_graph {
 public:
  static result<p2p_graph> build(topology_probe& probe);

  const machine_summary& machine() const { return machine_; }
  const std::vector<gpu_locality>& gpus() const { return gpus_; }
  const std::vector<p2p_edge>& edges() const { return edges_; }
  // Groups of GPUs connected by direct peer access, each sorted, ordered by their first GPU.
  const std::vector<std::vector<int>>& islands() const { return islands_; }

  const p2p_edge* edge(int a, int b) const;
  bool can_access(int a, int b) const;

  // `nvidia-smi topo -m` style matrix: NV (nvlink), PIX (pcie), SYS (cross-socket), X, or -- (no
  // direct access), then CPU and NUMA affinity.
  std::string matrix() const;
  std::string json() const;  // machine, gpus, edges, islands
  std::string dot() const;   // Graphviz

  template <typename A>
  void serialize(A& ar) {
    ar(machine_, gpus_, edges_, islands_);
  }

 private:
  machine_summary machine_;
  std::vector<gpu_locality> gpus_;
  std::vector<p2p_edge> edges_;
  std::vector<std::vector<int>> islands_;
};

}  // namespace atomr::local
