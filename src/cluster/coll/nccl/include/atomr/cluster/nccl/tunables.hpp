// The tunables of the NCCL backend, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable nccl_graphs{
    "nccl_graphs", "ATOMR_NCCL_GRAPHS", "1",
    "NCCL (blocking communicators): a collective the ranks repeat on the same buffers is captured once and "
    "replayed as CUDA graphs, one per GPU (the ranks agree on each replay): 1 or 0"};
inline constexpr tunable nccl_graph_bytes{"nccl_graph_bytes", "ATOMR_NCCL_GRAPH_BYTES", "1048576",
                                          "NCCL graphs: collectives up to this many bytes per rank are replayed",
                                          tunable::expert};
inline constexpr tunable nccl_scalable_ranks{
    "nccl_scalable_ranks", "ATOMR_NCCL_SCALABLE_RANKS", "1024",
    "NCCL worlds of at least this many GPUs start with ncclCommInitRankScalable (several unique ids); 0: never",
    tunable::expert};
inline constexpr tunable nccl_ranks_per_id{
    "nccl_ranks_per_id", "ATOMR_NCCL_RANKS_PER_ID", "128",
    "ncclCommInitRankScalable: one unique id (bootstrap root) per this many GPUs", tunable::expert};

inline constexpr std::array k_nccl{&nccl_graphs, &nccl_graph_bytes, &nccl_scalable_ranks, &nccl_ranks_per_id};

}  // namespace atomr::tunables
