// The pace of CUDA graph votes per request shape: a shape whose votes keep launching nothing
// (buffers that never repeat) skips its votes for a while, longer each time, so that it pays for
// no vote. Changed only by what every rank sees alike (the votes' outcomes, in order), so every
// rank skips the same votes. Owned by the issuing side of a world_engine.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>

#include "atomr/cluster/coll_spec.hpp"

namespace atomr::cluster::detail {

class graph_pacer {
 public:
  // A request's kind, type and operation; its root; its count. A packed batch's shape is its
  // head's with the batch's length where the root would be.
  using shape = std::array<std::uint64_t, 3>;
  // Votes in a row that launched nothing before a shape skips votes, and the longest skip.
  static constexpr std::uint32_t k_cold = 16;
  static constexpr std::uint32_t k_backoff_first = 64;
  static constexpr std::uint32_t k_backoff_most = 4096;
  // Shapes whose pace is kept; more, and every pace starts over (on every rank alike).
  static constexpr std::size_t k_shapes_most = 4096;

  // The shape of a request of `spec` over `count` elements.
  static shape of(const coll_spec& spec, std::size_t count) {
    return {static_cast<std::uint64_t>(spec.kind) | static_cast<std::uint64_t>(spec.type) << 8 |
                static_cast<std::uint64_t>(spec.params.op) << 16,
            static_cast<std::uint64_t>(static_cast<std::uint32_t>(spec.params.root)), count};
  }
  // The shape of a packed batch of `n` requests headed by one of shape `head`. (Bit 40 keeps it
  // apart from any single request's.)
  static shape of_pack(shape head, std::size_t n) {
    head[1] = std::uint64_t{1} << 40 | n;
    return head;
  }
  // Whether this vote on `s` is skipped (a skip is used up).
  bool skips(const shape& s) {
    auto& p = pace_of(s);
    if (p.skip == 0) return false;
    --p.skip;
    return true;
  }
  // A vote on `s` took place: it launched a graph, or it was one more cold vote.
  void note(const shape& s, bool launched) {
    auto& p = pace_of(s);
    if (launched) {
      p.cold = 0;
      p.backoff = k_backoff_first;
    } else if (++p.cold >= k_cold) {
      p.cold = 0;
      p.skip = p.backoff;
      p.backoff = std::min(p.backoff * 2, k_backoff_most);
    }
  }
  std::size_t shapes() const { return paces_.size(); }

 private:
  struct pace {
    std::uint32_t cold = 0;  // votes in a row that launched nothing
    std::uint32_t skip = 0;  // votes left to skip
    std::uint32_t backoff = k_backoff_first;
  };
  pace& pace_of(const shape& s) {
    if (paces_.size() >= k_shapes_most && !paces_.contains(s)) paces_.clear();
    return paces_[s];
  }
  std::map<shape, pace> paces_;
};

}  // namespace atomr::cluster::detail
