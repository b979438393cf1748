// `atomr topo`: collective; every rank builds its P2P graph (GPUs, links, islands, CPU and NUMA
// locality) and rank 0 prints all of them, as a table, --json or --dot (Graphviz).
#include <boost/program_options.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/local/topology/p2p_graph.hpp"
#include "command_line.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

struct rank_topology {
  cluster::node_identity identity;
  local::p2p_graph graph;
  std::string failure;  // why the graph is empty, if probing failed on that rank

  template <typename A>
  void serialize(A& ar) {
    ar(identity, graph, failure);
  }
};

void print(const std::vector<rank_topology>& all, const std::string& format) {
  if (format == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : all) {
      out.push_back({{"rank", r.identity.world_rank},
                     {"node", r.identity.node_id},
                     {"hostname", r.identity.hostname},
                     {"local_rank", r.identity.local_rank},
                     {"error", r.failure},
                     {"topology", nlohmann::json::parse(r.graph.json())}});
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  for (const auto& r : all) {
    const auto& id = r.identity;
    if (format == "dot") {
      std::string dot = r.graph.dot();
      dot.replace(0, dot.find('{'), "graph rank" + std::to_string(id.world_rank) + " ");
      std::cout << "// rank " << id.world_rank << " on " << id.hostname << '\n' << dot;
      continue;
    }
    std::cout << "== rank " << id.world_rank << " (node " << id.node_id << ", " << id.hostname << ", local rank "
              << id.local_rank << "/" << id.local_size << ")\n";
    if (!r.failure.empty()) std::cout << "probe failed: " << r.failure << '\n';
    std::cout << r.graph.matrix() << '\n';
  }
}

}  // namespace

int run_topo(const std::string& program, const std::vector<std::string>& args) {
  po::options_description opts("atomr " + program + " options");
  opts.add_options()("help,h", "print this help")("json", "print JSON")("dot", "print Graphviz dot");
  po::variables_map vm;
  const std::string usage =
      "usage: atomr topo [--json | --dot]\n"
      "Collective over all ranks: rank 0 prints each rank's GPUs, their links (NVLink, PCIe,\n"
      "cross-socket), islands of direct peer access, and CPU/NUMA locality.";
  if (auto done = parse_command_line(program, args, opts, usage, vm)) return *done;
  if (vm.count("json") && vm.count("dot")) return usage_error(program, "--json and --dot exclude each other", usage);
  const std::string format = vm.count("json") ? "json" : vm.count("dot") ? "dot" : "table";

  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  rank_topology mine;
  mine.identity = (*session)->identity();
  auto probe = local::make_system_probe();
  auto graph = local::p2p_graph::build(*probe);
  if (graph) {
    mine.graph = std::move(graph).value();
  } else {
    mine.failure = graph.error_value().describe();
    report_error(mine.failure, 1);
  }
  auto all = cluster::gather_values((*session)->world(), mine, "rank_topology");
  if (!all) return report_error(all.error_value().describe(), 1);
  if (mine.identity.world_rank == 0) print(*all, format);
  return mine.failure.empty() ? 0 : 1;
}

}  // namespace atomr::apps
