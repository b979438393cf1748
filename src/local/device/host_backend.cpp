// The host device kind: the device API over host memory, used where a rank has no GPU. Work is
// done when the call returns, so every marker is finished at once. Buffers up to
// ATOMR_HOST_ARENA_MOST come from the process's shared arena (other ranks of the node can
// reach them: shared_arena.hpp), larger ones from the heap.
#include <cstdlib>
#include <cstring>

#include "atomr/local/device/device_backend.hpp"
#include "atomr/local/device/shared_arena.hpp"

namespace atomr::local {

class host_backend final : public device_backend {
 public:
  host_backend(int index, std::size_t arena_most) : index_(index) {
    if (arena_most > 0) {
      arena_most_ = arena_most;
      arena_ = shared_arena::instance();
    }
  }

  result<void> init() override { return ok(); }
  stream_context context() const override { return {index_, device_kind::host, nullptr}; }

  result<void*> allocate(std::size_t bytes) override {
    // 64-byte alignment, like CUDA allocations are 256-byte aligned: vector loads stay aligned.
    const std::size_t rounded = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    if (arena_ != nullptr && rounded <= arena_most_) {
      if (void* p = arena_->allocate(rounded)) return p;
    }
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return error(errc::out_of_memory,
                   "host device " + std::to_string(index_) + ": cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void release(void* p) override {
    if (arena_ != nullptr && arena_->owns(p)) {
      arena_->release(p);
    } else {
      std::free(p);
    }
  }
  // Host memory is already where the host is; placement requests have nothing to move.
  result<void*> allocate_managed(std::size_t bytes, managed_attach) override { return allocate(bytes); }
  void release_managed(void* p) override { release(p); }
  result<void> prefetch(const void*, std::size_t, int location) override { return check_location(location); }
  result<void> advise(const void*, std::size_t, memory_advice, int location) override {
    return check_location(location);
  }

  result<std::function<void()>> copy(void* dst, const void* src, std::size_t bytes, copy_direction) override {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return std::function<void()>();
  }
  result<void> fill_bytes(void* dst, std::uint8_t value, std::size_t bytes) override {
    std::memset(dst, value, bytes);
    return ok();
  }
  result<void> copy_from_peer(void* dst, const void* src, int, std::size_t bytes) override {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return ok();
  }
  result<void> wait_event(const std::shared_ptr<void>&) override { return ok(); }

  result<void*> load_module(std::span<const std::byte>) override { return no_modules(); }
  result<loaded_kernel> get_kernel(void*, const std::string&) override { return no_modules(); }
  result<void> launch(void*, const launch_config&, void**) override { return no_modules(); }
  void unload_module(void*) override {}

  result<marked> mark(std::function<void(bool)>, bool) override { return marked{}; }
  result<bool> finished(const std::shared_ptr<void>&) override { return true; }
  bool is_sticky(const error&) const override { return false; }
  result<void> rebuild() override { return ok(); }
  void drain() override {}

 private:
  error no_modules() const {
    return error(errc::unavailable,
                 "host device " + std::to_string(index_) + " cannot run device code (modules need a CUDA device)");
  }
  result<void> check_location(int location) const {
    if (location == k_host_location || location == index_) return ok();
    return error(errc::invalid_argument, "host device " + std::to_string(index_) + " has no location " +
                                             std::to_string(location) + " (use the host or itself)");
  }

  int index_;
  shared_arena* arena_ = nullptr;  // (none: ATOMR_HOST_ARENA_MOST=0, or no memfd here)
  std::size_t arena_most_ = 0;
};

std::unique_ptr<device_backend> make_host_backend(int index, std::size_t arena_most) {
  return std::make_unique<host_backend>(index, arena_most);
}

}  // namespace atomr::local
