// The buffer registry: exports (a table of leased blocks), the owner's fetch server (an actor
// published through the router as "atomr.buffers"), and a transfer thread that moves the bytes
// with MPI on a communicator of the registry's own, one tag per transfer, so transfers between
// a pair never depend on each other's order.
#include "atomr/cluster/buffer_registry.hpp"

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

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/common/tunables.hpp"
#include "cuda_ipc.hpp"
#include "export_table.hpp"
#include "fd_exchange.hpp"
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

namespace atomr::cluster {

std::string_view to_string(fetch_route r) noexcept {
  switch (r) {
    case fetch_route::local_copy: return "device copy";
    case fetch_route::peer_copy: return "peer copy";
    case fetch_route::mpi_staged: return "MPI, staged through host memory";
    case fetch_route::cuda_ipc: return "CUDA IPC (same node, GPU to GPU)";
    case fetch_route::nccl: return "NCCL send/recv (GPU to GPU)";
  }
  return "?";
}

namespace detail {
namespace {
constexpr const char* k_server_name = "atomr.buffers";
auto logger() { return log::get("buffers"); }
}  // namespace

// Moves bytes with MPI: posts sends and receives, completes them in any order, and calls each
// one's continuation on this thread.
class transfer_thread {
 public:
  explicit transfer_thread(MPI_Comm comm) : comm_(comm), thread_([this] { run(); }) {}
  ~transfer_thread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
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

  void post(op o) {
    {
      std::lock_guard lock(mutex_);
      incoming_.push_back(std::move(o));
    }
    cv_.notify_one();
  }

  void run() {
    const spin_relax relax;
    std::list<op> active;
    for (;;) {
      std::vector<op> fresh;
      std::vector<std::pair<int, error>> failed;
      {
        std::unique_lock lock(mutex_);
        if (active.empty()) {
          cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
        }
        if (stopping_ && incoming_.empty() && active.empty()) return;
        if (stopping_) {
          // Whatever is still in flight will not finish: the registry is going away.
          for (auto& o : incoming_) o.done(error(errc::aborted, "the buffer registry stopped"));
          incoming_.clear();
          for (auto& o : active) {
            if (!o.is_send) MPI_Cancel(&o.request);
            MPI_Request_free(&o.request);
            o.done(error(errc::aborted, "the buffer registry stopped"));
          }
          return;
        }
        fresh.swap(incoming_);
        failed = failed_;  // a failed peer stays failed
      }
      for (auto& o : fresh) {
        const int count = static_cast<int>(o.bytes);
        auto posted = o.is_send ? ATOMR_MPI_CHECK(MPI_Isend(o.data, count, MPI_BYTE, o.peer, o.tag, comm_, &o.request))
                                : ATOMR_MPI_CHECK(MPI_Irecv(o.data, count, MPI_BYTE, o.peer, o.tag, comm_, &o.request));
        if (!posted) {
          o.done(posted.error_value());
          continue;
        }
        active.push_back(std::move(o));
      }
      for (auto it = active.begin(); it != active.end();) {
        std::optional<error> peer_failure;
        for (auto& [peer, why] : failed) {
          if (peer == it->peer) peer_failure = why;
        }
        if (peer_failure) {
          MPI_Cancel(&it->request);
          MPI_Request_free(&it->request);
          it->done(*peer_failure);
          it = active.erase(it);
          continue;
        }
        int flag = 0;
        MPI_Status status;
        auto tested = ATOMR_MPI_CHECK(MPI_Test(&it->request, &flag, &status));
        if (!tested || flag) {
          if (tested && !it->is_send) {
            int got = 0;
            MPI_Get_count(&status, MPI_BYTE, &got);
            if (static_cast<std::size_t>(got) != it->bytes) {
              tested = error(errc::protocol, "rank " + std::to_string(it->peer) + " sent " + std::to_string(got) +
                                                 " bytes for a fetch of " + std::to_string(it->bytes));
            }
          }
          it->done(std::move(tested));
          it = active.erase(it);
          continue;
        }
        ++it;
      }
      if (!active.empty()) relax();
    }
  }

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
  std::optional<kept_grant> kept_for(const gpu_token& token) {
    std::lock_guard lock(kept_mutex);
    const auto it = kept.find({static_cast<int>(token.node_id), token.buffer_id, token.generation});
    if (it == kept.end()) return std::nullopt;
    if (!it->second.view->live(it->second.grant.slot, token.buffer_id)) {
      kept.erase(it);  // ended: the owner says why
      return std::nullopt;
    }
    return it->second;
  }
  // After a fetch through `grant` worked: keep it, mapping the owner's table the first time.
  void keep(const gpu_token& token, const ipc_grant& grant) {
    if (grant.slot == export_table::k_no_slot) return;
    const int owner = static_cast<int>(token.node_id);
    std::lock_guard lock(kept_mutex);
    auto view = views.find(owner);
    if (view == views.end()) {
      std::shared_ptr<const export_view> mapped;
      auto fd = request_fd(fd_server_name(owner), k_table_key, std::chrono::seconds(10));
      if (fd) {
        auto v = export_view::map(*fd);
        ::close(*fd);
        if (v) {
          mapped = std::make_shared<const export_view>(std::move(*v));
        } else {
          fd = v.error_value();
        }
      }
      if (!fd)
        logger()->info("rank {}'s export table: {}; every fetch from it asks it", owner, fd.error_value().describe());
      view = views.emplace(owner, std::move(mapped)).first;
    }
    if (view->second) kept[{owner, token.buffer_id, token.generation}] = kept_grant{grant, view->second};
  }
  void forget_kept(int owner, std::optional<std::uint64_t> pin) {
    std::lock_guard lock(kept_mutex);
    std::erase_if(kept,
                  [&](const auto& k) { return std::get<0>(k.first) == owner && (!pin || k.second.grant.pin == *pin); });
    if (!pin) views.erase(owner);
  }

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
  result<std::uint64_t> pool_of(const local::device& dev, std::uint64_t generation) {
    {
      std::lock_guard lock(mutex);
      for (const auto& [id, p] : pools) {
        if (p.device == dev.index() && p.generation == generation) return id;
      }
    }
    auto pool = std::make_shared<void*>(nullptr);
    ATOMR_TRY(dev.run([pool](const local::stream_context& ctx) -> result<void> {
                   *pool = ctx.shareable_pool;
                   return ok();
                 })
                  .get());
    if (*pool == nullptr) {
      return error(errc::unavailable,
                   "device " + std::to_string(dev.index()) + "'s memory pool cannot be shared with other processes");
    }
    // CUDA exports allocations only from a pool that has been exported itself (cudaMemPoolExportPointer
    // fails with cudaErrorInvalidValue before): export it once here, and drop that descriptor.
    ATOMR_ASSIGN_OR_RETURN(const int fd, ipc_export_pool(dev.index(), *pool));
    ::close(fd);
    std::lock_guard lock(mutex);
    const std::uint64_t id = pools.size() + 1;
    pools[id] = shared_pool{*pool, dev.index(), generation};
    return id;
  }

