// world::plan_call: a long per-request group of small all_reduces planned whole, before its
// requests are made. The rank offers the plan in the exchange at the call's head, so that the
// call's later parts are issued as their caller hands them over, with no exchange each. With an
// exchange per part, both ranks' progress threads took turns on every plan (each waited for the
// other's offer between its own issuing, settling and freeing), and a call of 1000 x 2 KiB
// all_reduces ended 300-400 us after its caller returned on two H200s joined by NV18 NVLink.
#include <algorithm>

#include "atomr/cluster/engine/comm_backend.hpp"
#include "atomr/cluster/engine/world_engine.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/pointer_set.hpp"

namespace atomr::cluster {

std::unique_ptr<detail::call_plan> world::plan_call(const std::vector<coll_spec>& specs, pointer_set& used,
                                                    std::vector<std::size_t>& counts, bool counted) const {
  constexpr std::size_t k_part = world_engine::k_submit_part;
  const auto& options = engine_->options();
  // (Check mode compares every batch's head across ranks: it keeps an exchange per batch.)
  if (specs.size() <= k_part || options.check) return nullptr;
  auto plan = std::make_unique<detail::call_plan>();
  const std::size_t most = std::min(specs.size(), detail::call_plan::k_most);
  const coll_spec* first = nullptr;  // of the batch
  std::size_t batch_bytes = 0;
  std::size_t n = 0;
  for (; n < most; ++n) {
    const auto& s = specs[n];
    if (s.kind != coll_kind::all_reduce) break;
    // Every request the plan covers must be made: a refused one would leave the other ranks'
    // batches waiting for it. (make_request takes the count found here rather than check again:
    // the spec holds its buffers, and nothing else changes in between.)
    const auto count = counted ? result<std::size_t>(counts[n]) : checked_count(s);
    if (!count) break;
    if (!counted) counts.push_back(*count);
    const std::size_t bytes = *count * local::size_of(s.type);
    if (!engine_->packs_shape(s.kind, bytes)) break;
    // The requests of one plan touch distinct buffers (a request on a buffer an earlier one uses
    // cannot pack with it, and waits for it).
    if (!mark_buffers(used, s)) break;
    // A batch per options.call_batch requests (whole parts of the call, as it hands them over
    // while it makes the rest: see submit_group(each_request)), and wherever the type or reduction changes or the
    // pack would outgrow its buffer.
    const bool cut = first == nullptr || n % options.call_batch == 0 || s.type != first->type ||
                     s.params.op != first->params.op || batch_bytes + bytes > options.pack_capacity;
    if (cut) {
      plan->cuts[n / 8] = static_cast<std::uint8_t>(plan->cuts[n / 8] | 1U << (n % 8));
      first = &s;
      batch_bytes = 0;
    }
    batch_bytes += bytes;
  }
  // A call whose first part is all it has of them needs no plan of its own.
  if (n <= k_part) {
    if (!counted) counts.clear();
    return nullptr;
  }
  plan->length = static_cast<std::uint32_t>(n);
  return plan;
}

bool world::mark_buffers(pointer_set& used, const coll_spec& spec) {
  bool distinct = true;
  for (const auto& b : spec.recv) distinct = used.insert(b.get()) && distinct;
  for (const auto& b : spec.send) {
    if (std::find(spec.recv.begin(), spec.recv.end(), b) == spec.recv.end()) {
      distinct = used.insert(b.get()) && distinct;
    }
  }
  return distinct;
}

}  // namespace atomr::cluster
