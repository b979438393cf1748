// A kernel from a PTX module that writes out of bounds poisons the context. The launch fails with
// the illegal address, every old buffer, module and kernel handle is refused with stale_ref, and
// new work succeeds after the rebuild (or, where CUDA refuses a new context in this process, the
// device stops and says why). Its own executable: the fault can poison the whole process.
#include <gtest/gtest.h>

#include <random>

#include "atomr/local/device/device.hpp"
#include "gpu_test.hpp"
#include "module_images.hpp"
#include "rank_gpu.hpp"

namespace atomr::local {
namespace {

TEST(GpuModuleFault, OutOfBoundsKernelPoisonsTheContextAndOldHandlesAreRefused) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  const auto ptx = test::module_kernels_ptx();
  auto m = dev.load_module({ptx.begin(), ptx.end()}).get().value();
  auto k = dev.get_function(m, "write_far_away").get().value();
  auto old = dev.allocate<std::int32_t>(1024).get().value();

  kernel_args args;
  args.buffer(old);
  auto fault = dev.launch(k, {{1, 1, 1}, {32, 1, 1}}, std::move(args)).get();
  ASSERT_FALSE(fault);
  EXPECT_EQ(fault.error_value().code(), errc::cuda);
  EXPECT_NE(fault.error_value().message().find("IllegalAddress"), std::string::npos) << fault.error_value();

  auto next = dev.allocate<std::int32_t>(1024).get();
  EXPECT_EQ(dev.state()->generation(), 2u);
  EXPECT_EQ(old.validate().error_value().code(), errc::stale_ref);
  kernel_args again;
  again.buffer(old);
  EXPECT_EQ(dev.launch(k, {}, std::move(again)).get().error_value().code(), errc::stale_ref);
  EXPECT_EQ(dev.get_function(m, "affine").get().error_value().code(), errc::stale_ref);

  if (next) {
    // Rebuilt: a fresh module and buffers work in generation 2.
    auto m2 = dev.load_module({ptx.begin(), ptx.end()}).get().value();
    EXPECT_EQ(m2.generation, 2u);
    auto affine = dev.get_function(m2, "affine").get().value();
    std::mt19937 rng(21);
    std::vector<std::int32_t> in(1024), out(1024);
    for (auto& v : in) v = static_cast<std::int32_t>(rng() % 1000);
    auto dst = dev.allocate<std::int32_t>(1024).get().value();
    ASSERT_TRUE(dev.upload<std::int32_t>(*next, in).get());
    kernel_args a;
    a.buffer(*next, buffer_access::read).buffer(dst).value(2).value(1).value(1024u);
    ASSERT_TRUE(dev.launch(affine, {{4, 1, 1}, {256, 1, 1}}, std::move(a)).get());
    ASSERT_TRUE(dev.download<std::int32_t>(dst, out).get());
    for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], 2 * in[i] + 1);
  } else {
    EXPECT_EQ(next.error_value().code(), errc::unavailable);
    auto end = dev.on_terminated().get();
    ASSERT_TRUE(end);
    ASSERT_TRUE(end->reason.has_value());
    EXPECT_NE(end->reason->message().find("Restart this rank"), std::string::npos) << *end->reason;
  }
}

}  // namespace
}  // namespace atomr::local
