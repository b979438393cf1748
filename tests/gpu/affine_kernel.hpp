// A test kernel: out[i] = a * in[i] + b, on `stream`. Returns the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace atomr::test {
cudaError_t launch_affine(const std::int32_t* in, std::int32_t* out, std::size_t n, std::int32_t a, std::int32_t b,
                          cudaStream_t stream);
}
