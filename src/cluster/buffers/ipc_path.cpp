// The CUDA IPC path (same node): the owner pins and grants, the consumer imports and copies; grants
// kept for the export table's fetch without a round trip.
#include <unistd.h>

#include "registry_state.hpp"

namespace atomr::cluster::detail {

std::optional<registry_state::kept_grant> registry_state::kept_for(const gpu_token& token) {
  std::lock_guard lock(kept_mutex);
  const auto it = kept.find({static_cast<int>(token.node_id), token.buffer_id, token.generation});
  if (it == kept.end()) return std::nullopt;
  if (!it->second.view->live(it->second.grant.slot, token.buffer_id)) {
    kept.erase(it);  // ended: the owner says why
    return std::nullopt;
  }
  return it->second;
}

void registry_state::keep(const gpu_token& token, const ipc_grant& grant) {
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

void registry_state::forget_kept(int owner, std::optional<std::uint64_t> pin) {
  std::lock_guard lock(kept_mutex);
  std::erase_if(kept,
                [&](const auto& k) { return std::get<0>(k.first) == owner && (!pin || k.second.grant.pin == *pin); });
  if (!pin) views.erase(owner);
}

result<std::uint64_t> registry_state::pool_of(const local::device& dev, std::uint64_t generation) {
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

void registry_state::serve_ipc(ipc_ask& ask) {
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

void registry_state::unmap(int owner, std::uint64_t pin) {
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

result<fd_server::provided> registry_state::provide_pool(std::uint64_t id) {
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

}  // namespace atomr::cluster::detail
