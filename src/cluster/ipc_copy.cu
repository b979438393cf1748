#include <algorithm>
#include <cstdint>

#include "ipc_copy.hpp"

namespace atomr::cluster::detail {
namespace {

// Grid-stride copy in 16-byte words (the caller checks alignment and size).
__global__ void copy_words(uint4* __restrict__ out, const uint4* __restrict__ in, std::size_t words) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    out[i] = in[i];
  }
}

}  // namespace

bool kernel_copy_fits(const void* dst, const void* src, std::size_t bytes) {
  return ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) | bytes) & 15u) == 0;
}

cudaError_t launch_kernel_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  const std::size_t words = bytes / 16;
  if (words == 0) return cudaSuccess;
  int device = 0;
  int sms = 0;
  if (const auto e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const auto e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  constexpr int k_threads = 512;
  const auto wanted = (words + k_threads - 1) / k_threads;
  const int blocks = static_cast<int>(std::min<std::size_t>(wanted, static_cast<std::size_t>(sms) * 4));
  copy_words<<<blocks, k_threads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), words);
  return cudaGetLastError();
}

}  // namespace atomr::cluster::detail
