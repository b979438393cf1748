#include "atomr/cluster/engine/group_cache.hpp"

#include <algorithm>

namespace atomr::cluster::detail {

namespace {
std::uint64_t shape_word(const coll_spec& s) {
  return static_cast<std::uint64_t>(s.kind) | static_cast<std::uint64_t>(s.type) << 8 |
         static_cast<std::uint64_t>(s.params.op) << 16;
}
std::uint64_t address(const std::shared_ptr<local::buffer_block>& b) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b.get()));
}
// Words per spec: shape, root, count, and each list's length and addresses.
std::size_t words_of(const coll_spec& s) { return 5 + s.send.size() + s.recv.size(); }
// The specs a key was made of.
std::size_t specs_in(const group_key& k) {
  std::size_t n = 0;
  for (std::size_t at = 3; at < k.size(); at += 5 + k[at] + k[at + 1 + k[at]]) ++n;
  return n;
}
}  // namespace

group_key key_of(const std::vector<coll_spec>& specs) {
  group_key k;
  k.reserve(specs.size() * 7);
  for (const auto& s : specs) {
    k.push_back(shape_word(s));
    k.push_back(static_cast<std::uint64_t>(static_cast<std::int64_t>(s.params.root)));
    k.push_back(s.params.count);
    k.push_back(s.send.size());
    for (const auto& b : s.send) k.push_back(address(b));
    k.push_back(s.recv.size());
    for (const auto& b : s.recv) k.push_back(address(b));
  }
  return k;
}

bool matches(const std::vector<coll_spec>& specs, const group_key& key) {
  std::size_t at = 0;
  const std::size_t n = key.size();
  for (const auto& s : specs) {
    if (at + words_of(s) > n) return false;
    if (key[at] != shape_word(s) ||
        key[at + 1] != static_cast<std::uint64_t>(static_cast<std::int64_t>(s.params.root)) ||
        key[at + 2] != s.params.count || key[at + 3] != s.send.size()) {
      return false;
    }
    at += 4;
    for (const auto& b : s.send) {
      if (key[at++] != address(b)) return false;
    }
    if (key[at++] != s.recv.size()) return false;
    for (const auto& b : s.recv) {
      if (key[at++] != address(b)) return false;
    }
  }
  return at == n;
}

bool matches_in_place(local::dtype type, reduce_op op, std::span<const local::buffer_block* const> blocks,
                      const group_key& key) {
  // (What key_of makes of all_reduce_spec(b, op): 7 words a spec.)
  if (key.size() != 7 * blocks.size()) return false;
  const coll_spec shape{coll_kind::all_reduce, type, {op, 0, 0}, {}, {}};
  const std::uint64_t word = shape_word(shape);
  const std::uint64_t* k = key.data();
  for (const auto* b : blocks) {
    const auto at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(b));
    if (k[0] != word || k[1] != 0 || k[2] != 0 || k[3] != 1 || k[4] != at || k[5] != 1 || k[6] != at) return false;
    k += 7;
  }
  return true;
}

template <class Match>
std::shared_ptr<const group_call> group_cache::find_kept(std::size_t specs, Match&& match, clock::time_point now) {
  std::lock_guard lock(mutex_);
  for (auto& c : calls_) {
    if (c.specs != specs || !match(c.key)) continue;
    c.used = now;
    return c.call;
  }
  return nullptr;
}

std::shared_ptr<const group_call> group_cache::find_in_place(local::dtype type, reduce_op op,
                                                             std::span<const local::buffer_block* const> blocks,
                                                             clock::time_point now) {
  return find_kept(
      blocks.size(), [&](const group_key& k) { return matches_in_place(type, op, blocks, k); }, now);
}

std::shared_ptr<const group_call> group_cache::find(const std::vector<coll_spec>& specs, clock::time_point now) {
  return find_kept(
      specs.size(), [&](const group_key& k) { return matches(specs, k); }, now);
}

std::optional<group_key> group_cache::repeated(const std::vector<coll_spec>& specs) {
  if (specs.size() > k_specs_most) return std::nullopt;
  auto key = key_of(specs);
  std::lock_guard lock(mutex_);
  const auto it = std::find(seen_.begin(), seen_.end(), key);
  if (it != seen_.end()) {
    seen_.erase(it);
    return key;
  }
  if (seen_.size() == k_seen_most) seen_.pop_front();
  seen_.push_back(std::move(key));
  return std::nullopt;
}

void group_cache::keep(group_key key, std::shared_ptr<const group_call> call, clock::time_point now) {
  std::shared_ptr<const group_call> dropped;  // (let go outside the lock: it frees its entries)
  {
    std::lock_guard lock(mutex_);
    if (calls_.size() == k_calls_most) {
      auto oldest =
          std::min_element(calls_.begin(), calls_.end(), [](const auto& a, const auto& b) { return a.used < b.used; });
      dropped = std::move(oldest->call);
      calls_.erase(oldest);
    }
    const std::size_t n = specs_in(key);
    calls_.push_back({std::move(key), n, std::move(call), now});
  }
}

void group_cache::forget(const group_call* call) {
  std::shared_ptr<const group_call> dropped;
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(calls_.begin(), calls_.end(), [&](const auto& c) { return c.call.get() == call; });
  if (it == calls_.end()) return;
  dropped = std::move(it->call);
  calls_.erase(it);
}

std::size_t group_cache::expire(clock::time_point now) {
  std::vector<kept_call> gone;  // (let go outside the lock)
  {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return 0;
    auto stale = [&](const kept_call& c) { return now - c.used >= k_keep; };
    for (auto& c : calls_) {
      if (stale(c)) gone.push_back(std::move(c));
    }
    std::erase_if(calls_, [](const kept_call& c) { return c.call == nullptr; });
  }
  return gone.size();
}

std::size_t group_cache::kept() const {
  std::lock_guard lock(mutex_);
  return calls_.size();
}

}  // namespace atomr::cluster::detail
