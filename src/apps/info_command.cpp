// `atomr info`: collective; every rank probes itself and rank 0 prints one table for the job.
#include <boost/program_options.hpp>
#include <iostream>
#include <set>

#include "atomr/cluster/all_tunables.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/rank_report.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/common/version.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "text_table.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

std::string describe_device(const local::device_info& d) {
  std::string out = d.kind == local::device_kind::cuda ? "gpu" + std::to_string(d.index) + " " + d.name : d.name;
  out += ", " + format_bytes(d.total_memory);
  if (d.kind == local::device_kind::cuda) {
    out += ", sm_" + std::to_string(d.compute_major) + std::to_string(d.compute_minor) + ", " + d.pci_bus_id;
  }
  return out;
}

void print_ranks(std::ostream& os, const std::vector<cluster::rank_report>& reports) {
  text_table ranks({"rank", "node", "host", "local", "cores", "threads may run on", "devices"});
  std::set<std::string> no_gpu_reasons;
  for (const auto& r : reports) {
    const auto& id = r.identity;
    for (std::size_t d = 0; d < r.devices.size(); ++d) {
      if (d == 0) {
        ranks.add_row(
            {std::to_string(id.world_rank), std::to_string(id.node_id), id.hostname,
             std::to_string(id.local_rank) + "/" + std::to_string(id.local_size), std::to_string(r.host.cores),
             "cpus " + r.cpus + " (" + std::to_string(r.cpu_count) + ", waits " + (r.spins ? "spin" : "yield") + ")" +
                 (r.gpu_irq_cpus.empty() ? "" : ", world threads not on " + r.gpu_irq_cpus + " (GPU interrupts)"),
             describe_device(r.devices[d])});
      } else {
        ranks.add_row({"", "", "", "", "", "", describe_device(r.devices[d])});
      }
    }
    if (!r.no_gpu_reason.empty()) no_gpu_reasons.insert(r.no_gpu_reason);
  }
  ranks.print(os);
  for (const auto& reason : no_gpu_reasons) os << "no GPU: " << reason << '\n';
  os << "(a rank's caller, world progress and NCCL threads share its cpus; with fewer than " << spin_relax::k_plenty
     << " per rank (unbound ranks share the node's) they yield while they wait, else they spin: "
        "docs/guide/tuning.md; a world's progress thread and the thread that creates it keep off the CPUs that take "
        "GPU interrupts, ATOMR_AVOID_IRQ_CPUS)\n";
}

// How a token fetch travels between each pair (buffer_registry.hpp): within a rank a device
// or peer copy; between GPU ranks of one node CUDA IPC (unless ATOMR_CUDA_IPC=0); between other
// GPU ranks NCCL send/recv (ATOMR_FETCH_NCCL=1: between all GPU ranks); otherwise MPI, staged
// through host memory for GPU buffers.
std::string fetch_path(const cluster::rank_report& owner, const cluster::rank_report& fetcher) {
  const int o = owner.identity.world_rank;
  const int f = fetcher.identity.world_rank;
  std::string path;
  if (o == f) {
    path = owner.devices.size() > 1 ? "device copy, peer copy between its devices" : "device copy";
  } else {
    const bool gpu = owner.no_gpu_reason.empty() || fetcher.no_gpu_reason.empty();
    const bool both_gpu = owner.no_gpu_reason.empty() && fetcher.no_gpu_reason.empty();
    const bool same_node = owner.identity.node_id == fetcher.identity.node_id;
    const std::string nccl = tunable_value(tunables::fetch_nccl);
    const bool ipc = both_gpu && same_node && ATOMR_HAVE_CUDA && tunable_value(tunables::cuda_ipc) != "0";
    if (both_gpu && ATOMR_HAVE_NCCL && (nccl == "1" || (nccl == "auto" && !ipc))) {
      path = "NCCL send/recv, GPU to GPU";
    } else if (ipc) {
      path = "CUDA IPC, GPU to GPU";
    } else {
      path = gpu ? "MPI, staged through host memory" : "MPI (host memory, no staging)";
    }
    path += same_node ? ", same node" : ", across nodes";
  }
  return path;
}

