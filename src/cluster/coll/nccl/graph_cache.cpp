#include "graph_cache.hpp"

#include <algorithm>

#include "atomr/common/log.hpp"
#include "atomr/local/cuda_check.hpp"

namespace atomr::cluster::detail {

namespace {
// "3 nodes: 1 kernel, 2 host" (at debug level, once per capture: what a launch replays).
std::string describe_nodes(cudaGraph_t graph) {
  std::size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) return "nodes unknown";
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0 && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) return "nodes unknown";
  std::size_t kernel = 0, host = 0, memory = 0, event = 0, other = 0;
  for (auto node : nodes) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) t = cudaGraphNodeTypeCount;
    switch (t) {
      case cudaGraphNodeTypeKernel: ++kernel; break;
      case cudaGraphNodeTypeHost: ++host; break;
      case cudaGraphNodeTypeMemcpy:
      case cudaGraphNodeTypeMemset: ++memory; break;
      case cudaGraphNodeTypeEventRecord:
      case cudaGraphNodeTypeWaitEvent: ++event; break;
      default: ++other; break;
    }
  }
  return fmt::format("{} nodes: {} kernel, {} host, {} copy or set, {} event, {} other", n, kernel, host, memory, event,
                     other);
}
}  // namespace

namespace {
// A request's words (see key_of), appended: a chain's or a packed batch's key holds hundreds.
template <typename Words>
void append_key(Words& v, const coll_spec& spec, std::size_t count) {
  v.push_back(static_cast<std::uint64_t>(spec.kind) | static_cast<std::uint64_t>(spec.type) << 8 |
              static_cast<std::uint64_t>(spec.params.op) << 16 |
              static_cast<std::uint64_t>(static_cast<std::uint32_t>(spec.params.root)) << 32);
  v.push_back(count);
  // (Send and recv lists are each empty or one block per member; the lengths keep "no send
  // buffer" apart from a block id.)
  v.push_back(spec.send.size() << 32 | spec.recv.size());
  for (const auto& b : spec.send) v.push_back(b->id);
  for (const auto& b : spec.recv) v.push_back(b->id);
}

graph_cache::key key_of_list(std::uint64_t first, std::span<const coll_request* const> list) {
  graph_cache::key k;
  std::size_t words = 2;
  for (const auto* r : list) words += 3 + r->spec.send.size() + r->spec.recv.size();
  k.v.reserve(words);
  k.v.push_back(first);
  k.v.push_back(list.size());
  // (Each request's words straight into the list's: made as a key of its own per request and
  // copied in, they were two thirds of the keying's samples in a profile of prepared calls at one
  // rank.)
  for (const auto* r : list) append_key(k.v, r->spec, r->count);
  return k;
}
}  // namespace

graph_cache::key graph_cache::key_of(const coll_spec& spec, std::size_t count) {
  key k;
  append_key(k.v, spec, count);
  return k;
}

graph_cache::key graph_cache::key_of_chain(std::span<const coll_request* const> chain) {
  return key_of_list(std::uint64_t{1} << 24, chain);
}

