#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <regex>

#include "atomr/local/devices.hpp"
#include "atomr/local/host_info.hpp"
#include "atomr/local/versions.hpp"

namespace atomr {
namespace {

TEST(HostProbe, MatchesThisMachine) {
  auto host = local::probe_host();
  ASSERT_TRUE(host) << host.error_value();
  std::array<char, 256> name{};
  ASSERT_EQ(gethostname(name.data(), name.size() - 1), 0);
  EXPECT_EQ(host->hostname, name.data());
  EXPECT_GE(host->numa_nodes, 1);
  EXPECT_GE(host->cores, 1);
  EXPECT_GE(host->hardware_threads, host->cores);
  EXPECT_EQ(host->hardware_threads, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT(host->memory_bytes, 0u);
}

TEST(HostProbe, HostDeviceDescribesTheMachine) {
  const auto dev = local::host_device();
  EXPECT_EQ(dev.kind, local::device_kind::host);
  EXPECT_EQ(dev.index, 0);
  EXPECT_TRUE(dev.name.starts_with("host"));
  EXPECT_EQ(dev.total_memory, local::probe_host()->memory_bytes);
}

TEST(HostProbe, CudaProbeListsDevicesOrSaysWhyNone) {
  auto probe = local::probe_cuda_devices();
  ASSERT_TRUE(probe) << probe.error_value();
  if (probe->devices.empty()) {
    EXPECT_FALSE(probe->absent_reason.empty());
    return;
  }
  const std::regex bus_id("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]");
  for (std::size_t i = 0; i < probe->devices.size(); ++i) {
    const auto& d = probe->devices[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_EQ(d.kind, local::device_kind::cuda);
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_TRUE(std::regex_match(d.pci_bus_id, bus_id)) << d.pci_bus_id;
  }
}

TEST(HostProbe, VersionsAreFilledIn) {
  const auto v = local::probe_local_versions();
  EXPECT_TRUE(std::regex_match(v.hwloc, std::regex("[0-9]+\\.[0-9]+\\.[0-9]+ \\(runtime API [0-9]+\\.[0-9]+\\)")))
      << v.hwloc;
  EXPECT_FALSE(v.cuda_runtime.empty());
  EXPECT_FALSE(v.cuda_driver.empty());
}

}  // namespace
}  // namespace atomr
