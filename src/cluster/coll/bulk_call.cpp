// world::bulk_shape and world::submit_bulk: a long call of small all_reduces made into bulk
// calls (detail::bulk_call), each one request to the engine.
#include <algorithm>
#include <array>
#include <span>

#include "atomr/cluster/engine/comm_backend.hpp"
#include "atomr/cluster/engine/world_engine.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/pointer_set.hpp"

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

void world::mark_bulk(detail::bulk_call& b, const std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts,
                      std::size_t first, std::size_t n, pointer_set& touched, pointer_set& written) const {
  const auto& options = engine_->options();
  touched.reset(2 * n);
  written.reset(n);
  local::dtype batch_type = specs[first].type;
  reduce_op batch_op = specs[first].params.op;
  std::size_t batch_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = specs[first + i];
    const std::size_t bytes = counts[first + i] * local::size_of(s.type);
    bool repeat = false;
    for (const auto& blk : s.recv) repeat = repeat || touched.contains(blk.get());
    for (const auto& blk : s.send) repeat = repeat || written.contains(blk.get());
    // Hazards, as for one request with all these buffers: it waits for earlier writes to
    // everything it touches, and is one write to everything it writes (carrier_of).
    for (const auto& blk : s.recv) {
      if (written.insert(blk.get())) b.write_blocks.push_back(blk.get());
      touched.insert(blk.get());
    }
    for (const auto& blk : s.send) {
      if (!written.contains(blk.get()) && touched.insert(blk.get())) b.read_blocks.push_back(blk.get());
    }
    // A batch per call_batch entries, and wherever the type or reduction changes, the pack would
    // outgrow its buffer, or the entry touches a buffer an earlier one did (as plan_call cuts;
    // the ranks' cuts are merged).
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
    b.bytes += bytes;
  }
}

void world::fill_entries(detail::bulk_call& b, std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts,
                         std::size_t first, std::size_t n, bool futures) {
  b.entries.reserve(n);
  b.pointers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& e = b.entries.emplace_back(std::move(specs[first + i]));
    e.count = counts[first + i];
    e.in_bulk = true;
    if (futures) e.done = promise<void>();
  }
  for (auto& e : b.entries) b.pointers.push_back(&e);
}

std::size_t world::bulk_run_most() const {
  // (Alone, a rank agrees with nobody: each bulk call is handed over as soon as it is made.)
  return size() > 1 ? detail::call_plan::k_most : world_engine::k_bulk_most;
}

void world::mark_run(std::span<const std::shared_ptr<detail::bulk_call>> run, const std::vector<coll_spec>& specs,
                     const std::vector<std::size_t>& counts, std::size_t first, std::size_t n, pointer_set& touched,
                     pointer_set& written) const {
  constexpr std::size_t k_most = world_engine::k_bulk_most;
  static_assert(k_most % 8 == 0, "a bulk call's cuts are whole bytes of its run's");
  for (std::size_t j = 0; j < run.size(); ++j) {
    const std::size_t at = j * k_most;
    mark_bulk(*run[j], specs, counts, first + at, std::min(k_most, n - at), touched, written);
  }
  auto& lead = *run.front();
  lead.plan_length = static_cast<std::uint32_t>(n);
  for (std::size_t j = 1; j < run.size(); ++j) {
    const auto& cuts = run[j]->cuts;
    std::copy(cuts.begin(), cuts.begin() + k_most / 8, lead.cuts.begin() + static_cast<std::ptrdiff_t>(j * k_most / 8));
  }
}

std::unique_ptr<detail::coll_request> world::carrier_of(std::shared_ptr<detail::bulk_call> b, bool with_future) {
  const auto& head = b->entries.front().spec;
  auto carrier =
      std::make_unique<detail::coll_request>(coll_spec{coll_kind::all_reduce, head.type, head.params, {}, {}});
  carrier->writes.reserve(b->write_blocks.size());  // (grown one by one, it was copied eight times)
  for (auto* blk : b->write_blocks) carrier->writes.push_back({blk, blk->request_write()});
  for (auto* blk : b->read_blocks) carrier->reads.push_back({blk, blk->writes_requested()});
  carrier->count = std::max<std::size_t>(1, b->bytes / local::size_of(head.type));
  if (with_future) carrier->done = promise<void>();
  carrier->bulk = std::move(b);
  return carrier;
}

