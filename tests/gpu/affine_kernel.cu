#include "affine_kernel.hpp"

namespace atomr::test {
namespace {
__global__ void affine(const std::int32_t* in, std::int32_t* out, std::size_t n, std::int32_t a, std::int32_t b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}
}  // namespace

cudaError_t launch_affine(const std::int32_t* in, std::int32_t* out, std::size_t n, std::int32_t a, std::int32_t b,
                          cudaStream_t stream) {
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  affine<<<blocks, threads, 0, stream>>>(in, out, n, a, b);
  return cudaGetLastError();
}
}  // namespace atomr::test
