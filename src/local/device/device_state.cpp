#include "atomr/local/device/device_state.hpp"

#include <vector>

#include "atomr/local/device/dtype.hpp"

namespace atomr::local {

std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::i8: return "i8";
    case dtype::u8: return "u8";
    case dtype::i32: return "i32";
    case dtype::u32: return "u32";
    case dtype::i64: return "i64";
    case dtype::u64: return "u64";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
  }
  return "unknown";
}

std::uint64_t device_state::bump_generation() {
  const std::uint64_t next = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  std::vector<std::function<void(std::uint64_t)>> callbacks;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, f] : watchers_) callbacks.push_back(f);
  }
  for (const auto& f : callbacks) f(next);
  return next;
}

std::uint64_t device_state::watch(std::function<void(std::uint64_t)> f) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_watch_++;
  watchers_.emplace(id, std::move(f));
  return id;
}

void device_state::unwatch(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  watchers_.erase(id);
}

}  // namespace atomr::local
