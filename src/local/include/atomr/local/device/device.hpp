// device: the handle to one device actor (CUDA or host kind). The actor runs on a dedicated thread
// that keeps the device current; every operation is a message, enqueued on the device's stream in
// order, and its future resolves only when the device has finished the work. The actor never
// blocks on the device: completion is observed through events, woken by a host function with a
// polling fallback.
//
// A sticky CUDA error (illegal address, launch failure, ...) poisons the context: the failing
// operation and everything queued with it fail with that error, the actor rebuilds the context,
// bumps the generation (so every existing gpu_ref becomes stale_ref) and tells the watchers of
// device_state; new work then succeeds. At most `max_rebuilds` rebuilds within a minute, then
// the device stops.
//
// Host memory passed to upload/download must stay valid until the returned future resolves.
// Handles are validated here, before anything is sent (a stale handle fails at once with
// stale_ref), and again by the actor when it runs the operation.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "atomr/local/actors.hpp"
#include "atomr/local/device/device_backend.hpp"
#include "atomr/local/device/gpu_ref.hpp"
#include "atomr/local/device/module.hpp"

namespace atomr::local {

namespace detail {
// A buffer an operation writes, with the sequence number its write took when requested.
struct write_ticket {
  std::shared_ptr<buffer_block> block;
  std::uint64_t seq;
};
std::vector<write_ticket> tickets_for(const std::vector<std::shared_ptr<buffer_block>>& written);
// For buffers an operation only reads: the writes requested before it, which it must wait for.
std::vector<write_ticket> reads_of(const std::vector<std::shared_ptr<buffer_block>>& read);
// "upload of 5 elements into buffer 7 of 4": an operation asked for more elements than the buffer has.
error too_many_elements(std::string_view op, std::size_t count, std::string_view direction, std::uint64_t buffer,
                        std::size_t size);

struct alloc_op {
  std::size_t bytes;
  dtype type;
  bool managed;
  managed_attach attach;
  reply_to<std::shared_ptr<buffer_block>> reply;
};
struct placement_op {  // prefetch (advice empty) or advise
  std::shared_ptr<buffer_block> block;
  std::optional<memory_advice> advice;
  int location;
  reply_to<void> reply;
};
struct copy_op {
  void* dst;
  const void* src;
  std::size_t bytes;
  copy_direction direction;
  std::vector<std::shared_ptr<buffer_block>> uses;  // validated and kept alive until done
  std::vector<write_ticket> writes;
  std::vector<write_ticket> reads;
  reply_to<void> reply;
};
struct fill_op {
  std::shared_ptr<buffer_block> dst;
  std::uint8_t value;
  std::vector<write_ticket> writes;
  reply_to<void> reply;
};
struct run_op {
  std::function<result<void>(const stream_context&)> work;
  std::vector<std::shared_ptr<buffer_block>> uses;
  std::vector<write_ticket> writes;
  reply_to<void> reply;
};
struct peer_copy_op {
  std::shared_ptr<buffer_block> dst;  // on this device
  std::shared_ptr<buffer_block> src;  // on another device
  std::size_t bytes;
  std::vector<write_ticket> writes;
  std::vector<write_ticket> reads;  // src, with the writes to it requested before this copy
  reply_to<void> reply;
};
struct module_load_op {
  std::vector<std::byte> image;
  reply_to<module_ref> reply;
};
struct kernel_get_op {
  module_ref module;
  std::string name;
  reply_to<kernel_ref> reply;
};
struct launch_op {
  kernel_ref kernel;
  launch_config config;
  kernel_args args;
  std::vector<std::shared_ptr<buffer_block>> uses;
  std::vector<write_ticket> writes;  // the buffers passed read_write
  std::vector<write_ticket> reads;   // the buffers passed read
  reply_to<void> reply;
};
struct module_unload_op {
  module_ref module;
  reply_to<void> reply;
};
struct free_op {
  void* ptr;
  std::uint64_t generation;
};
struct stats_op;
struct poll_op {};
}  // namespace detail

// What a device holds now.
struct device_stats {
  std::size_t buffers = 0;
  std::size_t bytes = 0;
  std::size_t managed_buffers = 0;
  std::size_t managed_bytes = 0;
  // Operations whose completion the waiting caller saw itself (device_backend::mark), since start.
  std::uint64_t completions_seen_by_callers = 0;
  // Since start: operations their sender enqueued itself (the inline lane), and messages that
  // went by mail to the device thread (every operation that did not, and allocations, modules,
  // statistics: this request included).
  std::uint64_t operations_inline = 0;
  std::uint64_t messages_by_mail = 0;
};

namespace detail {
struct stats_op {
  reply_to<device_stats> reply;
};
using device_msg = std::variant<alloc_op, placement_op, copy_op, fill_op, run_op, peer_copy_op, module_load_op,
                                kernel_get_op, launch_op, module_unload_op, free_op, stats_op, poll_op>;

// The device actor's side of the inline lane.
struct lane_runner {
  virtual ~lane_runner() = default;
  // Enqueues `m` now, on the calling thread, if it needs no wait first; false: it goes by mail.
  virtual bool run_inline(device_msg& m) = 0;
};

// A device's inline lane. An operation sent while every earlier one sent by mail has been handled
// and nothing waits deferred would be the device's next anyway: the caller enqueues it on the
// device's stream itself, under the lane's mutex, which the device actor also holds while it
// handles a message. That skips the hop to the device thread (2-2.6 us on an H100 with 16 vCPUs) and
// keeps each sender's order. Allocation, modules and statistics always go by mail.
class device_lane {
 public:
  // Sender: true when `m` ran here; false when the sender must enqueue it (it is counted as sent).
  bool offer(device_msg& m);

