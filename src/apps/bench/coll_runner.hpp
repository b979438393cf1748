// The pieces of `atomr bench coll`: its settings, the timed runner of atomr's collectives and
// the request-stage report (bench_coll.cpp puts them together).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "atomr/cluster/device_plan.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/request_trace.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/version.hpp"
#include "atomr/local/device/half.hpp"
#include "atomr/local/devices.hpp"
#include "bench/bench_meta.hpp"
#include "bench/coll_raw.hpp"

namespace atomr::apps::coll_bench_parts {

using clock = std::chrono::steady_clock;
using cluster::coll_kind;
using cluster::reduce_op;
namespace al = atomr::local;

struct settings {
  coll_kind kind = coll_kind::all_reduce;
  std::size_t min_bytes = 8, max_bytes = 128 << 20, factor = 2;
  int iters = 20, warmup = 5, root = 0;
  // The timed iterations are split into this many rounds, atomr's and raw's interleaved, so that
  // a host whose speed drifts during the run moves both columns alike.
  int rounds = 4;
  bool check = true, blocking = false, host = false;
  reduce_op op = reduce_op::sum;
  al::dtype type = al::dtype::f32;
  int gpus_per_rank = 0;
  int many = 1000;
  std::size_t many_bytes = 2048;
  std::string json_path;
  std::string machine;  // for the JSON (atomr report labels its series with it)
};

struct timing {
  double us = 0, algbw = 0, busbw = 0;
  // Each round's time per iteration (mean over ranks): whether a slow cell was slow throughout,
  // or one round was (a host that stalled a thread for a while).
  std::vector<double> rounds_us;
  long long wrong = -1;  // -1: not checked; -2: not applicable
};
struct row {
  std::size_t bytes = 0, count = 0;
  timing oop, ip, raw_oop, raw_ip;
};

inline double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// The collective's per-rank count for `bytes` of total buffer, as nccl-tests sizes them.
inline bool splits(coll_kind k) {
  return k == coll_kind::all_gather || k == coll_kind::reduce_scatter || k == coll_kind::all_to_all;
}

inline double value(reduce_op op, int r, std::size_t i) {
  if (op == reduce_op::prod) return 1 + static_cast<double>((static_cast<std::size_t>(r) + i) % 2);
  return r + 1 + static_cast<double>(i % 3);
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, al::f16_t>) {
    return al::to_f16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, al::bf16_t>) {
    return al::to_bf16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
T reduced(reduce_op op, int ranks, std::size_t i) {
  double acc = value(op, 0, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = value(op, r, i);
    acc = op == reduce_op::prod  ? acc * v
          : op == reduce_op::min ? std::min(acc, v)
          : op == reduce_op::max ? std::max(acc, v)
                                 : acc + v;
  }
  if (op != reduce_op::avg) return from_double<T>(acc);
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<T>(acc) / static_cast<T>(ranks));
  } else {
    return from_double<T>(acc / ranks);
  }
}

template <typename T>
class coll_runner {
 public:
  coll_runner(const settings& s, cluster::world& w, std::vector<al::device>& devs) : s_(s), w_(w), devs_(devs) {}

  result<void> allocate() {
    const std::size_t elems = s_.max_bytes / sizeof(T);
    for (auto& d : devs_) {
      ATOMR_ASSIGN_OR_RETURN(auto a, d.allocate<T>(elems).get());
      ATOMR_ASSIGN_OR_RETURN(auto b, d.allocate<T>(elems).get());
      ATOMR_TRY(d.fill_bytes(a, 0).get());
      ATOMR_TRY(d.fill_bytes(b, 0).get());
      send_.push_back(a);
      recv_.push_back(b);
    }
    return ok();
  }

  // Seconds per operation: `iters` submitted back to back (or each waited for with -z 1).
  result<double> time(std::size_t count, bool in_place, int iters) {
    const auto& src = in_place ? recv_ : send_;
    const cluster::coll_params p{s_.op, s_.root, count};
    std::vector<cluster::future<void>> pending;
    pending.reserve(static_cast<std::size_t>(iters));
    const auto t0 = clock::now();
    for (int i = 0; i < iters; ++i) {
      pending.push_back(w_.collective<T>(s_.kind, src, recv_, p));
      if (s_.blocking) ATOMR_TRY(pending.back().get());
    }
    for (auto& f : pending) ATOMR_TRY(f.get());
    return since(t0) / iters;
  }

