// Recycled storage for small objects that one thread makes and another frees, many at a time: the
// world's requests (a caller makes them, the progress thread frees them, hundreds per submit_group(each_request)
// call) and the promises' shared states.
//
// With the allocator's per-thread caches that is memory flowing one way: the freeing thread's
// cache spills to the shared lists, whole spans go back to the system, and the making thread's
// next objects fault fresh pages in. `perf` of 1000 x 2 KiB all_reduces in one call on the 2-core
// machine had 48 % of the caller's time in those faults (clear_page under tcmalloc's
// CentralFreeList::Populate, under make_request); most of it went with the engine's bound on the
// finished requests it keeps (world_engine::free_retired), but without recycling one of two
// one-rank runs still took 759 us a call against 440-447 with it. Here freed blocks are kept, a
// batch at a time, for the next ones: each thread has a cache, and batches move through a pool
// shared by all.
//
// Off under the sanitizers (a recycled block would hide a use after free from them).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATOMR_RECYCLE_STORAGE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ATOMR_RECYCLE_STORAGE 0
#endif
#endif
#ifndef ATOMR_RECYCLE_STORAGE
#define ATOMR_RECYCLE_STORAGE 1
#endif

namespace atomr {

// Blocks of `Bytes` (aligned as ::operator new aligns); take() and give() from any threads.
template <std::size_t Bytes>
class recycled_storage {
 public:
  static constexpr bool k_on = ATOMR_RECYCLE_STORAGE != 0 && Bytes <= 4096;
  static constexpr std::size_t k_batch = 64;         // moved between a thread's cache and the pool at once
  static constexpr std::size_t k_thread_most = 256;  // kept by one thread before a batch goes to the pool
  static constexpr std::size_t k_pool_most = std::max<std::size_t>(16384, (std::size_t{8} << 20) / Bytes);

  static void* take() {
    if (!k_on || t_cache_ == cache_state::gone) return ::operator new(Bytes);
    auto& mine = cache();
    if (mine.blocks.empty()) {
      auto& p = pool::get();
      std::lock_guard lock(p.mutex);
      const std::size_t n = std::min(k_batch, p.blocks.size());
      mine.blocks.insert(mine.blocks.end(), p.blocks.end() - static_cast<std::ptrdiff_t>(n), p.blocks.end());
      p.blocks.resize(p.blocks.size() - n);
    }
    if (mine.blocks.empty()) return ::operator new(Bytes);
    void* b = mine.blocks.back();
    mine.blocks.pop_back();
    return b;
  }

  static void give(void* b) noexcept {
    if (b == nullptr) return;
    if (!k_on) return ::operator delete(b);
    if (t_cache_ == cache_state::gone) {
      auto& p = pool::get();
      std::lock_guard lock(p.mutex);
      return p.put_locked(b);
    }
    auto& mine = cache();
    mine.blocks.push_back(b);                                  // (within what the cache reserved)
    if (mine.blocks.size() < k_thread_most + k_batch) return;  // a batch to the pool, for the making thread
    auto& p = pool::get();
    std::lock_guard lock(p.mutex);
    for (std::size_t i = 0; i < k_batch; ++i) {
      p.put_locked(mine.blocks.back());
      mine.blocks.pop_back();
    }
  }

  // Blocks in the shared pool now (not counting the threads' caches; for tests).
  static std::size_t pooled() {
    auto& p = pool::get();
    std::lock_guard lock(p.mutex);
    return p.blocks.size();
  }

 private:
  // Never destroyed (threads give blocks back during exit); its list is reserved whole, so that
  // giving back never allocates.
  struct pool {
    std::mutex mutex;
    std::vector<void*> blocks;
    static pool& get() {
      static pool* const p = [] {
        auto* made = new pool;
        made->blocks.reserve(k_pool_most);
        return made;
      }();
      return *p;
    }
    void put_locked(void* b) noexcept {
      if (blocks.size() < k_pool_most) {
        blocks.push_back(b);
      } else {
        ::operator delete(b);
      }
    }
  };
  // This thread's cache: not made yet, in use, or destroyed (a block given back by a
  // thread_local's destructor that runs after the cache's goes straight to the pool).
  enum class cache_state : unsigned char { none, alive, gone };
  struct thread_cache {
    std::vector<void*> blocks;
    thread_cache() {
      blocks.reserve(k_thread_most + k_batch);
      t_cache_ = cache_state::alive;
    }
    ~thread_cache() {
      t_cache_ = cache_state::gone;
      auto& p = pool::get();
      std::lock_guard lock(p.mutex);
      for (void* b : blocks) p.put_locked(b);
    }
  };
  static thread_cache& cache() {
    thread_local thread_cache c;
    return c;
  }
  static inline thread_local cache_state t_cache_ = cache_state::none;
};

// An allocator over recycled_storage, for std::allocate_shared (which allocates one object of a
// type of its own, the state and its control block together).
template <typename T>
struct recycling_allocator {
  using value_type = T;
  recycling_allocator() noexcept = default;
  template <typename U>
  recycling_allocator(const recycling_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (n == 1) return static_cast<T*>(recycled_storage<sizeof(T)>::take());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) return recycled_storage<sizeof(T)>::give(p);
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const recycling_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace atomr
