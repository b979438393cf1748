#include "fault_kernel.hpp"

namespace atomr::test {
namespace {
__global__ void write_far_away(int* base) {
  // Far outside any allocation: an illegal address, which poisons the context.
  base[(1ull << 40) / sizeof(int) + threadIdx.x] = 1;
}
}  // namespace

cudaError_t launch_illegal_write(int* base, cudaStream_t stream) {
  write_far_away<<<1, 32, 0, stream>>>(base);
  return cudaGetLastError();
}
}  // namespace atomr::test