  // Device actor: it holds the lane while it handles a message, and counts each one that a sender
  // counted (everything but its own poll_op and the buffers' free_op).
  class hold {
   public:
    explicit hold(device_lane& lane);
    hold(device_lane& lane, std::try_to_lock_t);  // see owns()
    ~hold();
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    bool owns() const noexcept { return owns_; }

   private:
    device_lane& lane_;
    bool owns_ = true;
  };
  void attach(lane_runner* runner) noexcept { runner_ = runner; }  // while held
  void handled_one() noexcept { handled_.fetch_add(1, std::memory_order_release); }
  std::uint64_t ran_inline() const noexcept { return inline_.load(std::memory_order_relaxed); }
  std::uint64_t sent_by_mail() const noexcept { return sent_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::atomic<std::uint64_t> sent_{0};
  std::atomic<std::uint64_t> handled_{0};
  std::atomic<std::uint64_t> inline_{0};  // (only counted: device_stats)
  lane_runner* runner_ = nullptr;         // under mutex_; null before the device starts and once it stops
};
}  // namespace detail

struct device_options {
  std::chrono::steady_clock::duration op_timeout = std::chrono::seconds(60);  // for the futures
  int max_rebuilds = 3;                                                       // per minute
  // Host devices: buffers up to this many bytes come from the process's shared arena
  // (shared_arena.hpp: other ranks of the node can map them), larger ones from the heap; 0: all
  // from the heap. Unset: ATOMR_HOST_ARENA_MOST (4 MiB).
  std::optional<std::size_t> host_arena_most;
};

class device {
 public:
  // Spawns the device actor `device-<index>` on its own thread.
  static result<device> start(actor_system& system, int index, device_kind kind, device_options options = {});

  int index() const noexcept { return state_->device(); }
  device_kind kind() const noexcept { return state_->kind(); }
  const std::shared_ptr<device_state>& state() const noexcept { return state_; }

  template <device_element T>
  future<gpu_ref<T>> allocate(std::size_t count) const;
  // Managed memory: addressable from the host (gpu_ref::host_span) and from every device.
  template <device_element T>
  future<gpu_ref<T>> allocate_managed(std::size_t count, managed_attach attach = managed_attach::global) const;
  // Migrates a managed buffer to `location` (a device index, or k_host_location) in stream order.
  template <device_element T>
  future<void> prefetch(const gpu_ref<T>& buffer, int location) const;
  template <device_element T>
  future<void> advise(const gpu_ref<T>& buffer, memory_advice advice, int location) const;
  future<device_stats> stats() const;

