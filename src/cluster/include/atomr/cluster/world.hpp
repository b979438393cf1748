// world: the collectives of a group of ranks over one communicator. Each rank takes part with one
// or several local devices ("members"); every member is one rank of the collective, numbered
// rank by rank, then by member. Two backends share this API:
//   nccl  CUDA devices; ncclCommInitRankConfig per member (nonblocking, inside one group), the
//         ncclUniqueId broadcast over MPI from rank 0.
//   host  host-kind devices; nonblocking MPI collectives. Used where no GPU is visible or when
//         asked, and by CI.
//
// Every call validates its buffers first (stale, wrong device, sizes) and fails at once with
// invalid_argument or stale_ref. Accepted requests are issued by the world's progress thread in
// the order they were made; all ranks must make them in the same order. An operation waits, on
// the device, for the last write to each buffer it reads or writes, and records its own write;
// its future resolves when the device (or MPI) has finished. Do not write a buffer that a pending
// collective reads: wait for its future first.
//
// Coalescing: small all_reduces (with the same type and reduction, not touching each other's
// buffers) that are pending together are packed into one buffer, reduced once and unpacked. The
// ranks agree on a plan for up to 1024 queued all_reduces with one small MPI exchange, so the
// packing never differs between ranks; requests that cannot be packed (larger ones, other kinds)
// need no exchange. A submit_all call of more than 128 small all_reduces is planned whole by its
// caller, and that plan is what the ranks agree on, once for the call. Grouping: the other
// collectives of one submit_all call (all_reduce, broadcast, reduce, all_gather, reduce_scatter;
// not touching each other's buffers) go in one NCCL group, one aggregated launch; every rank
// makes the same call, so no exchange is needed for that.
//
// Watchdog: every request has a deadline. When one passes, or NCCL reports an asynchronous error,
// the communicator is aborted and every pending request fails with an error naming the
// operation, its sequence number, its size and the ranks involved; later calls fail at once with
// the same error. Create a new world (on all ranks) to go on. A device context rebuild makes the
// world fail the same way, so that all ranks rebuild it together.
#pragma once

#include <mpi.h>

#include <boost/container/small_vector.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "atomr/cluster/collective.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr {
class pointer_set;
}  // namespace atomr

namespace atomr::cluster {

using local::future;
using local::promise;

enum class world_backend { nccl, host };
std::string_view to_string(world_backend b);

// A gone world's NCCL communicators are destroyed on a thread of their own, because NCCL's
// ncclCommDestroy waits out a 500 ms poll of its own service thread: letting a world go returns at
// once. This returns once every communicator of the worlds already gone is destroyed and its
// memory freed (the process also waits for them at exit). Nothing to wait for without NCCL.
void wait_for_retired_communicators();

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
  // A long submit_all call of small all_reduces is planned whole (one exchange) in packed batches
  // of this many requests. ATOMR_COLL_CALL_BATCH.
  std::size_t call_batch = 256;
  // Where the backend replays CUDA graphs: a packed batch repeated on the same buffers is voted
  // on and replayed as one graph (its gather, all_reduce and scatter). ATOMR_COLL_PACK_GRAPHS; the
  // same on every rank (the ranks vote on the same batches).
  bool pack_graphs = true;
  // A submit_all or submit_group call of more than 128 small all_reduces (up to pack_limit
  // bytes each) goes through the engine as one request per 1024 of them, rather than one per
  // all_reduce (detail::bulk_call). ATOMR_COLL_BULK; the same on every rank.
  bool bulk = true;
  // A bulk-shaped submit_group call (see `bulk`) made twice lately with the same specs (kind,
  // type, reduction, root, count, buffers) is prepared on the second and kept (at most 4), and
  // later calls that match it are submitted as that prepared call (see group_call): the caller's
  // specs are only compared and dropped. A kept call holds its buffers until it has gone 1 s
  // unsubmitted. ATOMR_COLL_GROUP_CACHE; need not be the same on every rank (a prepared call
  // meets the same submit_group call).
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

// Specs for submit_all, submit_group and prepare_group, each buffer's reference taken once. (A
// braced list, `{..., {b.block()}, {b.block()}}`, copies each reference into the list and again
// into the spec, then drops the list's: three atomic operations per buffer where one does. In a
// call of 1000 x 2 KiB all_reduces that was about 30 us of the caller's 93 on the host backend:
// docs/benchmarks.md, thirty-fourth session.) An empty gpu_ref is kept as an empty block, which
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

class world {
 public:
  // Collective over `comm` (every rank calls it, with the same backend). `members` are this
  // rank's devices, all of one kind; the world keeps its own duplicate of `comm`. Fails on every
  // rank, naming the ranks that failed, if any rank fails or does not arrive within init_timeout.
  static result<std::unique_ptr<world>> create(MPI_Comm comm, std::vector<local::device> members,
                                               world_options options);
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  world_backend backend() const noexcept;
  int size() const noexcept;               // members in all ranks
  int rank(std::size_t member = 0) const;  // the collective rank of a local member
  std::size_t local_members() const noexcept;
  const world_options& options() const noexcept;
  // The error that failed the world (deadline, NCCL error, device rebuild), if any.
  std::optional<error> failure() const;