  // Host memory for staged transfers: pinned where CUDA is built in (so the device's copies to
  // and from it are plain DMA, not staged again), uninitialized, and reused (a few buffers are
  // kept), since allocating, pinning and first-touching tens of MiB per fetch costs more than
  // moving them.
  static std::byte* allocate_staging(std::size_t bytes) {
#if ATOMR_HAVE_CUDA
    void* p = nullptr;
    if (const auto e = cudaMallocHost(&p, bytes); e == cudaSuccess) {
      logger()->debug("staging: {} bytes of pinned memory", bytes);
      return static_cast<std::byte*>(p);
    } else {
      logger()->debug("staging: cudaMallocHost({}) failed ({}); plain memory", bytes, cudaGetErrorString(e));
    }
    cudaGetLastError();  // no GPU here (or out of pinned memory): plain memory works too
#endif
    return new std::byte[bytes];
  }
  static void free_staging(std::byte* p) {
#if ATOMR_HAVE_CUDA
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost) {
      cudaFreeHost(p);
      return;
    }
    cudaGetLastError();
#endif
    delete[] p;
  }
  struct staging_free {
    void operator()(std::byte* p) const { free_staging(p); }
  };
  using staging_block = std::unique_ptr<std::byte, staging_free>;

  std::shared_ptr<std::byte> staging(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    staging_block mem;
    {
      std::lock_guard lock(staging_mutex);
      for (auto it = spare.begin(); it != spare.end(); ++it) {
        if (it->first >= bytes && it->first <= 2 * bytes + 4096) {
          bytes = it->first;
          mem = std::move(it->second);
          spare.erase(it);
          break;
        }
      }
    }
    if (!mem) mem.reset(allocate_staging(bytes));
    return std::shared_ptr<std::byte>(mem.release(), [weak = weak_from_this(), bytes](std::byte* p) {
      auto self = weak.lock();
      if (!self) {
        free_staging(p);
        return;
      }
      // The newest are kept (the oldest go): a job's fetch sizes drift, and a buffer of a size no
      // longer fetched must not take the place of one that is.
      std::lock_guard lock(self->staging_mutex);
      self->spare.emplace_back(bytes, staging_block(p));
      if (self->spare.size() > 4) self->spare.erase(self->spare.begin());
    });
  }
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
  result<export_entry> resolve(const gpu_token& token) const {
    std::lock_guard lock(mutex);
    const auto it = exports.find(token.buffer_id);
    if (it == exports.end()) {
      const auto gone = ended.find(token.buffer_id);
      if (gone != ended.end()) return error(errc::stale_ref, to_string(token) + ": " + gone->second);
      return error(errc::stale_ref, to_string(token) + ": no such export on rank " + std::to_string(rank));
    }
    if (it->second.block->generation != token.generation) {
      return error(errc::stale_ref,
                   to_string(token) + ": exported in generation " + std::to_string(it->second.block->generation));
    }
    if (auto v = local::validate_block(*it->second.block); !v) {
      return v.error_value().with_context("resolving " + to_string(token));
    }
    return it->second;
  }

  void end_export(std::uint64_t id, const std::string& why) {
    std::vector<std::pair<int, std::uint64_t>> unmaps;  // (consumer, pin)
    {
      std::lock_guard lock(mutex);
      const auto it = exports.find(id);
      if (it == exports.end()) return;
      it->second.expiry.cancel();
      // Before anyone hears of the end: a fetch that starts after it must ask, and be refused.
      if (table && it->second.slot != export_table::k_no_slot) table->clear(it->second.slot);
      exports.erase(it);
      ended[id] = why;
      // Consumers that imported it give their imports back; the pins keep the memory until then.
      for (auto p = pin_of.begin(); p != pin_of.end();) {
        if (p->first.second == id) {
          unmaps.emplace_back(p->first.first, p->second);
          p = pin_of.erase(p);
        } else {
          ++p;
        }
      }
    }
    for (const auto& [consumer, pin] : unmaps) {
      auto sent = router_->lookup<server_msg>(consumer, k_server_name)
                      .tell(server_msg(ipc_unmap{static_cast<std::uint32_t>(rank), pin}));
      if (!sent) unpin(pin);  // (that rank is gone: nothing of it reads the buffer any more)
    }
  }

