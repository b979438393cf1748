// The buffer registry's state, shared by its files: the wire messages, the transfer thread, and
// registry_state, whose members are defined by transfer path (ipc_path.cpp, nccl_path.cpp,
// staged_path.cpp) and the registry's own (buffer_registry.cpp).
// The buffer registry: exports (a table of leased blocks), the owner's fetch server (an actor
// published through the router as "atomr.buffers"), and a transfer thread that moves the bytes
// with MPI on a communicator of the registry's own, one tag per transfer, so transfers between
// a pair never depend on each other's order.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cereal/types/array.hpp>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <variant>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/buffers/export_table.hpp"
#include "atomr/cluster/buffers/fd_exchange.hpp"
#include "atomr/cluster/buffers/tunables.hpp"
#include "atomr/cluster/coll/tunables.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "cuda_ipc.hpp"
#include "nccl_fetch.hpp"
#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace atomr::cluster {

// The fetch request with its answer: the owner posts its send, then answers with the length.
struct fetch_ask {
  serialization::fetch_request request;
  std::uint32_t job = 0;
  std::uint32_t consumer = 0;  // the rank the bytes go to
  local::reply_to<serialization::fetch_ready> reply;
  template <class A>
  void serialize(A& ar) {
    ar(request, job, consumer, reply);
  }
};

// CUDA IPC (same node, cuda_ipc.hpp): the owner answers with its pool and the allocation under a
// pin (one per consumer and export), and keeps the buffer until the consumer's ipc_done, which
// comes after the export ended and the owner's ipc_unmap.
struct ipc_grant {
  std::uint64_t pool_id = 0;             // the owner's pool, as its fd server knows it
  std::vector<std::uint8_t> allocation;  // cudaMemPoolPtrExportData
  std::uint64_t pin = 0;                 // what ipc_unmap and ipc_done name
  std::uint64_t bytes = 0;               // the exported buffer's size (a token may claim more)
  std::uint32_t slot = 0xffffffffu;      // the export's slot in the owner's export table, if any
  template <class A>
  void serialize(A& ar) {
    ar(pool_id, allocation, pin, bytes, slot);
  }
};
struct ipc_ask {
  gpu_token token;
  std::uint32_t job = 0;
  std::uint32_t consumer = 0;
  local::reply_to<ipc_grant> reply;
  template <class A>
  void serialize(A& ar) {
    ar(token, job, consumer, reply);
  }
};
// Consumer -> owner: the import under `pin` is freed (the owner may free the buffer).
struct ipc_done {
  std::uint64_t pin = 0;
  template <class A>
  void serialize(A& ar) {
    ar(pin);
  }
};
// Owner -> consumer: the export behind `pin` ended; free the import, then answer ipc_done.
struct ipc_unmap {
  std::uint32_t owner = 0;
  std::uint64_t pin = 0;
  template <class A>
  void serialize(A& ar) {
    ar(owner, pin);
  }
};
// NCCL (nccl_fetch.hpp): the consumer names its channel (and sends its unique id, in case the
// owner has not opened its side yet); the owner queues the send and answers with its number in
// the channel, which the consumer receives by.
struct nccl_ready {
  std::uint64_t seq = 0;
  std::uint64_t length = 0;
  template <class A>
  void serialize(A& ar) {
    ar(seq, length);
  }
};
struct nccl_ask {
  gpu_token token;
  std::uint64_t length = 0;
  std::uint32_t job = 0;
  std::uint32_t consumer = 0;
  std::uint64_t channel = 0;
  detail::nccl_id_bytes id{};
  local::reply_to<nccl_ready> reply;
  template <class A>
  void serialize(A& ar) {
    ar(token, length, job, consumer, channel, id, reply);
  }
};
using server_msg = std::variant<fetch_ask, ipc_ask, ipc_done, ipc_unmap, nccl_ask>;

}  // namespace atomr::cluster

// atomr's own ids (see registry.hpp): types of the cluster layer, since they hold a reply_to.
template <>
struct atomr::serialization::user_message<atomr::cluster::fetch_ask> {
  static constexpr std::uint32_t id = 0x100;
  static constexpr std::string_view name = "fetch_ask";
};
template <>
struct atomr::serialization::user_message<atomr::cluster::ipc_ask> {
  static constexpr std::uint32_t id = 0x101;
  static constexpr std::string_view name = "ipc_ask";
};
template <>
struct atomr::serialization::user_message<atomr::cluster::ipc_done> {
  static constexpr std::uint32_t id = 0x102;
  static constexpr std::string_view name = "ipc_done";
};
template <>
struct atomr::serialization::user_message<atomr::cluster::ipc_unmap> {
  static constexpr std::uint32_t id = 0x103;
  static constexpr std::string_view name = "ipc_unmap";
};
template <>
struct atomr::serialization::user_message<atomr::cluster::nccl_ask> {
  static constexpr std::uint32_t id = 0x104;
  static constexpr std::string_view name = "nccl_ask";
};

