// When the world engine packs small all_reduces into one buffer, and when it holds a packable
// request at the head of its queue back so that more can join it (the packing window). Pure
// decisions over what the engine's issuing side knows; every input is the same on every rank
// or only shapes this rank's timing, never what the ranks agree on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "atomr/cluster/collective.hpp"

namespace atomr::cluster::detail {

struct pack_policy {
  // Requests in flight from which a small all_reduce waits to be packed with later ones rather
  // than being issued alone.
  static constexpr std::size_t k_window_depth = 2;

  // Whether an all_reduce of `bytes` packs with others: small (`limit`: world_options::pack_limit,
  // 0 packs nothing), on a backend with one local member (a packed buffer is one member's).
  static bool packs(coll_kind k, std::size_t bytes, std::size_t limit, std::size_t backend_members) {
    return k == coll_kind::all_reduce && limit > 0 && bytes <= limit && backend_members == 1;
  }

  // What the packing window looks at for a packable head.
  struct head_state {
    std::size_t in_flight;          // requests issued and not finished
    bool planned_whole;             // the head of a per-request group planned whole (call_plan)
    std::uint64_t together;         // the head's per-request group (0: submitted alone)
    std::uint64_t queued_call_end;  // the group whose last request was queued last
    std::size_t queued;             // requests queued, the head among them
    std::size_t part;               // a per-request group's part (world_engine::k_submit_part)
  };
  // Whether a packable head waits for more requests to pack with. A small all_reduce issued
  // behind others only waits on the device: while the pipeline is that deep, more of them may
  // queue up and be packed together. It goes at once where nothing can join it, though:
  // - the last request of its per-request group is queued (waiting for more drained the devices:
  //   the last part of 1000 small all_reduces waited for the batch before it to finish);
  // - a whole part of its group is queued (the caller is still making the next one; a part held
  //   back to grow was agreed on and issued only after the call's last part came);
  // - the request behind it already cuts its batch (`head_is_cut`, looked at last: it takes a
  //   lock per buffer). Back to back on one buffer, every plan of 1024 requests waited so for the
  //   requests in flight to finish: 400 us per plan on two H200s, in which the GPUs ran dry.
  template <typename IsCut>
  static bool holds(const head_state& h, IsCut&& head_is_cut) {
    if (h.planned_whole || h.in_flight < k_window_depth) return false;
    if (h.together != 0 && (h.together == h.queued_call_end || h.queued >= h.part)) return false;
    return !head_is_cut();
  }

  // Whether a packable head may skip its plan exchange through the latency window (see
  // latency_window). Not in check mode (every request is compared), not alone (no exchange to
  // skip). Requests of one per-request group never take it: they came together, so they pack
  // (every rank knows which requests came together, so all decide alike; in the window, the first
  // 64 of 1000 small all_reduces submitted together went one NCCL call each, about 10 us apiece
  // on two H200s, and the rest in one packed call). Where the head goes through a graph vote
  // (`graph_shape`), though, ranks that submitted it differently (alone here, with a group there)
  // must all take the window, or one rank would vote while another exchanges offers, and both
  // wait: the vote closes the window instead, for every rank.
  template <typename GraphShape>
  static bool may_skip_exchange(bool check, int ranks, std::uint64_t together, GraphShape&& graph_shape) {
    return !check && ranks > 1 && (together == 0 || graph_shape());
  }

  // Alone at one rank, a lone small all_reduce has nothing to pack with and nobody to agree
  // with: the plan would be that request alone, so it is issued at once.
  static bool issues_at_once(bool check, int ranks, std::size_t queued) { return !check && ranks == 1 && queued == 1; }
};

}  // namespace atomr::cluster::detail
