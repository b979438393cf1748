// The buffer registry: exports (a table of leased blocks), the owner's fetch server (an actor
// published through the router as "atomr.buffers") and the route each fetch takes. The state and
// the transfer paths are described in registry_state.hpp.
#include "atomr/cluster/buffer_registry.hpp"

#include <random>

#include "atomr/cluster/buffers/tunables.hpp"
#include "atomr/cluster/coll/tunables.hpp"
#include "atomr/cluster/liveness.hpp"
#include "registry_state.hpp"

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

result<registry_state::export_entry> registry_state::resolve(const gpu_token& token) const {
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

void registry_state::end_export(std::uint64_t id, const std::string& why) {
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

void registry_state::unpin_consumer(int consumer) {
  std::lock_guard lock(mutex);
  std::erase_if(pins, [&](const auto& p) { return p.second.consumer == consumer; });
  std::erase_if(pin_of, [&](const auto& p) { return p.first.first == consumer; });
}

void registry_state::device_rebuilt(const std::shared_ptr<local::device_state>& state) {
  std::lock_guard lock(mutex);
  for (auto& [id, e] : exports) {
    if (e.slot != export_table::k_no_slot && e.block->state.lock() == state) {
      if (table) table->clear(e.slot);
      e.slot = export_table::k_no_slot;
    }
  }
}

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

// Which ranks share this node (CUDA IPC works only between them).
result<void> mark_same_node(registry_state& s, int size) {
  MPI_Comm node = MPI_COMM_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &node)));
  int local = 0;
  MPI_Group node_group, all_group;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(node, &local)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(node, &node_group)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(s.comm, &all_group)));
  std::vector<int> in_node(static_cast<std::size_t>(local)), in_all(static_cast<std::size_t>(local));
  for (int i = 0; i < local; ++i) in_node[static_cast<std::size_t>(i)] = i;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Group_translate_ranks(node_group, local, in_node.data(), all_group, in_all.data())));
  for (const int peer : in_all) {
    if (peer >= 0 && peer < size) s.same_node[static_cast<std::size_t>(peer)] = 1;
  }
  MPI_Group_free(&node_group);
  MPI_Group_free(&all_group);
  MPI_Comm_free(&node);
  return ok();
}

// The fd server for CUDA IPC, the export table and the device watches that clear it (a failure
// only costs the fast path).
void start_ipc(const std::shared_ptr<registry_state>& state) {
  auto fds = fd_server::start(state->fd_server_name(state->rank),
                              [weak = std::weak_ptr(state)](std::uint64_t key) -> result<fd_server::provided> {
                                auto s = weak.lock();
                                if (!s) return error(errc::unavailable, "the buffer registry has stopped");
                                return s->provide_pool(key);
                              });
  if (fds) {
    state->fds = std::move(*fds);
    if (auto t = export_table::create(registry_state::k_table_slots)) {
      std::lock_guard lock(state->mutex);
      state->table = std::move(*t);
    } else {
      logger()->info("no export table ({}): every CUDA IPC fetch asks the owner", t.error_value().describe());
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
    logger()->warn("CUDA IPC off: {}", fds.error_value().describe());
  }
}

// NCCL channels, where this rank has a GPU (ATOMR_FETCH_NCCL; nccl_fetch.hpp).
result<void> start_nccl(registry_state& s, int size, bool any_gpu) {
  for (int p = 0; p < size; ++p) s.nccl_off.push_back(std::make_unique<std::atomic<bool>>(false));
  const std::string nccl_mode = tunable_value(tunables::fetch_nccl);
  if (nccl_mode != "auto" && nccl_mode != "1" && nccl_mode != "0") {
    return error(errc::invalid_argument,
                 std::string(tunables::fetch_nccl.env) + "=" + nccl_mode + ": expected auto, 1 or 0");
  }
  if (nccl_fetch_built() && any_gpu && nccl_mode != "0") {
    ATOMR_ASSIGN_OR_RETURN(const auto open_ms, tunable_int(tunables::coll_init_timeout));
    ATOMR_ASSIGN_OR_RETURN(const auto transfer_ms, tunable_int(tunables::coll_timeout));
    ATOMR_ASSIGN_OR_RETURN(
        s.nccl, nccl_mover::start(std::chrono::milliseconds(open_ms), std::chrono::milliseconds(transfer_ms)));
    s.nccl_first = nccl_mode == "1";
  }
  return ok();
}

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
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(state->comm, &size)));
  state->same_node.assign(static_cast<std::size_t>(size), 0);
  for (int p = 0; p < size; ++p) state->ipc_off.push_back(std::make_unique<std::atomic<bool>>(false));
  ATOMR_TRY(detail::mark_same_node(*state, size));
  const bool any_gpu = std::any_of(state->devices.begin(), state->devices.end(),
                                   [](const local::device& d) { return d.kind() == local::device_kind::cuda; });
  if (detail::cuda_ipc_built() && any_gpu && tunable_value(tunables::cuda_ipc) != "0") detail::start_ipc(state);
  ATOMR_TRY(detail::start_nccl(*state, size, any_gpu));
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
  // Stopped, not destroyed: a reply continuation on the router thread holds the state and may
  // still reach the movers; they outlive the registry with it and fail such late transfers.
  state_->mover->stop();
  if (state_->nccl) state_->nccl->stop();
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
