// The CUDA device kind: one non-blocking stream per device, allocations from the device's
// stream-ordered memory pool, completion seen through events. A host function enqueued after
// each marker wakes the device actor; the actor also polls, because after a device fault later
// host functions may never run.
#include <cuda_runtime_api.h>

#include <limits>
#include <map>
#include <set>

#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/device_backend.hpp"

namespace atomr::local {
namespace {

void CUDART_CB run_wake(void* data) {
  auto* wake = static_cast<std::function<void()>*>(data);
  (*wake)();
  delete wake;
}

}  // namespace

class cuda_backend final : public device_backend {
 public:
  explicit cuda_backend(int index) : index_(index) {}
  ~cuda_backend() override { destroy(); }

  result<void> init() override {
    context::scoped_device bound(index_);
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(index_)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    // Keep freed memory in the pool instead of returning it to the driver at every sync point.
    cudaMemPool_t pool = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_)));
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)));
    return ok();
  }

  stream_context context() const override { return {index_, device_kind::cuda, stream_}; }

  result<void*> allocate(std::size_t bytes) override {
    context::scoped_device bound(index_);
    void* p = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), stream_)));
    return p;
  }

  void release(void* p) override { cudaFreeAsync(p, stream_); }

  result<void> copy(void* dst, const void* src, std::size_t bytes, copy_direction direction) override {
    context::scoped_device bound(index_);
    const cudaMemcpyKind kind = direction == copy_direction::host_to_device   ? cudaMemcpyHostToDevice
                                : direction == copy_direction::device_to_host ? cudaMemcpyDeviceToHost
                                                                              : cudaMemcpyDeviceToDevice;
    return ATOMR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
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
    return ATOMR_CUDA_CHECK(cudaMemcpyPeerAsync(dst, index_, src, src_device, bytes, stream_));
  }

  result<std::shared_ptr<void>> record_event() override {
    context::scoped_device bound(index_);
    cudaEvent_t event = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)));
    if (auto r = ATOMR_CUDA_CHECK(cudaEventRecord(event, stream_)); !r) {
      cudaEventDestroy(event);
      return r.error_value();
    }
    // Destroying a recorded event is safe before it completes; CUDA frees it afterwards.
    return std::shared_ptr<void>(event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  }

  result<void> wait_event(const std::shared_ptr<void>& event) override {
    if (!event) return ok();
    context::scoped_device bound(index_);
    return ATOMR_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event.get()), 0));
  }

  result<std::uint64_t> mark(std::function<void()> wake) override {
    context::scoped_device bound(index_);
    cudaEvent_t event = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)));
    if (auto r = ATOMR_CUDA_CHECK(cudaEventRecord(event, stream_)); !r) {
      cudaEventDestroy(event);
      return r.error_value();
    }
    const std::uint64_t id = next_marker_++;
    markers_.emplace(id, event);
    auto* fn = new std::function<void()>(std::move(wake));
    if (cudaLaunchHostFunc(stream_, run_wake, fn) != cudaSuccess) {
      cudaGetLastError();
      delete fn;  // the actor's polling still observes the marker
    }
    return id;
  }

  result<bool> finished(std::uint64_t marker) override {
    context::scoped_device bound(index_);
    const auto it = markers_.find(marker);
    if (it == markers_.end()) return error(errc::internal, "unknown completion marker " + std::to_string(marker));
    const cudaError_t status = cudaEventQuery(it->second);
    if (status == cudaErrorNotReady) return false;
    cudaEventDestroy(it->second);
    markers_.erase(it);
    ATOMR_TRY(ATOMR_CUDA_CHECK(status));
    return true;
  }

  bool is_sticky(const error& e) const override {
    for (const char* name :
         {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
          "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
          "cudaErrorHardwareStackError", "cudaErrorAssert", "cudaErrorECCUncorrectable", "cudaErrorLaunchTimeout"}) {
      if (e.message().find(name) != std::string::npos) return true;
    }
    return false;
  }

  result<void> rebuild() override {
    context::scoped_device bound(index_);
    destroy();
    peers_enabled_.clear();
    cudaGetLastError();
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceReset()));
    return init();
  }

  void drain() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  }

 private:
  void destroy() {
    for (auto& [id, event] : markers_) cudaEventDestroy(event);
    markers_.clear();
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
      stream_ = nullptr;
    }
  }

  int index_;
  cudaStream_t stream_ = nullptr;
  std::uint64_t next_marker_ = 1;
  std::map<std::uint64_t, cudaEvent_t> markers_;
  std::set<int> peers_enabled_;
};

std::unique_ptr<device_backend> make_cuda_backend(int index) { return std::make_unique<cuda_backend>(index); }

}  // namespace atomr::local
