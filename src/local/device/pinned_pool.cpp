#include "pinned_pool.hpp"

#include <cuda_runtime_api.h>

#include <bit>

#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"

namespace atomr::local::detail {

pinned_pool::~pinned_pool() {
  for (auto& [size, list] : free_) {
    for (void* p : list) cudaFreeHost(p);
  }
}

result<std::shared_ptr<void>> pinned_pool::take(std::size_t bytes) {
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(bytes, 64 * 1024));
  void* p = nullptr;
  std::uint64_t epoch = 0;
  {
    std::lock_guard lock(mutex_);
    epoch = epoch_;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= size;
    }
  }
  if (p == nullptr) {
    context::scoped_device bound(device_);
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocHost(&p, size)));
  }
  return std::shared_ptr<void>(p, [pool = weak_from_this(), size, epoch](void* q) {
    if (auto keep = pool.lock()) return keep->give_back(q, size, epoch);
    cudaFreeHost(q);
  });
}

void pinned_pool::give_back(void* p, std::size_t size, std::uint64_t epoch) {
  std::lock_guard lock(mutex_);
  if (epoch != epoch_) return;  // its context is gone, and the memory with it
  if (cached_ + size > k_cache_bytes) {
    cudaFreeHost(p);
    return;
  }
  free_[size].push_back(p);
  cached_ += size;
}

void pinned_pool::forget() {
  std::lock_guard lock(mutex_);
  free_.clear();
  cached_ = 0;
  ++epoch_;
}

}  // namespace atomr::local::detail
