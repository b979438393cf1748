// The NCCL backend's CUDA graphs: a request, a chain of requests or a packed batch captured once
// into a graph (graph_cache) and replayed when the ranks vote to.
#include <nccl.h>

#include <vector>

#include "atomr/cluster/nccl_check.hpp"
#include "atomr/local/cuda_check.hpp"
#include "nccl_backend_impl.hpp"

namespace atomr::cluster::detail {

comm_backend::graph_holding nccl_backend::graph_lookup(const coll_request& r) {
  const auto h = graphs_.lookup(graph_cache::key_of(r.spec, r.count));
  return {h.capture, h.seen};
}

result<void> nccl_backend::issue_graph(coll_request& r, const member_waits& waits, graph_step step, std::uint64_t id) {
  const auto k = graph_cache::key_of(r.spec, r.count);
  if (step == graph_step::eager) {
    ATOMR_TRY(issue(r, waits));
    graphs_.note_issued(k);
    return ok();
  }
  ATOMR_TRY(wait_for(waits));
  if (step == graph_step::launch) {
    ATOMR_TRY(graphs_.launch(k, id, streams_));
  } else {
    std::vector<std::shared_ptr<local::buffer_block>> blocks(r.spec.send.begin(), r.spec.send.end());
    blocks.insert(blocks.end(), r.spec.recv.begin(), r.spec.recv.end());
    stall_watch::scope guard(watch_, r.deadline, "an NCCL call captured into a CUDA graph");
    const bool grouped = members_.size() > 1 || r.spec.kind == coll_kind::all_to_all;
    auto calls = [&]() -> result<void> {
      if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
      auto enqueued = enqueue(r);
      if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
      return enqueued;
    };
    ATOMR_TRY(graphs_.capture_and_launch(k, id, streams_, devices_, std::move(blocks), calls));
  }
  r.stamp(trace_stage::called);
  if (!open_) open_ = std::make_shared<nccl_state>();
  r.state = open_;
  return ok();
}

comm_backend::graph_holding nccl_backend::graph_lookup_chain(std::span<const coll_request* const> chain) {
  const auto h = graphs_.lookup(graph_cache::key_of_chain(chain));
  return {h.capture, h.seen};
}

void nccl_backend::graph_note_chain(std::span<const coll_request* const> chain) {
  graphs_.note_issued(graph_cache::key_of_chain(chain));
}

result<void> nccl_backend::issue_graph_chain(std::span<coll_request* const> chain, const member_waits& waits,
                                             graph_step step, std::uint64_t id) {
  if (chain.empty() || step == graph_step::eager) {
    return error(errc::internal, "a chain of requests goes as a graph, captured or launched");
  }
  const auto k = graph_cache::key_of_chain(std::span<const coll_request* const>(chain.data(), chain.size()));
  ATOMR_TRY(wait_for(waits));
  if (step == graph_step::launch) {
    ATOMR_TRY(graphs_.launch(k, id, streams_));
  } else {
    std::vector<std::shared_ptr<local::buffer_block>> blocks;
    for (const auto* r : chain) {
      blocks.insert(blocks.end(), r->spec.send.begin(), r->spec.send.end());
      blocks.insert(blocks.end(), r->spec.recv.begin(), r->spec.recv.end());
    }
    stall_watch::scope guard(watch_, chain.front()->deadline, "NCCL calls captured into a CUDA graph");
    // Each request's calls as it would make them alone, one after another on the stream.
    auto calls = [&]() -> result<void> {
      for (auto* r : chain) {
        const bool grouped = members_.size() > 1 || r->spec.kind == coll_kind::all_to_all;
        if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
        auto enqueued = enqueue(*r);
        if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
        ATOMR_TRY(enqueued);
      }
      return ok();
    };
    ATOMR_TRY(graphs_.capture_and_launch(k, id, streams_, devices_, std::move(blocks), calls));
  }
  if (!open_) open_ = std::make_shared<nccl_state>();
  for (auto* r : chain) {
    r->stamp(trace_stage::called);
    r->state = open_;
  }
  return ok();
}

comm_backend::graph_holding nccl_backend::graph_lookup_packed(std::span<const coll_request* const> batch,
                                                              std::vector<std::uint64_t>* kept) {
  if (kept != nullptr && !kept->empty()) {
    pack_key_.v.assign(kept->begin(), kept->end());
  } else {
    pack_key_ = graph_cache::key_of_packed(batch);
    if (kept != nullptr) kept->assign(pack_key_.v.begin(), pack_key_.v.end());
  }
  pack_key_seq_ = batch.front()->seq;
  const auto h = graphs_.lookup(pack_key_);
  return {h.capture, h.seen};
}

result<void> nccl_backend::issue_packed_graph(std::span<coll_request* const> batch, const member_waits& waits,
                                              graph_step step, std::uint64_t id) {
  // (The vote looked the batch up just before: its key is kept.)
  if (pack_key_seq_ != batch.front()->seq || pack_key_.v.size() < 2 || pack_key_.v[1] != batch.size()) {
    pack_key_ = graph_cache::key_of_packed(std::span<const coll_request* const>(batch.data(), batch.size()));
  }
  pack_key_seq_ = 0;
  if (step == graph_step::eager) {
    ATOMR_TRY(issue_packed(batch, waits));
    graphs_.note_issued(pack_key_);
    return ok();
  }
  ATOMR_TRY(wait_for(waits));
  auto& m = members_[0];
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
  if (step == graph_step::launch) {
    ATOMR_TRY(graphs_.launch(pack_key_, id, streams_));
  } else {
    const std::size_t total = lay_out_pack(batch);
    // The graph's own pack buffer, allocated before the capture and freed after the graph's
    // last launch (stream-ordered: every launch is on this stream).
    void* pack = nullptr;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocFromPoolAsync(&pack, total, m.pack_pool, m.stream)));
    std::shared_ptr<void> scratch(pack, [stream = m.stream](void* p) { (void)cudaFreeAsync(p, stream); });
    std::vector<std::shared_ptr<local::buffer_block>> blocks;
    blocks.reserve(2 * batch.size());
    for (const auto* r : batch) {
      blocks.push_back(r->spec.send[0]);
      blocks.push_back(r->spec.recv[0]);
    }
    stall_watch::scope guard(watch_, batch.front()->deadline, "a packed NCCL all_reduce captured into a CUDA graph");
    auto calls = [&]() -> result<void> {
      ATOMR_TRY(gather_pack(pack));
      ATOMR_TRY(all_reduce_pack(batch, pack, total));
      return scatter_pack(batch, pack);
    };
    ATOMR_TRY(
        graphs_.capture_and_launch(pack_key_, id, streams_, devices_, std::move(blocks), calls, std::move(scratch)));
  }
  coll_request::stamp_all(batch, trace_stage::called);
  auto st = std::make_shared<nccl_state>();
  give_state(batch, st);
  return ok();
}
}  // namespace atomr::cluster::detail
