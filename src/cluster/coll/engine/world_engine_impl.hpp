// The world engine's pieces shared by its files (world_engine.cpp, world_plan.cpp,
// world_issue.cpp, world_bulk.cpp, world_complete.cpp, world_submit.cpp, world_failure.cpp): what
// ranks offer and merge when they agree on a plan, the exchange that carries it, and the
// engine's pacing constants, and the hook through which waiting callers help it. Private to
// src/cluster.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "atomr/cluster/engine/world_engine.hpp"
#include "atomr/cluster/mpi/host_allreduce.hpp"

namespace atomr::cluster {
namespace engine_detail {

using detail::clock;
using detail::coll_request;

// What ranks compare before a request, when checking or packing: 32 bytes each.
struct signature {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int32_t root = 0;
  std::uint8_t kind = 0;
  std::uint8_t type = 0;
  std::uint8_t op = 0;
  std::uint8_t sorts = 0;         // what the offers were of (k_offer_*), every rank's or-ed together
  std::int32_t offered = 0;       // how many packable requests from this one the rank plans for
  std::int32_t offered_most = 0;  // in a merged plan: the longest offer (offered is the shortest)
};
static_assert(sizeof(signature) == 32);

// signature::sorts: an offer of queued requests (per-request groups, calls of one request), or of a
// bulk call (a submit_group call of many small all_reduces, see start_bulk). Or-ed across ranks,
// both at once is ranks that made one call differently: their batches would not match.
inline constexpr std::uint8_t k_offer_requests = 1;
inline constexpr std::uint8_t k_offer_bulk = 2;
inline constexpr const char* k_mixed_rule =
    " (a call of more than 128 small all_reduces is made with submit_group on every rank, or on none: "
    "see the README's \"Bulk calls\")";
static_assert(world_engine::k_submit_part == 128, "k_mixed_rule says 128");

// Packing needs every rank to batch the same requests, and what is queued differs between ranks
// at any moment, so ranks agree on a plan: each offers the packable all_reduces it has queued
// (up to this many) and where it would start a new batch; the plan covers the shortest offer and
// starts a batch wherever any rank would. One exchange then serves many batches, and a stream
// of requests that cannot pack (one buffer used again and again) costs one exchange per queue,
// not one per request.
inline constexpr std::size_t k_plan_most = 1024;
static_assert(k_plan_most == detail::call_plan::k_most);

// At most this many requests issued in a row share one completion event (see seal()).
inline constexpr std::size_t k_seal_most = 64;

struct offer {
  signature head;
  std::uint8_t cuts[k_plan_most / 8] = {};  // bit i: request i starts a new batch
};

// Merging offers is a reduction (the shortest offer, the longest, and every rank's cuts), so the
// ranks agree with one all_reduce of 160 bytes, log P rounds, rather than an all-gather of every
// rank's offer (160 bytes x P, every plan). Check mode still gathers: it names the rank that differs.
inline void merge_offers(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const offer*>(in);
  auto* b = static_cast<offer*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i].head.offered = std::min(a[i].head.offered, b[i].head.offered);
    b[i].head.offered_most = std::max(a[i].head.offered_most, b[i].head.offered_most);
    b[i].head.sorts = static_cast<std::uint8_t>(b[i].head.sorts | a[i].head.sorts);
    for (std::size_t c = 0; c < sizeof(a[i].cuts); ++c)
      b[i].cuts[c] = static_cast<std::uint8_t>(b[i].cuts[c] | a[i].cuts[c]);
  }
}

// The MPI type and operation for merge_offers, made once per process (and left to MPI_Finalize).
struct offer_reduction {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};
inline const offer_reduction& plan_reduction() {
  static const offer_reduction r = [] {
    offer_reduction out;
    if (MPI_Type_contiguous(sizeof(offer), MPI_BYTE, &out.type) != MPI_SUCCESS ||
        MPI_Type_commit(&out.type) != MPI_SUCCESS || MPI_Op_create(&merge_offers, 1, &out.op) != MPI_SUCCESS) {
      out = {};
    }
    return out;
  }();
  return r;
}

