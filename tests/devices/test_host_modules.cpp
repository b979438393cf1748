// Modules on the host kind, and the checks every module call makes before anything reaches a
// device: the argument layout, launch arguments against a kernel's parameters, and handles that
// are empty, from another device, from an older generation, or unknown.
#include <gtest/gtest.h>

#include <cstring>

#include "atomr/local/device/device.hpp"

namespace atomr::local {
namespace {

kernel_ref fake_kernel(const device& dev, std::vector<std::size_t> params) {
  return kernel_ref{41, 40, dev.index(), dev.state()->generation(), "axpy", std::move(params)};
}

TEST(KernelArgs, ValuesAndBuffersBindInOrder) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host).value();
  auto buf = dev.allocate<float>(8).get().value();
  kernel_args args;
  args.value(std::int32_t{-5}).buffer(buf, buffer_access::read).value(2.5).value(std::uint8_t{7});
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args.arg_bytes(0), 4u);
  EXPECT_EQ(args.arg_bytes(1), sizeof(void*));
  EXPECT_EQ(args.arg_bytes(2), 8u);
  EXPECT_EQ(args.arg_bytes(3), 1u);
  ASSERT_EQ(args.buffers().size(), 1u);
  EXPECT_EQ(args.buffers()[0].access, buffer_access::read);

  const auto bound = args.bind();
  ASSERT_EQ(bound.size(), 4u);
  std::int32_t i = 0;
  void* p = nullptr;
  double d = 0;
  std::uint8_t u = 0;
  std::memcpy(&i, bound[0], sizeof(i));
  std::memcpy(&p, bound[1], sizeof(p));
  std::memcpy(&d, bound[2], sizeof(d));
  std::memcpy(&u, bound[3], sizeof(u));
  EXPECT_EQ(i, -5);
  EXPECT_EQ(p, buf.data().value());
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(u, 7);
  for (void* slot : bound) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slot) % 16, 0u);
}

TEST(KernelArgs, CheckedAgainstTheKernelsParameters) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host).value();
  auto buf = dev.allocate<float>(8).get().value();
  const auto k = fake_kernel(dev, {8, 4});
  kernel_args ok_args;
  ok_args.buffer(buf).value(1.0f);
  EXPECT_TRUE(check_launch_args(k, ok_args));

  kernel_args few;
  few.buffer(buf);
  auto e = check_launch_args(k, few);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(e.error_value().message(), "kernel 'axpy' takes 2 parameter(s); 1 given");

  kernel_args wide;
  wide.buffer(buf).value(1.0);
  e = check_launch_args(k, wide);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error_value().message(), "parameter 1 of kernel 'axpy' is 4 bytes; the argument is 8 bytes");

  kernel_args empty_ref;
  empty_ref.buffer(gpu_ref<float>{}).value(1.0f);
  e = check_launch_args(k, empty_ref);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error_value().message().find("empty gpu_ref"), std::string::npos);
}

class HostModules : public ::testing::Test {
 protected:
  actor_system sys_;
  device dev_ = device::start(sys_, 0, device_kind::host).value();
};

TEST_F(HostModules, TheHostKindRunsNoDeviceCode) {
  const char ptx[] = ".version 8.0\n.target sm_90\n";
  std::vector<std::byte> image(sizeof(ptx));
  std::memcpy(image.data(), ptx, sizeof(ptx));
  auto m = dev_.load_module(image).get();
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error_value().code(), errc::unavailable);
  EXPECT_EQ(m.error_value().message(), "host device 0 cannot run device code (modules need a CUDA device)");
  EXPECT_EQ(dev_.load_module({}).get().error_value().message(), "an empty module image");
}

TEST_F(HostModules, MissingModuleFileNamesThePathAndTheReason) {
  auto m = dev_.load_module_file("/nonexistent/atomr/kernels.ptx").get();
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(m.error_value().message(),
            "cannot read module file '/nonexistent/atomr/kernels.ptx': No such file or directory");
}

TEST_F(HostModules, HandlesAreCheckedBeforeAndByTheDevice) {
  auto buf = dev_.allocate<float>(4).get().value();
  auto args = [&] {
    kernel_args a;
    a.buffer(buf).value(1.0f);
    return a;
  };
  // Empty.
  auto r = dev_.launch(kernel_ref{}, {}, args()).get();
  EXPECT_EQ(r.error_value().message(), "an empty kernel handle");
  // Another device's.
  auto k = fake_kernel(dev_, {8, 4});
  k.device = 3;
  r = dev_.launch(k, {}, args()).get();
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(r.error_value().message(), "kernel 41 belongs to device 3, not device 0");
  // From an older context.
  k = fake_kernel(dev_, {8, 4});
  k.generation = 0;
  r = dev_.launch(k, {}, args()).get();
  EXPECT_EQ(r.error_value().code(), errc::stale_ref);
  EXPECT_NE(r.error_value().message().find("rebuilt its context since"), std::string::npos) << r.error_value();
  // Well formed but never loaded here: the device actor refuses it.
  r = dev_.launch(fake_kernel(dev_, {8, 4}), {}, args()).get();
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(r.error_value().message(), "unknown kernel 41 on device 0 (unloaded, or never loaded here)");
  // A zero-sized grid.
  launch_config zero;
  zero.grid[1] = 0;
  r = dev_.launch(fake_kernel(dev_, {8, 4}), zero, args()).get();
  EXPECT_EQ(r.error_value().message(), "kernel 'axpy': a grid or block dimension is 0");

  const module_ref m{40, 0, dev_.state()->generation()};
  auto f = dev_.get_function(m, "axpy").get();
  EXPECT_EQ(f.error_value().message(), "unknown module 40 on device 0 (unloaded, or never loaded here)");
  EXPECT_EQ(dev_.unload_module(m).get().error_value().code(), errc::invalid_argument);
  EXPECT_EQ(dev_.get_function(m, "").get().error_value().message(), "an empty kernel name");
}

TEST_F(HostModules, HandlesOfAStoppedDeviceAreStale) {
  const module_ref m{40, 0, dev_.state()->generation()};
  dev_.stop();
  ASSERT_TRUE(dev_.on_terminated().get());
  auto f = dev_.get_function(m, "axpy").get();
  EXPECT_EQ(f.error_value().code(), errc::stale_ref);
  EXPECT_EQ(f.error_value().message(), "module 40: device 0 is shutting down");
}

}  // namespace
}  // namespace atomr::local
