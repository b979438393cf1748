#include "graph_cache.hpp"

#include <algorithm>

#include "atomr/local/cuda_check.hpp"

namespace atomr::cluster::detail {

graph_cache::key graph_cache::key_of(const coll_spec& spec, std::size_t count, std::size_t member) {
  key k;
  k.v[0] = static_cast<std::uint64_t>(spec.kind) | static_cast<std::uint64_t>(spec.type) << 8 |
           static_cast<std::uint64_t>(spec.params.op) << 16 |
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(spec.params.root)) << 32;
  k.v[1] = count;
  k.v[2] = member < spec.send.size() ? spec.send[member]->id : 0;
  k.v[3] = member < spec.recv.size() ? spec.recv[member]->id : 0;
  return k;
}

graph_cache::holding graph_cache::lookup(const key& k) {
  std::lock_guard lock(mutex_);
  sweep_locked();
  holding h;
  for (auto& e : entries_) {
    if (e.k == k) {
      h.capture = e.capture;
      break;
    }
  }
  h.seen = h.capture != 0 || std::find(seen_.begin(), seen_.end(), k) != seen_.end();
  return h;
}

void graph_cache::note_issued(const key& k) {
  std::lock_guard lock(mutex_);
  if (std::find(seen_.begin(), seen_.end(), k) != seen_.end()) return;
  if (seen_.size() < k_seen_most) {
    seen_.push_back(k);
  } else {
    seen_[seen_next_] = k;
    seen_next_ = (seen_next_ + 1) % k_seen_most;
  }
}

result<void> graph_cache::capture_and_launch(const key& k, std::uint64_t id, cudaStream_t stream,
                                             std::vector<std::shared_ptr<local::buffer_block>> blocks,
                                             const std::function<result<void>()>& enqueue) {
  // Thread-local mode: other threads of the process (device actors, the program) may allocate
  // meanwhile; only this thread's unsafe calls would break the capture.
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)));
  auto enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  auto ended = ATOMR_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  result<void> made = !enqueued ? std::move(enqueued) : std::move(ended);
  if (made) made = ATOMR_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  if (graph != nullptr) (void)cudaGraphDestroy(graph);  // (the executable graph keeps what it needs)
  ATOMR_TRY(made);
  std::lock_guard lock(mutex_);
  if (closed_) {
    (void)cudaGraphExecDestroy(exec);
    return error(errc::aborted, "the NCCL communicator was aborted during a graph capture");
  }
  auto found = std::find_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.k == k; });
  if (found == entries_.end() && entries_.size() >= k_graphs_most) {
    found = std::min_element(entries_.begin(), entries_.end(),
                             [](const entry& a, const entry& b) { return a.used < b.used; });
  }
  if (found != entries_.end()) {
    (void)cudaGraphExecDestroy(found->exec);
    entries_.erase(found);
  }
  // (Each block once: in place, send and recv are one block, and sweep_locked counts references.)
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  entries_.push_back(entry{k, id, exec, std::move(blocks), ++clock_});
  return ATOMR_CUDA_CHECK(cudaGraphLaunch(exec, stream));
}

result<void> graph_cache::launch(const key& k, std::uint64_t id, cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  for (auto& e : entries_) {
    if (e.k == k && e.capture == id) {
      e.used = ++clock_;
      return ATOMR_CUDA_CHECK(cudaGraphLaunch(e.exec, stream));
    }
  }
  return error(errc::internal, "the CUDA graph of capture " + std::to_string(id) +
                                   " is gone (the communicator was aborted, or the ranks disagreed)");
}

void graph_cache::drop_all() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (auto& e : entries_) (void)cudaGraphExecDestroy(e.exec);
  entries_.clear();
}

std::size_t graph_cache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void graph_cache::sweep_locked() {
  // A buffer the program let go of is never seen again (block ids are not reused): its graph
  // would only keep the memory.
  std::erase_if(entries_, [](const entry& e) {
    const bool orphan = std::any_of(e.blocks.begin(), e.blocks.end(), [](const auto& b) { return b.use_count() == 1; });
    if (orphan) (void)cudaGraphExecDestroy(e.exec);
    return orphan;
  });
}

}  // namespace atomr::cluster::detail
