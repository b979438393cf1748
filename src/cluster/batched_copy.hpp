// One kernel that performs many small device-to-device copies: how packed all_reduces gather
// their inputs into one buffer and scatter the result back, in one launch instead of hundreds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace atomr::cluster::detail {

struct copy_desc {
  const void* src;
  void* dst;
  std::size_t bytes;
};

// Copies every `descs[i]` (the array itself in device memory) on `stream`.
cudaError_t launch_batched_copy(const copy_desc* descs, int count, cudaStream_t stream);

}  // namespace atomr::cluster::detail