  template <device_element T>
  future<void> upload(const gpu_ref<T>& dst, std::span<const T> src) const;
  template <device_element T>
  future<void> download(const gpu_ref<T>& src, std::span<T> dst) const;
  template <device_element T>
  future<void> fill_bytes(const gpu_ref<T>& dst, std::uint8_t value) const;
  template <device_element T>
  future<void> copy(const gpu_ref<T>& dst, const gpu_ref<T>& src) const;
  // Copies `src`, a buffer on another device, into `dst` on this one: on the device, after src's
  // last write (an event wait, not a host synchronization), over NVLink/PCIe peer access where
  // the pair has it. Resolves when the bytes have landed.
  template <device_element T>
  future<void> copy_from_peer(const gpu_ref<T>& dst, const gpu_ref<T>& src) const;
  // Runs `work` on the device's thread with its stream, after validating `uses` (keeps them alive
  // until the work enqueued on the stream has finished). How users launch their own kernels.
  future<void> run(std::function<result<void>(const stream_context&)> work,
                   std::vector<std::shared_ptr<buffer_block>> uses = {}) const;

  // Modules (CUDA kind; the host kind fails them with unavailable). load_module takes a cubin, a
  // fatbin or PTX text (a PTX error carries the JIT log); load_module_file reads one from disk.
  // get_function looks a kernel up by its (extern "C" or mangled) name and learns its parameter
  // layout; launch checks the arguments against it (count and sizes) and the buffers like every
  // other operation, runs after the earlier writes to the buffers it reads, and resolves when the
  // kernel has finished. unload_module waits for the module's launches in flight, then unloads.
  future<module_ref> load_module(std::vector<std::byte> image) const;
  future<module_ref> load_module_file(const std::string& path) const;
  future<kernel_ref> get_function(const module_ref& module, std::string name) const;
  future<void> launch(const kernel_ref& kernel, const launch_config& config, kernel_args args) const;
  future<void> unload_module(const module_ref& module) const;

  // Stops the actor: waits for enqueued work, frees every buffer, makes all refs stale.
  void stop() const { actor_.stop(); }
  future<terminated> on_terminated() const { return actor_.on_terminated(); }

 private:
  device(actor_ref<detail::device_msg> a, std::shared_ptr<device_state> s, std::shared_ptr<detail::device_lane> lane,
         device_options o)
      : actor_(std::move(a)), state_(std::move(s)), lane_(std::move(lane)), options_(o) {}
  template <typename R, typename Make>
  future<R> send(Make&& make) const {
    return actor_.ask_routed<R>(std::forward<Make>(make), options_.op_timeout,
                                [lane = lane_.get()](detail::device_msg& m) { return lane->offer(m); });
  }
  template <typename T = void>
  static future<T> failed(error e) {
    promise<T> p;
    auto f = p.get_future();
    p.set_error(std::move(e));
    return f;
  }
  // Refuses a module or kernel handle that is not this device's current generation.
  result<void> check_handle(std::string_view what, std::uint64_t id, int owner, std::uint64_t generation) const;
  template <device_element T>
  future<gpu_ref<T>> typed_allocation(std::size_t count, bool managed, managed_attach attach) const;

