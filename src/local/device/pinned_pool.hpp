// Page-locked host buffers for staging copies between a device and pageable host memory. A copy
// from pageable memory makes CUDA synchronize the caller with the stream (the whole copy, for
// device to host), which would block the device actor behind every kernel queued before it;
// through a pinned buffer the copy is asynchronous and the actor only does a memcpy.
//
// Buffers come back to the pool when their last holder drops them and are reused by size class
// (powers of two from 64 KiB), keeping at most k_cache_bytes cached. A rebuilt context takes its
// pinned memory with it: forget() drops everything without freeing it. Actor thread only, except
// that a handle may be dropped on any thread (a mutex guards the free lists).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::local::detail {

class pinned_pool : public std::enable_shared_from_this<pinned_pool> {
 public:
  static constexpr std::size_t k_cache_bytes = std::size_t{1} << 30;

  explicit pinned_pool(int device) : device_(device) {}
  ~pinned_pool();
  pinned_pool(const pinned_pool&) = delete;
  pinned_pool& operator=(const pinned_pool&) = delete;

  // A buffer of at least `bytes`, freed or cached when the returned handle goes.
  result<std::shared_ptr<void>> take(std::size_t bytes);
  // The context that owned every buffer is gone: drop them all without freeing.
  void forget();

 private:
  void give_back(void* p, std::size_t size, std::uint64_t epoch);

  int device_;
  std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;  // size class -> cached buffers
  std::size_t cached_ = 0;
  std::uint64_t epoch_ = 0;  // bumped by forget(): older buffers are not freed
};

}  // namespace atomr::local::detail
