#include "atomr/cluster/rank_report.hpp"

#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/versions.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/topology/irq_cpus.hpp"

namespace atomr::cluster {

result<rank_report> probe_rank_report(const node_identity& identity) {
  rank_report r;
  r.identity = identity;
  ATOMR_ASSIGN_OR_RETURN(r.host, local::probe_host());
  ATOMR_ASSIGN_OR_RETURN(local::device_probe probe, local::probe_cuda_devices());
  r.devices = std::move(probe.devices);
  if (r.devices.empty()) {
    r.devices.push_back(local::host_device());
    r.no_gpu_reason = std::move(probe.absent_reason);
  }
  r.local_versions = local::probe_local_versions();
  r.mpi_version = mpi_library_version();
  r.nccl_version = nccl_library_version();
  r.cpus = spin_relax::cpu_list(&r.cpu_count);
  r.spins = spin_relax::plenty();
  r.gpu_irq_cpus = local::cpu_list_text(local::cpus_to_avoid());
  return r;
}

result<std::vector<rank_report>> gather_rank_reports(MPI_Comm comm, const rank_report& mine) {
  return gather_values(comm, mine, "rank_report");
}

}  // namespace atomr::cluster
