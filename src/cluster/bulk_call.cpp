// world::bulk_shape and world::submit_bulk: a long call of small all_reduces made into bulk
// calls (detail::bulk_call), each one request to the engine.
#include <algorithm>

#include "atomr/cluster/world.hpp"
#include "atomr/common/pointer_set.hpp"
#include "comm_backend.hpp"
#include "world_engine.hpp"

namespace atomr::cluster {

bool world::bulk_shape(const std::vector<coll_spec>& specs, std::vector<std::size_t>& counts) const {
  const auto& options = engine_->options();
  // (Check mode compares every request's signature across ranks: it keeps one request each.)
  if (!options.bulk || options.check || specs.size() <= world_engine::k_submit_part) return false;
  const bool counted = !counts.empty();
  std::vector<std::size_t> found;
  if (!counted) found.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    if (s.kind != coll_kind::all_reduce) return false;
    std::size_t count = 0;
    if (counted) {
      count = counts[i];
    } else {
      // (A request that fails its check leaves the call to submit_call, which fails its future.)
      const auto c = checked_count(s);
      if (!c) return false;
      count = *c;
      found.push_back(count);
    }
    if (!engine_->packs_shape(s.kind, count * local::size_of(s.type))) return false;
  }
  if (!counted) counts = std::move(found);
  return true;
}

void world::submit_bulk(std::vector<coll_spec>&& specs, const std::vector<std::size_t>& counts, bool group,
                        std::vector<std::optional<future<void>>>& out) const {
  const auto& options = engine_->options();
  // Entries per bulk call: a call is handed over a bulk call at a time, so that the engine agrees
  // on and issues the first while the caller makes the next (made whole first, 1000 x 2 KiB ran
  // 30-40 % slower at one rank on the 2-core machine). The same on every rank (ranks may set
  // call_batch unalike: their cuts are merged).
  constexpr std::size_t k_most = 256;
  static_assert(k_most <= detail::call_plan::k_most);
  const std::uint64_t together = engine_->together_id();
  // The buffers the bulk call touches so far, and those it writes: each gets one ticket (the call
  // is one request), and an entry on a buffer an earlier entry touches starts a batch. (Kept per
  // thread for their tables, as submit_call's set is; a call made from a continuation that this
  // call runs while it hands over has its own.)
  thread_local pointer_set kept_touched, kept_written;
  thread_local bool kept_in_use = false;
  pointer_set own_touched, own_written;
  const bool nested = kept_in_use;
  pointer_set& touched = nested ? own_touched : kept_touched;
  pointer_set& written = nested ? own_written : kept_written;
  kept_in_use = true;
  struct release {
    bool nested;
    ~release() {
      if (!nested) kept_in_use = false;
    }
  } released_on_exit{nested};
  for (std::size_t first = 0; first < specs.size(); first += k_most) {
    const std::size_t n = std::min(k_most, specs.size() - first);
    const bool last = first + n == specs.size();
    auto bulk = engine_->take_bulk();
    auto& b = *bulk;
    b.entries.reserve(n);
    b.pointers.reserve(n);
    touched.reset(2 * n);
    written.reset(n);
    const auto head_type = specs[first].type;
    auto carrier = std::make_unique<detail::coll_request>(
        coll_spec{coll_kind::all_reduce, head_type, specs[first].params, {}, {}});
    if (group && last) carrier->done = promise<void>();  // (the call's one future)
    local::dtype batch_type = head_type;
    reduce_op batch_op = specs[first].params.op;
    std::size_t batch_bytes = 0;
    std::size_t total_bytes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      auto& s = specs[first + i];
      const std::size_t count = counts[first + i];
      const std::size_t bytes = count * local::size_of(s.type);
      bool repeat = false;
      for (const auto& blk : s.recv) repeat = repeat || touched.contains(blk.get());
      for (const auto& blk : s.send) repeat = repeat || written.contains(blk.get());
      // Hazards, as for one request with all these buffers: it waits for earlier writes to
      // everything it touches, and is one write to everything it writes.
      for (const auto& blk : s.recv) {
        if (written.insert(blk.get())) carrier->writes.push_back({blk.get(), blk->request_write()});
        touched.insert(blk.get());
      }
      for (const auto& blk : s.send) {
        if (!written.contains(blk.get()) && touched.insert(blk.get())) {
          carrier->reads.push_back({blk.get(), blk->writes_requested()});
        }
      }
      // A batch per call_batch entries, and wherever the type or reduction changes, the pack would
      // outgrow its buffer, or the entry touches a buffer an earlier one did (as plan_call cuts,
      // which this rank may meet on another: the cuts are merged).
      const bool cut = i == 0 || i % options.call_batch == 0 || s.type != batch_type || s.params.op != batch_op ||
                       batch_bytes + bytes > options.pack_capacity || repeat;
      if (cut) {
        b.set_cut(i);
        batch_type = s.type;
        batch_op = s.params.op;
        batch_bytes = 0;
      }
      b.repeats = b.repeats || repeat;
      batch_bytes += bytes;
      total_bytes += bytes;
      auto& e = b.entries.emplace_back(std::move(s));
      e.count = count;
      if (!group) e.done = promise<void>();
    }
    for (auto& e : b.entries) b.pointers.push_back(&e);
    carrier->count = std::max<std::size_t>(1, total_bytes / local::size_of(head_type));
    carrier->ends_call = last;
    carrier->bulk = std::move(bulk);
    auto futures = engine_->submit_bulk(std::move(carrier), together, !last);
    if (group) {
      if (last && !futures.empty()) out[0] = std::move(futures.back());
    } else {
      for (std::size_t j = 0; j < futures.size() && j < n; ++j) out[first + j] = std::move(futures[j]);
    }
  }
}

}  // namespace atomr::cluster
