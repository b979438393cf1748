#include "slow_fill_kernel.hpp"

namespace atomr::test {
namespace {
__global__ void slow_fill(std::int32_t* out, std::size_t n, std::int32_t value, long long spin) {
  // Spin first, so work queued behind this kernel on another device would overtake it unless it
  // waits for it on the device.
  const long long start = clock64();
  while (clock64() - start < spin) {
  }
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}
}  // namespace

cudaError_t launch_slow_fill(std::int32_t* out, std::size_t n, std::int32_t value, long long spin_cycles,
                             cudaStream_t stream) {
  slow_fill<<<64, 256, 0, stream>>>(out, n, value, spin_cycles);
  return cudaGetLastError();
}
}  // namespace atomr::test
