// Kernels for the module tests. This file is not linked into any test: the build compiles it to
// PTX and to a cubin, and the tests load those images through device::load_module at run time.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// out[i] = a * in[i] + b
extern "C" __global__ void affine(const int* in, int* out, int a, int b, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}

// Sums `in` into *total in one launch: each block adds its share into partial[block], the whole
// grid waits at grid.sync() (valid only in a cooperative launch), then thread 0 adds the partials.
extern "C" __global__ void grid_sum(const int* in, int* partial, int* total, unsigned n) {
  cg::grid_group grid = cg::this_grid();
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) atomicAdd(&partial[blockIdx.x], in[i]);
  grid.sync();
  if (grid.thread_rank() == 0) {
    int sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
    *total = sum;
  }
}

// Writes 1 TiB past `base`: an illegal address, which poisons the context.
extern "C" __global__ void write_far_away(int* base) { base[(1ull << 40) / sizeof(int) + threadIdx.x] = 1; }
