#include <cuda_runtime_api.h>

#include "sum_kernel.hpp"

namespace {
// One block per 256 x 32 elements; each block adds its partial sum into *out atomically.
__global__ void sum_kernel(const float* in, std::size_t n, double* out) {
  __shared__ double partial[256];
  double v = 0;
  for (std::size_t i = blockIdx.x * 256ull * 32 + threadIdx.x; i < n && i < (blockIdx.x + 1) * 256ull * 32; i += 256) {
    v += in[i];
  }
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
}  // namespace

namespace example {
int launch_sum(const float* in, std::size_t n, double* out, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (auto e = cudaMemsetAsync(out, 0, sizeof(double), s); e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>((n + 256 * 32 - 1) / (256 * 32));
  if (blocks > 0) sum_kernel<<<blocks, 256, 0, s>>>(in, n, out);
  return cudaGetLastError();
}
}  // namespace example
