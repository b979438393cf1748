// The probes' copy kernel with its table in device memory (uploaded, or mapped page-locked
// memory): how issue_packed gathered and scattered before its table became the kernels'
// parameter block (src/cluster/batched_copy.cu), kept to measure the two side by side.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace atomr::probes {

struct copy_desc {
  const void* src;
  void* dst;
  std::size_t bytes;
};

// One block per copy; 16-byte words where source, destination and size allow, bytes otherwise.
__global__ void uploaded_copy(const copy_desc* descs) {
  const copy_desc d = descs[blockIdx.x];
  const auto s = reinterpret_cast<std::uintptr_t>(d.src);
  const auto t = reinterpret_cast<std::uintptr_t>(d.dst);
  if (((s | t | d.bytes) & 15u) == 0) {
    const auto* in = static_cast<const uint4*>(d.src);
    auto* out = static_cast<uint4*>(d.dst);
    for (std::size_t i = threadIdx.x; i < d.bytes / 16; i += blockDim.x) out[i] = in[i];
    return;
  }
  const auto* in = static_cast<const unsigned char*>(d.src);
  auto* out = static_cast<unsigned char*>(d.dst);
  for (std::size_t i = threadIdx.x; i < d.bytes; i += blockDim.x) out[i] = in[i];
}

// Copies every `descs[i]` (the array itself in device memory) on `stream`.
inline cudaError_t launch_batched_copy(const copy_desc* descs, int count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  uploaded_copy<<<count, 128, 0, stream>>>(descs);
  return cudaGetLastError();
}

}  // namespace atomr::probes
