// Token fetches across nodes by NCCL send/recv (the buffer registry's NCCL path; see
// buffer_registry.hpp for when a fetch takes it).
//
// Each direction of a pair of ranks with fetches between them is a channel: a two-rank NCCL
// communicator of its own (the owner is rank 0, the consumer rank 1) and a stream on each side. On
// a channel the owner only sends and the consumer only receives, so the transfers match in the
// order the owner numbered them, and nothing else (a user's collectives on a world, the other
// direction, another device's fetches) can stand between a send and its receive: one shared
// communicator would let rank A's send to B wait behind A's receive from B while B's does the
// same, a deadlock.
//
// The consumer makes the channel's ncclUniqueId and sends it with every fetch request (128 bytes);
// the owner opens its side when it first accepts a request, the consumer when the first answer
// comes. A side opens on a thread of its own: a blocking ncclCommInitRankConfig under a deadline
// (a stall watch aborts it), then a one-byte transfer that connects the pair, so that later
// enqueues never block waiting for the peer. One mover thread issues every transfer on its
// channel's stream in the channel's order, after the buffer's earlier writes (event waits on the
// device, never on the host), and polls their completion events and the communicators' errors.
// A channel whose peer failed (liveness), whose communicator reported an error, or whose transfer
// passed its deadline is aborted and its transfers fail, naming why; the next fetch between the
// pair opens a new channel.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "atomr/common/result.hpp"
#include "atomr/local/device/gpu_ref.hpp"

namespace atomr::cluster::detail {

// NCCL_UNIQUE_ID_BYTES (checked where nccl.h is included).
using nccl_id_bytes = std::array<std::uint8_t, 128>;

// False in builds without NCCL (then nccl_mover::start fails with unavailable).
bool nccl_fetch_built() noexcept;

class nccl_mover {
 public:
  using done_fn = std::function<void(result<void>)>;
  // `open_deadline`: how long a channel may take to open (both sides joined and connected).
  // `transfer_deadline`: how long one transfer may take once issued.
  static result<std::unique_ptr<nccl_mover>> start(std::chrono::milliseconds open_deadline,
                                                   std::chrono::milliseconds transfer_deadline);
  ~nccl_mover();
  nccl_mover(const nccl_mover&) = delete;
  // Fails every channel and joins the mover thread; later sends and receives fail at once.
  void stop();
  nccl_mover& operator=(const nccl_mover&) = delete;

  struct channel_ref {
    std::uint64_t number = 0;
    nccl_id_bytes id{};
  };
  // Consumer: the channel on which this rank receives from `owner`'s device `owner_device` into
  // its device `device` (a new one, with a new unique id, the first time or after a failure).
  result<channel_ref> receiving_channel(int owner, int owner_device, int device);
  // Owner: numbers and queues a send of the first `bytes` of `block` on `consumer`'s channel
  // `number` (its side opened on `device` with `id` the first time). Returns the transfer's number
  // in the channel, which the consumer receives by. `done` runs on the mover thread.
  result<std::uint64_t> send(int consumer, std::uint64_t number, const nccl_id_bytes& id, int device,
                             std::shared_ptr<local::buffer_block> block, std::size_t bytes, done_fn done);
  // Consumer: receives transfer `seq` of channel `number` from `owner` into the first `bytes` of
  // `into` (after `into`'s earlier writes). `done` runs on the mover thread.
  void receive(int owner, std::uint64_t number, std::uint64_t seq, std::shared_ptr<local::buffer_block> into,
               std::size_t bytes, done_fn done);
  // Fails and closes every channel with `peer` (liveness named it).
  void fail_peer(int peer, const error& why);

  struct impl;

 private:
  explicit nccl_mover(std::shared_ptr<impl> s) : impl_(std::move(s)) {}
  std::shared_ptr<impl> impl_;
};

}  // namespace atomr::cluster::detail
