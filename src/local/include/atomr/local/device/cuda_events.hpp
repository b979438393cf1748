// A pool of CUDA events (timing disabled) handed out as shared_ptr<void>, the type-erased form
// buffer_block keeps for "the last write": creating an event per operation costs microseconds.
// CUDA builds only. Used by the device actors and by the NCCL world.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/local/cuda_check.hpp"

namespace atomr::local {

// Events are recycled: creating one per operation costs microseconds. An event returns here when
// the last holder (a pending reply, a buffer's last write) lets go, from any thread. A rebuilt
// context gets a fresh pool; events of the old context are destroyed with the old pool.
class cuda_event_pool : public std::enable_shared_from_this<cuda_event_pool> {
 public:
  ~cuda_event_pool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  result<std::shared_ptr<void>> take() {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        e = free_.back();
        free_.pop_back();
      }
    }
    if (e == nullptr) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)));
    return std::shared_ptr<void>(
        e, [pool = shared_from_this()](void* ev) { pool->give_back(static_cast<cudaEvent_t>(ev)); });
  }

 private:
  void give_back(cudaEvent_t e) {
    std::lock_guard lock(mutex_);
    free_.push_back(e);
  }
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

}  // namespace atomr::local
