// pointer_set: a set of addresses for hot loops that fill it, ask it, and empty it again and
// again (the world's packing plan checks every queued request's buffers against the batch so
// far). Open addressing with linear probing in one array; clear() is O(1) (a new generation
// makes every slot empty), so a plan that starts a new batch at each request does not pay for
// the table's size each time. std::unordered_set cost about 1300 instructions a request there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace atomr {

class pointer_set {
 public:
  // Empties the set and makes room for `expected` addresses at no more than half load.
  void reset(std::size_t expected) {
    std::size_t capacity = 16;
    while (capacity < 2 * expected) capacity <<= 1;
    if (slots_.size() < capacity) {
      slots_.assign(capacity, slot{});
      generation_ = 0;
    }
    mask_ = slots_.size() - 1;
    clear();
  }
  void clear() noexcept {
    ++generation_;
    size_ = 0;
  }
  std::size_t size() const noexcept { return size_; }

  bool contains(const void* p) const noexcept {
    if (slots_.empty()) return false;
    for (std::size_t i = hash(p) & mask_;; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.generation != generation_) return false;
      if (s.address == p) return true;
    }
  }
  // False if it was there already.
  bool insert(const void* p) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = hash(p) & mask_;; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (s.generation != generation_) {
        s = {p, generation_};
        ++size_;
        return true;
      }
      if (s.address == p) return false;
    }
  }

 private:
  struct slot {
    const void* address = nullptr;
    std::uint64_t generation = 0;  // the slot holds an address only in the current generation
  };

  static std::size_t hash(const void* p) noexcept {
    // Allocations share their low bits (alignment) and often their high bits: mix them all.
    auto x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return static_cast<std::size_t>(x);
  }

  void grow() {
    std::vector<const void*> kept;
    kept.reserve(size_);
    for (const auto& s : slots_) {
      if (s.generation == generation_) kept.push_back(s.address);
    }
    slots_.assign(slots_.empty() ? 16 : 2 * slots_.size(), slot{});
    mask_ = slots_.size() - 1;
    generation_ = 1;
    size_ = 0;
    for (const void* p : kept) insert(p);
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  std::uint64_t generation_ = 1;
  std::size_t size_ = 0;
};

// N pointer_sets a hot path keeps per thread for their tables (a fresh one for 1000 requests was
// an allocation and 32 KiB to clear on every call, 9 % of a caller's time in a profile of 1000 x
// 2 KiB calls), or fresh ones where the path runs nested on the same thread (a call made from a
// continuation that an outer call runs). `Tag`: one per path.
template <typename Tag, std::size_t N = 1>
class thread_pointer_sets {
 public:
  thread_pointer_sets() : nested_(in_use()) { in_use() = true; }
  ~thread_pointer_sets() {
    if (!nested_) in_use() = false;
  }
  thread_pointer_sets(const thread_pointer_sets&) = delete;
  thread_pointer_sets& operator=(const thread_pointer_sets&) = delete;
  pointer_set& operator[](std::size_t i) { return nested_ ? own_[i] : kept()[i]; }

 private:
  static bool& in_use() {
    thread_local bool used = false;
    return used;
  }
  static std::array<pointer_set, N>& kept() {
    thread_local std::array<pointer_set, N> sets;
    return sets;
  }
  bool nested_;
  std::array<pointer_set, N> own_;  // (empty, no table, unless nested)
};

}  // namespace atomr