  // Owner side of a remote fetch: read the bytes, post the send, answer.
  void serve(fetch_ask& ask, int consumer) {
    const auto& req = ask.request;
    if (ask.job != job) {
      ask.reply.fail(error(errc::invalid_argument, "token from another job (job tag " + std::to_string(ask.job) +
                                                       ", this job " + std::to_string(job) + ")"));
      return;
    }
    auto entry = resolve(req.token);
    if (!entry) {
      ask.reply.fail(entry.error_value());
      return;
    }
    const std::size_t bytes = entry->block->bytes;
    if (req.offset != 0 || req.length > bytes) {
      ask.reply.fail(error(errc::invalid_argument, "fetch of [" + std::to_string(req.offset) + ", " +
                                                       std::to_string(req.offset + req.length) + ") from " +
                                                       std::to_string(bytes) + " bytes"));
      return;
    }
    const local::device* dev = device_of(*entry->block);
    if (!dev) {
      ask.reply.fail(error(errc::stale_ref, to_string(req.token) + ": its device is gone"));
      return;
    }
    auto reply = std::make_shared<local::reply_to<serialization::fetch_ready>>(std::move(ask.reply));
    const auto ready = serialization::fetch_ready{req.token, req.length, req.transfer_tag};
    auto send = [self = shared_from_this(), reply, ready, consumer](const void* data,
                                                                    std::shared_ptr<const void> keep) {
      self->mover->send(consumer, static_cast<int>(ready.transfer_tag), data, ready.length, std::move(keep),
                        [](result<void> sent) {
                          if (!sent) logger()->warn("fetch send failed: {}", sent.error_value().describe());
                        });
      reply->send(ready);
    };
    if (dev->kind() == local::device_kind::host) {
      // Host memory: MPI reads the buffer itself (the export waited for the writes before it).
      send(entry->block->ptr, entry->block);
      return;
    }
    // Device memory: read into host memory on the device's stream, after the writes ordered on the
    // buffer (the device's read tickets), then send.
    auto staging = this->staging(req.length);
    auto read = dev->download(local::gpu_ref<std::uint8_t>(entry->block),
                              std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(staging.get()), req.length));
    read.then([reply, staging, send, t0 = std::chrono::steady_clock::now(), bytes = req.length](const result<void>& r) {
      logger()->debug("serve: {} bytes read from the device in {:.1f} us", bytes,
                      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (!r) {
        reply->fail(r.error_value().with_context("reading the exported buffer"));
        return;
      }
      send(staging.get(), staging);
    });
  }