  // A sub-world of the members of the ranks that pass the same color, ordered by key
  // (ncclCommSplit / MPI_Comm_split). Collective over this world; waits for pending requests.
  result<std::unique_ptr<world>> split(int color, int key);

  // After ranks failed (ATOMR_ON_FAILURE=continue, liveness.hpp): a new world of this world's
  // living ranks, with the same local devices and options, ranks renumbered in their old order.
  // `failed` are ranks of MPI_COMM_WORLD, as liveness names them; empty means every rank liveness
  // has declared failed so far. Collective over the living ranks only: every survivor calls it
  // with the same set. This world fails (its pending requests end with an error) and stays
  // failed. The new communicator comes from MPI_Comm_create_group, which only the members of the
  // new group take part in (MPI_Comm_split would wait for the dead rank too). The NCCL backend
  // makes the survivors' communicator out of the old one with ncclCommShrink (NCCL_SHRINK_ABORT,
  // which first ends the old one's unfinished work) where NCCL has it (2.27 and up) and every
  // rank has one GPU: under ATOMR_ON_FAILURE=continue a failed NCCL world keeps its communicator
  // for that (its unfinished work stays on the GPU, so keep the buffers of failed requests until
  // the shrink or the world's end, which aborts it). Otherwise the survivors create a fresh
  // communicator. Fails with invalid_argument if no rank of this world failed, or if this rank is
  // among `failed`.
  result<std::unique_ptr<world>> shrink(std::vector<int> failed = {});

  // One buffer per local member.
  template <local::device_element T>
  future<void> collective(coll_kind kind, std::span<const local::gpu_ref<T>> send,
                          std::span<const local::gpu_ref<T>> recv, coll_params params = {}) const;

  // One local member.
  template <local::device_element T>
  future<void> all_reduce(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv, reduce_op op = reduce_op::sum,
                          std::size_t count = 0) const {
    return one(coll_kind::all_reduce, send, recv, {op, 0, count});
  }
  template <local::device_element T>
  future<void> all_reduce(const local::gpu_ref<T>& buffer, reduce_op op = reduce_op::sum) const {
    return one(coll_kind::all_reduce, buffer, buffer, {op, 0, 0});
  }
  template <local::device_element T>
  future<void> broadcast(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv, int root,
                         std::size_t count = 0) const {
    return one(coll_kind::broadcast, send, recv, {reduce_op::sum, root, count});
  }
  template <local::device_element T>
  future<void> broadcast(const local::gpu_ref<T>& buffer, int root) const {
    return one(coll_kind::broadcast, buffer, buffer, {reduce_op::sum, root, 0});
  }
  template <local::device_element T>
  future<void> reduce(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv, reduce_op op, int root,
                      std::size_t count = 0) const {
    return one(coll_kind::reduce, send, recv, {op, root, count});
  }
  // recv holds size() * count elements: member r's send lands at r * count.
  template <local::device_element T>
  future<void> all_gather(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv, std::size_t count = 0) const {
    return one(coll_kind::all_gather, send, recv, {reduce_op::sum, 0, count});
  }
  // send holds size() * count elements; member r gets the reduction of block r.
  template <local::device_element T>
  future<void> reduce_scatter(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv,
                              reduce_op op = reduce_op::sum, std::size_t count = 0) const {
    return one(coll_kind::reduce_scatter, send, recv, {op, 0, count});
  }
  // Both hold size() * count elements; block p of send goes to member p, landing at block r.
  template <local::device_element T>
  future<void> all_to_all(const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv, std::size_t count = 0) const {
    return one(coll_kind::all_to_all, send, recv, {reduce_op::sum, 0, count});
  }
  template <local::device_element T>
  future<void> send(const local::gpu_ref<T>& buffer, int peer, std::size_t count = 0) const {
    return one(coll_kind::send, buffer, {}, {reduce_op::sum, peer, count});
  }
  template <local::device_element T>
  future<void> recv(const local::gpu_ref<T>& buffer, int peer, std::size_t count = 0) const {
    return one(coll_kind::recv, {}, buffer, {reduce_op::sum, peer, count});
  }
  future<void> barrier() const;

