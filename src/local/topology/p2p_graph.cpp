#include "atomr/local/topology/p2p_graph.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

namespace atomr::local {

std::string_view to_string(link_kind k) {
  switch (k) {
    case link_kind::nvlink: return "nvlink";
    case link_kind::pcie: return "pcie";
    case link_kind::cross_socket: return "cross_socket";
  }
  return "unknown";
}

namespace {

link_kind classify(const gpu_locality& a, const gpu_locality& b, const pair_probe& ab, const pair_probe& ba) {
  if (ab.access && ba.access && ab.native_atomics && ba.native_atomics) return link_kind::nvlink;
  if (a.package >= 0 && b.package >= 0 && a.package != b.package) return link_kind::cross_socket;
  return link_kind::pcie;
}

// Union-find over direct-access edges.
std::vector<std::vector<int>> find_islands(std::size_t n, const std::vector<p2p_edge>& edges) {
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const auto& e : edges) {
    if (e.access) parent[root(static_cast<std::size_t>(e.a))] = root(static_cast<std::size_t>(e.b));
  }
  std::vector<std::vector<int>> islands;
  std::vector<int> index_of_root(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = root(i);
    if (index_of_root[r] < 0) {
      index_of_root[r] = static_cast<int>(islands.size());
      islands.emplace_back();
    }
    islands[static_cast<std::size_t>(index_of_root[r])].push_back(static_cast<int>(i));
  }
  return islands;
}

}  // namespace

result<p2p_graph> p2p_graph::build(topology_probe& probe) {
  p2p_graph g;
  ATOMR_ASSIGN_OR_RETURN(g.machine_, probe.machine());
  ATOMR_ASSIGN_OR_RETURN(g.gpus_, probe.gpus());
  const int n = static_cast<int>(g.gpus_.size());
  for (int i = 0; i < n; ++i) {
    if (g.gpus_[static_cast<std::size_t>(i)].device != i) {
      return error(errc::internal, "topology probe listed device " +
                                       std::to_string(g.gpus_[static_cast<std::size_t>(i)].device) + " at position " +
                                       std::to_string(i));
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      ATOMR_ASSIGN_OR_RETURN(pair_probe ab, probe.pair(a, b));
      ATOMR_ASSIGN_OR_RETURN(pair_probe ba, probe.pair(b, a));
      p2p_edge e;
      e.a = a;
      e.b = b;
      e.access = ab.access && ba.access;
      e.performance_rank = e.access ? std::max(ab.performance_rank, ba.performance_rank) : -1;
      e.native_atomics = ab.native_atomics && ba.native_atomics;
      e.kind = classify(g.gpus_[static_cast<std::size_t>(a)], g.gpus_[static_cast<std::size_t>(b)], ab, ba);
      g.edges_.push_back(e);
    }
  }
  g.islands_ = find_islands(static_cast<std::size_t>(n), g.edges_);
  return g;
}

const p2p_edge* p2p_graph::edge(int a, int b) const {
  if (a > b) std::swap(a, b);
  for (const auto& e : edges_) {
    if (e.a == a && e.b == b) return &e;
  }
  return nullptr;
}

bool p2p_graph::can_access(int a, int b) const {
  if (a == b) return a >= 0 && a < static_cast<int>(gpus_.size());
  const auto* e = edge(a, b);
  return e != nullptr && e->access;
}

std::string p2p_graph::matrix() const {
  std::ostringstream os;
  if (gpus_.empty()) {
    os << "no GPUs visible\n";
  } else {
    os << "      ";
    for (const auto& g : gpus_) os << "GPU" << g.device << (g.device < 10 ? "  " : " ");
    os << "CPU affinity    NUMA\n";
    for (const auto& row : gpus_) {
      os << "GPU" << row.device << (row.device < 10 ? "  " : " ");
      for (const auto& col : gpus_) {
        std::string cell = "X";
        if (row.device != col.device) {
          const auto* e = edge(row.device, col.device);
          cell = !e->access ? "--" : e->kind == link_kind::nvlink ? "NV" : e->kind == link_kind::pcie ? "PIX" : "SYS";
        }
        os << cell << std::string(6 - cell.size(), ' ');
      }
      std::string cpus = row.cpus.empty() ? "?" : row.cpus;
      os << cpus << std::string(cpus.size() < 16 ? 16 - cpus.size() : 1, ' ')
         << (row.numa_node >= 0 ? std::to_string(row.numa_node) : "?") << '\n';
    }
    os << "\nislands:";
    for (const auto& island : islands_) {
      os << " {";
      for (std::size_t i = 0; i < island.size(); ++i) os << (i ? "," : "") << "GPU" << island[i];
      os << '}';
    }
    os << "\nlegend: NV = NVLink (native P2P atomics), PIX = PCIe peer access, SYS = peer access across CPU "
          "sockets, -- = no direct access\n";
  }
  os << "\nmachine: " << machine_.hostname << ", " << machine_.packages << " package(s), " << machine_.numa_nodes
     << " NUMA node(s), " << machine_.cores << " core(s)\n";
  for (std::size_t i = 0; i < machine_.numa_cpus.size(); ++i) {
    os << "  NUMA " << i << ": CPUs " << machine_.numa_cpus[i] << '\n';
  }
  return os.str();
}

std::string p2p_graph::json() const {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : gpus_) {
    gpus.push_back({{"device", g.device},
                    {"name", g.name},
                    {"pci_bus_id", g.pci_bus_id},
                    {"numa_node", g.numa_node},
                    {"package", g.package},
                    {"cpus", g.cpus},
                    {"nics", g.nics}});
  }
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& e : edges_) {
    edges.push_back({{"a", e.a},
                     {"b", e.b},
                     {"kind", to_string(e.kind)},
                     {"access", e.access},
                     {"performance_rank", e.performance_rank},
                     {"native_atomics", e.native_atomics}});
  }
  nlohmann::json machine{{"hostname", machine_.hostname},
                         {"packages", machine_.packages},
                         {"numa_nodes", machine_.numa_nodes},
                         {"cores", machine_.cores},
                         {"numa_cpus", machine_.numa_cpus}};
  return nlohmann::json{{"machine", machine}, {"gpus", gpus}, {"edges", edges}, {"islands", islands_}}.dump(2);
}

std::string p2p_graph::dot() const {
  std::ostringstream os;
  os << "graph p2p {\n  node [shape=box];\n";
  for (const auto& g : gpus_) {
    os << "  gpu" << g.device << " [label=\"GPU" << g.device << "\\n"
       << g.name << "\\nNUMA " << (g.numa_node >= 0 ? std::to_string(g.numa_node) : "?") << "\"];\n";
  }
  for (const auto& e : edges_) {
    if (!e.access) continue;
    os << "  gpu" << e.a << " -- gpu" << e.b << " [label=\"" << to_string(e.kind) << "\""
       << (e.kind == link_kind::nvlink ? ", penwidth=3" : "") << "];\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace atomr::local