  // Owner side of a CUDA IPC fetch: pin the buffer, answer with its pool and allocation.
  void serve_ipc(ipc_ask& ask) {
    if (ask.job != job) {
      ask.reply.fail(error(errc::invalid_argument, "token from another job (job tag " + std::to_string(ask.job) +
                                                       ", this job " + std::to_string(job) + ")"));
      return;
    }
    auto entry = resolve(ask.token);
    if (!entry) {
      ask.reply.fail(entry.error_value());
      return;
    }
    const local::device* dev = device_of(*entry->block);
    if (!dev) {
      ask.reply.fail(error(errc::stale_ref, to_string(ask.token) + ": its device is gone"));
      return;
    }
    // "ipc:" marks a refusal of the path (the consumer takes the staged one), not of the token.
    auto refuse = [&](const error& why) { ask.reply.fail(error(errc::unavailable, "ipc: " + why.message())); };
    if (dev->kind() != local::device_kind::cuda) {
      refuse(error(errc::unavailable, "the buffer is in host memory"));
      return;
    }
    auto pool_id = pool_of(*dev, entry->block->generation);
    if (!pool_id) {
      refuse(pool_id.error_value());
      return;
    }
    auto allocation = ipc_export_allocation(dev->index(), entry->block->ptr);
    if (!allocation) {
      refuse(allocation.error_value());
      return;
    }
    std::uint64_t pin = 0;
    std::uint32_t slot = export_table::k_no_slot;
    {
      std::lock_guard lock(mutex);
      if (const auto e = exports.find(ask.token.buffer_id); e != exports.end() && table) {
        if (e->second.slot == export_table::k_no_slot) {
          e->second.slot = table->claim(ask.token.buffer_id).value_or(export_table::k_no_slot);
        }
        slot = e->second.slot;
      }
      const auto key = std::make_pair(static_cast<int>(ask.consumer), ask.token.buffer_id);
      if (const auto it = pin_of.find(key); it != pin_of.end()) {
        pin = it->second;  // the consumer has it imported already
      } else {
        pin = next_pin++;
        pins[pin] = pin_entry{entry->block, static_cast<int>(ask.consumer), ask.token.buffer_id};
        pin_of[key] = pin;
      }
    }
    ask.reply.send(ipc_grant{*pool_id, std::move(*allocation), pin, entry->block->bytes, slot});
  }
  void unpin(std::uint64_t pin) {
    std::lock_guard lock(mutex);
    pins.erase(pin);
  }
  void unpin_consumer(int consumer) {
    std::lock_guard lock(mutex);
    std::erase_if(pins, [&](const auto& p) { return p.second.consumer == consumer; });
    std::erase_if(pin_of, [&](const auto& p) { return p.first.first == consumer; });
  }
  // Consumer side of ipc_unmap: free the import behind the copies already enqueued, then answer.
  void unmap(int owner, std::uint64_t pin) {
    auto done = [self = shared_from_this(), owner, pin] {
      (void)self->router_->lookup<server_msg>(owner, k_server_name).tell(server_msg(ipc_done{pin}));
    };
    forget_kept(owner, pin);
    const auto import = importer.unmap(owner, pin);
    const local::device* dev = nullptr;
    for (const auto& d : devices) {
      if (import && d.index() == import->second && d.kind() == local::device_kind::cuda) dev = &d;
    }
    if (!import || dev == nullptr) {
      done();
      return;
    }
    dev->run([ptr = import->first](const local::stream_context& ctx) { return ipc_importer::release(ptr, ctx.stream); })
        .then([done](const result<void>& r) {
          if (!r) logger()->warn("freeing an imported buffer: {}", r.error_value().describe());
          done();
        });
  }
  void fetch_ipc(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                 const std::shared_ptr<local::promise<void>>& shared);
  void copy_granted(const ipc_grant& grant, bool by_kept_grant, const remote_buffer& handle,
                    const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                    const std::shared_ptr<local::promise<void>>& shared);
  // Ends the fast path's view of every export of `state`'s device (it was rebuilt).
  void device_rebuilt(const std::shared_ptr<local::device_state>& state) {
    std::lock_guard lock(mutex);
    for (auto& [id, e] : exports) {
      if (e.slot != export_table::k_no_slot && e.block->state.lock() == state) {
        if (table) table->clear(e.slot);
        e.slot = export_table::k_no_slot;
      }
    }
  }
  void fetch_staged(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                    const std::shared_ptr<local::promise<void>>& shared);
  // The fd server's answer: a new descriptor for the pool `id`.
  result<fd_server::provided> provide_pool(std::uint64_t id) {
    shared_pool p;
    {
      std::lock_guard lock(mutex);
      if (id == k_table_key) {
        if (!table) return error(errc::unavailable, "this rank keeps no export table");
        return fd_server::provided{table->fd(), false};
      }
      const auto it = pools.find(id);
      if (it == pools.end()) return error(errc::invalid_argument, "no pool " + std::to_string(id) + " here");
      p = it->second;
    }
    ATOMR_ASSIGN_OR_RETURN(const int fd, ipc_export_pool(p.device, p.pool));
    return fd_server::provided{fd, true};
  }
};

namespace {
class fetch_server : public local::actor<server_msg> {
 public:
  explicit fetch_server(std::weak_ptr<registry_state> state) : state_(std::move(state)) {}
  void receive(server_msg& m) override {
    auto s = state_.lock();
    const error stopped(errc::unavailable, "the buffer registry has stopped");
    if (auto* ask = std::get_if<fetch_ask>(&m)) {
      if (!s) return ask->reply.fail(stopped);
      s->serve(*ask, static_cast<int>(ask->consumer));
    } else if (auto* ipc = std::get_if<ipc_ask>(&m)) {
      if (!s) return ipc->reply.fail(stopped);
      s->serve_ipc(*ipc);
    } else if (auto* done = std::get_if<ipc_done>(&m); done && s) {
      s->unpin(done->pin);
    } else if (auto* unmap = std::get_if<ipc_unmap>(&m); unmap && s) {
      s->unmap(static_cast<int>(unmap->owner), unmap->pin);
    } else if (auto* nccl = std::get_if<nccl_ask>(&m)) {
      if (!s) return nccl->reply.fail(stopped);
      s->serve_nccl(*nccl);
    }
  }

 private:
  std::weak_ptr<registry_state> state_;
};
}  // namespace

}  // namespace detail

