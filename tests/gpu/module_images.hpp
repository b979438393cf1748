// tests/gpu/module_kernels.cu compiled at build time, as PTX text and as a cubin for the build's
// first CUDA architecture.
#pragma once

#include <cstddef>
#include <span>

namespace atomr::test {
std::span<const std::byte> module_kernels_ptx();
std::span<const std::byte> module_kernels_cubin();
}  // namespace atomr::test
