// A test hook of world::create (not installed).
#pragma once

#include <memory>

#include "atomr/cluster/engine/comm_backend.hpp"

namespace atomr::cluster::detail {

// For tests: a function world::create passes each backend it makes through (none by default), so
// that a test can wrap the host backend and drive the engine's paths that only a GPU build takes
// otherwise (the CUDA graph votes). Set it before creating worlds, from one thread.
using backend_wrapper = std::unique_ptr<comm_backend> (*)(std::unique_ptr<comm_backend>);
void set_backend_wrapper(backend_wrapper w);

}  // namespace atomr::cluster::detail
