#include "gate_kernel.hpp"

namespace atomr::test {
namespace {
__global__ void wait_for_gate(const volatile int* gate) {
  while (*gate == 0) {
  }
}
}  // namespace

cudaError_t launch_wait_for_gate(const volatile int* gate, cudaStream_t stream) {
  wait_for_gate<<<1, 1, 0, stream>>>(gate);
  return cudaGetLastError();
}
}  // namespace atomr::test
