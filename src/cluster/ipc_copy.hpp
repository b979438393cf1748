// A device-to-device copy by kernel, for reads out of memory imported from another process:
// cudaMemcpyAsync moved such memory at about half the rate of a copy out of a cudaIpcOpenMemHandle
// buffer on the same H100 (it takes the copy engines); a kernel reads it at the SMs' rate.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace atomr::cluster::detail {

// Whether dst, src and bytes are all multiples of 16 (what the kernel needs).
bool kernel_copy_fits(const void* dst, const void* src, std::size_t bytes);
cudaError_t launch_kernel_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

}  // namespace atomr::cluster::detail
