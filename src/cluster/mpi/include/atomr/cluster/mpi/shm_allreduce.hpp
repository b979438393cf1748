// The host backend's all_reduce through shared memory, where every rank of the communicator is on
// one node (internal).
//
// Open MPI moves an all_reduce between processes of one node through its shared-memory transport
// in fragments, and reduces in a schedule of its own (libnbc for the nonblocking one): a packed
// 2 MiB all_reduce takes 1.0 ms on a 2-core VM and 0.65 ms on the 32 vCPUs of a KVM guest with two
// H100s, where a copy of 2 MiB takes 0.1 ms. Here every rank maps one segment: a ring per rank that its inputs are
// copied into, and a few counters per rank. A reduction is then two or three polled steps:
//   1. copy the inputs into this rank's ring, then say so (`ready_through`);
//   2. once every rank has, reduce: a small one (up to k_whole_bytes) whole, on every rank, from
//      every rank's ring straight into the outputs; a larger one in P slices, slice r on rank r
//      into rank r's own ring (`reduced_through`), and
//   3. once every rank has, copy each slice out of its owner's ring into the outputs;
// then give the ring space back (`done_bytes`). Every rank combines the same operands in the same
// order for each element (the whole: rank 0's, then 1's, ...; a slice: once, by its owner), so
// every rank ends with the same bits, as with MPI.
//
// Direct reductions. Where every rank's host buffers come from its shared arena
// (atomr/local/device/shared_arena.hpp) and each rank mapped every other rank's arena at open, a
// reduction larger than k_whole_bytes skips the copies: each rank writes a table of where its
// pieces are (offsets in its arena) into its ring, and rank r reduces slice r straight from every
// rank's inputs into every rank's outputs; once every rank has, each is done. A piece outside the
// arena (a large buffer, or ATOMR_HOST_ARENA_MOST) goes through the ring as before: its owner
// copies it in after the table, the table points there, and its owner copies the result out.
// Each element is still combined once, by one rank, in rank order. (Small reductions stay whole:
// a rank reducing everything into its own outputs would overwrite an input, in place, that
// another rank may still be reading.)
//
// Reductions run in the order issued, which is the same on every rank (all ranks issue the same
// all_reduces in the same order); so is each one's place in the ring, which depends only on the
// sizes before it. Nothing here blocks: a rank that never arrives leaves the reduction pending
// until the engine's deadline fails the world.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

class shm_reducer;

// One all_reduce (or a packed batch of them): `pieces` are the requests' buffers, in order; the
// ring holds them back to back.
struct shm_piece {
  const void* send;
  void* recv;
  std::size_t bytes;
};

class shm_reduction {
 public:
  bool done() const { return phase_ == phase::done; }

 private:
  friend class shm_reducer;
  enum class phase { copy_in, reduce, copy_out, done };
  std::vector<shm_piece> pieces_;
  std::size_t bytes_ = 0;
  std::uint64_t seq_ = 0;    // 1, 2, ... in issue order, the same on every rank
  std::uint64_t start_ = 0;  // place in the ring, counted from the first byte ever used
  std::uint64_t end_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op op_ = MPI_OP_NULL;
  std::size_t elem_ = 1;  // bytes per element
  // Combines `count` elements of `in` into `inout` as MPI_Reduce_local would (sums of the usual
  // types, without a call into MPI per piece); nullptr: MPI_Reduce_local does (combine()).
  void (*combine_)(const void* in, void* inout, std::size_t count) = nullptr;
  phase phase_ = phase::copy_in;
  bool direct_ = false;    // the pieces are read and written where they are (see above)
  std::size_t table_ = 0;  // direct: bytes of the piece table at the start of the ring's slot
};

// What a shm_reducer is opened for (shm_reducer::open): `user` names who it is for in logs and
// errors; `direct`: whether reductions may go direct (the ranks share where their arenas are),
// the same on every rank. A rank that does not want one (`wanted` false) still takes part, and
// says no: then no rank has one.
struct shm_purpose {
  const char* user = "the host backend";
  bool direct = true;
  bool wanted = true;
};
class shm_reducer {
 public:
  // Reductions up to this size are reduced whole by every rank (one step fewer).
  static constexpr std::size_t k_whole_bytes = 16384;

