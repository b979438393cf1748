// The request timeline: when tracing is on, every collective request records when it passed each
// stage, and the last `capacity` requests are kept in a ring (bounded memory). ATOMR_TRACE=<path>
// turns it on when the first world is created; each rank then writes its timeline as
// Chrome-trace/Perfetto JSON to <path>.rank<N>.json whenever a world ends (open it in
// ui.perfetto.dev or chrome://tracing). `atomr bench coll` uses it for its per-stage medians.
// When off, a request pays one relaxed atomic load.
//
// Thread-safe: callers and progress threads record; any thread may read a snapshot.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "atomr/cluster/collective.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster {

// In the order a request passes them.
enum class trace_stage : std::uint8_t {
  submitted,  // the caller handed it to the world
  taken,      // the progress thread took it from the inbox
  inputs,     // its inputs' last writes were enqueued (it could be issued)
  agreed,     // the ranks agreed how it is batched (at once where no exchange is needed)
  called,     // the NCCL/MPI call returned
  issued,     // its completion event was recorded: the progress thread is done issuing it
  done,       // the device (or MPI) finished it
  resolved,   // its future was fulfilled
};
inline constexpr std::size_t k_trace_stages = 8;
std::string_view to_string(trace_stage s);

struct traced_request {
  std::array<std::int64_t, k_trace_stages> at_ns{};  // steady clock; 0: not passed
  std::uint64_t seq = 0;
  std::uint64_t bytes = 0;
  coll_kind kind = coll_kind::barrier;
  std::uint32_t batch = 1;           // requests issued together with it (packed or grouped), itself included
  std::uint32_t entries = 0;         // a bulk call's all_reduces (one traced request for all; 0: not one)
  std::int32_t caller_thread = 0;    // Linux thread ids
  std::int32_t progress_thread = 0;  // the thread that issued it
  std::int32_t done_thread = 0;      // the thread that found it done (a waiting caller, or the progress thread)
  // Looks that found it still running, and when the last of them was (0: none): a last look
  // well before "done" means that nobody looked meanwhile, not that the device was late.
  std::uint32_t looks = 0;
  std::int64_t last_look_ns = 0;
  std::int64_t done_look_ns = 0;  // when the look that found it done began
  // Context switches of the thread that found it done, between its last look and that one
  // (voluntary: it slept or blocked; involuntary: it was preempted); -1 where another thread looked.
  std::int32_t voluntary_switches = -1;
  std::int32_t involuntary_switches = -1;
  std::int32_t last_look_thread = 0;
  std::int64_t last_look_switches[2] = {0, 0};
  // How a CUDA graph vote had it issued: -1 no vote; else comm_backend::graph_step (0 eager,
  // 1 capture, 2 launch).
  std::int8_t graph = -1;
};

class request_trace {
 public:
  // The process's one timeline.
  static request_trace& get();

  bool on() const noexcept { return on_.load(std::memory_order_relaxed); }
  // Keeps the last `capacity` requests (at least 1); clears what was kept.
  void enable(std::size_t capacity);
  void disable();
  // On again after disable(), keeping what was recorded.
  void enable_keeping();
  void clear();
  void add(const traced_request& r);
  // Oldest first.
  std::vector<traced_request> snapshot() const;
  // Chrome-trace JSON: one complete event ("ph":"X") per request and stage, on the thread that
  // passed it, with the rank as pid and seq, op, bytes and batch as args.
  result<void> write_json(const std::string& path, int rank) const;

  // From ATOMR_TRACE / ATOMR_TRACE_REQUESTS: turns tracing on (once) if the path is set.
  static result<void> enable_from_environment();
  // Where ATOMR_TRACE asked for this rank's file, or "" when off.
  static std::string path_for_rank(int rank);

 private:
  std::atomic<bool> on_{false};
  mutable std::mutex mutex_;
  std::vector<traced_request> ring_;
  std::size_t next_ = 0;
  bool wrapped_ = false;
};

// Median time (us) spent reaching each stage from the latest stage passed before it (a request of
// an agreed plan is agreed before its inputs are ready: that stage then counts 0), over the
// requests that passed it; index 0 (submitted) is always 0.
std::array<double, k_trace_stages> stage_medians(const std::vector<traced_request>& requests);

// The calling thread's Linux id.
std::int32_t this_thread_id();
// The calling thread's context switches so far: voluntary, involuntary (getrusage(RUSAGE_THREAD)).
std::array<std::int64_t, 2> this_thread_switches();

}  // namespace atomr::cluster
