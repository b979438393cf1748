// The device check's kernel (cuda/add_one.cu): adds one to every word, on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace atomr::cluster::doctor::detail {
cudaError_t launch_add_one(std::uint32_t* words, std::size_t count, cudaStream_t stream);
}
