// The example's reduction kernel: sums n floats on the device's stream into *out (one double).
#pragma once

#include <cstddef>

namespace example {
// Returns 0 on success, else a cudaError_t value.
int launch_sum(const float* in, std::size_t n, double* out, void* stream);
}  // namespace example