namespace atomr::cluster::detail {

inline constexpr const char* k_server_name = "atomr.buffers";
inline auto logger() { return log::get("buffers"); }

// Moves bytes with MPI: posts sends and receives, completes them in any order, and calls each
// one's continuation on this thread.
class transfer_thread {
 public:
  explicit transfer_thread(MPI_Comm comm) : comm_(comm), thread_([this] { run(); }) {}
  ~transfer_thread() { stop(); }

  // Fails what is in flight and joins the thread. The object outlives this: a continuation on
  // another thread may still post, and such a post fails at once instead of touching freed state.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  using done_fn = std::function<void(result<void>)>;
  // `keep` holds the memory at [data, data + bytes) until `done` has run.
  void send(int peer, int tag, const void* data, std::size_t bytes, std::shared_ptr<const void> keep, done_fn done) {
    post(op{true, peer, tag, const_cast<void*>(data), bytes, std::move(keep), std::move(done)});
  }
  void receive(int peer, int tag, void* data, std::size_t bytes, std::shared_ptr<const void> keep, done_fn done) {
    post(op{false, peer, tag, data, bytes, std::move(keep), std::move(done)});
  }
  // Fails every transfer with `peer` (it failed).
  void fail_peer(int peer, const error& why) {
    std::lock_guard lock(mutex_);
    failed_.emplace_back(peer, why);
  }

 private:
  struct op {
    bool is_send;
    int peer;
    int tag;
    void* data;
    std::size_t bytes;
    std::shared_ptr<const void> keep;
    done_fn done;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void post(op o);

  void run();

  MPI_Comm comm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<op> incoming_;
  std::vector<std::pair<int, error>> failed_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is built
};

class registry_state : public std::enable_shared_from_this<registry_state> {
 public:
  struct export_entry {
    std::shared_ptr<local::buffer_block> block;
    local::dtype type;
    local::timer_handle expiry;
    std::uint32_t slot = export_table::k_no_slot;  // in `table`, once a CUDA IPC consumer read it
  };

  router* router_ = nullptr;
  std::vector<local::device> devices;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  std::uint32_t job = 0;
  std::unique_ptr<transfer_thread> mover;
  std::atomic<std::uint32_t> next_tag{1};
  std::uint64_t listener = 0;

  mutable std::mutex mutex;
  std::unordered_map<std::uint64_t, export_entry> exports;
  std::unordered_map<std::uint64_t, std::string> ended;  // buffer id -> why it ended
  std::uint64_t next_export = 1;
  local::actor_ref<server_msg> server;

  // CUDA IPC. Owner side: the shareable pools by id (what the fd server hands out), the device
  // each belongs to and the generation it was read in, and the buffers pinned for consumers.
  struct shared_pool {
    void* pool = nullptr;
    int device = 0;
    std::uint64_t generation = 0;
  };
  struct pin_entry {
    std::shared_ptr<local::buffer_block> block;
    int consumer = 0;
    std::uint64_t export_id = 0;
  };
  std::vector<char> same_node;  // per rank
  std::unique_ptr<fd_server> fds;
  std::unordered_map<std::uint64_t, shared_pool> pools;           // under mutex
  std::unordered_map<std::uint64_t, pin_entry> pins;              // under mutex
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> pin_of;  // (consumer, export) -> pin, live exports
  std::uint64_t next_pin = 1;
  // Consumer side: imported pools, and the owners IPC failed with (then the staged path serves;
  // the reason is logged once).
  ipc_importer importer;
  std::vector<std::unique_ptr<std::atomic<bool>>> ipc_off;  // per rank

  // The fetch without a round trip (export_table.hpp). Owner side: `table` holds the live exports
  // that IPC consumers read (its fd is the fd server's key k_table_key), and the device watches
  // clear an export's slot when its device is rebuilt. Consumer side: the grants of fetches that
  // worked, by (owner, export, generation), and each owner's table, mapped once.
  static constexpr std::uint64_t k_table_key = ~std::uint64_t{0};
  static constexpr std::size_t k_table_slots = 1 << 16;
  std::optional<export_table> table;  // under mutex
  std::vector<std::pair<std::shared_ptr<local::device_state>, std::uint64_t>> watches;
  struct kept_grant {
    ipc_grant grant;
    std::shared_ptr<const export_view> view;
  };
  std::mutex kept_mutex;
  std::map<std::tuple<int, std::uint64_t, std::uint64_t>, kept_grant> kept;  // under kept_mutex
  std::map<int, std::shared_ptr<const export_view>> views;                   // null: none to be had
  std::atomic<std::uint64_t> fast_fetches{0};

