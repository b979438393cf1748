// gpu_ref<T>: a typed handle to a device buffer. Copies share ownership of the allocation, which
// is returned to its device (stream-ordered) when the last handle goes. Every use validates the
// handle against its device_state: a handle whose device is gone, shutting down, or rebuilt since
// the buffer was allocated fails with errc::stale_ref and never touches the memory.
//
// Threading: handles may be copied and validated on any thread; the bytes are only touched by
// work the device actor runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "atomr/common/result.hpp"
#include "atomr/local/device/device_state.hpp"
#include "atomr/local/device/dtype.hpp"

namespace atomr::local {

// One allocation, shared by every gpu_ref to it.
struct buffer_block {
  std::uint64_t id = 0;  // unique per process
  std::size_t bytes = 0;
  dtype type = dtype::u8;
  void* ptr = nullptr;
  std::uint64_t generation = 0;  // the device generation it was allocated in
  std::weak_ptr<device_state> state;
  std::function<void(void*)> release;  // hands the memory back to the device actor

  buffer_block() = default;
  buffer_block(const buffer_block&) = delete;
  buffer_block& operator=(const buffer_block&) = delete;
  ~buffer_block() {
    if (release) release(ptr);
  }
};

// Why `block` may not be used now, or success.
result<void> validate_block(const buffer_block& block);

template <device_element T>
class gpu_ref {
 public:
  gpu_ref() = default;
  explicit gpu_ref(std::shared_ptr<buffer_block> block) : block_(std::move(block)) {}

  bool valid() const noexcept { return block_ != nullptr; }
  std::size_t size() const noexcept { return block_ ? block_->bytes / sizeof(T) : 0; }
  std::size_t bytes() const noexcept { return block_ ? block_->bytes : 0; }
  std::uint64_t buffer_id() const noexcept { return block_ ? block_->id : 0; }
  std::uint64_t generation() const noexcept { return block_ ? block_->generation : 0; }
  int device() const {
    auto s = block_ ? block_->state.lock() : nullptr;
    return s ? s->device() : -1;
  }

  result<void> validate() const {
    if (!block_) return error(errc::invalid_argument, "empty gpu_ref");
    return validate_block(*block_);
  }
  // The device pointer, after validation. Use it only in work running on the owning device.
  result<T*> data() const {
    ATOMR_TRY(validate());
    return static_cast<T*>(block_->ptr);
  }
  const std::shared_ptr<buffer_block>& block() const noexcept { return block_; }

 private:
  std::shared_ptr<buffer_block> block_;
};

}  // namespace atomr::local
