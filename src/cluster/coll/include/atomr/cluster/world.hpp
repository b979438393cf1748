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
// need no exchange. A per-request group of more than 128 small all_reduces is planned whole by its
// caller, and that plan is what the ranks agree on, once for the call. Grouping: the other
// collectives of one per-request group (all_reduce, broadcast, reduce, all_gather, reduce_scatter;
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

#include "atomr/cluster/coll_spec.hpp"
#include "atomr/cluster/collective.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr {
class pointer_set;
}  // namespace atomr

namespace atomr::cluster {

using local::future;
using local::promise;

// A gone world's NCCL communicators are destroyed on a thread of their own, because NCCL's
// ncclCommDestroy waits out a 500 ms poll of its own service thread: letting a world go returns at
// once. This returns once every communicator of the worlds already gone is destroyed and its
// memory freed (the process also waits for them at exit). Nothing to wait for without NCCL.
void wait_for_retired_communicators();

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

  // Three ways to submit collectives, each for its use:
  //   one operation   submit(spec), and the typed calls above, which go through it;
  //   a group         submit_group(specs): submitted together, one future for the group (or one
  //                   per request, with each_request);
  //   a prepared call prepare_group(specs) once, then submit_prepared(call) again and again (what
  //                   MPI_Allreduce_init is to MPI_Allreduce).
  // Every rank must submit the same calls in the same order.

  // One operation. (Taken by reference: the spec is moved once, into the request.)
  future<void> submit(coll_spec&& spec) const;
  future<void> submit(const coll_spec& spec) const { return submit(coll_spec(spec)); }

  // A group: the progress thread sees its requests together, so small all_reduces among them are
  // packed and the other collectives among them go in one NCCL group (every rank makes the same
  // call, so no exchange is needed for that). One future for the group: it succeeds once every
  // request has, and fails if any fails (with the first failure's cause). The group is checked
  // whole first: a bad request fails the future and nothing is submitted. A group of more than
  // 128 small all_reduces that all pack goes through the engine as bulk calls (one request per
  // 256 all_reduces), and one that repeats lately is kept as a prepared call
  // (world_options::group_cache), so a training loop's gradient buckets get most of a prepared
  // call's speed without preparing it.
  future<void> submit_group(std::vector<coll_spec> specs) const;
  // The same group with a future per request, in order, where the caller needs each request's
  // end (each is checked on its own: a bad one fails its future, the others go). Costs a future
  // per request, which the caller makes and the progress thread settles. It meets the same group
  // submitted with one future on other ranks, except for bulk calls.
  std::vector<future<void>> submit_group(std::vector<coll_spec> specs, each_request_t) const;
  // A group of in-place all_reduces (`op`) of every buffer: all_reduce_spec(b, op) per buffer.
  // Where it repeats a kept call it is compared by the buffers themselves: no spec is made, and
  // no buffer's reference is taken or dropped.
  template <local::device_element T>
  future<void> submit_group(std::span<const local::gpu_ref<T>> buffers, reduce_op op = reduce_op::sum) const;

  // A prepared call (see group_call); a bad spec is refused here, naming it, as submit_group
  // names it.
  result<group_call> prepare_group(std::vector<coll_spec> specs) const;
  // Submits a prepared call; every rank must submit the same call (or make it with submit_group).
  future<void> submit_prepared(const group_call& call) const;

  using stats_snapshot = world_stats;
  stats_snapshot stats() const;

 private:
  explicit world(std::shared_ptr<world_engine> engine);
  result<std::unique_ptr<world>> shrink_backend(MPI_Comm next, const std::vector<int>& left_out,
                                                std::chrono::steady_clock::time_point deadline);
  // `checked`: the count checked_count gave for this spec a moment ago (a planned call's), or 0.
  // `with_future`: false for a submit_group call's requests but its last.
  result<std::unique_ptr<detail::coll_request>> make_request(coll_spec&& spec, std::size_t checked = 0,
                                                             bool with_future = true) const;
  // the per-request submit_group's and submit_group's body: makes and hands over the requests, putting the futures
  // they have in `out` (one per request; a group's, given `checked`, holds every count: one).
  void submit_call(std::vector<coll_spec>&& specs, std::vector<std::size_t> checked,
                   std::vector<std::optional<future<void>>>& out) const;
  // Clears the buffer lists `spec`'s kind does not use (a recv's send, a send's recv).
  static void trim_unused(coll_spec& spec);
  // The elements per rank `spec` names, once its buffers and arguments are checked (make_request
  // trims the lists a kind does not use first).
  result<std::size_t> checked_count(const coll_spec& spec) const;
  // A long per-request group's plan (call_plan.cpp): null where its first part is not small
  // all_reduces that pack. Marks the planned requests' buffers in `used` and gives their counts.
  // (`counted`: counts holds every spec's count already, checked.)
  std::unique_ptr<detail::call_plan> plan_call(const std::vector<coll_spec>& specs, pointer_set& used,
                                               std::vector<std::size_t>& counts, bool counted = false) const;
  // Marks the buffers `spec` uses in `used`; false if one of them was marked already (by an
  // earlier request of the same call).
  static bool mark_buffers(pointer_set& used, const coll_spec& spec);
  // Whether a call goes as bulk calls (detail::bulk_call, bulk_call.cpp): more than 128 small
  // all_reduces that pack, with bulk calls on. Decided by the calls' shapes alone, so the same
  // calls decide alike on every rank. Fills `counts` where it was empty (the per-request submit_group's call).
  bool bulk_shape(const std::vector<coll_spec>& specs, std::vector<std::size_t>& counts) const;
  // Makes the call's bulk calls (256 all_reduces at most each) and hands them over, putting the
  // futures in `out` as submit_call does.
  void submit_bulk(std::vector<coll_spec>&& specs, const std::vector<std::size_t>& counts, bool group,
                   std::vector<std::optional<future<void>>>& out) const;
  // A bulk call of specs[first, first + n), before its entries are made: its cuts, its bytes and
  // the buffers it writes and reads (bulk_call.cpp). Then fill_entries makes its entries (the
  // specs moved; `futures`: one per entry, for submit_group(each_request)).
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
  // submit_group(buffers)'s: the kept call of in-place all_reduces of `blocks`, submitted, if any.
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
future<void> world::submit_group(std::span<const local::gpu_ref<T>> buffers, reduce_op op) const {
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
