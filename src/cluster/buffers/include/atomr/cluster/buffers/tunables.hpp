// The tunables of buffer fetches, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable cuda_ipc{"cuda_ipc", "ATOMR_CUDA_IPC", "1",
                                  "buffer fetches between GPU ranks of one node: CUDA IPC (1) or host staging (0)"};
inline constexpr tunable fetch_nccl{
    "fetch_nccl", "ATOMR_FETCH_NCCL", "auto",
    "buffer fetches between GPU ranks by NCCL send/recv: auto (where CUDA IPC does not serve), 1 (first), 0 (never)"};

inline constexpr std::array k_buffers{&cuda_ipc, &fetch_nccl};

}  // namespace atomr::tunables