result<std::unique_ptr<buffer_registry>> buffer_registry::start(MPI_Comm world, router& r,
                                                                std::vector<local::device> devices) {
  auto state = std::make_shared<detail::registry_state>();
  state->router_ = &r;
  state->devices = std::move(devices);
  state->rank = r.rank();
  ATOMR_ASSIGN_OR_RETURN(const own_comm own, duplicate_comm(world));
  state->comm = own.comm;
  // The job's tag: tokens carry it, so one from another job is refused by name.
  std::uint32_t job = 0;
  if (state->rank == 0) {
    std::random_device rd;
    while (job == 0) job = rd();
  }
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&job, 1, MPI_UINT32_T, 0, state->comm)));
  state->job = job;
  state->mover = std::make_unique<detail::transfer_thread>(state->comm);
  // Which ranks share this node (CUDA IPC works only between them).
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(state->comm, &size)));
  state->same_node.assign(static_cast<std::size_t>(size), 0);
  for (int p = 0; p < size; ++p) state->ipc_off.push_back(std::make_unique<std::atomic<bool>>(false));
  {
    MPI_Comm node = MPI_COMM_NULL;
    ATOMR_TRY(
        ATOMR_MPI_CHECK(MPI_Comm_split_type(state->comm, MPI_COMM_TYPE_SHARED, state->rank, MPI_INFO_NULL, &node)));
    int local = 0;
    MPI_Group node_group, all_group;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(node, &local)));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(node, &node_group)));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(state->comm, &all_group)));
    std::vector<int> in_node(static_cast<std::size_t>(local)), in_all(static_cast<std::size_t>(local));
    for (int i = 0; i < local; ++i) in_node[static_cast<std::size_t>(i)] = i;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Group_translate_ranks(node_group, local, in_node.data(), all_group, in_all.data())));
    for (const int peer : in_all) {
      if (peer >= 0 && peer < size) state->same_node[static_cast<std::size_t>(peer)] = 1;
    }
    MPI_Group_free(&node_group);
    MPI_Group_free(&all_group);
    MPI_Comm_free(&node);
  }
  // The fd server for CUDA IPC, where there is a GPU to share (a failure only costs the fast path).
  const bool any_gpu = std::any_of(state->devices.begin(), state->devices.end(),
                                   [](const local::device& d) { return d.kind() == local::device_kind::cuda; });
  if (detail::cuda_ipc_built() && any_gpu && tunable_value(tunables::cuda_ipc) != "0") {
    auto fds = detail::fd_server::start(
        state->fd_server_name(state->rank),
        [weak = std::weak_ptr(state)](std::uint64_t key) -> result<detail::fd_server::provided> {
          auto s = weak.lock();
          if (!s) return error(errc::unavailable, "the buffer registry has stopped");
          return s->provide_pool(key);
        });
    if (fds) {
      state->fds = std::move(*fds);
      if (auto t = detail::export_table::create(detail::registry_state::k_table_slots)) {
        std::lock_guard lock(state->mutex);
        state->table = std::move(*t);
      } else {
        detail::logger()->info("no export table ({}): every CUDA IPC fetch asks the owner", t.error_value().describe());
      }
      for (const auto& d : state->devices) {
        const auto& ds = d.state();
        if (!ds) continue;
        const auto id = ds->watch([weak = std::weak_ptr(state), ds_weak = std::weak_ptr(ds)](std::uint64_t) {
          auto s = weak.lock();
          auto dev = ds_weak.lock();
          if (s && dev) s->device_rebuilt(dev);
        });
        state->watches.emplace_back(ds, id);
      }
    } else {
      detail::logger()->warn("CUDA IPC off: {}", fds.error_value().describe());
    }
  }
  // NCCL channels, where this rank has a GPU (ATOMR_FETCH_NCCL; nccl_fetch.hpp).
  for (int p = 0; p < size; ++p) state->nccl_off.push_back(std::make_unique<std::atomic<bool>>(false));
  const std::string nccl_mode = tunable_value(tunables::fetch_nccl);
  if (nccl_mode != "auto" && nccl_mode != "1" && nccl_mode != "0") {
    return error(errc::invalid_argument,
                 std::string(tunables::fetch_nccl.env) + "=" + nccl_mode + ": expected auto, 1 or 0");
  }
  if (detail::nccl_fetch_built() && any_gpu && nccl_mode != "0") {
    ATOMR_ASSIGN_OR_RETURN(const auto open_ms, tunable_int(tunables::coll_init_timeout));
    ATOMR_ASSIGN_OR_RETURN(const auto transfer_ms, tunable_int(tunables::coll_timeout));
    ATOMR_ASSIGN_OR_RETURN(state->nccl, detail::nccl_mover::start(std::chrono::milliseconds(open_ms),
                                                                  std::chrono::milliseconds(transfer_ms)));
    state->nccl_first = nccl_mode == "1";
  }
  // Transfers with a rank that liveness declares failed end at once, naming it; its pins go.
  ATOMR_ASSIGN_OR_RETURN(state->listener, add_failure_listener(state->comm, [weak = std::weak_ptr(state)](
                                                                                int peer, const std::string& text) {
                           if (auto s = weak.lock()) {
                             s->mover->fail_peer(peer, error(errc::unavailable, text));
                             if (s->nccl) s->nccl->fail_peer(peer, error(errc::unavailable, text));
                             s->unpin_consumer(peer);
                             s->forget_kept(peer, std::nullopt);
                           }
                         }));
  auto server = r.core()->system().spawn<detail::fetch_server>(local::spawn_options{.name = "atomr.buffers"},
                                                               std::weak_ptr<detail::registry_state>(state));
  if (!server) return server.error_value().with_context("starting the buffer registry");
  state->server = *server;
  ATOMR_TRY(r.publish("atomr.buffers", *server));
  return std::unique_ptr<buffer_registry>(new buffer_registry(std::move(state)));
}

buffer_registry::~buffer_registry() {
  remove_failure_listener(state_->listener);
  for (const auto& [ds, id] : state_->watches) ds->unwatch(id);
  state_->server.stop();
  state_->fds.reset();
  state_->mover.reset();
  state_->nccl.reset();
  {
    std::lock_guard lock(state_->mutex);
    for (auto& [id, e] : state_->exports) {
      e.expiry.cancel();
      if (state_->table && e.slot != detail::export_table::k_no_slot) state_->table->clear(e.slot);
    }
    state_->exports.clear();
  }
  MPI_Comm_free(&state_->comm);
}

