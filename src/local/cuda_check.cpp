#include "atomr/local/cuda_check.hpp"

#include <string>

namespace atomr::detail {

error cuda_failure(cudaError_t status, const char* call, const char* file, int line) {
  // Clear the non-sticky error so the next unrelated call does not report it again.
  cudaGetLastError();
  std::string text = cudaGetErrorString(status);
  text += " (";
  text += cudaGetErrorName(status);
  text += '=';
  text += std::to_string(static_cast<int>(status));
  text += ')';
  const errc code = status == cudaErrorMemoryAllocation ? errc::out_of_memory : errc::cuda;
  return failed_call(code, call, text, file, line);
}

}  // namespace atomr::detail
