// What the launcher told this process through its environment: Slurm (srun), PMIx and Open MPI
// (mpirun) each publish the rank, the job size and the node-local rank under their own names.
// This is the one place atomr reads them. MPI's own answers (node_identity) win once MPI is up;
// these values serve before MPI_Init (logging, device choice) and cross-check the launcher.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr {

enum class launcher_kind { none, slurm, open_mpi, pmix };
std::string_view to_string(launcher_kind k);

struct launch_env {
  launcher_kind launcher = launcher_kind::none;
  std::optional<int> rank;
  std::optional<int> size;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  std::optional<int> node_count;
  std::string job_id;  // SLURM_JOB_ID or PMIX_NAMESPACE; empty if neither
  // CUDA_VISIBLE_DEVICES split at commas (indices or GPU-/MIG- UUIDs); nullopt when unset.
  // An empty list means the variable is set but names no device.
  std::optional<std::vector<std::string>> visible_devices;
};

// Reads the variables through `lookup` (returns nullptr for an unset variable). A variable that
// is set but is not a non-negative integer, or a rank outside its size, is an invalid_argument
// error naming the variable and its value.
using env_lookup = std::function<const char*(const char*)>;
result<launch_env> read_launch_env(const env_lookup& lookup);
// The same over the process environment.
result<launch_env> read_launch_env();

// The ranks the launcher started on this node, for what must be known before MPI is up (how
// polling threads wait: spin_relax): local_size where the launcher says it, else the leading
// count of Slurm's SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE ("4(x2),3" gives 4), else
// MPICH's MPI_LOCALNRANKS; 1 where none says or a value is malformed.
unsigned ranks_on_this_node(const env_lookup& lookup);
unsigned ranks_on_this_node();

}  // namespace atomr
