#include "atomr/common/launch_env.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace atomr {
namespace {

// The names each launcher uses, most specific first. Slurm's srun exports SLURM_PROCID/NTASKS
// per task; Open MPI's mpirun exports OMPI_COMM_WORLD_*; a PMIx server (prterun, srun --mpi=pmix)
// exports PMIX_RANK. Local size and node count have no PMIx variable.
struct names {
  launcher_kind kind;
  const char* marker;  // set only under this launcher
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* node_count;
  const char* job_id;
};
constexpr names k_launchers[] = {
    {launcher_kind::open_mpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr, "PMIX_NAMESPACE"},
    {launcher_kind::slurm, "SLURM_PROCID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NNODES",
     "SLURM_JOB_ID"},
    {launcher_kind::pmix, "PMIX_RANK", "PMIX_RANK", nullptr, nullptr, nullptr, nullptr, "PMIX_NAMESPACE"},
};

result<std::optional<int>> read_int(const env_lookup& lookup, const char* name) {
  if (name == nullptr) return std::optional<int>{};
  const char* raw = lookup(name);
  if (raw == nullptr || *raw == '\0') return std::optional<int>{};
  const std::string_view text(raw);
  int value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return error(errc::invalid_argument,
                 std::string(name) + "='" + std::string(text) + "' is not a non-negative integer");
  }
  return std::optional<int>(value);
}

// Slurm's per-node task count comes as SLURM_TASKS_PER_NODE ("4(x2),3"), which is per node, not
// per this node; SLURM_NTASKS_PER_NODE is set only when the user asked for it. Use it when there.
result<std::optional<int>> slurm_local_size(const env_lookup& lookup) {
  return read_int(lookup, "SLURM_NTASKS_PER_NODE");
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    auto item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::string_view to_string(launcher_kind k) {
  switch (k) {
    case launcher_kind::none: return "none";
    case launcher_kind::slurm: return "slurm";
    case launcher_kind::open_mpi: return "open-mpi";
    case launcher_kind::pmix: return "pmix";
  }
  return "unknown";
}

result<launch_env> read_launch_env(const env_lookup& lookup) {
  launch_env env;
  for (const auto& n : k_launchers) {
    const char* marker = lookup(n.marker);
    if (marker == nullptr || *marker == '\0') continue;
    env.launcher = n.kind;
    ATOMR_ASSIGN_OR_RETURN(env.rank, read_int(lookup, n.rank));
    ATOMR_ASSIGN_OR_RETURN(env.size, read_int(lookup, n.size));
    ATOMR_ASSIGN_OR_RETURN(env.local_rank, read_int(lookup, n.local_rank));
    ATOMR_ASSIGN_OR_RETURN(env.local_size, read_int(lookup, n.local_size));
    ATOMR_ASSIGN_OR_RETURN(env.node_count, read_int(lookup, n.node_count));
    if (n.kind == launcher_kind::slurm) {
      ATOMR_ASSIGN_OR_RETURN(env.local_size, slurm_local_size(lookup));
    }
    if (const char* job = n.job_id ? lookup(n.job_id) : nullptr; job != nullptr) env.job_id = job;
    break;
  }
  if (env.rank && env.size && *env.rank >= *env.size) {
    return error(errc::invalid_argument, "launcher " + std::string(to_string(env.launcher)) + " says rank " +
                                             std::to_string(*env.rank) + " of " + std::to_string(*env.size));
  }
  if (env.local_rank && env.local_size && *env.local_rank >= *env.local_size) {
    return error(errc::invalid_argument, "launcher " + std::string(to_string(env.launcher)) + " says local rank " +
                                             std::to_string(*env.local_rank) + " of " +
                                             std::to_string(*env.local_size));
  }
  if (const char* visible = lookup("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    env.visible_devices = split_commas(visible);
  }
  return env;
}

result<launch_env> read_launch_env() {
  return read_launch_env([](const char* name) -> const char* { return std::getenv(name); });
}

unsigned ranks_on_this_node(const env_lookup& lookup) {
  if (const auto env = read_launch_env(lookup); env && env->local_size && *env->local_size > 0) {
    return static_cast<unsigned>(*env->local_size);
  }
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "MPI_LOCALNRANKS"}) {
    const char* raw = lookup(name);
    if (raw == nullptr) continue;
    const std::string_view text(raw);
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec == std::errc() && n > 0 && n < 1'000'000) return n;
  }
  return 1;
}

unsigned ranks_on_this_node() {
  return ranks_on_this_node([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace atomr
