// The CUDA device kind: one non-blocking stream per device, allocations from the device's
// stream-ordered memory pool, completion seen through events. A waiter thread per device wakes
// the device actor as each event completes; the actor also polls, in case a fault stops events.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <latch>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "atomr/common/context.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/recycled_storage.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/cuda_events.hpp"
#include "atomr/local/device/device_backend.hpp"
#include "cuda_completion.hpp"
#include "cuda_driver.hpp"
#include "pinned_pool.hpp"

namespace atomr::local {
namespace {

using detail::caller_look;
using detail::completion_waiter;
using detail::k_caller_window;
using detail::watched_mark;

}  // namespace

class cuda_backend final : public device_backend {
 public:
  explicit cuda_backend(int index) : index_(index), pinned_(std::make_shared<detail::pinned_pool>(index)) {}
  ~cuda_backend() override { destroy(); }

  result<void> init() override {
    const auto began = std::chrono::steady_clock::now();
    context::scoped_device bound(index_);
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(index_)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    // Buffers come from a pool of the device actor's own whose memory can be shared with other
    // processes (POSIX file descriptor handles): that is what lets a rank on the same node fetch
    // an exported buffer with CUDA IPC, GPU to GPU (pool memory cannot go through
    // cudaIpcGetMemHandle). Where the driver refuses such a pool, the default pool serves and
    // fetches between processes take the staged path.
    cudaMemPool_t pool = nullptr;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = index_;
    if (const auto made = cudaMemPoolCreate(&pool, &props); made == cudaSuccess) {
      own_pool_ = true;
    } else {
      cudaGetLastError();
      own_pool_ = false;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_)));
    }
    pool_ = pool;
    // Keep freed memory in the pool instead of returning it to the driver at every sync point.
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)));
    // Peer access to pool memory is granted per pool, not by cudaDeviceEnablePeerAccess; without
    // it, peer copies out of this device's buffers are staged through the host (10x slower).
    int count = 0;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGetDeviceCount(&count)));
    for (int peer = 0; peer < count; ++peer) {
      int can = 0;
      if (peer == index_) continue;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, peer, index_)));
      if (!can) continue;
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = peer;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1)));
    }
    const auto pool_ready = std::chrono::steady_clock::now();
    // The pool's first allocation maps its first memory (for the peers above too): 27-33 ms on
    // the two-H200 machine, paid by the first buffer a caller asked for (bench coll's startup
    // line). Made here, as the device starts on its own thread, it overlaps what the caller does
    // meanwhile (a world's creation). The pool keeps the memory (release threshold above). Only
    // a head start: where it fails (a full device) the device starts anyway, and the first buffer
    // meets the failure itself.
    void* first = nullptr;
    if (const auto e = cudaMallocFromPoolAsync(&first, 1, pool, stream_); e == cudaSuccess) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaFreeAsync(first, stream_)));
    } else {
      cudaGetLastError();
      log::get("devices")->debug(
          "device {}: mapping the pool's first memory at start failed ({}); left to the first buffer", index_,
          cudaGetErrorString(e));
    }
    events_ = std::make_shared<cuda_event_pool>();
    waiter_ = std::make_unique<completion_waiter>(index_, quiet_);
    using ms = std::chrono::duration<double, std::milli>;
    log::get("devices")->debug("device {}: context, stream and pool in {:.1f} ms, the pool's first memory in {:.1f} ms",
                               index_, ms(pool_ready - began).count(),
                               ms(std::chrono::steady_clock::now() - pool_ready).count());
    return ok();
  }

  stream_context context() const override { return {index_, device_kind::cuda, stream_, own_pool_ ? pool_ : nullptr}; }

  result<void*> allocate(std::size_t bytes) override {
    context::scoped_device bound(index_);
    void* p = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocFromPoolAsync(&p, std::max<std::size_t>(bytes, 1), pool_, stream_)));
    return p;
  }

  void release(void* p) override { cudaFreeAsync(p, stream_); }

  result<void*> allocate_managed(std::size_t bytes, managed_attach attach) override {
    context::scoped_device bound(index_);
    void* p = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(
        cudaMallocManaged(&p, std::max<std::size_t>(bytes, 1),
                          attach == managed_attach::global ? cudaMemAttachGlobal : cudaMemAttachHost)));
    return p;
  }
  void release_managed(void* p) override {
    // cudaFree synchronizes the device, so work still using the memory finishes first.
    cudaFree(p);
  }

  result<void> prefetch(const void* p, std::size_t bytes, int location) override {
    context::scoped_device bound(index_);
    return ATOMR_CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, to_location(location), 0, stream_));
  }

  result<void> advise(const void* p, std::size_t bytes, memory_advice advice, int location) override {
    context::scoped_device bound(index_);
    const cudaMemoryAdvise a = advice == memory_advice::read_mostly          ? cudaMemAdviseSetReadMostly
                               : advice == memory_advice::preferred_location ? cudaMemAdviseSetPreferredLocation
                                                                             : cudaMemAdviseSetAccessedBy;
    return ATOMR_CUDA_CHECK(cudaMemAdvise(p, bytes, a, to_location(location)));
  }

  result<std::function<void()>> copy(void* dst, const void* src, std::size_t bytes, copy_direction direction) override {
    context::scoped_device bound(index_);
    const cudaMemcpyKind kind = direction == copy_direction::host_to_device   ? cudaMemcpyHostToDevice
                                : direction == copy_direction::device_to_host ? cudaMemcpyDeviceToHost
                                                                              : cudaMemcpyDeviceToDevice;
    const void* host = direction == copy_direction::host_to_device ? src : dst;
    bool staged = false;
    if (direction != copy_direction::device_to_device && bytes != 0) {
      ATOMR_ASSIGN_OR_RETURN(staged, is_pageable(host));
    }
    if (!staged) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_)));
      return std::function<void()>();
    }
    ATOMR_ASSIGN_OR_RETURN(std::shared_ptr<void> staging, pinned_->take(bytes));
    auto* stage = static_cast<std::byte*>(staging.get());
    // In chunks, so that the CPU's memcpy of one chunk overlaps the DMA of another.
    const std::size_t chunks = (bytes + k_stage_chunk - 1) / k_stage_chunk;
    auto span_of = [&](std::size_t c) {
      return std::pair{c * k_stage_chunk, std::min(k_stage_chunk, bytes - c * k_stage_chunk)};
    };
    if (direction == copy_direction::host_to_device) {
      for (std::size_t c = 0; c < chunks; ++c) {
        const auto [off, len] = span_of(c);
        std::memcpy(stage + off, static_cast<const std::byte*>(src) + off, len);
        ATOMR_TRY(
            ATOMR_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(dst) + off, stage + off, len, kind, stream_)));
      }
      return std::function<void()>([staging] {});  // held until the device has read it
    }
    // Device to host: the completion waiter copies each chunk out as soon as its DMA is done
    // (skipping chunks whose DMA failed); the reply waits until all chunks are out.
    auto out = std::make_shared<std::latch>(static_cast<std::ptrdiff_t>(chunks));
    for (std::size_t c = 0; c < chunks; ++c) {
      const auto [off, len] = span_of(c);
      auto counted = [&]() -> result<void> {
        ATOMR_TRY(ATOMR_CUDA_CHECK(
            cudaMemcpyAsync(stage + off, static_cast<const std::byte*>(src) + off, len, kind, stream_)));
        ATOMR_ASSIGN_OR_RETURN(std::shared_ptr<void> event, events_->take());
        ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event.get()), stream_)));
        waiter_->watch(event, [event, staging, out, to = static_cast<std::byte*>(dst) + off, from = stage + off,
                               len](bool completed) {
          if (completed) std::memcpy(to, from, len);
          out->count_down();
        });
        return ok();
      };
      if (auto r = counted(); !r) {
        out->count_down(static_cast<std::ptrdiff_t>(chunks - c));  // nothing waits for the rest
        return r.error_value();
      }
    }
    return std::function<void()>([staging, out] { out->wait(); });
  }

  result<void> fill_bytes(void* dst, std::uint8_t value, std::size_t bytes) override {
    context::scoped_device bound(index_);
    return ATOMR_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_));
  }

  result<void> copy_from_peer(void* dst, const void* src, int src_device, std::size_t bytes) override {
    context::scoped_device bound(index_);
    if (peers_enabled_.insert(src_device).second) {
      int can = 0;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, index_, src_device)));
      if (can) {
        const cudaError_t status = cudaDeviceEnablePeerAccess(src_device, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled) {
          cudaGetLastError();
        } else {
          ATOMR_TRY(ATOMR_CUDA_CHECK(status));
        }
      }
    }
    // cudaMemcpyAsync, not cudaMemcpyPeerAsync: between pool allocations (what device buffers
    // are) the peer call costs 2-3 us more per copy and gets 0.4-0.6 of the bandwidth up to 1 MiB,
    // while the unified-address copy runs at cudaMalloc'd memory's speed (peer_copy_probe, two
    // H200s joined by NV18 NVLink).
    return ATOMR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  }

  result<void*> load_module(std::span<const std::byte> image) override {
    context::scoped_device bound(index_);
    ATOMR_ASSIGN_OR_RETURN(const detail::cuda_driver* cu, detail::cuda_driver::get());
    if (image.empty()) return error(errc::invalid_argument, "an empty module image");
    // PTX is text the JIT reads up to a NUL; cubins and fatbins carry their own sizes.
    std::vector<std::byte> text;
    if (is_text(image) && image.back() != std::byte{0}) {
      text.assign(image.begin(), image.end());
      text.push_back(std::byte{0});
      image = text;
    }
    std::string log(16 * 1024, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(log.size())};
    CUmodule module = nullptr;
    auto loaded = ATOMR_CU_CHECK(cu->module_load_data_ex(&module, image.data(), 2, options, values));
    if (!loaded) {
      if (const auto end = log.find('\0'); end != std::string::npos) log.resize(end);
      if (log.empty()) return loaded.error_value();
      return error(loaded.error_value().code(), loaded.error_value().message() + "; JIT log: " + log);
    }
    return static_cast<void*>(module);
  }

  result<loaded_kernel> get_kernel(void* module, const std::string& name) override {
    context::scoped_device bound(index_);
    ATOMR_ASSIGN_OR_RETURN(const detail::cuda_driver* cu, detail::cuda_driver::get());
    CUfunction function = nullptr;
    const CUresult found = cu->module_get_function(&function, static_cast<CUmodule>(module), name.c_str());
    if (found == CUDA_ERROR_NOT_FOUND) {
      return error(errc::invalid_argument, "the module has no kernel named '" + name +
                                               "' (extern \"C\" names are "
                                               "kept as written; C++ names are mangled)");
    }
    ATOMR_TRY(ATOMR_CU_CHECK(found));
    loaded_kernel k{function, {}};
    // The parameter list ends where cuFuncGetParamInfo says the index is out of range.
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0;
      std::size_t size = 0;
      const CUresult status = cu->func_get_param_info(function, i, &offset, &size);
      if (status == CUDA_ERROR_INVALID_VALUE) break;
      ATOMR_TRY(ATOMR_CU_CHECK(status));
      k.param_sizes.push_back(size);
    }
    return k;
  }

  result<void> launch(void* function, const launch_config& config, void** args) override {
    context::scoped_device bound(index_);
    ATOMR_ASSIGN_OR_RETURN(const detail::cuda_driver* cu, detail::cuda_driver::get());
    const auto f = static_cast<CUfunction>(function);
    CUlaunchConfig launch{};
    launch.gridDimX = config.grid[0];
    launch.gridDimY = config.grid[1];
    launch.gridDimZ = config.grid[2];
    launch.blockDimX = config.block[0];
    launch.blockDimY = config.block[1];
    launch.blockDimZ = config.block[2];
    launch.sharedMemBytes = config.shared_bytes;
    launch.hStream = stream_;
    CUlaunchAttribute cooperative{};
    if (config.cooperative) {
      ATOMR_TRY(fits_at_once(*cu, f, config));
      cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      cooperative.value.cooperative = 1;
      launch.attrs = &cooperative;
      launch.numAttrs = 1;
    }
    return ATOMR_CU_CHECK(cu->launch_kernel_ex(&launch, f, args, nullptr));
  }

  void unload_module(void* module) override {
    context::scoped_device bound(index_);
    if (auto cu = detail::cuda_driver::get()) (*cu)->module_unload(static_cast<CUmodule>(module));
  }

  result<void> wait_event(const std::shared_ptr<void>& event) override {
    if (!event) return ok();
    context::scoped_device bound(index_);
    return ATOMR_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event.get()), 0));
  }

  result<int> enter_caller() override {
    int previous = -1;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGetDevice(&previous)));
    if (previous != index_) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(index_)));
    return previous;
  }
  void leave_caller(int previous) override {
    // (Setting back a device that was current a moment ago fails only with a broken driver.)
    if (previous >= 0 && previous != index_) (void)ATOMR_CUDA_CHECK(cudaSetDevice(previous));
  }

  void on_quiet(std::function<void()> quiet) override { quiet_ = std::move(quiet); }

  result<marked> mark(std::function<void(bool)> done, bool caller_looks) override {
    context::scoped_device bound(index_);
    ATOMR_ASSIGN_OR_RETURN(std::shared_ptr<void> event, events_->take());
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event.get()), stream_)));
    auto watched = std::allocate_shared<watched_mark>(recycling_allocator<watched_mark>{}, event, std::move(done),
                                                      caller_looks ? watched_mark::k_open : watched_mark::k_waiter);
    marked out{std::move(event), nullptr};
    if (caller_looks) {
      watched->open_until = std::chrono::steady_clock::now() + k_caller_window;
      out.look = std::make_shared<caller_look>(watched, &seen_by_callers_);
    }
    waiter_->watch(std::move(watched));
    return out;
  }

  std::uint64_t completions_seen_by_callers() const override {
    return seen_by_callers_.load(std::memory_order_relaxed);
  }

  result<bool> finished(const std::shared_ptr<void>& event) override {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event.get()));
    if (status == cudaErrorNotReady) return false;
    context::scoped_device bound(index_);
    ATOMR_TRY(ATOMR_CUDA_CHECK(status));
    return true;
  }

  bool is_sticky(const error& e) const override {
    for (const char* name :
         {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
          "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
          "cudaErrorHardwareStackError", "cudaErrorAssert", "cudaErrorECCUncorrectable", "cudaErrorLaunchTimeout",
          // The same faults reported by driver API calls (module launches).
          "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
          "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
          "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_ECC_UNCORRECTABLE",
          "CUDA_ERROR_LAUNCH_TIMEOUT"}) {
      if (e.message().find(name) != std::string::npos) return true;
    }
    return false;
  }

  result<void> rebuild() override {
    context::scoped_device bound(index_);
    destroy();
    peers_enabled_.clear();
    pinned_->forget();
    cudaGetLastError();
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceReset()));
    return init();
  }

  void drain() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  }

 private:
  void destroy() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    waiter_.reset();  // its queue is done once the stream is
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
      stream_ = nullptr;
    }
    if (own_pool_ && pool_ != nullptr) {
      // (Memory still allocated from it is released with its last allocation.)
      cudaMemPoolDestroy(pool_);
      cudaGetLastError();
    }
    pool_ = nullptr;
    own_pool_ = false;
  }

  // A cooperative grid must be resident all at once; say so plainly instead of CUDA's
  // "cooperative launch too large".
  result<void> fits_at_once(const detail::cuda_driver& cu, CUfunction f, const launch_config& config) const {
    const unsigned long long threads = 1ULL * config.block[0] * config.block[1] * config.block[2];
    const unsigned long long blocks = 1ULL * config.grid[0] * config.grid[1] * config.grid[2];
    int per_sm = 0;
    int sms = 0;
    ATOMR_TRY(
        ATOMR_CU_CHECK(cu.occupancy_max_active_blocks(&per_sm, f, static_cast<int>(threads), config.shared_bytes)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index_)));
    const unsigned long long most = 1ULL * static_cast<unsigned>(per_sm) * static_cast<unsigned>(sms);
    if (blocks > most) {
      return error(errc::invalid_argument, "cooperative launch of " + std::to_string(blocks) + " blocks of " +
                                               std::to_string(threads) + " threads: at most " + std::to_string(most) +
                                               " fit on device " + std::to_string(index_) + " at once (" +
                                               std::to_string(per_sm) + " per SM x " + std::to_string(sms) + " SMs)");
    }
    return ok();
  }

  static constexpr std::size_t k_stage_chunk = std::size_t{4} << 20;

  // Host memory CUDA did not allocate or register: copies to or from it go through pinned staging.
  static result<bool> is_pageable(const void* p) {
    cudaPointerAttributes attributes{};
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p)));
    return attributes.type == cudaMemoryTypeUnregistered;
  }

  // Cubins and fatbins start with binary magic numbers; PTX is printable text.
  static bool is_text(std::span<const std::byte> image) {
    const auto first = std::to_integer<unsigned char>(image.front());
    return first != 0x7f && first != 0x50 && first != 0xba;
  }

  static cudaMemLocation to_location(int location) {
    cudaMemLocation where{};
    where.type = location == k_host_location ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = location == k_host_location ? 0 : location;
    return where;
  }

  int index_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<cuda_event_pool> events_;
  cudaMemPool_t pool_ = nullptr;                   // where buffers come from
  bool own_pool_ = false;                          // pool_ is ours (shareable with other processes), not the default
  std::atomic<std::uint64_t> seen_by_callers_{0};  // (before waiter_: it outlives the waiter thread)
  std::unique_ptr<completion_waiter> waiter_;
  std::function<void()> quiet_;  // for the waiter (on_quiet)
  std::set<int> peers_enabled_;
  std::shared_ptr<detail::pinned_pool> pinned_;
};

std::unique_ptr<device_backend> make_cuda_backend(int index) { return std::make_unique<cuda_backend>(index); }

}  // namespace atomr::local
