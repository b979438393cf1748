// `atomr bench device`: what one request through a device actor costs against the direct call.
// Each case is a round trip: the request is made and waited for before the next one, so the
// difference is the actor's overhead (messages, completion, reply) per operation.
#include "bench/bench_device.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "atomr/local/device/device.hpp"
#include "bench/measure.hpp"

#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::apps::bench {
namespace {

namespace al = atomr::local;
using namespace std::chrono_literals;

constexpr std::size_t k_small = 4096;
constexpr std::size_t k_large = std::size_t{64} << 20;

// The direct calls the actor makes, on a stream of their own; host kind: the C library.
class raw_device {
 public:
  virtual ~raw_device() = default;
  virtual result<void> allocate_free(std::size_t bytes) = 0;
  virtual result<void> upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual result<void> download(void* dst, const void* src, std::size_t bytes) = 0;
  virtual result<void> sync() = 0;
};

class raw_host final : public raw_device {
 public:
  result<void> allocate_free(std::size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    keep(p);
    std::free(p);
    return ok();
  }
  result<void> upload(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return ok();
  }
  result<void> download(void* dst, const void* src, std::size_t bytes) override { return upload(dst, src, bytes); }
  result<void> sync() override { return ok(); }
};

#if ATOMR_HAVE_CUDA
class raw_cuda final : public raw_device {
 public:
  static result<std::unique_ptr<raw_cuda>> make(int index) {
    auto r = std::make_unique<raw_cuda>();
    r->index_ = index;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(index)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&r->stream_, cudaStreamNonBlocking)));
    return r;
  }
  ~raw_cuda() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  result<void> allocate_free(std::size_t bytes) override {
    void* p = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream_)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaFreeAsync(p, stream_)));
    return sync();
  }
  result<void> upload(void* dst, const void* src, std::size_t bytes) override {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_)));
    return sync();
  }
  result<void> download(void* dst, const void* src, std::size_t bytes) override {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_)));
    return sync();
  }
  result<void> sync() override { return ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  int index_ = 0;
  cudaStream_t stream_ = nullptr;
};
#endif

result<std::unique_ptr<raw_device>> make_raw(al::device_kind kind, [[maybe_unused]] int index) {
#if ATOMR_HAVE_CUDA
  if (kind == al::device_kind::cuda) {
    ATOMR_ASSIGN_OR_RETURN(auto r, raw_cuda::make(index));
    return std::unique_ptr<raw_device>(std::move(r));
  }
#endif
  if (kind == al::device_kind::cuda) return error(errc::unavailable, "atomr was built without CUDA");
  return std::unique_ptr<raw_device>(std::make_unique<raw_host>());
}

// Microseconds per call of `op`, which must succeed every time.
template <typename F>
result<double> time_us(F&& op, std::chrono::milliseconds budget) {
  std::optional<error> failed;
  const auto m = measure(
      [&] {
        if (failed) return;
        if (auto r = op(); !r) failed = r.error_value();
      },
      budget, 5);
  if (failed) return *failed;
  return m.ns_per_op / 1000.0;
}

}  // namespace

result<std::vector<device_case>> run_device_benchmarks(al::device_kind kind, int index) {
  ATOMR_ASSIGN_OR_RETURN(auto raw, make_raw(kind, index));
  al::actor_system sys;
  ATOMR_ASSIGN_OR_RETURN(al::device dev, al::device::start(sys, index, kind));
  ATOMR_ASSIGN_OR_RETURN(auto buffer, dev.allocate<std::uint8_t>(k_large).get());
  ATOMR_ASSIGN_OR_RETURN(std::uint8_t * device_ptr, buffer.data());
  std::vector<std::uint8_t> host(k_large, 7);  // pageable, as users pass it

  std::vector<device_case> out;
  auto add = [&](std::string name, std::size_t bytes, auto&& raw_op, auto&& atomr_op) -> result<void> {
    const auto budget = bytes >= k_large ? 400ms : 100ms;
    ATOMR_ASSIGN_OR_RETURN(const double raw_us, time_us(raw_op, budget));
    ATOMR_ASSIGN_OR_RETURN(const double atomr_us, time_us(atomr_op, budget));
    out.push_back({std::move(name), bytes, raw_us, atomr_us});
    return ok();
  };
  ATOMR_TRY(add(
      "allocate + free", k_small, [&] { return raw->allocate_free(k_small); },
      [&]() -> result<void> {
        ATOMR_ASSIGN_OR_RETURN(auto b, dev.allocate<std::uint8_t>(k_small).get());
        keep(b.buffer_id());
        return ok();
      }));
  for (const std::size_t bytes : {k_small, k_large}) {
    const std::span<const std::uint8_t> src(host.data(), bytes);
    const std::span<std::uint8_t> dst(host.data(), bytes);
    ATOMR_TRY(add(
        "upload (pageable)", bytes, [&] { return raw->upload(device_ptr, host.data(), bytes); },
        [&] { return dev.upload<std::uint8_t>(buffer, src).get(); }));
    ATOMR_TRY(add(
        "download (pageable)", bytes, [&] { return raw->download(host.data(), device_ptr, bytes); },
        [&] { return dev.download<std::uint8_t>(buffer, dst).get(); }));
  }
  ATOMR_TRY(add(
      "run (empty work)", 0, [&] { return raw->sync(); },
      [&] { return dev.run([](const al::stream_context&) { return ok(); }).get(); }));
  return out;
}

result<device_hops> run_device_hops(al::device_kind kind, int index) {
  al::actor_system sys;
  ATOMR_ASSIGN_OR_RETURN(al::device dev, al::device::start(sys, index, kind));
  using clock = std::chrono::steady_clock;
  std::vector<double> hop[3];
  auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  for (int i = 0; i < 2200; ++i) {
    auto at_actor = std::make_shared<clock::time_point>();
    auto at_done = std::make_shared<clock::time_point>();
    auto seen = std::make_shared<al::promise<void>>();
    auto result_future = seen->get_future();
    const auto t0 = clock::now();
    dev.run([at_actor](const al::stream_context&) -> result<void> {
         *at_actor = clock::now();
         return ok();
       })
        .then([at_done, seen](const result<void>& r) {
          *at_done = clock::now();
          seen->set_result(r);
        });
    ATOMR_TRY(result_future.get());
    const auto t1 = clock::now();
    if (i < 200) continue;  // warm-up
    hop[0].push_back(us(t0, *at_actor));
    hop[1].push_back(us(*at_actor, *at_done));
    hop[2].push_back(us(*at_done, t1));
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return device_hops{median(hop[0]), median(hop[1]), median(hop[2])};
}

}  // namespace atomr::apps::bench