  actor_ref<detail::device_msg> actor_;
  std::shared_ptr<device_state> state_;
  std::shared_ptr<detail::device_lane> lane_;
  device_options options_;
};

template <device_element T>
future<gpu_ref<T>> device::allocate(std::size_t count) const {
  return typed_allocation<T>(count, false, managed_attach::global);
}

template <device_element T>
future<gpu_ref<T>> device::allocate_managed(std::size_t count, managed_attach attach) const {
  return typed_allocation<T>(count, true, attach);
}

template <device_element T>
future<void> device::prefetch(const gpu_ref<T>& buffer, int location) const {
  if (auto v = buffer.validate(); !v) return failed(v.error_value());
  return send<void>([&](auto r) { return detail::placement_op{buffer.block(), std::nullopt, location, std::move(r)}; });
}

template <device_element T>
future<void> device::advise(const gpu_ref<T>& buffer, memory_advice advice, int location) const {
  if (auto v = buffer.validate(); !v) return failed(v.error_value());
  return send<void>([&](auto r) { return detail::placement_op{buffer.block(), advice, location, std::move(r)}; });
}

template <device_element T>
future<gpu_ref<T>> device::typed_allocation(std::size_t count, bool managed, managed_attach attach) const {
  auto block = send<std::shared_ptr<buffer_block>>([&](auto r) {
    return detail::alloc_op{count * sizeof(T), dtype_of<T>::value, managed, attach, std::move(r)};
  });
  promise<gpu_ref<T>> typed;
  auto out = typed.get_future();
  block.then(
      [p = std::make_shared<promise<gpu_ref<T>>>(std::move(typed))](const result<std::shared_ptr<buffer_block>>& b) {
        if (b)
          p->set_value(gpu_ref<T>(*b));
        else
          p->set_error(b.error_value());
      });
  return out;
}

template <device_element T>
future<void> device::upload(const gpu_ref<T>& dst, std::span<const T> src) const {
  if (auto v = dst.validate(); !v) return failed(v.error_value());
  if (src.size() > dst.size()) {
    return failed(detail::too_many_elements("upload", src.size(), "into", dst.buffer_id(), dst.size()));
  }
  return send<void>([&](auto r) {
    return detail::copy_op{dst.block()->ptr,
                           src.data(),
                           src.size_bytes(),
                           copy_direction::host_to_device,
                           {dst.block()},
                           detail::tickets_for({dst.block()}),
                           {},
                           std::move(r)};
  });
}

template <device_element T>
future<void> device::download(const gpu_ref<T>& src, std::span<T> dst) const {
  if (auto v = src.validate(); !v) return failed(v.error_value());
  if (dst.size() > src.size()) {
    return failed(detail::too_many_elements("download", dst.size(), "from", src.buffer_id(), src.size()));
  }
  return send<void>([&](auto r) {
    return detail::copy_op{dst.data(),
                           src.block()->ptr,
                           dst.size_bytes(),
                           copy_direction::device_to_host,
                           {src.block()},
                           {},
                           detail::reads_of({src.block()}),
                           std::move(r)};
  });
}

template <device_element T>
future<void> device::fill_bytes(const gpu_ref<T>& dst, std::uint8_t value) const {
  if (auto v = dst.validate(); !v) return failed(v.error_value());
  return send<void>([&](auto r) {
    return detail::fill_op{dst.block(), value, detail::tickets_for({dst.block()}), std::move(r)};
  });
}

template <device_element T>
future<void> device::copy(const gpu_ref<T>& dst, const gpu_ref<T>& src) const {
  if (auto v = dst.validate(); !v) return failed(v.error_value());
  if (auto v = src.validate(); !v) return failed(v.error_value());
  if (src.size() > dst.size()) {
    return failed(detail::too_many_elements("copy", src.size(), "into", dst.buffer_id(), dst.size()));
  }
  return send<void>([&](auto r) {
    return detail::copy_op{dst.block()->ptr,
                           src.block()->ptr,
                           src.bytes(),
                           copy_direction::device_to_device,
                           {dst.block(), src.block()},
                           detail::tickets_for({dst.block()}),
                           detail::reads_of({src.block()}),
                           std::move(r)};
  });
}

template <device_element T>
future<void> device::copy_from_peer(const gpu_ref<T>& dst, const gpu_ref<T>& src) const {
  if (auto v = dst.validate(); !v) return failed(v.error_value());
  if (auto v = src.validate(); !v) return failed(v.error_value());
  if (src.size() > dst.size()) {
    return failed(detail::too_many_elements("peer copy", src.size(), "into", dst.buffer_id(), dst.size()));
  }
  return send<void>([&](auto r) {
    return detail::peer_copy_op{
        dst.block(), src.block(), src.bytes(), detail::tickets_for({dst.block()}), detail::reads_of({src.block()}),
        std::move(r)};
  });
}

}  // namespace atomr::local