void world::submit_bulk(std::vector<coll_spec>&& specs, const std::vector<std::size_t>& counts, bool group,
                        std::vector<std::optional<future<void>>>& out) const {
  constexpr std::size_t k_most = world_engine::k_bulk_most;
  constexpr std::size_t k_run_bulks = detail::call_plan::k_most / k_most;
  static_assert(detail::call_plan::k_most % k_most == 0);
  const std::uint64_t together = engine_->together_id();
  const std::size_t run_most = bulk_run_most();
  // The buffers a bulk call touches so far, and those it writes.
  thread_pointer_sets<struct submit_bulk_sets, 2> sets;
  pointer_set& touched = sets[0];
  pointer_set& written = sets[1];
  std::array<std::shared_ptr<detail::bulk_call>, k_run_bulks> run;
  for (std::size_t first = 0; first < specs.size(); first += run_most) {
    // A run's bulk calls are marked first (their cuts, offered by the first one), then filled
    // and handed over one by one: the progress thread agrees on the run and issues the first
    // while the caller fills the next.
    const std::size_t n = std::min(run_most, specs.size() - first);
    const std::size_t bulks = (n + k_most - 1) / k_most;
    for (std::size_t j = 0; j < bulks; ++j) run[j] = engine_->take_bulk();
    mark_run(std::span(run.data(), bulks), specs, counts, first, n, touched, written);
    for (std::size_t j = 0; j < bulks; ++j) {
      const std::size_t at = first + j * k_most;
      const std::size_t length = std::min(k_most, n - j * k_most);
      const bool last = at + length == specs.size();
      fill_entries(*run[j], specs, counts, at, length, !group);
      auto carrier = carrier_of(std::move(run[j]), group && last);  // (a group's one future)
      carrier->ends_call = last;
      auto futures = engine_->submit_bulk(std::move(carrier), together, !last);
      if (group) {
        if (last && !futures.empty()) out[0] = std::move(futures.back());
      } else {
        for (std::size_t e = 0; e < futures.size() && e < length; ++e) out[at + e] = std::move(futures[e]);
      }
    }
  }
}

result<std::optional<future<void>>> world::hand_over_prepared(const group_call& call) const {
  const auto& bulks = call.bulks_;
  // Each bulk call is this submission's until the engine is done with it.
  std::size_t claimed = 0;
  while (claimed < bulks.size() && !bulks[claimed]->busy.exchange(true, std::memory_order_acq_rel)) ++claimed;
  auto unclaim = [&] {
    for (std::size_t i = 0; i < claimed; ++i) bulks[i]->busy.store(false, std::memory_order_release);
  };
  if (claimed < bulks.size()) {
    unclaim();
    return std::optional<future<void>>();
  }
  // Its buffers must still be usable here (a device rebuilt since the call was prepared).
  const auto& device_state = engine_->members().front().state();
  for (const auto& b : bulks) {
    for (const auto* list : {&b->write_blocks, &b->read_blocks}) {
      for (const auto* blk : *list) {
        if (local::usable_on(*blk, device_state)) continue;
        unclaim();
        auto why = local::validate_block(*blk);
        return (why ? error(errc::invalid_argument, "a buffer of the call is not on local device " +
                                                        std::to_string(engine_->members().front().index()))
                    : why.error_value())
            .with_context("submitting a prepared submit_group call (nothing was submitted)");
      }
    }
  }
  const std::uint64_t together = engine_->together_id();
  std::optional<future<void>> out;
  for (std::size_t i = 0; i < bulks.size(); ++i) {
    const bool last = i + 1 == bulks.size();
    bulks[i]->rearm();
    auto carrier = carrier_of(bulks[i], last);
    carrier->ends_call = last;
    auto futures = engine_->submit_bulk(std::move(carrier), together, !last);
    if (last && !futures.empty()) out = std::move(futures.back());
  }
  return out;
}

}  // namespace atomr::cluster