local::future<remote_buffer> buffer_registry::export_block(const std::shared_ptr<local::buffer_block>& block,
                                                           local::dtype type,
                                                           std::optional<std::chrono::milliseconds> lease) {
  local::promise<remote_buffer> out;
  auto result_future = out.get_future();
  if (!block) {
    out.set_error(error(errc::invalid_argument, "export of an empty gpu_ref"));
    return result_future;
  }
  if (auto v = local::validate_block(*block); !v) {
    out.set_error(v.error_value().with_context("exporting a buffer"));
    return result_future;
  }
  const local::device* dev = state_->device_of(*block);
  if (!dev) {
    out.set_error(error(errc::invalid_argument, "buffer " + std::to_string(block->id) +
                                                    " is not on a device this rank's buffer registry serves"));
    return result_future;
  }
  // A one-byte read ordered after the buffer's earlier writes: once it is back, they are done.
  auto probe = std::make_shared<std::uint8_t>(0);
  local::future<void> settled;
  if (block->bytes > 0) {
    settled = dev->download(local::gpu_ref<std::uint8_t>(block), std::span<std::uint8_t>(probe.get(), 1));
  } else {
    local::promise<void> none;
    none.set_value();
    settled = none.get_future();
  }
  auto shared = std::make_shared<local::promise<remote_buffer>>(std::move(out));
  settled.then([state = state_, block, type, lease, shared, probe, device = dev->index()](const result<void>& r) {
    if (!r) {
      shared->set_error(r.error_value().with_context("exporting buffer " + std::to_string(block->id)));
      return;
    }
    remote_buffer handle;
    {
      std::lock_guard lock(state->mutex);
      const std::uint64_t id = state->next_export++;
      handle.token =
          gpu_token{static_cast<std::uint32_t>(state->rank), static_cast<std::uint32_t>(device), id, block->generation};
      handle.bytes = block->bytes;
      handle.dtype = static_cast<std::uint8_t>(type);
      handle.job = state->job;
      detail::registry_state::export_entry entry{block, type, {}};
      if (lease) {
        entry.expiry = state->router_->core()->system().timers().after(
            *lease, [weak = std::weak_ptr(state), id, ms = lease->count()] {
              if (auto s = weak.lock()) s->end_export(id, "its lease of " + std::to_string(ms) + " ms expired");
            });
      }
      state->exports.emplace(id, std::move(entry));
    }
    shared->set_value(handle);
  });
  return result_future;
}

result<void> buffer_registry::release(const remote_buffer& handle) {
  if (static_cast<int>(handle.token.node_id) != state_->rank || handle.job != state_->job) {
    return error(errc::invalid_argument, "release of " + to_string(handle.token) + ": rank " +
                                             std::to_string(state_->rank) + " of this job does not own it");
  }
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->exports.contains(handle.token.buffer_id)) {
      return error(errc::invalid_argument, "release of " + to_string(handle.token) + ": not exported (or released)");
    }
  }
  state_->end_export(handle.token.buffer_id, "released by its owner (rank " + std::to_string(state_->rank) + ")");
  return ok();
}

local::future<void> buffer_registry::fetch_block(const remote_buffer& handle,
                                                 const std::shared_ptr<local::buffer_block>& into, local::dtype type) {
  local::promise<void> out;
  auto done = out.get_future();
  auto fail = [&](error e) {
    out.set_error(e.with_context("fetching " + to_string(handle.token)));
    return done;
  };
  if (handle.job != state_->job) {
    return fail(error(errc::invalid_argument, "token from another job (job tag " + std::to_string(handle.job) +
                                                  ", this job " + std::to_string(state_->job) + ")"));
  }
  if (!into) return fail(error(errc::invalid_argument, "fetch into an empty gpu_ref"));
  if (handle.dtype != static_cast<std::uint8_t>(type)) {
    return fail(
        error(errc::invalid_argument, "element type mismatch: the buffer holds " +
                                          std::string(local::to_string(static_cast<local::dtype>(handle.dtype))) +
                                          ", the target " + std::string(local::to_string(type))));
  }
  if (into->bytes < handle.bytes) {
    return fail(error(errc::invalid_argument, "the target holds " + std::to_string(into->bytes) +
                                                  " bytes, the buffer " + std::to_string(handle.bytes)));
  }
  if (auto v = local::validate_block(*into); !v) return fail(v.error_value());
  const local::device* dst_dev = state_->device_of(*into);
  if (!dst_dev) return fail(error(errc::invalid_argument, "the target is not on a device this registry serves"));
  const local::gpu_ref<std::uint8_t> dst(into);
  const int owner = static_cast<int>(handle.token.node_id);
  if (owner == state_->rank) {
    auto entry = state_->resolve(handle.token);
    if (!entry) return fail(entry.error_value());
    const local::gpu_ref<std::uint8_t> src(entry->block);
    const local::device* src_dev = state_->device_of(*entry->block);
    return src_dev == dst_dev || src_dev == nullptr ? dst_dev->copy(dst, src) : dst_dev->copy_from_peer(dst, src);
  }
  auto shared = std::make_shared<local::promise<void>>(std::move(out));
  switch (state_->route_to(owner, dst_dev->kind() == local::device_kind::cuda)) {
    case fetch_route::nccl: state_->fetch_nccl(handle, dst, *dst_dev, shared); break;
    case fetch_route::cuda_ipc: state_->fetch_ipc(handle, dst, *dst_dev, shared); break;
    default: state_->fetch_staged(handle, dst, *dst_dev, shared); break;
  }
  return done;
}