  // Collective over `comm` (bounded by `deadline`; `rank` and `size` are this rank's in it):
  // maps a segment of `ring_bytes` per rank that every rank shares, or gives nullptr where they
  // cannot (ranks on several nodes, no room in /dev/shm: the reason is logged at debug level).
  // The ranks agree by point-to-point messages on `parent`, a communicator that holds `comm`'s
  // ranks and is complete on every rank already. Errors only for MPI failures and timeouts.
  static result<std::unique_ptr<shm_reducer>> open(MPI_Comm parent, MPI_Comm comm, int rank, int size,
                                                   std::size_t ring_bytes,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   shm_purpose what = {});
  // The tag of those messages on `parent` ("ASM"; apart from the other tags on the world's
  // control communicator and the host backend's: send/recv "ATM", failure notices "ATN").
  static constexpr int k_tag = 0x41534d;
  ~shm_reducer();
  shm_reducer(const shm_reducer&) = delete;
  shm_reducer& operator=(const shm_reducer&) = delete;

  // The largest reduction that goes this way.
  std::size_t most() const { return ring_ / 2; }
  // Starts a reduction of `pieces` (at most most() bytes in all, of elements of `elem` bytes);
  // the caller keeps the buffers alive until it is done.
  result<std::shared_ptr<shm_reduction>> start(std::vector<shm_piece> pieces, MPI_Datatype type, MPI_Op op,
                                               std::size_t elem);
  // Advances every reduction in flight as far as the other ranks allow.
  result<void> progress();
  // Drops every reduction in flight (the world failed): they never complete. This rank's buffers
  // in direct ones stay out of reuse (shared_arena::quarantine): a rank that is late, not dead,
  // may still read or write them.
  void abandon();
  // Reductions started so far, and how many of them went direct.
  std::uint64_t started() const { return next_seq_ - 1; }
  std::uint64_t direct() const { return direct_started_.load(std::memory_order_relaxed); }
  // Whether reductions may go direct (every rank mapped every other rank's arena).
  bool can_go_direct() const { return direct_ok_; }

 private:
  struct counters;
  struct arena_info;
  // One entry of a direct reduction's piece table: where a rank's piece is, for every rank.
  struct piece_place {
    std::uint64_t send;
    std::uint64_t recv;
  };
  // A place with this bit is an offset in the owner's ring slot; else an offset in its arena.
  static constexpr std::uint64_t k_in_ring = std::uint64_t{1} << 63;
  struct arena_view {
    std::byte* base = nullptr;
    std::size_t bytes = 0;
    bool mapped = false;  // by this reducer (another rank's): unmapped with it
  };
  shm_reducer(void* map, std::size_t map_bytes, int rank, int size, std::size_t ring);
  arena_info& arena_of(int rank) const;
  // Maps every other rank's arena; false (with the reason) where one cannot be.
  bool map_arenas(std::string& why);
  // Where rank `k`'s place `where` is, in this process (a reduction at `at` in the rings).
  std::byte* resolve(int k, std::size_t at, std::uint64_t where) const;
  // Where this rank's `p` is: in its arena, else at `in_ring` in its slot (copied there).
  std::uint64_t place_of(const void* p, std::size_t in_ring) const;
  void copy_in_direct(shm_reduction& r, std::size_t at);
  result<void> reduce_direct(shm_reduction& r, std::size_t at);
  void copy_out_direct(shm_reduction& r, std::size_t at);
  counters& of(int rank) const;
  static std::size_t header_bytes(int size);
  std::byte* ring_of(int rank) const;
  // True once `r` is done; `may_finish`: every reduction before it is done (else only its inputs
  // may go in).
  result<bool> advance(shm_reduction& r, bool may_finish);
  static result<void> combine(const shm_reduction& r, const std::byte* in, std::byte* inout, std::size_t bytes);
  result<void> reduce(shm_reduction& r, std::size_t at);
  void copy_out(shm_reduction& r, std::size_t at);
  // The byte range of `r` that `rank` reduces (a large reduction).
  std::pair<std::size_t, std::size_t> slice(const shm_reduction& r, int rank) const;

  void* map_;
  std::size_t map_bytes_;
  std::byte* rings_;  // rank 0's ring (each rank's follows the one before)
  int rank_;
  int size_;
  std::size_t ring_;
  std::uint64_t next_seq_ = 1;
  std::uint64_t next_start_ = 0;
  std::deque<std::shared_ptr<shm_reduction>> flight_;
  std::vector<arena_view> arenas_;  // every rank's arena as mapped here (this rank's own: its own)
  bool direct_ok_ = false;
  std::atomic<std::uint64_t> direct_started_{0};  // (read by stats() on callers' threads)
  std::vector<std::byte> scratch_;                // a direct reduction's chunk, combined here before it is written
};

}  // namespace atomr::cluster::detail
