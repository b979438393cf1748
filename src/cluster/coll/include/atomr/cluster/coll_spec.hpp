// What a collective is, as the world's facade and its engine both see it: the world's options, a
// request's spec, a prepared group call and the world's counters. world.hpp is the API; this
// header is the part the engine and the backends need without depending on the facade.
#pragma once

#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atomr/cluster/collective.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr::cluster {

using local::future;
using local::promise;

enum class world_backend { nccl, host };
std::string_view to_string(world_backend b);

struct world_options {
  // Default: nccl when the members are CUDA devices, host when they are host devices.
  std::optional<world_backend> backend{};
  std::chrono::milliseconds init_timeout{60'000};  // ATOMR_COLL_INIT_TIMEOUT_MS
  std::chrono::milliseconds op_timeout{120'000};   // ATOMR_COLL_TIMEOUT_MS: per request
  // Exchange each request's signature (op, type, count, root) across ranks before issuing it, and
  // fail with the first mismatch by rank instead of hanging (a packed or grouped batch is
  // compared by its first request). ATOMR_COLL_CHECK=1.
  bool check = false;
  // All_reduces of at most this many bytes may be packed together; 0 turns packing off.
  std::size_t pack_limit = 64 * 1024;    // ATOMR_COLL_PACK_BYTES
  std::size_t seal_bytes = 1 << 20;      // ATOMR_COLL_SEAL_BYTES
  std::size_t pack_capacity = 16 << 20;  // at most this many bytes in one packed all_reduce
  // A long per-request group of small all_reduces is planned whole (one exchange) in packed batches
  // of this many requests. ATOMR_COLL_CALL_BATCH.
  std::size_t call_batch = 256;
  // Where the backend replays CUDA graphs: a packed batch repeated on the same buffers is voted
  // on and replayed as one graph (its gather, all_reduce and scatter). A graph holds its buffers'
  // memory for as long as it is kept: turn it off (ATOMR_COLL_PACK_GRAPHS=0) where a program
  // frees and remakes its small buffers every step and device memory is tight. The same on every
  // rank (the ranks vote on the same batches).
  bool pack_graphs = true;
  // A submit_group call of more than 128 small all_reduces (up to pack_limit bytes each) goes
  // through the engine as one request per 1024 of them, rather than one per all_reduce
  // (detail::bulk_call). Not an environment switch: the per-request path is the one shorter calls
  // take, and tests turn this off to check that both give the same results. The same on every rank.
  bool bulk = true;
  // A bulk-shaped submit_group call (see `bulk`) made twice lately with the same specs (kind,
  // type, reduction, root, count, buffers) is prepared on the second and kept (at most 4), and
  // later calls that match it are submitted as that prepared call (see group_call): the caller's
  // specs are only compared and dropped. A kept call holds its buffers until it has gone 1 s
  // unsubmitted: turn it off (ATOMR_COLL_GROUP_CACHE=0) where that memory matters more than the
  // saving, or prepare the call yourself (prepare_group). Need not be the same on every rank (a
  // prepared call meets the same submit_group call).
  bool group_cache = true;

  // The defaults, with the ATOMR_COLL_* variables applied (a malformed one is an error).
  static result<world_options> from_environment();
};

struct coll_params {
  reduce_op op = reduce_op::sum;
  int root = 0;           // broadcast/reduce: the root; send/recv: the peer (member i uses peer + i)
  std::size_t count = 0;  // elements (per rank where the op splits); 0: derived from the buffers
};

// What a request is, as seen by error messages and the consistency check.
struct coll_spec {
  coll_kind kind = coll_kind::barrier;
  local::dtype type = local::dtype::u8;
  coll_params params{};
  // One send and one recv block per local member (the same block when in place; empty for
  // barrier, send has no recv, recv has no send). (Held inline for up to two members: two heap
  // lists were two allocations and frees on every collective's path.)
  using blocks = boost::container::small_vector<std::shared_ptr<local::buffer_block>, 2>;
  blocks send{};
  blocks recv{};
};

// Specs for submit_group(each_request), submit_group and prepare_group, each buffer's reference taken once. (A
// braced list, `{..., {b.block()}, {b.block()}}`, copies each reference into the list and again
// into the spec, then drops the list's: three atomic operations per buffer where one does. In a
// call of 1000 x 2 KiB all_reduces that is about 30 us of the caller's 93 on the host backend.)
// An empty gpu_ref is kept as an empty block, which
// the world refuses by name, as it refuses an empty ref passed to its calls.
template <local::device_element T>
coll_spec spec_of(coll_kind kind, std::span<const local::gpu_ref<T>> send, std::span<const local::gpu_ref<T>> recv,
                  coll_params params = {}) {
  coll_spec spec{kind, local::dtype_of<T>::value, params, {}, {}};
  spec.send.reserve(send.size());
  spec.recv.reserve(recv.size());
  for (const auto& s : send) spec.send.push_back(s.block());
  for (const auto& r : recv) spec.recv.push_back(r.block());
  return spec;
}
// One local member's buffers (send or recv may be an empty gpu_ref where the kind has none).
template <local::device_element T>
coll_spec spec_of(coll_kind kind, const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv,
                  coll_params params = {}) {
  return spec_of<T>(kind, std::span(&send, 1), std::span(&recv, 1), params);
}
// An all_reduce of one local member, in place.
template <local::device_element T>
coll_spec all_reduce_spec(const local::gpu_ref<T>& buffer, reduce_op op = reduce_op::sum) {
  return spec_of<T>(coll_kind::all_reduce, buffer, buffer, {op, 0, 0});
}

// Asks world::submit_group for a future per request rather than one for the group.
struct each_request_t {
  explicit each_request_t() = default;
};
inline constexpr each_request_t each_request{};

class world_engine;
namespace detail {
struct coll_request;
struct call_plan;
struct bulk_call;
class group_cache;
}  // namespace detail

// A submit_group call made once and submitted again and again, as a training step's gradient
// buckets are (what MPI_Allreduce_init is to MPI_Allreduce): world::prepare_group checks its specs
// and makes its bulk calls once, and each world::submit_prepared(call) takes its buffers' write
// tickets, checks that their devices still hold them, and hands the bulk calls over: no specs to
// make, check, move or free per step. It holds its buffers until it is destroyed. A call that
// does not go as bulk calls (128 all_reduces or fewer, other collectives, or bulk calls off)
// keeps its specs and submits a copy of them, as submit_group does. Submitted again before the
// last submission finished, it submits a copy of its specs too. Only for the world that made it.
class group_call {
 public:
  group_call() = default;
  std::size_t size() const noexcept { return size_; }  // the collectives of the call
  bool bulk() const noexcept { return !bulks_.empty(); }

 private:
  friend class world;
  std::weak_ptr<const world_engine> engine_;
  std::size_t size_ = 0;
  std::vector<coll_spec> specs_;                           // (not as bulk calls)
  std::vector<std::shared_ptr<detail::bulk_call>> bulks_;  // (as bulk calls)
};

// What a world has done so far (world::stats).
struct world_stats {
  std::uint64_t requests = 0;  // requests completed
  std::uint64_t issues = 0;    // backend calls made for them (a packed or grouped batch counts once)
  std::uint64_t packed = 0;    // requests that went in a packed group
  std::uint64_t grouped = 0;   // collectives issued in one NCCL group with others (submit_group(each_request))
  // Plans the ranks agreed on with an exchange (packing, and every batch in check mode): one
  // covers up to 1024 queued requests.
  std::uint64_t agreements = 0;
  // Requests a waiting caller saw finish itself (ATOMR_WAIT_ASSIST), not the progress thread.
  std::uint64_t assisted = 0;
  // CUDA graphs (NCCL, ATOMR_NCCL_GRAPHS): votes the ranks held (one decides a run of up to 32
  // queued requests), graphs captured (of one request, or of a chain of 8 back to back), and
  // requests launched from a graph captured earlier (each request of a chain counts).
  std::uint64_t graph_votes = 0;
  // Of those, the ones that went through the ranks' shared memory (every rank on one node,
  // ATOMR_COLL_VOTE_SHM), not by MPI messages.
  std::uint64_t graph_votes_shared_memory = 0;
  std::uint64_t graph_captures = 0;
  std::uint64_t graph_launches = 0;
  // Requests that went in a chain's graph (captured or launched).
  std::uint64_t graph_chained = 0;
  // Host backend, every rank on one node: all_reduces (a packed batch counting once) reduced
  // through the ranks' shared memory rather than by MPI (ATOMR_HOST_SHM_BYTES).
  std::uint64_t shared_memory = 0;
  // Of those, the ones that read the ranks' inputs and wrote their outputs where they are,
  // without copies through the ring (host buffers from the shared arena: ATOMR_HOST_ARENA_MOST).
  std::uint64_t shared_memory_direct = 0;
  // submit_group calls submitted as a kept prepared call (world_options::group_cache); of them,
  // submit_group calls of buffers found by their buffers (no specs made).
  std::uint64_t group_repeats = 0;
  std::uint64_t group_repeats_by_buffers = 0;
  // The most finished requests held unfreed at once (each holds its buffers): the engine frees
  // them between its turns, and keeps at most 1024 of them even where the callers never leave
  // it idle (plus what one turn finishes).
  std::uint64_t most_unfreed = 0;
};

}  // namespace atomr::cluster
