// The staged path: the owner reads the buffer into host memory (pinned, reused) and sends it with
// MPI; the consumer receives and uploads it.
#include "registry_state.hpp"

namespace atomr::cluster::detail {

std::byte* registry_state::allocate_staging(std::size_t bytes) {
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

void registry_state::free_staging(std::byte* p) {
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

std::shared_ptr<std::byte> registry_state::staging(std::size_t bytes) {
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

void registry_state::serve(fetch_ask& ask, int consumer) {
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
  auto send = [self = shared_from_this(), reply, ready, consumer](const void* data, std::shared_ptr<const void> keep) {
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

}  // namespace atomr::cluster::detail
