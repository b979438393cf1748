// GPU (or host-device) buffers named by token across the job. A rank exports a buffer and gets a
// remote_buffer (gpu_token + size + element type + job tag) that can travel inside any message;
// any rank fetches it into a buffer of its own.
//
//   // rank 0
//   auto handle = registry->export_buffer(buf).get().value();     // waits for buf's earlier writes
//   consumer.tell(work{handle});                                  // a remote_buffer member
//   // rank 1, in the consumer
//   registry->fetch(msg.handle, local_buf).then(...);             // the bytes, GPU to GPU
//
// Paths (fetch_path() says which a pair takes; `atomr info` prints it):
// - the owner is this process: a device copy (same device) or a peer copy (another device);
// - another process of the same node, GPU to GPU: CUDA IPC. The device actors allocate from a
//   pool that can be shared (POSIX file descriptor handles); the owner answers a fetch with the
//   allocation's export data and pins the buffer for that consumer; the consumer imports the
//   owner's pool once (its descriptor handed over a Unix socket) and the allocation once, and
//   copies on its own stream. Later fetches of the same export skip the round trip: the owner
//   keeps a table of its live exports in shared memory (a memfd its consumers map read-only),
//   clears an export's word before anyone hears that it ended (release, lease, device rebuild),
//   and a consumer whose kept grant's word is still set copies at once; otherwise it asks, and a
//   fetch that starts after the end is refused with stale_ref as before.
//   When the export ends, the owner asks each consumer to free its
//   import (in stream order behind its copies) and lets the buffer go once they have.
//   ATOMR_CUDA_IPC=0 turns the path off; where it fails (a driver that refuses shareable pools,
//   GPUs the consumer cannot see) the fetch takes the staged path below, and so do later ones
//   from that owner (logged once).
// - GPU to GPU where CUDA IPC does not serve (another node; or IPC off or failed): NCCL send/recv
//   (src/cluster/nccl_fetch.hpp). Each direction of a pair gets a two-rank communicator of its
//   own, opened at the pair's first fetch (the consumer's unique id travels with its requests);
//   the owner queues the send behind the buffer's earlier writes and answers with the transfer's
//   number in the channel, and the consumer receives by that number on its own stream. Nothing
//   else shares the channel, so a fetch cannot deadlock with the other direction or with a
//   world's collectives. ATOMR_FETCH_NCCL: auto (the default, as described), 1 (before CUDA IPC,
//   also within a node) or 0 (never). Where the path fails (no channel can be made, or the owner's
//   buffer is in host memory) the fetch takes the staged path below, and so do later ones from
//   that owner (logged once).
// - otherwise (host memory, or no GPU path): the owner reads the buffer into pinned host memory
//   on its device's stream (after the writes ordered before the export), MPI carries the bytes on
//   the registry's own communicator with a tag per transfer, and the consumer uploads them. The
//   bytes never go through the router; only the small fetch request and its answer do.
//
// Leases: the owner keeps an exported buffer alive until it calls release() or the lease given at
// export expires. After that, and after the owner's device is rebuilt (a new generation), a fetch
// fails with errc::stale_ref saying which ("released by its owner", "lease expired", "generation").
// A token from another job fails with errc::invalid_argument naming both job tags. A fetch in
// flight when the owner fails ends with the liveness/router error naming the rank.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atomr/cluster/router.hpp"
#include "atomr/local/device/device.hpp"
#include "atomr/serialization/messages.hpp"

namespace atomr::cluster {

using serialization::remote_buffer;

enum class fetch_route { local_copy, peer_copy, mpi_staged, cuda_ipc, nccl };
std::string_view to_string(fetch_route r) noexcept;

namespace detail {
class registry_state;
}

class buffer_registry {
 public:
  // Collective over `world`: every rank calls it with its router (which must outlive the
  // registry) and the devices whose buffers it exports or fetches into.
  static result<std::unique_ptr<buffer_registry>> start(MPI_Comm world, router& r, std::vector<local::device> devices);
  ~buffer_registry();
  buffer_registry(const buffer_registry&) = delete;
  buffer_registry& operator=(const buffer_registry&) = delete;

  // Exports `buffer` (one of this rank's devices). Resolves once the writes already ordered on
  // the buffer are done, so every fetch sees them. `lease`: the export ends by itself after it.
  template <local::device_element T>
  local::future<remote_buffer> export_buffer(const local::gpu_ref<T>& buffer,
                                             std::optional<std::chrono::milliseconds> lease = std::nullopt) {
    return export_block(buffer.block(), local::dtype_of<T>::value, lease);
  }

  // Ends an export (owner only); later fetches fail with stale_ref. Errors: invalid_argument
  // (not exported here, or already released).
  result<void> release(const remote_buffer& handle);

  // Copies the exported bytes into `into` (at least as large, same element type). Resolves when
  // the bytes are in `into`.
  template <local::device_element T>
  local::future<void> fetch(const remote_buffer& handle, const local::gpu_ref<T>& into) {
    return fetch_block(handle, into.block(), local::dtype_of<T>::value);
  }

  // How a fetch from `owner_rank`'s buffers into this rank's would travel.
  fetch_route route_from(int owner_rank) const;
  // Exports alive now.
  std::size_t exported() const;
  // Buffers this rank keeps pinned for CUDA IPC consumers (one per consumer and export). An ended
  // export stays pinned until each consumer has freed its import (it is asked to at once).
  std::size_t ipc_pins() const;
  // CUDA IPC fetches this rank made without asking the owner: by a grant kept from an earlier
  // fetch of the same export, while the owner's export table said the export was alive.
  std::uint64_t ipc_fetches_without_asking() const;
  std::uint32_t job_tag() const;

 private:
  explicit buffer_registry(std::shared_ptr<detail::registry_state> state) : state_(std::move(state)) {}
  local::future<remote_buffer> export_block(const std::shared_ptr<local::buffer_block>& block, local::dtype type,
                                            std::optional<std::chrono::milliseconds> lease);
  local::future<void> fetch_block(const remote_buffer& handle, const std::shared_ptr<local::buffer_block>& into,
                                  local::dtype type);
  std::shared_ptr<detail::registry_state> state_;
};

}  // namespace atomr::cluster
