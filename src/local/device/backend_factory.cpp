#include "atomr/local/device/device_backend.hpp"

namespace atomr::local {

std::unique_ptr<device_backend> make_host_backend(int index, std::size_t arena_most);
#if ATOMR_HAVE_CUDA
std::unique_ptr<device_backend> make_cuda_backend(int index);
#endif

result<std::unique_ptr<device_backend>> make_backend(device_kind kind, int index, std::size_t host_arena_most) {
  if (kind == device_kind::host) return make_host_backend(index, host_arena_most);
#if ATOMR_HAVE_CUDA
  return make_cuda_backend(index);
#else
  return error(errc::unavailable,
               "CUDA device " + std::to_string(index) + " requested, but atomr was built without CUDA");
#endif
}

}  // namespace atomr::local