  // The type-erased entry every call above goes through. (Taken by reference: the spec is moved
  // once, into the request.)
  future<void> submit(coll_spec&& spec) const;
  future<void> submit(const coll_spec& spec) const { return submit(coll_spec(spec)); }
  // Submits several requests at once, in order: the progress thread sees them together, so
  // small all_reduces among them are packed (when the other ranks also have them pending) and the
  // other collectives among them go in one NCCL group. Every rank must make the same call.
  std::vector<future<void>> submit_all(std::vector<coll_spec> specs) const;
  // submit_all with one future for the whole call (as NCCL's group, or a coalesced all_reduce of
  // a step's gradient buckets): it succeeds once every request has, and fails if any fails (with
  // the first failure's cause). The call is checked whole first: a bad request fails the future
  // and nothing is submitted. Cheaper than submit_all by a future per request, which the caller
  // makes and the progress thread settles: the way to hand over many small collectives when
  // only their end matters. Every rank must make the same call (submit_all on one rank and
  // submit_group on another, with the same specs, also match, but for bulk calls). A call of more
  // than 128 small all_reduces that all pack goes as bulk calls (world_options::bulk): one request
  // per 256 of them, which meets only the same submit_group call on the other ranks.
  future<void> submit_group(std::vector<coll_spec> specs) const;
  // A submit_group call made once (see group_call); a bad spec is refused here, naming it, as
  // submit_group names it.
  result<group_call> prepare_group(std::vector<coll_spec> specs) const;
  // Submits a prepared call; every rank must submit the same call (or make it with submit_group).
  future<void> submit_prepared(const group_call& call) const;
  // Sums (or `op`s) every buffer in place, as one submit_group call of all_reduce_spec(b, op) per
  // buffer, and meets such a call (or its prepared call) on the other ranks. Where it repeats a
  // kept call (world_options::group_cache) it is compared by the buffers themselves and submitted
  // as that call: no spec is made, and no buffer's reference is taken or dropped.
  template <local::device_element T>
  future<void> all_reduce_group(std::span<const local::gpu_ref<T>> buffers, reduce_op op = reduce_op::sum) const;

  struct stats_snapshot {
    std::uint64_t requests = 0;  // requests completed
    std::uint64_t issues = 0;    // backend calls made for them (a packed or grouped batch counts once)
    std::uint64_t packed = 0;    // requests that went in a packed group
    std::uint64_t grouped = 0;   // collectives issued in one NCCL group with others (submit_all)
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
    // all_reduce_group calls found by their buffers (no specs made).
    std::uint64_t group_repeats = 0;
    std::uint64_t group_repeats_by_buffers = 0;
    // The most finished requests held unfreed at once (each holds its buffers): the engine frees
    // them between its turns, and keeps at most 1024 of them even where the callers never leave
    // it idle (plus what one turn finishes).
    std::uint64_t most_unfreed = 0;
  };
  stats_snapshot stats() const;

