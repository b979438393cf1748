// The device check's kernel: every word of a buffer plus one, so the host can tell that it ran.
#include <cstddef>
#include <cstdint>

#include "../add_one.hpp"

namespace {
__global__ void add_one(std::uint32_t* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] += 1;
  }
}
}  // namespace

namespace atomr::cluster::doctor::detail {
cudaError_t launch_add_one(std::uint32_t* words, std::size_t count, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(count / 256 + 1 < 1024 ? count / 256 + 1 : 1024);
  add_one<<<blocks, 256, 0, stream>>>(words, count);
  return cudaGetLastError();
}
}  // namespace atomr::cluster::doctor::detail
