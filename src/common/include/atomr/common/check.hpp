// The shared half of atomr's call-checking macros (ATOMR_CUDA_CHECK, ATOMR_NCCL_CHECK,
// ATOMR_MPI_CHECK live next to their libraries). Each turns a failed call into an atomr::error
// whose message names the call as written, the library's own error text, file:line, and the
// rank and device it happened on, e.g.
//   cudaMalloc(&ptr, bytes) failed: out of memory (cudaErrorMemoryAllocation=2) at src/local/x.cpp:40 [rank 1, device
//   0]
#pragma once

#include <string_view>

#include "atomr/common/error.hpp"

namespace atomr::detail {

error failed_call(errc code, std::string_view call, std::string_view library_text, std::string_view file, int line);

}  // namespace atomr::detail
