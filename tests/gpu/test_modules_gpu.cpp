// Modules on a CUDA device: PTX and cubin images, kernel lookup and parameter layouts, typed
// launches with exact values, cooperative launch with a grid-wide barrier, unload, and the errors
// for bad PTX, unknown names and handles, and wrong arguments.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "atomr/local/device/device.hpp"
#include "gpu_test.hpp"
#include "module_images.hpp"
#include "rank_gpu.hpp"

namespace atomr::local {
namespace {

std::vector<std::byte> bytes_of(std::span<const std::byte> s) { return {s.begin(), s.end()}; }
std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

class GpuModules : public ::testing::Test {
 protected:
  void SetUp() override {
    ATOMR_REQUIRE_GPUS(1);
    dev_ = device::start(sys_, test::rank_gpu(), device_kind::cuda).value();
  }
  // Runs affine (out = a * in + b) from `module` over seeded values and checks every element.
  void expect_affine(const module_ref& module, std::uint32_t seed) {
    auto k = dev_->get_function(module, "affine").get();
    ASSERT_TRUE(k) << k.error_value();
    EXPECT_EQ(k->param_sizes, (std::vector<std::size_t>{8, 8, 4, 4, 4}));
    const unsigned n = 100'003;
    std::mt19937 rng(seed);
    std::vector<std::int32_t> in(n), out(n);
    for (auto& v : in) v = static_cast<std::int32_t>(rng() % 100'000);
    auto src = dev_->allocate<std::int32_t>(n).get().value();
    auto dst = dev_->allocate<std::int32_t>(n).get().value();
    ASSERT_TRUE(dev_->upload<std::int32_t>(src, in).get());
    kernel_args args;
    args.buffer(src, buffer_access::read).buffer(dst).value(std::int32_t{3}).value(std::int32_t{-7}).value(n);
    const launch_config config{{(n + 255) / 256, 1, 1}, {256, 1, 1}};
    auto launched = dev_->launch(*k, config, std::move(args)).get();
    ASSERT_TRUE(launched) << launched.error_value();
    ASSERT_TRUE(dev_->download<std::int32_t>(dst, out).get());
    for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], 3 * in[i] - 7) << "element " << i;
  }

  actor_system sys_;
  std::optional<device> dev_;
};

TEST_F(GpuModules, PtxLoadsLaunchesWithTypedArgumentsAndUnloads) {
  auto m = dev_->load_module(bytes_of(test::module_kernels_ptx())).get();
  ASSERT_TRUE(m) << m.error_value();
  EXPECT_EQ(m->device, dev_->index());
  expect_affine(*m, 11);
  auto k = dev_->get_function(*m, "affine").get().value();
  ASSERT_TRUE(dev_->unload_module(*m).get());
  // Gone: its kernels and the module itself are refused by name, not by a CUDA crash.
  auto buf = dev_->allocate<std::int32_t>(1).get().value();
  kernel_args args;
  args.buffer(buf).buffer(buf).value(1).value(2).value(1u);
  auto after = dev_->launch(k, {}, std::move(args)).get();
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error_value().code(), errc::invalid_argument);
  EXPECT_NE(after.error_value().message().find("unknown kernel"), std::string::npos) << after.error_value();
  auto again = dev_->get_function(*m, "affine").get();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error_value().message().find("unknown module"), std::string::npos) << again.error_value();
  EXPECT_EQ(dev_->unload_module(*m).get().error_value().code(), errc::invalid_argument);
}

TEST_F(GpuModules, CubinLoadsFromAFile) {
  const auto path = std::filesystem::temp_directory_path() / ("atomr_module_" + std::to_string(::getpid()) + ".cubin");
  {
    std::ofstream f(path, std::ios::binary);
    const auto image = test::module_kernels_cubin();
    f.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
  }
  auto m = dev_->load_module_file(path.string()).get();
  std::filesystem::remove(path);
  ASSERT_TRUE(m) << m.error_value();
  expect_affine(*m, 12);

  auto missing = dev_->load_module_file(path.string()).get();
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error_value().code(), errc::invalid_argument);
  EXPECT_NE(missing.error_value().message().find("No such file"), std::string::npos) << missing.error_value();
}

