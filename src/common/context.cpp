#include "atomr/common/context.hpp"

#include <atomic>

namespace atomr::context {
namespace {
std::atomic<int> g_rank{k_unknown};
thread_local int t_device = k_unknown;
}  // namespace

int rank() noexcept { return g_rank.load(std::memory_order_relaxed); }
void set_rank(int world_rank) noexcept { g_rank.store(world_rank, std::memory_order_relaxed); }
int device() noexcept { return t_device; }

scoped_device::scoped_device(int device_id) noexcept : previous_(t_device) { t_device = device_id; }
scoped_device::~scoped_device() { t_device = previous_; }

std::string describe() {
  const int r = rank();
  std::string out = r == k_unknown ? std::string("rank ?") : "rank " + std::to_string(r);
  if (t_device != k_unknown) out += ", device " + std::to_string(t_device);
  return out;
}

}  // namespace atomr::context
