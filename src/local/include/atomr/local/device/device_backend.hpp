// The device actor's backend: the operations it enqueues on one device, in order. One
// implementation drives a CUDA device (a non-blocking stream, the stream-ordered memory pool,
// events); the host implementation does the same on host memory, completing at once. Called only
// from the device actor's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/local/actors/future.hpp"
#include "atomr/local/device/module.hpp"
#include "atomr/local/devices.hpp"

namespace atomr::local {

enum class copy_direction { host_to_device, device_to_host, device_to_device };

// Managed (unified) memory. `location` below is a device index, or k_host_location for host memory.
inline constexpr int k_host_location = -1;
enum class managed_attach { global, host };  // cudaMemAttachGlobal / cudaMemAttachHost
enum class memory_advice { read_mostly, preferred_location, accessed_by };

// What a user callable gets in device::run(): the device and the stream to enqueue work on
// (a cudaStream_t, or nullptr on the host kind, where work is done by the time the callable returns).
struct stream_context {
  int device = -1;
  device_kind kind = device_kind::host;
  void* stream = nullptr;
  // The cudaMemPool_t the device's buffers come from when other processes can share it (POSIX
  // file descriptor handles, for CUDA IPC); nullptr otherwise (host kind, or a driver that
  // refused such a pool).
  void* shareable_pool = nullptr;
};

class device_backend {
 public:
  virtual ~device_backend() = default;

  // Binds the device to the calling thread and creates the stream. Called again after rebuild().
  virtual result<void> init() = 0;
  virtual stream_context context() const = 0;

  virtual result<void*> allocate(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual result<void*> allocate_managed(std::size_t bytes, managed_attach attach) = 0;
  virtual void release_managed(void* p) = 0;
  // Migrates managed memory to `location` in stream order; advises the driver about it.
  virtual result<void> prefetch(const void* p, std::size_t bytes, int location) = 0;
  virtual result<void> advise(const void* p, std::size_t bytes, memory_advice advice, int location) = 0;
  // Returns what must run once the device has finished the copy (a copy staged through pinned
  // memory moves the bytes out and gives the staging buffer back), or an empty function.
  virtual result<std::function<void()>> copy(void* dst, const void* src, std::size_t bytes,
                                             copy_direction direction) = 0;
  virtual result<void> fill_bytes(void* dst, std::uint8_t value, std::size_t bytes) = 0;
  // Copies from device `src_device`'s memory into this device's, after making peer access
  // possible (enabled once per peer where the hardware allows; otherwise CUDA stages the copy).
  virtual result<void> copy_from_peer(void* dst, const void* src, int src_device, std::size_t bytes) = 0;

  // Modules (CUDA kind; the host kind answers errc::unavailable). `image` is a cubin, a fatbin or
  // PTX text; PTX errors carry the JIT compiler's log. Handles are the backend's own; unload waits
  // for nothing, so the caller unloads only once launches from the module have finished.
  struct loaded_kernel {
    void* function = nullptr;
    std::vector<std::size_t> param_sizes;
  };
  virtual result<void*> load_module(std::span<const std::byte> image) = 0;
  virtual result<loaded_kernel> get_kernel(void* module, const std::string& name) = 0;
  virtual result<void> launch(void* function, const launch_config& config, void** args) = 0;
  virtual void unload_module(void* module) = 0;

  // What mark() gives back.
  struct marked {
    std::shared_ptr<void> event;          // empty where work completes at once
    std::shared_ptr<progress_hook> look;  // see mark(); null where not asked for or not offered
  };
  // An event after all work enqueued so far (empty where work completes at once). `done` is
  // called once that work has finished, with whether it succeeded, on another thread; it may
  // never be called if the device failed, so callers also poll finished(). The same event is what
  // readers on other devices wait on (wait_event) before reading buffers that work wrote.
  // `caller_looks`: the work was enqueued on the thread that will likely wait for it (the inline
  // lane). Then `look`, set as the progress hook of the operation's future, lets that thread see
  // the completion itself while it looks and call `done` there, which spares it the hand-over
  // from the completion thread (0.6-1 us on an H200); the completion thread leaves the
  // mark to it for a few microseconds, and takes it back when the thread stops looking.
  virtual result<marked> mark(std::function<void(bool ok)> done, bool caller_looks) = 0;
  // How many marks their caller answered so far (any thread).
  virtual std::uint64_t completions_seen_by_callers() const { return 0; }
  // Set before init(): called from another thread after marks' `done` calls once no more work is
  // waited for, for the owner to retire what finished in one go rather than after every mark. Never called where marks
  // finish at once (no `done` calls).
  virtual void on_quiet(std::function<void()> /*quiet*/) {}
  // True once the work before `event` has finished; the failure if it failed.
  virtual result<bool> finished(const std::shared_ptr<void>& event) = 0;
  virtual result<void> wait_event(const std::shared_ptr<void>& event) = 0;

  // True for errors that poison the device context (illegal address, launch failure, ...).
  virtual bool is_sticky(const error& e) const = 0;
  // Throws the context away and makes a fresh one (on the calling thread); all memory is gone.
  virtual result<void> rebuild() = 0;
  // Waits for all enqueued work (used when the device stops).
  virtual void drain() = 0;

  // Makes the device current on a caller's thread for an operation of the inline lane
  // (device.hpp); returns the thread's previous device, which leave_caller() restores.
  virtual result<int> enter_caller() { return -1; }
  virtual void leave_caller(int /*previous*/) {}
};

// A backend for device `index` of `kind`; unavailable if CUDA is asked for in a build without it.
// `host_arena_most`: a host device's buffers up to this size come from the shared arena.
result<std::unique_ptr<device_backend>> make_backend(device_kind kind, int index, std::size_t host_arena_most);

}  // namespace atomr::local
