// A test kernel that writes to an illegal address (a sticky error that poisons the context).
#pragma once

#include <cuda_runtime_api.h>

namespace atomr::test {
cudaError_t launch_illegal_write(int* base, cudaStream_t stream);
}