  // The grant kept for `token` while its owner's table says the export is alive.
  std::optional<kept_grant> kept_for(const gpu_token& token);
  // After a fetch through `grant` worked: keep it, mapping the owner's table the first time.
  void keep(const gpu_token& token, const ipc_grant& grant);
  void forget_kept(int owner, std::optional<std::uint64_t> pin);

  std::string fd_server_name(int r) const { return "atomr-" + std::to_string(job) + "-" + std::to_string(r); }
  bool ipc_possible(int owner) const {
    return cuda_ipc_built() && owner >= 0 && owner < static_cast<int>(same_node.size()) &&
           same_node[static_cast<std::size_t>(owner)] && fds && !ipc_off[static_cast<std::size_t>(owner)]->load();
  }
  // NCCL: the channels (consumer and owner sides) and the owners the path failed with.
  std::unique_ptr<nccl_mover> nccl;
  bool nccl_first = false;                                   // ATOMR_FETCH_NCCL=1: before CUDA IPC
  std::vector<std::unique_ptr<std::atomic<bool>>> nccl_off;  // per rank
  bool nccl_possible(int owner) const {
    return nccl && owner >= 0 && owner < static_cast<int>(nccl_off.size()) &&
           !nccl_off[static_cast<std::size_t>(owner)]->load();
  }
  void nccl_failed(int owner, const error& why) {
    if (!nccl_off[static_cast<std::size_t>(owner)]->exchange(true)) {
      logger()->warn("NCCL fetches from rank {} failed ({}); they go through host memory now", owner, why.describe());
    }
  }
  fetch_route route_to(int owner, bool gpu_target) const {
    if (gpu_target && nccl_first && nccl_possible(owner)) return fetch_route::nccl;
    if (gpu_target && ipc_possible(owner)) return fetch_route::cuda_ipc;
    if (gpu_target && nccl_possible(owner)) return fetch_route::nccl;
    return fetch_route::mpi_staged;
  }
  void serve_nccl(nccl_ask& ask);
  void fetch_nccl(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                  const std::shared_ptr<local::promise<void>>& shared);

  void ipc_failed(int owner, const error& why) {
    if (!ipc_off[static_cast<std::size_t>(owner)]->exchange(true)) {
      logger()->warn("CUDA IPC with rank {} failed ({}); fetches from it go through host memory", owner,
                     why.describe());
    }
  }
  // The pool id of `dev`'s shareable pool (read from the device when its generation changed).
  result<std::uint64_t> pool_of(const local::device& dev, std::uint64_t generation);

  // Host memory for staged transfers: pinned where CUDA is built in (so the device's copies to
  // and from it are plain DMA, not staged again), uninitialized, and reused (a few buffers are
  // kept), since allocating, pinning and first-touching tens of MiB per fetch costs more than
  // moving them.
  static std::byte* allocate_staging(std::size_t bytes);
  static void free_staging(std::byte* p);
  struct staging_free {
    void operator()(std::byte* p) const { free_staging(p); }
  };
  using staging_block = std::unique_ptr<std::byte, staging_free>;

  std::shared_ptr<std::byte> staging(std::size_t bytes);
  std::mutex staging_mutex;
  std::vector<std::pair<std::size_t, staging_block>> spare;

  const local::device* device_of(const local::buffer_block& block) const {
    const auto s = block.state.lock();
    if (!s) return nullptr;
    for (const auto& d : devices) {
      if (d.state() == s) return &d;
    }
    return nullptr;
  }

  // The export behind `token`, validated (owner side).
  result<export_entry> resolve(const gpu_token& token) const;

  void end_export(std::uint64_t id, const std::string& why);

  // Owner side of a remote fetch: read the bytes, post the send, answer.
  void serve(fetch_ask& ask, int consumer);

  // Owner side of a CUDA IPC fetch: pin the buffer, answer with its pool and allocation.
  void serve_ipc(ipc_ask& ask);
  void unpin(std::uint64_t pin) {
    std::lock_guard lock(mutex);
    pins.erase(pin);
  }
  void unpin_consumer(int consumer);
  // Consumer side of ipc_unmap: free the import behind the copies already enqueued, then answer.
  void unmap(int owner, std::uint64_t pin);
  void fetch_ipc(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                 const std::shared_ptr<local::promise<void>>& shared);
  void copy_granted(const ipc_grant& grant, bool by_kept_grant, const remote_buffer& handle,
                    const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                    const std::shared_ptr<local::promise<void>>& shared);
  // Ends the fast path's view of every export of `state`'s device (it was rebuilt).
  void device_rebuilt(const std::shared_ptr<local::device_state>& state);
  void fetch_staged(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                    const std::shared_ptr<local::promise<void>>& shared);
  // The fd server's answer: a new descriptor for the pool `id`.
  result<fd_server::provided> provide_pool(std::uint64_t id);
};

}  // namespace atomr::cluster::detail