  // Runs the collective once on exactly checkable inputs; counts wrong elements on this rank.
  result<long long> check(std::size_t count, bool in_place) {
    const int n = w_.size();
    const auto un = static_cast<std::size_t>(n);
    long long wrong = 0;
    for (std::size_t m = 0; m < devs_.size(); ++m) {
      const int me = w_.rank(m);
      const std::size_t in_elems = splits(s_.kind) && s_.kind != coll_kind::all_gather ? count * un : count;
      std::vector<T> in(in_elems);
      for (std::size_t i = 0; i < in_elems; ++i) in[i] = from_double<T>(value(s_.op, me, i));
      auto& d = devs_[m];
      if (in_place && s_.kind == coll_kind::all_gather) {
        std::vector<T> block(count * un, T{});
        std::copy(in.begin(), in.end(), block.begin() + static_cast<std::ptrdiff_t>(count) * me);
        ATOMR_TRY(d.upload(recv_[m], std::span<const T>(block)).get());
      } else {
        ATOMR_TRY(d.upload(in_place ? recv_[m] : send_[m], std::span<const T>(in)).get());
      }
    }
    const auto& src = in_place ? recv_ : send_;
    ATOMR_TRY(w_.collective<T>(s_.kind, src, recv_, {s_.op, s_.root, count}).get());
    // Every input pattern repeats every 6 elements, so the reductions do too.
    std::array<T, 6> red{};
    for (std::size_t i = 0; i < red.size(); ++i) red[i] = reduced<T>(s_.op, n, i);
    for (std::size_t m = 0; m < devs_.size(); ++m) {
      const int me = w_.rank(m);
      const std::size_t out_elems = s_.kind == coll_kind::all_gather || s_.kind == coll_kind::all_to_all ? count * un
                                    : s_.kind == coll_kind::reduce_scatter && in_place                   ? count * un
                                                                                                         : count;
      std::vector<T> out(out_elems);
      ATOMR_TRY(devs_[m].download(recv_[m], std::span<T>(out)).get());
      for (std::size_t i = 0; i < out_elems; ++i) {
        T want{};
        switch (s_.kind) {
          case coll_kind::all_reduce: want = red[i % 6]; break;
          case coll_kind::broadcast: want = from_double<T>(value(s_.op, s_.root, i)); break;
          case coll_kind::reduce:
            if (me != s_.root) continue;
            want = red[i % 6];
            break;
          case coll_kind::all_gather:
            want = from_double<T>(value(s_.op, static_cast<int>(i / count), i % count));
            break;
          case coll_kind::reduce_scatter: {
            const std::size_t at = in_place ? i : static_cast<std::size_t>(me) * count + i;
            if (in_place && i / count != static_cast<std::size_t>(me)) continue;
            want = red[at % 6];
            break;
          }
          case coll_kind::all_to_all:
            want = from_double<T>(
                value(s_.op, static_cast<int>(i / count), static_cast<std::size_t>(me) * count + i % count));
            break;
          default: continue;
        }
        if (!(out[i] == want)) ++wrong;
      }
    }
    return wrong;
  }

