// What one rank knows about itself (identity, host, devices, library versions) and the collective
// that brings every rank's report to rank 0. Used by `atomr info` and by startup diagnostics.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "atomr/cluster/node_identity.hpp"
#include "atomr/common/result.hpp"
#include "atomr/local/devices.hpp"
#include "atomr/local/host_info.hpp"
#include "atomr/local/versions.hpp"

namespace atomr::cluster {

struct rank_report {
  node_identity identity;
  local::host_info host;
  std::vector<local::device_info> devices;  // the CUDA devices visible to the rank, or the host device
  std::string no_gpu_reason;                // set when `devices` holds the host device
  local::local_versions local_versions;
  std::string mpi_version;
  std::string nccl_version;
  // Where the rank's threads (the caller's, the world's progress thread, NCCL's) may run: its CPU
  // affinity as the launcher left it, and how waiting threads wait there (spin_relax).
  std::string cpus;
  int cpu_count = 0;
  bool spins = false;
  // The CPUs that take the node's GPU interrupts, which a world's threads keep off
  // (local::gpu_interrupt_cpus, ATOMR_AVOID_IRQ_CPUS); empty where none are known or it is off.
  std::string gpu_irq_cpus;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(identity, host, devices, no_gpu_reason, local_versions, mpi_version, nccl_version, cpus, cpu_count, spins,
       gpu_irq_cpus);
  }
};

// Probes this rank. Fails only on real errors; "no GPU" yields the host device.
result<rank_report> probe_rank_report(const node_identity& identity);

// Collective over `comm`: on rank 0 returns every rank's report in rank order; elsewhere empty.
result<std::vector<rank_report>> gather_rank_reports(MPI_Comm comm, const rank_report& mine);

}  // namespace atomr::cluster
