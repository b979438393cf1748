// ATOMR_CUDA_CHECK(call): runs a CUDA runtime call and yields result<void>; a failure becomes an
// errc::cuda error (errc::out_of_memory for allocation failures) naming the call, CUDA's error
// name and text, file:line, rank and device. Use as ATOMR_TRY(ATOMR_CUDA_CHECK(cudaFree(p))).
#pragma once

#include <cuda_runtime_api.h>

#include "atomr/common/check.hpp"
#include "atomr/common/result.hpp"

namespace atomr::detail {
error cuda_failure(cudaError_t status, const char* call, const char* file, int line);

inline result<void> check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return ok();
  return cuda_failure(status, call, file, line);
}
}  // namespace atomr::detail

#define ATOMR_CUDA_CHECK(call) ::atomr::detail::check_cuda((call), #call, __FILE__, __LINE__)
