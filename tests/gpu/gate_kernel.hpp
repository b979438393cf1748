// A test kernel that holds its stream until the host opens a gate: it spins until *gate (host
// memory mapped into the device) is non-zero. Lets a test keep work queued behind it, for as
// long as it likes and without timing, while it checks what the host side can still do.
#pragma once

#include <cuda_runtime_api.h>

namespace atomr::test {
cudaError_t launch_wait_for_gate(const volatile int* gate, cudaStream_t stream);
}