TEST_F(GpuModules, CooperativeLaunchSynchronizesTheWholeGrid) {
  auto m = dev_->load_module(bytes_of(test::module_kernels_cubin())).get().value();
  auto k = dev_->get_function(m, "grid_sum").get().value();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev_->index()), cudaSuccess);
  const unsigned blocks = static_cast<unsigned>(sms);  // one block per SM always fits at once
  const unsigned n = 1u << 22;
  std::mt19937 rng(13);
  std::vector<std::int32_t> in(n);
  for (auto& v : in) v = static_cast<std::int32_t>(rng() % 256);
  const std::int64_t expected = std::accumulate(in.begin(), in.end(), std::int64_t{0});
  auto src = dev_->allocate<std::int32_t>(n).get().value();
  auto partial = dev_->allocate<std::int32_t>(blocks).get().value();
  auto total = dev_->allocate<std::int32_t>(1).get().value();
  ASSERT_TRUE(dev_->upload<std::int32_t>(src, in).get());
  ASSERT_TRUE(dev_->fill_bytes(partial, 0).get());
  kernel_args args;
  args.buffer(src, buffer_access::read).buffer(partial).buffer(total).value(n);
  launch_config config{{blocks, 1, 1}, {256, 1, 1}};
  config.cooperative = true;
  auto done = dev_->launch(k, config, std::move(args)).get();
  ASSERT_TRUE(done) << done.error_value();
  std::vector<std::int32_t> out(1);
  ASSERT_TRUE(dev_->download<std::int32_t>(total, out).get());
  EXPECT_EQ(out[0], expected);

  // A cooperative grid larger than the device holds at once is refused before CUDA sees it.
  kernel_args big_args;
  big_args.buffer(src, buffer_access::read).buffer(partial).buffer(total).value(n);
  launch_config big{{blocks * 64, 1, 1}, {1024, 1, 1}};
  big.cooperative = true;
  auto refused = dev_->launch(k, big, std::move(big_args)).get();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error_value().code(), errc::invalid_argument);
  EXPECT_NE(refused.error_value().message().find("fit on device"), std::string::npos) << refused.error_value();
}

TEST_F(GpuModules, BadPtxUnknownNamesAndWrongArgumentsAreClearErrors) {
  auto bad = dev_->load_module(bytes_of(".version 8.0\n.target sm_90\n.address_size 64\n"
                                        ".visible .entry broken() { this is not ptx; }\n"))
                 .get();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error_value().code(), errc::cuda);
  EXPECT_NE(bad.error_value().message().find("CUDA_ERROR_INVALID_PTX"), std::string::npos) << bad.error_value();
  EXPECT_NE(bad.error_value().message().find("JIT log"), std::string::npos) << bad.error_value();

  auto m = dev_->load_module(bytes_of(test::module_kernels_ptx())).get().value();
  auto unknown = dev_->get_function(m, "no_such_kernel").get();
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error_value().code(), errc::invalid_argument);
  EXPECT_NE(unknown.error_value().message().find("no kernel named 'no_such_kernel'"), std::string::npos)
      << unknown.error_value();

  auto k = dev_->get_function(m, "affine").get().value();
  auto buf = dev_->allocate<std::int32_t>(4).get().value();
  kernel_args too_few;
  too_few.buffer(buf).buffer(buf).value(1);
  auto few = dev_->launch(k, {}, std::move(too_few)).get();
  ASSERT_FALSE(few);
  EXPECT_NE(few.error_value().message().find("takes 5 parameter(s); 3 given"), std::string::npos) << few.error_value();
  kernel_args wrong_size;
  wrong_size.buffer(buf).buffer(buf).value(1).value(std::int64_t{2}).value(4u);
  auto wrong = dev_->launch(k, {}, std::move(wrong_size)).get();
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error_value().message().find("parameter 3 of kernel 'affine' is 4 bytes; the argument is 8"),
            std::string::npos)
      << wrong.error_value();
  // The device is still healthy after all of these.
  EXPECT_EQ(dev_->state()->generation(), 1u);
  expect_affine(m, 14);
}

}  // namespace
}  // namespace atomr::local
