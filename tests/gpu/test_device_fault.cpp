// A kernel that writes to an illegal address poisons its CUDA context. The device actor must
// report the fault, make every existing gpu_ref stale (new generation, watchers told) and then
// either rebuild the context so new work succeeds, or, where CUDA refuses any new context in this
// process (as its documentation says it may after such errors), stop and say that the rank must be
// restarted. Its own executable: a fault can poison the whole process.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/device.hpp"
#include "fault_kernel.hpp"
#include "gpu_test.hpp"
#include "rank_gpu.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

TEST(GpuDeviceFault, KernelFaultMakesOldRefsStaleThenRebuildsOrStopsWithTheReason) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  std::atomic<std::uint64_t> told{0};
  dev.state()->watch([&](std::uint64_t g) { told = g; });
  auto old = dev.allocate<std::int32_t>(1024).get().value();
  EXPECT_EQ(old.generation(), 1u);

  auto fault = dev.run(
                      [old](const stream_context& ctx) -> result<void> {
                        ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, old.data());
                        return ATOMR_CUDA_CHECK(test::launch_illegal_write(p, static_cast<cudaStream_t>(ctx.stream)));
                      },
                      {old.block()})
                   .get();
  ASSERT_FALSE(fault);
  EXPECT_EQ(fault.error_value().code(), errc::cuda);
  EXPECT_NE(fault.error_value().message().find("cudaErrorIllegalAddress"), std::string::npos) << fault.error_value();

  // Whatever CUDA allows next, the old handle is refused and never touches the memory.
  auto next = dev.allocate<std::int32_t>(1024).get();
  EXPECT_EQ(dev.state()->generation(), 2u);
  EXPECT_EQ(told.load(), 2u);
  auto stale = old.validate();
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error_value().code(), errc::stale_ref);

  if (next) {
    // Rebuilt: new work succeeds in generation 2.
    EXPECT_EQ(next->generation(), 2u);
    std::mt19937 rng(9);
    std::vector<std::int32_t> in(1024), out(1024);
    for (auto& v : in) v = static_cast<std::int32_t>(rng());
    ASSERT_TRUE(dev.upload<std::int32_t>(*next, in).get());
    ASSERT_TRUE(dev.download<std::int32_t>(*next, out).get());
    EXPECT_EQ(out, in);
  } else {
    // CUDA refused a new context: the device stopped and its watchers learn why.
    EXPECT_EQ(next.error_value().code(), errc::unavailable);
    auto end = dev.on_terminated().get();
    ASSERT_TRUE(end);
    ASSERT_TRUE(end->reason.has_value());
    EXPECT_NE(end->reason->message().find("CUDA cannot recover this process from"), std::string::npos) << *end->reason;
    EXPECT_NE(end->reason->message().find("Restart this rank"), std::string::npos) << *end->reason;
    EXPECT_FALSE(dev.state()->accepting());
    std::vector<std::int32_t> out(1024);
    EXPECT_EQ(dev.download<std::int32_t>(old, out).get().error_value().code(), errc::stale_ref);
  }
}

}  // namespace
}  // namespace atomr::local