 private:
  explicit world(std::shared_ptr<world_engine> engine);
  result<std::unique_ptr<world>> shrink_backend(MPI_Comm next, const std::vector<int>& left_out,
                                                std::chrono::steady_clock::time_point deadline);
  // `checked`: the count checked_count gave for this spec a moment ago (a planned call's), or 0.
  // `with_future`: false for a submit_group call's requests but its last.
  result<std::unique_ptr<detail::coll_request>> make_request(coll_spec&& spec, std::size_t checked = 0,
                                                             bool with_future = true) const;
  // submit_all's and submit_group's body: makes and hands over the requests, putting the futures
  // they have in `out` (one per request; a group's, given `checked`, holds every count: one).
  void submit_call(std::vector<coll_spec>&& specs, std::vector<std::size_t> checked,
                   std::vector<std::optional<future<void>>>& out) const;
  // Clears the buffer lists `spec`'s kind does not use (a recv's send, a send's recv).
  static void trim_unused(coll_spec& spec);
  // The elements per rank `spec` names, once its buffers and arguments are checked (make_request
  // trims the lists a kind does not use first).
  result<std::size_t> checked_count(const coll_spec& spec) const;
  // A long submit_all call's plan (call_plan.cpp): null where its first part is not small
  // all_reduces that pack. Marks the planned requests' buffers in `used` and gives their counts.
  // (`counted`: counts holds every spec's count already, checked.)
  std::unique_ptr<detail::call_plan> plan_call(const std::vector<coll_spec>& specs, pointer_set& used,
                                               std::vector<std::size_t>& counts, bool counted = false) const;
  // Marks the buffers `spec` uses in `used`; false if one of them was marked already (by an
  // earlier request of the same call).
  static bool mark_buffers(pointer_set& used, const coll_spec& spec);
  // Whether a call goes as bulk calls (detail::bulk_call, bulk_call.cpp): more than 128 small
  // all_reduces that pack, with bulk calls on. Decided by the calls' shapes alone, so the same
  // calls decide alike on every rank. Fills `counts` where it was empty (submit_all's call).
  bool bulk_shape(const std::vector<coll_spec>& specs, std::vector<std::size_t>& counts) const;
  // Makes the call's bulk calls (256 all_reduces at most each) and hands them over, putting the
  // futures in `out` as submit_call does.
  void submit_bulk(std::vector<coll_spec>&& specs, const std::vector<std::size_t>& counts, bool group,
                   std::vector<std::optional<future<void>>>& out) const;
  // A bulk call of specs[first, first + n), before its entries are made: its cuts, its bytes and
  // the buffers it writes and reads (bulk_call.cpp). Then fill_entries makes its entries (the
  // specs moved; `futures`: one per entry, for submit_all).
  void mark_bulk(detail::bulk_call& b, const std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts,
                 std::size_t first, std::size_t n, pointer_set& touched, pointer_set& written) const;
  static void fill_entries(detail::bulk_call& b, std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts,
                           std::size_t first, std::size_t n, bool futures);
  // The most entries of a run of bulk calls agreed on in one exchange (detail::bulk_call::
  // plan_length): 1024 where the world has other ranks, one bulk call's otherwise. The same on
  // every rank.
  std::size_t bulk_run_most() const;
  // Marks a run's bulk calls, run[j] covering specs[first + 256 j, ...) of the run's n: the
  // first one holds the run's cuts and length.
  void mark_run(std::span<const std::shared_ptr<detail::bulk_call>> run, const std::vector<coll_spec>& specs,
                const std::vector<std::size_t>& counts, std::size_t first, std::size_t n, pointer_set& touched,
                pointer_set& written) const;
  // The request that carries `b` once: one ticket per buffer (`with_future`: the call's future).
  static std::unique_ptr<detail::coll_request> carrier_of(std::shared_ptr<detail::bulk_call> b, bool with_future);
  // The checks submit_group makes, with its message: the counts of `specs`.
  result<std::vector<std::size_t>> checked_group(std::vector<coll_spec>& specs) const;
  // Makes `call`'s bulk calls of bulk-shaped `specs` (moved; `counts` checked), as submit_group
  // would make them.
  void make_bulks(group_call& call, std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts) const;
  // A bulk-shaped submit_group call, kept as a prepared call where it repeats (group_cache.hpp):
  // its future, or nullopt (submit it as usual).
  std::optional<future<void>> submit_kept(const std::vector<coll_spec>& specs) const;
  // all_reduce_group's: the kept call of in-place all_reduces of `blocks`, submitted, if any.
  std::optional<future<void>> submit_kept_in_place(local::dtype type, reduce_op op,
                                                   std::span<const local::buffer_block* const> blocks) const;
  // The engine's kept calls, expired as of now, where a call of `specs` specs may be one (null
  // where the cache is off or the call too short for bulk calls).
  detail::group_cache* kept_calls(std::size_t specs) const;
  // A kept call found (or null: nullopt) handed over: its future, or nullopt where it could not
  // be (busy with its last submission, or refused: then it is let go of).
  std::optional<future<void>> hand_over_kept(detail::group_cache& cache, const std::shared_ptr<const group_call>& call,
                                             bool by_buffers = false) const;
  std::optional<future<void>> keep_repeated(std::vector<coll_spec>& specs, std::vector<std::size_t>& counts) const;
  // A prepared call's bulk calls handed over (bulk_call.cpp); nullopt where its last submission
  // is not done yet (nothing was handed over).
  result<std::optional<future<void>>> hand_over_prepared(const group_call& call) const;
  template <local::device_element T>
  future<void> one(coll_kind kind, const local::gpu_ref<T>& send, const local::gpu_ref<T>& recv,
                   coll_params params) const {
    return collective<T>(kind, std::span(&send, 1), std::span(&recv, 1), params);
  }

  std::shared_ptr<world_engine> engine_;
};

template <local::device_element T>
future<void> world::all_reduce_group(std::span<const local::gpu_ref<T>> buffers, reduce_op op) const {
  {
    // (The blocks' addresses only: nothing is taken from them unless the call is made afresh.)
    std::vector<const local::buffer_block*> blocks;
    blocks.reserve(buffers.size());
    for (const auto& b : buffers) blocks.push_back(b.block().get());
    if (auto f = submit_kept_in_place(local::dtype_of<T>::value, op, blocks)) return std::move(*f);
  }
  std::vector<coll_spec> specs;
  specs.reserve(buffers.size());
  for (const auto& b : buffers) specs.push_back(all_reduce_spec(b, op));
  return submit_group(std::move(specs));
}

template <local::device_element T>
future<void> world::collective(coll_kind kind, std::span<const local::gpu_ref<T>> send,
                               std::span<const local::gpu_ref<T>> recv, coll_params params) const {
  return submit(spec_of<T>(kind, send, recv, params));
}

}  // namespace atomr::cluster
