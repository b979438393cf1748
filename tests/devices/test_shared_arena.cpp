// The host devices' shared arena (atomr/local/device/shared_arena.hpp): what it hands out is
// aligned, reused once given back, kept out of reuse once quarantined, and is the same memory
// another mapping of its memfd sees (as another rank of the node maps it, by /proc/<pid>/fd).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "atomr/local/actors.hpp"
#include "atomr/local/device/device.hpp"
#include "atomr/local/device/shared_arena.hpp"

namespace atomr::local {
namespace {

shared_arena& arena() {
  auto* a = shared_arena::instance();
  if (a == nullptr) throw std::runtime_error("no shared arena on this machine (memfd_create or mmap refused)");
  return *a;
}

TEST(SharedArena, HandsOutAlignedMemoryInsideItself) {
  auto& a = arena();
  std::vector<void*> got;
  for (std::size_t bytes : {1, 63, 64, 2048, 100000, 4 << 20}) {
    void* p = a.allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes << " bytes";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % shared_arena::k_alignment, 0u);
    EXPECT_TRUE(a.owns(p));
    EXPECT_TRUE(a.owns(static_cast<std::byte*>(p) + bytes - 1));
    std::memset(p, 0x5a, bytes);
    got.push_back(p);
  }
  int on_heap = 0;
  EXPECT_FALSE(a.owns(&on_heap));
  for (void* p : got) a.release(p);
  EXPECT_EQ(a.allocate(0), nullptr);
}

TEST(SharedArena, GivenBackMemoryIsReusedButQuarantinedMemoryIsNot) {
  auto& a = arena();
  auto reused_within = [&](void* given_back) {
    std::vector<void*> held;
    bool reused = false;
    for (int i = 0; i < 64; ++i) {
      held.push_back(a.allocate(8192));
      EXPECT_NE(held.back(), nullptr);
      reused = reused || held.back() == given_back;
    }
    for (void* p : held) a.release(p);
    return reused;
  };
  void* first = a.allocate(8192);
  ASSERT_NE(first, nullptr);
  a.release(first);
  EXPECT_TRUE(reused_within(first));
  void* kept = a.allocate(8192);
  ASSERT_NE(kept, nullptr);
  a.quarantine(kept);
  a.release(kept);  // (does nothing: another rank may still write there)
  EXPECT_FALSE(reused_within(kept));
}

TEST(SharedArena, AnotherMappingOfItsMemfdSeesTheSameBytes) {
  auto& a = arena();
  const auto where = a.where();
  auto* p = static_cast<std::uint32_t*>(a.allocate(4096));
  ASSERT_NE(p, nullptr);
  for (std::uint32_t i = 0; i < 1024; ++i) p[i] = i * 2654435761u;
  const std::string path = "/proc/" + std::to_string(where.pid) + "/fd/" + std::to_string(where.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  void* m = mmap(nullptr, where.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  ASSERT_NE(m, MAP_FAILED) << std::strerror(errno);
  auto* seen =
      reinterpret_cast<std::uint32_t*>(static_cast<std::byte*>(m) + (reinterpret_cast<std::byte*>(p) - where.base));
  EXPECT_NE(static_cast<void*>(seen), static_cast<void*>(p));
  for (std::uint32_t i = 0; i < 1024; ++i) ASSERT_EQ(seen[i], i * 2654435761u) << i;
  seen[7] = 42;  // and writes through it land in the arena
  EXPECT_EQ(p[7], 42u);
  munmap(m, where.bytes);
  a.release(p);
}

// A host device's small buffers come from the arena, its large ones (over ATOMR_HOST_ARENA_MOST,
// 4 MiB by default) from the heap; both work alike.
TEST(SharedArena, HostDeviceBuffersComeFromItUpToTheLimit) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host);
  ASSERT_TRUE(dev) << dev.error_value();
  auto small = dev->allocate<float>(512).get();
  auto large = dev->allocate<float>((std::size_t{8} << 20) / sizeof(float)).get();
  ASSERT_TRUE(small);
  ASSERT_TRUE(large);
  EXPECT_TRUE(arena().owns(small->data().value()));
  EXPECT_FALSE(arena().owns(large->data().value()));
  std::vector<float> v(512);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(dev->upload(*small, std::span<const float>(v)).get());
  std::vector<float> back(512);
  ASSERT_TRUE(dev->download(*small, std::span<float>(back)).get());
  EXPECT_EQ(back, v);
}

TEST(SharedArena, TheLimitComesFromTheOptionsOrTheEnvironment) {
  actor_system sys;
  device_options none;
  none.host_arena_most = 0;
  auto heap_only = device::start(sys, 0, device_kind::host, none);
  ASSERT_TRUE(heap_only) << heap_only.error_value();
  auto b = heap_only->allocate<float>(16).get();
  ASSERT_TRUE(b);
  EXPECT_FALSE(arena().owns(b->data().value()));
  setenv("ATOMR_HOST_ARENA_MOST", "lots", 1);
  actor_system other;
  auto refused = device::start(other, 0, device_kind::host);
  unsetenv("ATOMR_HOST_ARENA_MOST");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error_value().code(), errc::invalid_argument);
  EXPECT_NE(refused.error_value().message().find("ATOMR_HOST_ARENA_MOST"), std::string::npos)
      << refused.error_value().message();
}

}  // namespace
}  // namespace atomr::local