inline bool bit(const std::uint8_t* bits, std::size_t i) { return (bits[i / 8] >> (i % 8)) & 1U; }
inline void set_bit(std::uint8_t* bits, std::size_t i) {
  bits[i / 8] = static_cast<std::uint8_t>(bits[i / 8] | 1U << (i % 8));
}

inline bool reduces(coll_kind k) {
  return k == coll_kind::all_reduce || k == coll_kind::reduce || k == coll_kind::reduce_scatter;
}

inline std::string describe(const signature& s) {
  std::string out = std::string(to_string(static_cast<coll_kind>(s.kind))) + " #" + std::to_string(s.seq) + " of " +
                    std::to_string(s.count) + " x " + std::string(local::to_string(static_cast<local::dtype>(s.type)));
  if (reduces(static_cast<coll_kind>(s.kind))) out += " (" + std::string(to_string(static_cast<reduce_op>(s.op))) + ")";
  const auto k = static_cast<coll_kind>(s.kind);
  if (k == coll_kind::broadcast || k == coll_kind::reduce) out += " root " + std::to_string(s.root);
  return out;
}

inline bool same_request(const signature& a, const signature& b) {
  return a.seq == b.seq && a.count == b.count && a.kind == b.kind && a.type == b.type &&
         (!reduces(static_cast<coll_kind>(a.kind)) || a.op == b.op) &&
         (static_cast<coll_kind>(a.kind) == coll_kind::send || static_cast<coll_kind>(a.kind) == coll_kind::recv ||
          a.root == b.root);
}

// Send and recv pair up by rank, so their signatures legitimately differ; compare the rest.
inline bool point_to_point(const signature& s) {
  const auto k = static_cast<coll_kind>(s.kind);
  return k == coll_kind::send || k == coll_kind::recv;
}

// The plan exchanges' messages on the control communicator: each exchange in flight has tags
// of its own (host_allreduce::k_tag_span), taken in turn from k_plan_slots (exchanges are posted
// in the same order on every rank; far fewer than that are ever in flight at once).
inline constexpr int k_plan_tag = 0x500000;
inline constexpr std::uint64_t k_plan_slots = 1024;

}  // namespace engine_detail

struct world_engine::exchange {
  engine_detail::offer mine;
  engine_detail::offer merged;            // the plan: every rank's offer merged (merge_offers)
  std::vector<engine_detail::offer> all;  // check mode: every rank's offer, to name the one that differs
  std::size_t batch = 1;                  // check mode, a head that does not pack: the batch it heads
  MPI_Request request = MPI_REQUEST_NULL;
  // The merge by point-to-point recursive doubling (not in check mode). Open MPI's MPI_Iallreduce
  // of the offer takes 50-175 us back to back on two H100s joined by NV18 NVLink, with both ranks
  // posted and polling, while the GPUs run dry; host_allreduce is what the graph votes use.
  std::unique_ptr<detail::host_allreduce> reduction;
  bool finished = false;
  std::uint64_t call = 0;  // this rank offered the plan of this per-request group (call_plan)
};

// Held by the futures of this world's requests; forwards to the engine while it lives.
class world_engine::assist_hook final : public local::progress_hook {
 public:
  explicit assist_hook(world_engine* e) : engine_(e) {}
  // The last sequence number through which every request finished with success (see resolving_).
  // (On a line of its own: every waiter reads it while the progress thread writes it.)
  alignas(64) std::atomic<std::uint64_t> done_through{0};
  void progress() noexcept override {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (lock.owns_lock() && engine_ != nullptr) engine_->assist();
  }
  // The engine is going: later calls do nothing (waits for a call under way).
  void detach() {
    std::lock_guard lock(mutex_);
    engine_ = nullptr;
  }

 private:
  std::mutex mutex_;
  world_engine* engine_;
};

// (Here, inline: the seal asks it for every buffer it publishes.)
inline std::size_t world_engine::member_of(const local::buffer_block& b) const {
  if (members_.size() == 1) return 0;  // make_request checked the device
  const auto s = b.state.lock();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].state() == s) return i;
  }
  return 0;
}

}  // namespace atomr::cluster