void print_fetch_routes(std::ostream& os, const std::vector<cluster::rank_report>& reports) {
  os << "\ntoken fetches (owner -> fetcher):\n";
  text_table fetches({"pair", "path"});
  // Beyond 8 ranks, one row per kind of pair (the table would have ranks^2 rows).
  std::set<std::string> seen;
  for (const auto& owner : reports) {
    for (const auto& fetcher : reports) {
      const int o = owner.identity.world_rank;
      const int f = fetcher.identity.world_rank;
      const std::string path = fetch_path(owner, fetcher);
      if (reports.size() <= 8) {
        fetches.add_row({"rank " + std::to_string(o) + " -> rank " + std::to_string(f), path});
      } else if (seen.insert(path).second) {
        fetches.add_row(
            {o == f ? "within a rank" : "e.g. rank " + std::to_string(o) + " -> rank " + std::to_string(f), path});
      }
    }
  }
  fetches.print(os);
}

void print_versions(std::ostream& os, const std::vector<cluster::rank_report>& reports) {
  text_table versions({"rank", "cuda runtime", "cuda driver", "nccl", "mpi", "hwloc"});
  for (const auto& r : reports) {
    versions.add_row({std::to_string(r.identity.world_rank), r.local_versions.cuda_runtime,
                      r.local_versions.cuda_driver, r.nccl_version, r.mpi_version, r.local_versions.hwloc});
  }
  versions.print(os);
}

void print_tunables(std::ostream& os, bool all_tunables) {
  text_table tunables({"tunable", "env", "value", "meaning"});
  std::size_t experts = 0;
  for (const tunable* t : atomr::all_tunables()) {
    if (t->level == tunable::expert && !all_tunables) {
      ++experts;
      continue;
    }
    tunables.add_row({std::string(t->name), std::string(t->env),
                      tunable_value(*t) + (tunable_is_set(*t) ? "" : " (default)"), std::string(t->description)});
  }
  tunables.print(os);
  if (experts > 0) os << "(and " << experts << " expert tunables: atomr info --all)\n";
}

void print_reports(std::ostream& os, const std::vector<cluster::rank_report>& reports, bool all_tunables) {
  const auto& first = reports.front().identity;
  os << "atomr " << k_version << " (" << k_git_revision << "): " << first.world_size << " rank(s) on "
     << first.node_count << " node(s)\n\n";

  print_ranks(os, reports);
  print_fetch_routes(os, reports);
  os << '\n';
  print_versions(os, reports);
  os << '\n';
  print_tunables(os, all_tunables);
}

}  // namespace

int run_info(const std::string& program, const std::vector<std::string>& args) {
  po::options_description opts("atomr " + program + " options");
  opts.add_options()("help,h", "print this help")("all", "list every tunable, the expert ones too");
  po::variables_map vm;
  if (auto done = parse_command_line(program, args, opts,
                                     "usage: atomr info [--all]\n"
                                     "Collective over all ranks: rank 0 prints each rank's node, local rank, devices\n"
                                     "(or the host device where no GPU is visible), library versions and tunables.",
                                     vm)) {
    return *done;
  }

  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  auto mine = cluster::probe_rank_report((*session)->identity());
  // A failed probe still takes part in the gather, so the other ranks do not wait forever.
  cluster::rank_report fallback;
  fallback.identity = (*session)->identity();
  if (!mine) {
    report_error(mine.error_value().describe(), 1);
    fallback.no_gpu_reason = "probe failed: " + mine.error_value().describe();
  }
  auto reports = cluster::gather_rank_reports((*session)->world(), mine ? *mine : fallback);
  if (!reports) return report_error(reports.error_value().describe(), 1);
  if ((*session)->identity().world_rank == 0) print_reports(std::cout, *reports, vm.count("all") > 0);
  return mine ? 0 : 1;
}

}  // namespace atomr::apps
