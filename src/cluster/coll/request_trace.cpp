#include "atomr/cluster/request_trace.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "atomr/cluster/coll/tunables.hpp"

namespace atomr::cluster {

std::string_view to_string(trace_stage s) {
  switch (s) {
    case trace_stage::submitted: return "submitted";
    case trace_stage::taken: return "taken";
    case trace_stage::inputs: return "inputs";
    case trace_stage::agreed: return "agreed";
    case trace_stage::called: return "called";
    case trace_stage::issued: return "issued";
    case trace_stage::done: return "done";
    case trace_stage::resolved: return "resolved";
  }
  return "?";
}

namespace {
// What the span that ends at each stage is called in the timeline.
constexpr std::array<std::string_view, k_trace_stages> k_span_names{"",
                                                                    "hand-off",
                                                                    "wait for inputs",
                                                                    "plan agreement",
                                                                    "NCCL/MPI call",
                                                                    "record event",
                                                                    "on the device",
                                                                    "resolve future"};

constexpr std::size_t k_done = static_cast<std::size_t>(trace_stage::done);
// traced_request::graph's names (comm_backend::graph_step's order).
constexpr std::array<std::string_view, 3> k_graph_steps{"eager", "capture", "launch"};

// When the request reached stage `s` after the latest stage before it, or -1 if it never reached `s`.
std::int64_t span_from(const traced_request& r, std::size_t s) {
  if (r.at_ns[s] == 0) return -1;
  std::int64_t from = 0;
  for (std::size_t t = 0; t < s; ++t) from = std::max(from, r.at_ns[t]);
  return from == 0 ? -1 : std::min(from, r.at_ns[s]);
}
}  // namespace

std::int32_t this_thread_id() {
  thread_local const auto id = static_cast<std::int32_t>(::syscall(SYS_gettid));
  return id;
}

std::array<std::int64_t, 2> this_thread_switches() {
  rusage u{};
  if (getrusage(RUSAGE_THREAD, &u) != 0) return {0, 0};
  return {u.ru_nvcsw, u.ru_nivcsw};
}

request_trace& request_trace::get() {
  static request_trace trace;
  return trace;
}

void request_trace::enable(std::size_t capacity) {
  std::lock_guard lock(mutex_);
  ring_.assign(std::max<std::size_t>(capacity, 1), traced_request{});
  next_ = 0;
  wrapped_ = false;
  on_.store(true, std::memory_order_relaxed);
}

void request_trace::enable_keeping() {
  std::lock_guard lock(mutex_);
  if (ring_.empty()) ring_.assign(1, traced_request{});
  on_.store(true, std::memory_order_relaxed);
}

void request_trace::disable() { on_.store(false, std::memory_order_relaxed); }

void request_trace::clear() {
  std::lock_guard lock(mutex_);
  next_ = 0;
  wrapped_ = false;
}

void request_trace::add(const traced_request& r) {
  std::lock_guard lock(mutex_);
  if (ring_.empty()) return;
  ring_[next_] = r;
  if (++next_ == ring_.size()) {
    next_ = 0;
    wrapped_ = true;
  }
}

std::vector<traced_request> request_trace::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<traced_request> out;
  if (wrapped_) out.insert(out.end(), ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

result<void> request_trace::write_json(const std::string& path, int rank) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (const auto& r : snapshot()) {
    nlohmann::json args{{"seq", r.seq}, {"op", to_string(r.kind)}, {"bytes", r.bytes}, {"batch", r.batch}};
    if (r.entries > 0) args["entries"] = r.entries;
    if (r.graph >= 0) args["graph"] = k_graph_steps[static_cast<std::size_t>(r.graph) % k_graph_steps.size()];
    auto done_args = args;
    done_args["looks"] = r.looks;
    if (r.last_look_ns != 0 && r.at_ns[k_done] != 0) {
      done_args["last_look_us_before"] = static_cast<double>(r.at_ns[k_done] - r.last_look_ns) / 1e3;
    }
    if (r.done_look_ns != 0 && r.at_ns[k_done] != 0) {
      done_args["done_look_us_before"] = static_cast<double>(r.at_ns[k_done] - r.done_look_ns) / 1e3;
    }
    if (r.voluntary_switches >= 0) {
      done_args["voluntary_switches"] = r.voluntary_switches;
      done_args["involuntary_switches"] = r.involuntary_switches;
    }
    for (std::size_t s = 1; s < k_trace_stages; ++s) {
      const auto from = span_from(r, s);
      if (from < 0) continue;
      const bool caller = s == 1;  // the hand-off is the caller's until the progress thread takes it
      events.push_back({{"name", k_span_names[s]},
                        {"cat", to_string(r.kind)},
                        {"ph", "X"},
                        {"ts", static_cast<double>(from) / 1e3},
                        {"dur", static_cast<double>(r.at_ns[s] - from) / 1e3},
                        {"pid", rank},
                        {"tid", caller                              ? r.caller_thread
                                : s == k_done && r.done_thread != 0 ? r.done_thread
                                                                    : r.progress_thread},
                        {"args", s == k_done ? done_args : args}});
    }
  }
  std::ofstream out(path);
  if (!out) return error(errc::invalid_argument, "cannot write the request timeline to " + path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() << '\n';
  if (!out) return error(errc::internal, "writing the request timeline to " + path + " failed");
  return ok();
}

result<void> request_trace::enable_from_environment() {
  if (tunable_value(tunables::trace).empty()) return ok();
  ATOMR_ASSIGN_OR_RETURN(const auto n, tunable_int(tunables::trace_requests));
  if (n <= 0) return error(errc::invalid_argument, "ATOMR_TRACE_REQUESTS must be a positive number of requests");
  static std::once_flag once;
  std::call_once(once, [&] { get().enable(static_cast<std::size_t>(n)); });
  return ok();
}

std::string request_trace::path_for_rank(int rank) {
  const auto base = tunable_value(tunables::trace);
  return base.empty() ? std::string() : base + ".rank" + std::to_string(rank) + ".json";
}

std::array<double, k_trace_stages> stage_medians(const std::vector<traced_request>& requests) {
  std::array<double, k_trace_stages> out{};
  std::vector<double> d;
  for (std::size_t s = 1; s < k_trace_stages; ++s) {
    d.clear();
    for (const auto& r : requests) {
      const auto from = span_from(r, s);
      if (from >= 0) d.push_back(static_cast<double>(r.at_ns[s] - from) / 1e3);
    }
    if (d.empty()) continue;
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
    out[s] = d[d.size() / 2];
  }
  return out;
}

}  // namespace atomr::cluster