graph_cache::key graph_cache::key_of_packed(std::span<const coll_request* const> batch) {
  return key_of_list(std::uint64_t{1} << 25, batch);
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

result<void> graph_cache::capture_and_launch(const key& k, std::uint64_t id, std::span<const cudaStream_t> streams,
                                             std::span<const int> devices,
                                             std::vector<std::shared_ptr<local::buffer_block>> blocks,
                                             const std::function<result<void>()>& enqueue,
                                             std::shared_ptr<void> scratch) {
  // Thread-local mode: other threads of the process (device actors, the program) may allocate
  // meanwhile; only this thread's unsafe calls would break the capture. Every member's stream is
  // captured on its own; NCCL's group enqueues each member's work on its stream.
  entry e;
  e.k = k;
  e.capture = id;
  std::size_t begun = 0;
  result<void> made = ok();
  for (; begun < streams.size() && made; ++begun) {
    made = ATOMR_CUDA_CHECK(cudaSetDevice(devices[begun]));
    if (made) made = ATOMR_CUDA_CHECK(cudaStreamBeginCapture(streams[begun], cudaStreamCaptureModeThreadLocal));
    if (!made) break;
  }
  if (made) made = enqueue();
  // Every capture begun ends, whatever failed (a stream left capturing would fail all later
  // work), before any graph is instantiated (which this thread may not do while it captures).
  std::vector<cudaGraph_t> graphs(begun, nullptr);
  for (std::size_t i = 0; i < begun; ++i) {
    auto ended = ATOMR_CUDA_CHECK(cudaSetDevice(devices[i]));
    if (ended) ended = ATOMR_CUDA_CHECK(cudaStreamEndCapture(streams[i], &graphs[i]));
    if (made && !ended) made = std::move(ended);
  }
  for (std::size_t i = 0; i < begun; ++i) {
    cudaGraphExec_t exec = nullptr;
    if (made) {
      if (const auto lg = log::get("cluster"); lg->should_log(spdlog::level::debug)) {
        lg->debug("CUDA graph of capture {} on member {}: {}", id, i, describe_nodes(graphs[i]));
      }
      made = ATOMR_CUDA_CHECK(cudaSetDevice(devices[i]));
      if (made) made = ATOMR_CUDA_CHECK(cudaGraphInstantiate(&exec, graphs[i], 0));
    }
    if (exec != nullptr) e.execs.push_back(exec);
    if (graphs[i] != nullptr) (void)cudaGraphDestroy(graphs[i]);  // (the executable graph keeps what it needs)
  }
  if (!made) {
    destroy(e);
    return made;
  }
  std::lock_guard lock(mutex_);
  if (closed_) {
    destroy(e);
    return error(errc::aborted, "the NCCL communicator was aborted during a graph capture");
  }
  auto found = std::find_if(entries_.begin(), entries_.end(), [&](const entry& x) { return x.k == k; });
  if (found == entries_.end() && entries_.size() >= k_graphs_most) {
    found = std::min_element(entries_.begin(), entries_.end(),
                             [](const entry& a, const entry& b) { return a.used < b.used; });
  }
  if (found != entries_.end()) {
    destroy(*found);
    entries_.erase(found);
  }
  // (Each block once: in place, send and recv are one block, and sweep_locked counts references.)
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  e.blocks = std::move(blocks);
  e.scratch = std::move(scratch);
  e.used = ++clock_;
  entries_.push_back(std::move(e));
  for (std::size_t i = 0; i < streams.size(); ++i) {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGraphLaunch(entries_.back().execs[i], streams[i])));
  }
  return ok();
}

result<void> graph_cache::launch(const key& k, std::uint64_t id, std::span<const cudaStream_t> streams) {
  std::lock_guard lock(mutex_);
  for (auto& e : entries_) {
    if (e.capture == id && e.k == k) {  // (the id first: a packed batch's key is hundreds of words)
      e.used = ++clock_;
      // (A graph launches on a stream of another device than the current one: no cudaSetDevice.)
      for (std::size_t i = 0; i < streams.size(); ++i)
        ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGraphLaunch(e.execs[i], streams[i])));
      return ok();
    }
  }
  return error(errc::internal, "the CUDA graph of capture " + std::to_string(id) +
                                   " is gone (the communicator was aborted, or the ranks disagreed)");
}

void graph_cache::destroy(const entry& e) {
  for (auto exec : e.execs) (void)cudaGraphExecDestroy(exec);
}

void graph_cache::drop_all() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  for (auto& e : entries_) destroy(e);
  entries_.clear();
}

std::size_t graph_cache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void graph_cache::sweep_locked() {
  // A buffer the program let go of is never seen again (block ids are not reused): its graph
  // would only keep the memory. One block an entry a look, in turn: a packed batch's graph holds
  // hundreds, each count a line the program's threads write as they make their requests, and
  // every lookup (every vote) reading all of them would pay a cache miss each. A graph of a
  // dropped buffer goes within as many lookups as it holds blocks (at once where the program
  // dropped them all), or sooner as the least recently used.
  std::erase_if(entries_, [](entry& e) {
    if (e.blocks.empty()) return false;
    const bool orphan = e.blocks[e.swept++ % e.blocks.size()].use_count() == 1;
    if (orphan) destroy(e);
    return orphan;
  });
}

}  // namespace atomr::cluster::detail
