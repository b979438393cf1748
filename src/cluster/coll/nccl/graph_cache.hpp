// The CUDA graphs the NCCL backend captured: one per request shape and buffers, so that a
// collective a program repeats on the same buffers is enqueued with one cudaGraphLaunch per local
// member instead of NCCL's host path (6-9 us per call on two H100s joined by NV18 NVLink).
//
// Where a rank drives several GPUs, each member's stream is captured on its own (all begun before
// the NCCL group, all ended after it) and replayed on its own stream: every member's work stays in
// its stream's order, as an eager call's does, so completion events and later requests need no
// joins between the streams. One capture joined across the streams and launched on the first cost
// more to launch than the eager group.
//
// The graph of an NCCL call holds NCCL's plan of it, which refers to the communicator and to the
// buffers: a graph holds its buffers (so their memory cannot go back to the device and come back
// at the same address while the graph may run), is dropped once it holds the last reference to
// them, and every graph is destroyed before the communicator is finalized or aborted (NCCL's
// destroy and abort wait until no graph refers to the communicator).
//
// Threading: the issuing thread looks up, captures and launches; abort() may drop everything from
// another thread (the watchdog or the stall watch). One mutex guards the list; it is not held
// across the NCCL calls of a capture (a call blocked on a peer must not keep an abort waiting).
#pragma once

#include <cuda_runtime_api.h>

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "atomr/cluster/coll_spec.hpp"
#include "atomr/cluster/engine/comm_backend.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

class graph_cache {
 public:
  // What makes two requests replay the same graphs: shape and every member's buffers (by block
  // id: unique per allocation in this process, never reused). Three words plus a send and a recv
  // id per member: up to 2 members without a heap allocation (a key is made on every launch).
  struct key {
    boost::container::small_vector<std::uint64_t, 8> v;
    bool operator==(const key&) const = default;
  };
  static key key_of(const coll_spec& spec, std::size_t count);
  // A chain's (several requests replayed as one graph, in order): a first word no request's key
  // starts with (bit 24 set, where a request's has its zero byte), the length, then every
  // request's key.
  static key key_of_chain(std::span<const coll_request* const> chain);
  // A packed batch's (its requests reduced as one): as a chain's, with bit 25 set instead.
  static key key_of_packed(std::span<const coll_request* const> batch);

  static constexpr std::size_t k_graphs_most = 32;  // graphs kept; the least recently used goes
  static constexpr std::size_t k_seen_most = 256;   // request keys remembered as issued before

  graph_cache() = default;
  graph_cache(const graph_cache&) = delete;
  graph_cache& operator=(const graph_cache&) = delete;
  ~graph_cache() { drop_all(); }

  // The capture id of the graph held for `k` (0: none), and whether `k` was issued before.
  struct holding {
    std::uint64_t capture = 0;
    bool seen = false;
  };
  holding lookup(const key& k);
  // Remembers `k` as issued (the next agreement may capture it).
  void note_issued(const key& k);
  // Captures `enqueue` (the request's NCCL calls) on every member's stream (`streams`, of
  // `devices`), keeps the graphs as capture `id` for `k` (replacing any for `k`), holding
  // `blocks` and `scratch` (memory of the backend's own that the graph's work uses: let go once
  // the graph is destroyed), and launches each on its stream.
  result<void> capture_and_launch(const key& k, std::uint64_t id, std::span<const cudaStream_t> streams,
                                  std::span<const int> devices,
                                  std::vector<std::shared_ptr<local::buffer_block>> blocks,
                                  const std::function<result<void>()>& enqueue,
                                  std::shared_ptr<void> scratch = nullptr);
  // Launches capture `id` held for `k`, each member's graph on its stream.
  result<void> launch(const key& k, std::uint64_t id, std::span<const cudaStream_t> streams);
  // Destroys every graph and refuses new ones (before the communicator is finalized or aborted).
  // Launched work finishes on its own.
  void drop_all();
  std::size_t size() const;

 private:
  struct entry {
    key k;
    std::uint64_t capture = 0;
    boost::container::small_vector<cudaGraphExec_t, 2> execs;  // one per member
    std::vector<std::shared_ptr<local::buffer_block>> blocks;
    std::shared_ptr<void> scratch;
    std::uint64_t used = 0;
    std::size_t swept = 0;  // the block the next sweep looks at (modulo blocks.size())  // last use, for eviction
  };
  // Drops the graphs found holding the last reference to one of their buffers, one block of each
  // looked at a call (under mutex_).
  void sweep_locked();
  static void destroy(const entry& e);
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
  std::vector<key> seen_;  // a ring of k_seen_most
  std::size_t seen_next_ = 0;
  std::uint64_t clock_ = 0;
  bool closed_ = false;
};

}  // namespace atomr::cluster::detail
