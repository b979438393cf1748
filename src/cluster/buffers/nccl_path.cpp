// The NCCL path (GPU to GPU between nodes): the owner queues a send on the consumer's channel, the
// consumer receives by the owner's number.
#include "registry_state.hpp"

namespace atomr::cluster::detail {

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

}  // namespace atomr::cluster::detail