namespace detail {

// Consumer side of a CUDA IPC fetch. A grant this rank kept from an earlier fetch of the same
// export serves at once while the owner's export table says the export lives (no round trip);
// otherwise ask the owner for the grant (it checks the token). Then on this rank's device: import
// the pool and the allocation (each once), copy. Where the path itself fails (not the token), the
// fetch goes the staged way and later ones from that owner too.
void registry_state::fetch_ipc(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst,
                               const local::device& dst_dev, const std::shared_ptr<local::promise<void>>& shared) {
  if (auto kept_now = kept_for(handle.token)) {
    copy_granted(kept_now->grant, true, handle, dst, dst_dev, shared);
    return;
  }
  const int owner = static_cast<int>(handle.token.node_id);
  ipc_ask ask;
  ask.token = handle.token;
  ask.job = handle.job;
  ask.consumer = static_cast<std::uint32_t>(rank);
  auto owner_server = router_->lookup<server_msg>(owner, k_server_name);
  auto answer = owner_server.ask<ipc_grant>(
      [&](local::reply_to<ipc_grant> reply) {
        ask.reply = std::move(reply);
        return server_msg(std::move(ask));
      },
      std::chrono::seconds(60));
  answer.then([self = shared_from_this(), shared, owner, dst, dst_dev, handle](const result<ipc_grant>& grant) {
    if (!grant) {
      const auto& e = grant.error_value();
      if (e.code() == errc::unavailable && e.message().starts_with("ipc: ")) {
        self->ipc_failed(owner, e);
        self->fetch_staged(handle, dst, dst_dev, shared);
        return;
      }
      shared->set_error(e.with_context("fetching " + to_string(handle.token)));
      return;
    }
    self->copy_granted(*grant, false, handle, dst, dst_dev, shared);
  });
}

void registry_state::copy_granted(const ipc_grant& grant, bool by_kept_grant, const remote_buffer& handle,
                                  const local::gpu_ref<std::uint8_t>& dst, const local::device& dst_dev,
                                  const std::shared_ptr<local::promise<void>>& shared) {
  const int owner = static_cast<int>(handle.token.node_id);
  if (handle.bytes > grant.bytes) {
    // A token (bytes from the wire) that claims more than was exported: never read past the end.
    shared->set_error(error(errc::invalid_argument,
                            "fetching " + to_string(handle.token) + ": the token says " + std::to_string(handle.bytes) +
                                " bytes, rank " + std::to_string(owner) + " exported " + std::to_string(grant.bytes)));
    return;
  }
  auto path_failed = std::make_shared<bool>(false);
  const std::string name = fd_server_name(owner);
  dst_dev
      .run(
          [self = shared_from_this(), owner, grant, name, dst, bytes = handle.bytes,
           path_failed](const local::stream_context& ctx) -> result<void> {
            auto pool = self->importer.pool(owner, grant.pool_id, name, ctx.device);
            if (!pool) {
              *path_failed = true;
              return pool.error_value();
            }
            auto src = self->importer.allocation(owner, grant.pin, *pool, grant.allocation, ctx.device);
            if (!src) {
              *path_failed = src.error_value().code() != errc::stale_ref;
              return src.error_value();
            }
            auto copied = ipc_importer::copy(dst.block()->ptr, *src, bytes, ctx.stream);
            if (!copied) *path_failed = true;
            return copied;
          },
          {dst.block()})
      .then([self = shared_from_this(), shared, owner, grant, by_kept_grant, dst, dst_dev, handle,
             path_failed](const result<void>& r) {
        if (r) {
          if (by_kept_grant) {
            self->fast_fetches.fetch_add(1, std::memory_order_relaxed);
          } else {
            self->keep(handle.token, grant);
          }
          shared->set_value();
        } else if (*path_failed) {
          self->ipc_failed(owner, r.error_value());
          self->fetch_staged(handle, dst, dst_dev, shared);
        } else if (by_kept_grant && r.error_value().code() == errc::stale_ref) {
          // The export ended while this fetch went by the kept grant: the owner says how.
          self->forget_kept(owner, grant.pin);
          self->fetch_ipc(handle, dst, dst_dev, shared);
        } else {
          shared->set_error(r.error_value().with_context("fetching " + to_string(handle.token)));
        }
      });
}

// Owner side of an NCCL fetch: check the token, queue the send on the consumer's channel (opening
// this side the first time), answer with its number there. A refusal of the path (not of the
// token) starts with "nccl:", and the consumer then takes the staged path.
void registry_state::serve_nccl(nccl_ask& ask) {
  if (ask.job != job) {
    return ask.reply.fail(error(errc::invalid_argument, "token from another job (job tag " + std::to_string(ask.job) +
                                                            ", this job " + std::to_string(job) + ")"));
  }
  auto entry = resolve(ask.token);
  if (!entry) return ask.reply.fail(entry.error_value());
  if (ask.length > entry->block->bytes) {
    return ask.reply.fail(error(errc::invalid_argument, "fetch of " + std::to_string(ask.length) + " bytes from " +
                                                            std::to_string(entry->block->bytes)));
  }
  const local::device* dev = device_of(*entry->block);
  if (!dev) return ask.reply.fail(error(errc::stale_ref, to_string(ask.token) + ": its device is gone"));
  auto refuse = [&](const std::string& why) { ask.reply.fail(error(errc::unavailable, "nccl: " + why)); };
  if (!nccl) return refuse("rank " + std::to_string(rank) + " has no NCCL fetch channels");
  if (dev->kind() != local::device_kind::cuda) return refuse("the buffer is in host memory");
  const int consumer = static_cast<int>(ask.consumer);
  auto seq = nccl->send(consumer, ask.channel, ask.id, dev->index(), entry->block, ask.length,
                        [consumer, token = ask.token](result<void> sent) {
                          if (!sent) {
                            logger()->warn("NCCL send of {} to rank {} failed: {}", to_string(token), consumer,
                                           sent.error_value().describe());
                          }
                        });
  if (!seq) return refuse(seq.error_value().describe());
  ask.reply.send(nccl_ready{*seq, ask.length});
}

// Consumer side of an NCCL fetch: name the channel, ask, receive by the owner's number. Where the
// path itself fails (this rank cannot make a channel, or the owner refuses it), this fetch and
// later ones from that owner go the staged way.
void registry_state::fetch_nccl(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst,
                                const local::device& dst_dev, const std::shared_ptr<local::promise<void>>& shared) {
  const int owner = static_cast<int>(handle.token.node_id);
  auto ch = nccl->receiving_channel(owner, static_cast<int>(handle.token.device_id), dst_dev.index());
  if (!ch) {
    nccl_failed(owner, ch.error_value());
    return fetch_staged(handle, dst, dst_dev, shared);
  }
  nccl_ask ask;
  ask.token = handle.token;
  ask.length = handle.bytes;
  ask.job = handle.job;
  ask.consumer = static_cast<std::uint32_t>(rank);
  ask.channel = ch->number;
  ask.id = ch->id;
  auto answer = router_->lookup<server_msg>(owner, k_server_name)
                    .ask<nccl_ready>(
                        [&](local::reply_to<nccl_ready> reply) {
                          ask.reply = std::move(reply);
                          return server_msg(std::move(ask));
                        },
                        std::chrono::seconds(60));
  const std::uint64_t number = ch->number;
  answer.then(
      [self = shared_from_this(), shared, owner, number, handle, dst, dst_dev](const result<nccl_ready>& ready) {
        if (!ready) {
          const auto& e = ready.error_value();
          if (e.code() == errc::unavailable && e.message().starts_with("nccl: ")) {
            self->nccl_failed(owner, e);
            self->fetch_staged(handle, dst, dst_dev, shared);
          } else {
            shared->set_error(e.with_context("fetching " + to_string(handle.token)));
          }
          return;
        }
        self->nccl->receive(owner, number, ready->seq, dst.block(), handle.bytes,
                            [self, shared, owner, handle, dst, dst_dev](result<void> got) {
                              if (!got && got.error_value().code() == errc::unavailable &&
                                  got.error_value().message().starts_with("nccl: ")) {
                                self->nccl_failed(owner, got.error_value());
                                return self->fetch_staged(handle, dst, dst_dev, shared);
                              }
                              if (!got) got = got.error_value().with_context("receiving " + to_string(handle.token));
                              shared->set_result(std::move(got));
                            });
      });
}

// Consumer side of a staged fetch: the owner reads the buffer into host memory and sends it with
// MPI on the registry's communicator under a tag of this fetch's own; this rank uploads it.
void registry_state::fetch_staged(const remote_buffer& handle, const local::gpu_ref<std::uint8_t>& dst,
                                  const local::device& dst_dev, const std::shared_ptr<local::promise<void>>& shared) {
  const int owner = static_cast<int>(handle.token.node_id);
  const std::uint32_t tag = next_tag.fetch_add(1) % (1u << 20) + 1;  // within every MPI's tag range
  fetch_ask ask;
  ask.request = serialization::fetch_request{handle.token, 0, handle.bytes, tag};
  ask.job = handle.job;
  ask.consumer = static_cast<std::uint32_t>(rank);
  auto owner_server = router_->lookup<server_msg>(owner, k_server_name);
  auto answer = owner_server.ask<serialization::fetch_ready>(
      [&](local::reply_to<serialization::fetch_ready> reply) {
        ask.reply = std::move(reply);
        return server_msg(std::move(ask));
      },
      std::chrono::seconds(60));
  answer.then([state = shared_from_this(), shared, owner, dst, dst_dev, token = handle.token,
               bytes = handle.bytes](const result<serialization::fetch_ready>& ready) {
    if (!ready) {
      shared->set_error(ready.error_value().with_context("fetching " + to_string(token)));
      return;
    }
    if (dst_dev.kind() == local::device_kind::host) {
      // Host memory: MPI writes the target itself (it is the caller's until the future resolves).
      state->mover->receive(owner, static_cast<int>(ready->transfer_tag), dst.block()->ptr, bytes, dst.block(),
                            [shared, token](result<void> got) {
                              if (!got) got = got.error_value().with_context("receiving " + to_string(token));
                              shared->set_result(std::move(got));
                            });
      return;
    }
    auto staging = state->staging(bytes);
    const auto t_ready = std::chrono::steady_clock::now();
    state->mover->receive(
        owner, static_cast<int>(ready->transfer_tag), staging.get(), bytes, staging,
        [shared, staging, dst, dst_dev, token, bytes, t_ready](result<void> got) {
          if (!got) {
            shared->set_error(got.error_value().with_context("receiving " + to_string(token)));
            return;
          }
          const auto t_got = std::chrono::steady_clock::now();
          logger()->debug("fetch: {} bytes received {:.1f} us after the owner's answer", bytes,
                          std::chrono::duration<double, std::micro>(t_got - t_ready).count());
          dst_dev
              .upload(dst, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(staging.get()), bytes))
              .then([shared, staging, t_got](const result<void>& up) {
                logger()->debug(
                    "fetch: uploaded in {:.1f} us",
                    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t_got).count());
                shared->set_result(up);
              });
        });
  });
}

}  // namespace detail

fetch_route buffer_registry::route_from(int owner_rank) const {
  if (owner_rank != state_->rank) {
    // (The GPU paths are possible only where this rank has a GPU: their servers run only then.)
    return state_->route_to(owner_rank, true);
  }
  return state_->devices.size() > 1 ? fetch_route::peer_copy : fetch_route::local_copy;
}

std::size_t buffer_registry::exported() const {
  std::lock_guard lock(state_->mutex);
  return state_->exports.size();
}

std::size_t buffer_registry::ipc_pins() const {
  std::lock_guard lock(state_->mutex);
  return state_->pins.size();
}

std::uint64_t buffer_registry::ipc_fetches_without_asking() const {
  return state_->fast_fetches.load(std::memory_order_relaxed);
}

std::uint32_t buffer_registry::job_tag() const { return state_->job; }

}  // namespace atomr::cluster
