// gpu_ref<T>: a typed handle to a device buffer. Copies share ownership of the allocation, which
// is returned to its device (stream-ordered) when the last handle goes. Every use validates the
// handle against its device_state: a handle whose device is gone, shutting down, or rebuilt since
// the buffer was allocated fails with errc::stale_ref and never touches the memory.
//
// Threading: handles may be copied and validated on any thread; the bytes are only touched by
// work the device actor runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "atomr/common/result.hpp"
#include "atomr/common/spin_mutex.hpp"
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
  bool managed = false;          // managed memory: also addressable from the host
  std::weak_ptr<device_state> state;
  std::function<void(void*)> release;  // hands the memory back to the device actor

  // Write ordering across devices. Each write asked of a buffer takes a sequence number when it
  // is requested; the owning device actor reports each one once enqueued (or refused), with the
  // event recorded after it (CUDA kind; empty on the host kind). A reader on another device waits
  // until the writes requested before its own request are enqueued, then waits on the event on
  // the device, never on the host. Type-erased events keep this header free of CUDA.
  std::uint64_t request_write() { return writes_requested_.fetch_add(1, std::memory_order_acq_rel) + 1; }
  std::uint64_t writes_requested() const { return writes_requested_.load(std::memory_order_acquire); }
  // `origin` names the stream (or other queue) the event was recorded on, so a reader on that
  // same queue can skip the wait: its own order already covers it.
  void write_enqueued(std::uint64_t seq, const std::shared_ptr<void>& event, const void* origin = nullptr) {
    std::lock_guard lock(write_mutex_);
    if (event) {
      last_write_ = event;
      last_origin_.store(origin, std::memory_order_relaxed);
      if (!had_event_.load(std::memory_order_relaxed)) had_event_.store(true, std::memory_order_relaxed);
    }
    // (Released after the origin: a reader that sees this count sees that origin or a later one.)
    if (seq > writes_enqueued_.load(std::memory_order_relaxed)) writes_enqueued_.store(seq, std::memory_order_release);
  }
  struct write_mark {
    std::shared_ptr<void> event;  // empty: nothing to wait on
    const void* origin = nullptr;
  };
  // What to wait on for every write up to `seq`; empty optional while one is not enqueued yet.
  std::optional<write_mark> mark_after(std::uint64_t seq) const {
    if (writes_enqueued_.load(std::memory_order_acquire) < seq) return std::nullopt;
    std::lock_guard lock(write_mutex_);
    return write_mark{last_write_, last_origin_.load(std::memory_order_relaxed)};
  }
  // True if every write up to `seq` is enqueued and the latest event was recorded on `origin`: a
  // reader on that queue needs no wait. Without the lock or a copy of the event (the engine asks
  // this for every buffer of every collective); false means "ask mark_after".
  bool enqueued_on(std::uint64_t seq, const void* origin) const {
    return origin != nullptr && writes_enqueued_.load(std::memory_order_acquire) >= seq &&
           last_origin_.load(std::memory_order_relaxed) == origin;
  }
  // True if every write up to `seq` is enqueued and none ever left an event to wait on (a host
  // buffer): nothing to wait for, known without the lock (mark_after would take it and copy an
  // empty event for every request on the host backend).
  bool enqueued_without_event(std::uint64_t seq) const {
    return writes_enqueued_.load(std::memory_order_acquire) >= seq && !had_event_.load(std::memory_order_relaxed);
  }
  std::optional<std::shared_ptr<void>> event_after(std::uint64_t seq) const {
    auto m = mark_after(seq);
    if (!m) return std::nullopt;
    return m->event;
  }

  buffer_block() = default;
  buffer_block(const buffer_block&) = delete;
  buffer_block& operator=(const buffer_block&) = delete;
  ~buffer_block() {
    if (release) release(ptr);
  }

  // The line of the write marks a reader looks at (to ask for it ahead: see
  // cluster::detail::coll_request::prefetch_buffers).
  const void* write_marks() const noexcept { return &writes_enqueued_; }

 private:
  // The two sides on lines of their own. Writes are requested by the program's threads (the
  // callers), and published by whoever enqueued them (a device actor, or a world's progress
  // thread after every batch). Sharing a line with the publishing side's lock, every write
  // request of a call of 1000 small all_reduces (an atomic read-modify-write, which waits for its
  // line) missed on a line the progress thread had taken since the call before.
  alignas(64) std::atomic<std::uint64_t> writes_requested_{0};
  // (Atomics, written under the lock: enqueued_on and mark_after's early answer read them without it.)
  alignas(64) std::atomic<std::uint64_t> writes_enqueued_{0};
  std::atomic<const void*> last_origin_{nullptr};
  // (Set, under the lock and before the count's release, once a write left an event: a reader
  // that sees the count sees this.)
  std::atomic<bool> had_event_{false};
  // (A spin lock: the world's seal takes it once per buffer it publishes, see spin_mutex.hpp.)
  mutable spin_mutex write_mutex_;
  std::shared_ptr<void> last_write_;
};

// Why `block` may not be used now, or success.
result<void> validate_block(const buffer_block& block);
// Whether `block` lives on `owner` (a state the caller holds) and may be used there now: what
// validate_block answers with success, for that device, without locking the block's reference to
// its state (two atomic operations on a line every thread using the device shares, per buffer and
// operation). False says nothing more: ask validate_block why.
inline bool usable_on(const buffer_block& block, const std::shared_ptr<device_state>& owner) noexcept {
  return !block.state.owner_before(owner) && !owner.owner_before(block.state) && owner->accepting() &&
         owner->generation() == block.generation;
}

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
  // The elements seen from the host; managed buffers only. Read or write them only while no
  // device work on the buffer is in flight (after its futures have resolved).
  result<std::span<T>> host_span() const {
    ATOMR_TRY(validate());
    if (!block_->managed) {
      return error(errc::invalid_argument, "buffer " + std::to_string(block_->id) + " is device memory, not managed");
    }
    return std::span<T>(static_cast<T*>(block_->ptr), size());
  }
  const std::shared_ptr<buffer_block>& block() const noexcept { return block_; }

 private:
  std::shared_ptr<buffer_block> block_;
};

}  // namespace atomr::local