  // `many` small all_reduces on distinct buffers, none waited for until the end, handed over
  // each by a call of its own, all in one per-request group, all in one submit_group call (one
  // future), as a call prepared once (world::prepare_group) and submitted each time, or in one
  // world::submit_group (buffers) call on the buffers.
  enum class handing { each, together, group, prepared, buffers };
  result<double> many_small(std::size_t count, int many, handing how = handing::each) {
    if (small_.empty()) {
      for (int i = 0; i < many; ++i) {
        ATOMR_ASSIGN_OR_RETURN(auto b, devs_[0].allocate<T>(count).get());
        ATOMR_TRY(devs_[0].fill_bytes(b, 0).get());
        small_.push_back(b);
      }
    }
    std::vector<cluster::future<void>> pending;
    pending.reserve(small_.size());
    std::vector<cluster::coll_spec> specs;
    specs.reserve(small_.size());
    if (how == handing::prepared && !prepared_) {
      for (const auto& b : small_) {
        specs.push_back(cluster::all_reduce_spec(b, s_.op));
      }
      ATOMR_ASSIGN_OR_RETURN(auto call, w_.prepare_group(std::move(specs)));
      prepared_ = std::move(call);
      specs.clear();
    }
    const auto t0 = clock::now();
    if (how == handing::prepared) {
      pending.push_back(w_.submit_prepared(*prepared_));
    } else if (how == handing::buffers) {
      pending.push_back(w_.submit_group(std::span<const al::gpu_ref<T>>(small_), s_.op));
    } else if (how != handing::each) {
      for (const auto& b : small_) {
        specs.push_back(cluster::all_reduce_spec(b, s_.op));
      }
      if (how == handing::group) {
        pending.push_back(w_.submit_group(std::move(specs)));
      } else {
        pending = w_.submit_group(std::move(specs), cluster::each_request);
      }
    } else {
      for (const auto& b : small_) pending.push_back(w_.all_reduce(b, s_.op));
    }
    handed_ = since(t0);
    for (auto& f : pending) ATOMR_TRY(f.get());
    return since(t0);
  }
  // How long the last many_small took to hand its requests over (until the calls returned).
  double handed() const { return handed_; }

 private:
  const settings& s_;
  cluster::world& w_;
  std::vector<al::device>& devs_;
  std::vector<al::gpu_ref<T>> send_, recv_, small_;
  std::optional<cluster::group_call> prepared_;  // (made once, on small_)
  double handed_ = 0;
};

inline double mean_over_ranks(MPI_Comm comm, double v) {
  double sum = 0;
  int n = 1;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  MPI_Comm_size(comm, &n);
  return sum / n;
}
inline double max_over_ranks(MPI_Comm comm, double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}
inline long long sum_over_ranks(MPI_Comm comm, long long v) {
  long long out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_SUM, comm);
  return out;
}

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline nlohmann::json to_json(const timing& t) {
  nlohmann::json j{{"time_us", t.us}, {"algbw_gbps", t.algbw}, {"busbw_gbps", t.busbw}};
  if (t.wrong >= 0) j["wrong"] = t.wrong;
  if (!t.rounds_us.empty()) j["rounds_us"] = t.rounds_us;
  return j;
}

struct stages {
  std::array<double, cluster::k_trace_stages> medians{};
  double off_us = 0, on_us = 0;  // per operation, mean over ranks
};

// The smallest size once more, with the request timeline off and then on: each stage's median
// (rank 0's) and what the timeline costs. An ATOMR_TRACE timeline keeps its requests: the medians
// then come from its records of this size.
template <typename T>
result<stages> stage_report(coll_runner<T>& runner, std::size_t count, const settings& s, MPI_Comm comm) {
  auto& trace = cluster::request_trace::get();
  const bool was_on = trace.on();
  const int iters = std::max(s.iters, 200);
  stages out;
  if (was_on) trace.disable();
  ATOMR_ASSIGN_OR_RETURN(const double off, runner.time(count, false, iters));
  if (was_on) {
    trace.enable_keeping();
  } else {
    trace.enable(static_cast<std::size_t>(iters));
  }
  auto on = runner.time(count, false, iters);
  auto records = trace.snapshot();
  if (!was_on) trace.disable();
  ATOMR_TRY(on);
  std::erase_if(records, [&](const cluster::traced_request& r) { return r.bytes != count * sizeof(T); });
  if (records.size() > static_cast<std::size_t>(iters)) {
    records.erase(records.begin(), records.end() - iters);
  }
  out.medians = cluster::stage_medians(records);
  out.off_us = mean_over_ranks(comm, off) * 1e6;
  out.on_us = mean_over_ranks(comm, *on) * 1e6;
  return out;
}

// Where a rank's startup went, max over ranks (ms), and its memory once up.
struct startup_report {
  double total_ms = 0;  // from entering the command (before MPI_Init) to the first all_reduce done
  std::vector<std::pair<std::string, double>> phases;
  double max_rss_mib = 0;  // the largest resident set of any rank, after the first all_reduce

  nlohmann::json to_json() const {
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [name, ms] : phases) p[name] = ms;
    return {{"total_ms", total_ms}, {"phases_ms", p}, {"max_rss_mib", max_rss_mib}};
  }
};

}  // namespace atomr::apps::coll_bench_parts
