#include <cstdint>

#include "batched_copy.hpp"

namespace atomr::cluster::detail {
namespace {

// One block per copy; 16-byte words where source, destination and size allow, bytes otherwise.
__global__ void batched_copy(const copy_desc* descs) {
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

}  // namespace

cudaError_t launch_batched_copy(const copy_desc* descs, int count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  batched_copy<<<count, 128, 0, stream>>>(descs);
  return cudaGetLastError();
}

}  // namespace atomr::cluster::detail
