// Repeated submit_group calls kept as prepared calls (world_options::group_cache).
//
// A program that makes the same submit_group call step after step (its gradient buckets, on the
// same buffers) pays, per call, for specs it makes and the engine checks, marks, moves into
// entries and frees. A prepared call (world::prepare_group) pays for none of that, but the
// program has to make it. This cache makes it for the program: a bulk-shaped call (more than 128
// small all_reduces) seen twice lately, spec for spec the same (kind, type, reduction, root,
// count and every buffer), is prepared on its second sighting and kept, and later calls that
// match it are submitted as that prepared call. The program's specs are then only compared and
// dropped, on its own thread: the engine's threads never take or drop those references, so each
// buffer's reference count stays on the caller's core (a line takes 150-240 ns a round trip
// between most pairs of the 32 vCPUs of a KVM guest with two H200s, and making 1000 specs whose
// counts the progress thread had dropped is about 69 us of a submit_group call's 235 on an H200
// with 16 vCPUs).
//
// A kept call holds its buffers, so no other allocation can take their addresses while it is kept
// (a match by address is a match by buffer). It lets go of them once it has not been submitted
// for k_keep: the progress thread looks every 100 ms, and every submit_group call looks too.
// Calls seen once are remembered by their keys only (they hold nothing): a freed buffer's address
// taken by a new one can make a call look repeated, which only prepares it from its own specs.
//
// Threading: any thread (the callers, the progress thread's expiry); one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "atomr/cluster/coll_spec.hpp"

namespace atomr::cluster::detail {

// A call's specs as words: per spec its kind, type and reduction in one, its root and count, then
// its send and recv buffers' addresses (each list led by its length).
using group_key = std::vector<std::uint64_t>;
group_key key_of(const std::vector<coll_spec>& specs);
// Whether `specs` are the call `key` was made of (without making their key).
bool matches(const std::vector<coll_spec>& specs, const group_key& key);
// Whether `key` is of in-place all_reduces of `blocks` (all_reduce_spec(b, op) of each, in order).
bool matches_in_place(local::dtype type, reduce_op op, std::span<const local::buffer_block* const> blocks,
                      const group_key& key);

class group_cache {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t k_calls_most = 4;  // prepared calls kept; the least recently used goes
  static constexpr std::size_t k_seen_most = 4;   // keys of calls seen once
  static constexpr std::chrono::seconds k_keep{1};
  // Longer calls are neither remembered nor kept: a key is 7 words a spec, and the 4 remembered
  // keys of calls of a million all_reduces would hold over 200 MB.
  static constexpr std::size_t k_specs_most = std::size_t{1} << 16;

  group_cache() = default;
  group_cache(const group_cache&) = delete;
  group_cache& operator=(const group_cache&) = delete;

  // The kept call `specs` repeat, if any (marked as submitted now).
  std::shared_ptr<const group_call> find(const std::vector<coll_spec>& specs, clock::time_point now);
  // The kept call of in-place all_reduces of `blocks`, if any (marked as submitted now).
  std::shared_ptr<const group_call> find_in_place(local::dtype type, reduce_op op,
                                                  std::span<const local::buffer_block* const> blocks,
                                                  clock::time_point now);
  // For a call find() did not know: its key if it repeats a call seen lately (keep() its prepared
  // call then); otherwise it is remembered (unless longer than k_specs_most) and nothing is
  // returned.
  std::optional<group_key> repeated(const std::vector<coll_spec>& specs);
  void keep(group_key key, std::shared_ptr<const group_call> call, clock::time_point now);
  // Lets go of `call` (its submission failed: the usual path says why).
  void forget(const group_call* call);
  // Lets go of the calls not submitted since `now - k_keep`. Skipped (0) while another thread
  // holds the cache. Gives how many went.
  std::size_t expire(clock::time_point now);
  std::size_t kept() const;
  std::uint64_t repeats() const { return repeats_.load(std::memory_order_relaxed); }
  std::uint64_t repeats_by_buffers() const { return by_buffers_.load(std::memory_order_relaxed); }
  void count_repeat(bool by_buffers) {
    repeats_.fetch_add(1, std::memory_order_relaxed);
    if (by_buffers) by_buffers_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  struct kept_call {
    group_key key;
    std::size_t specs = 0;  // (of the key: a call of another length is passed over at once)
    std::shared_ptr<const group_call> call;
    clock::time_point used;
  };
  // The kept call of `specs` specs whose key `match` accepts (marked as submitted now).
  template <class Match>
  std::shared_ptr<const group_call> find_kept(std::size_t specs, Match&& match, clock::time_point now);
  mutable std::mutex mutex_;
  std::vector<kept_call> calls_;
  std::deque<group_key> seen_;
  std::atomic<std::uint64_t> repeats_{0};
  std::atomic<std::uint64_t> by_buffers_{0};
};

}  // namespace atomr::cluster::detail
