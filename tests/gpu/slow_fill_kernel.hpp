// A test kernel: spins for `spin_cycles` clock cycles, then writes `value` to out[0..n).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace atomr::test {
cudaError_t launch_slow_fill(std::int32_t* out, std::size_t n, std::int32_t value, long long spin_cycles,
                             cudaStream_t stream);
}
