// One kernel that performs many small device-to-device copies: how packed all_reduces gather
// their inputs into one buffer and scatter the result back, in one launch instead of hundreds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace atomr::cluster::detail {

// One request's slot in a pack buffer: its own buffer, and where in the pack its bytes go.
struct pack_entry {
  void* user;
  std::size_t offset;
  std::size_t bytes;
};

// Copies each entry's bytes from its user buffer into `pack + offset` (gather) or back (scatter)
// on `stream`. The table travels as the kernels' parameters (up to 1024 entries a launch, under
// CUDA's 32 KiB), so nothing is allocated or uploaded and the host may reuse `entries` at once.
cudaError_t launch_pack_copy(const pack_entry* entries, int count, void* pack, bool gather, cudaStream_t stream);

}  // namespace atomr::cluster::detail
