// `atomr bench coll`: collectives through atomr's world against the raw path (direct NCCL calls
// on a stream, or blocking MPI on the host backend) in the same run. Options and table follow
// nccl-tests (-b -e -f -n -w -c -o -d -r -z, out-of-place and in-place `time algbw busbw #wrong`,
// busbw factors), with the raw columns and the ratio appended; -J writes the same as JSON.
#include "bench/bench_coll.hpp"

#include <array>
#include <boost/program_options.hpp>
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
#include "command_line.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

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

double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// The collective's per-rank count for `bytes` of total buffer, as nccl-tests sizes them.
bool splits(coll_kind k) {
  return k == coll_kind::all_gather || k == coll_kind::reduce_scatter || k == coll_kind::all_to_all;
}

double value(reduce_op op, int r, std::size_t i) {
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
  // each by a call of its own, all in one submit_all call, all in one submit_group call (one
  // future), as a call prepared once (world::prepare_group) and submitted each time, or in one
  // world::all_reduce_group call on the buffers.
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
      pending.push_back(w_.all_reduce_group(std::span<const al::gpu_ref<T>>(small_), s_.op));
    } else if (how != handing::each) {
      for (const auto& b : small_) {
        specs.push_back(cluster::all_reduce_spec(b, s_.op));
      }
      if (how == handing::group) {
        pending.push_back(w_.submit_group(std::move(specs)));
      } else {
        pending = w_.submit_all(std::move(specs));
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

double mean_over_ranks(MPI_Comm comm, double v) {
  double sum = 0;
  int n = 1;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  MPI_Comm_size(comm, &n);
  return sum / n;
}
double max_over_ranks(MPI_Comm comm, double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}
long long sum_over_ranks(MPI_Comm comm, long long v) {
  long long out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_SUM, comm);
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

nlohmann::json to_json(const timing& t) {
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

// Where a rank's startup went, max over ranks (ms), and its memory once up: the scale table's
// columns (docs/scale.md).
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

template <typename T>
int run_typed(const settings& s, cluster::mpi_session& session, cluster::world& w, std::vector<al::device>& devs,
              const std::vector<int>& gpus, const startup_report& startup) {
  const MPI_Comm comm = session.world();
  const bool lead = session.identity().world_rank == 0;
  auto fail = [&](const error& e) { return report_error(e.describe(), 1); };
  coll_runner<T> runner(s, w, devs);
  if (auto r = runner.allocate(); !r) return fail(r.error_value());
  // The many-small mode reuses these buffers: big enough for either.
  auto raw =
      bench::make_raw_collectives({comm, gpus, s.type, s.op, s.root, std::max({s.max_bytes, s.many_bytes, sizeof(T)})});
  if (!raw) return fail(raw.error_value());
  const int n = w.size();
  const double factor = cluster::bus_factor(s.kind, n);
  if (lead) {
    std::printf("# atomr bench coll: %s, %d ranks (%s backend, %zu device(s) per rank), %s, %s, root %d\n",
                std::string(cluster::to_string(s.kind)).c_str(), n, std::string(to_string(w.backend())).c_str(),
                devs.size(), std::string(al::to_string(s.type)).c_str(), std::string(cluster::to_string(s.op)).c_str(),
                s.root);
    std::printf(
        "# iters %d, warmup %d, rounds %d (atomr and raw taking turns), check %d, blocking %d; MPI_Init to first "
        "all_reduce done: %.1f ms\n",
        s.iters, s.warmup, std::clamp(s.rounds, 1, s.iters), s.check ? 1 : 0, s.blocking ? 1 : 0, startup.total_ms);
    std::printf("# startup, max over ranks (ms):");
    for (const auto& [name, ms] : startup.phases)
      std::printf(" %s %.1f%s", name.c_str(), ms, &name == &startup.phases.back().first ? "" : ",");
    std::printf("; max RSS per rank %.1f MiB\n", startup.max_rss_mib);
    std::printf("#%76s%34s%36s\n", "atomr out-of-place", "atomr in-place", "raw out-of-place   raw in-place");
    std::printf("#%12s %12s %6s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "time",
                "busbw", "time", "busbw", "ratio");
    std::printf("#%12s %12s %6s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(us)",
                "(GB/s)", "");
  }
  std::vector<row> rows;
  double busbw_sum = 0;
  const std::size_t parts = splits(s.kind) ? static_cast<std::size_t>(n) : 1;
  for (std::size_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) {
    const std::size_t count = bytes / sizeof(T) / parts;  // per rank
    if (count == 0) continue;
    row r;
    r.count = count * parts;
    r.bytes = r.count * sizeof(T);
    // Each of the four columns runs iters / rounds timed iterations per round (after warmup /
    // rounds untimed ones), and the rounds take turns: atomr out of place, in place, raw out of
    // place, in place. A column's time is its total over the rounds per iteration.
    const bool no_in_place = s.kind == coll_kind::all_to_all;
    if (no_in_place) r.ip.wrong = r.raw_ip.wrong = -2;
    if (s.check) {
      for (bool in_place : {false, true}) {
        if (in_place && no_in_place) continue;
        auto& t = in_place ? r.ip : r.oop;
        auto checked = runner.check(count, in_place);
        if (!checked) {
          return fail(checked.error_value().with_context(std::string(in_place ? "in-place" : "out-of-place") + " at " +
                                                         std::to_string(r.bytes) + " B"));
        }
        t.wrong = sum_over_ranks(comm, *checked);
      }
    }
    const int rounds = std::clamp(s.rounds, 1, s.iters);
    double sec[4] = {0, 0, 0, 0};      // oop, ip, raw oop, raw ip
    std::vector<double> round_sec[4];  // per iteration, each round's
    for (int round = 0; round < rounds; ++round) {
      const int timed_n = s.iters / rounds + (round < s.iters % rounds ? 1 : 0);
      const int warm_n = s.warmup / rounds + (round < s.warmup % rounds ? 1 : 0);
      for (int col = 0; col < 4; ++col) {
        const bool in_place = (col % 2) == 1;
        if (in_place && no_in_place) continue;
        auto timed = [&]() -> result<double> {
          if (col < 2) {
            if (warm_n > 0) ATOMR_TRY(runner.time(count, in_place, warm_n));
            ATOMR_ASSIGN_OR_RETURN(const double per_op, runner.time(count, in_place, timed_n));
            return per_op * timed_n;
          }
          if (warm_n > 0) ATOMR_TRY((*raw)->run(s.kind, count, in_place, warm_n, s.blocking));
          return (*raw)->run(s.kind, count, in_place, timed_n, s.blocking);
        }();
        if (!timed) {
          static const char* names[] = {"out-of-place", "in-place", "raw out-of-place", "raw in-place"};
          return fail(
              timed.error_value().with_context(std::string(names[col]) + " at " + std::to_string(r.bytes) + " B"));
        }
        sec[col] += *timed;
        round_sec[col].push_back(timed_n > 0 ? *timed / timed_n : 0.0);
      }
    }
    timing* cols[4] = {&r.oop, &r.ip, &r.raw_oop, &r.raw_ip};
    for (int col = 0; col < 4; ++col) {
      if ((col % 2) == 1 && no_in_place) continue;
      cols[col]->us = mean_over_ranks(comm, sec[col] / s.iters) * 1e6;
      for (double v : round_sec[col]) cols[col]->rounds_us.push_back(mean_over_ranks(comm, v) * 1e6);
    }
    for (timing* t : {&r.oop, &r.ip, &r.raw_oop, &r.raw_ip}) {
      if (t->us > 0) {
        t->algbw = static_cast<double>(r.bytes) / (t->us * 1e-6) / 1e9;
        t->busbw = t->algbw * factor;
      }
    }
    busbw_sum += r.oop.busbw;
    const int root = s.kind == coll_kind::broadcast || s.kind == coll_kind::reduce ? s.root : -1;
    auto wrong = [](const timing& t) {
      return t.wrong == -2 ? std::string("n/a") : t.wrong < 0 ? std::string("-") : std::to_string(t.wrong);
    };
    auto col = [](const timing& t, const char* f, double v) { return t.wrong == -2 ? std::string("n/a") : fmt(f, v); };
    if (lead) {
      std::printf(" %12zu %12zu %6s %6s %5d %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", r.bytes, r.count,
                  std::string(al::to_string(s.type)).c_str(), std::string(cluster::to_string(s.op)).c_str(), root,
                  fmt("%.2f", r.oop.us).c_str(), fmt("%.2f", r.oop.algbw).c_str(), fmt("%.2f", r.oop.busbw).c_str(),
                  wrong(r.oop).c_str(), col(r.ip, "%.2f", r.ip.us).c_str(), col(r.ip, "%.2f", r.ip.algbw).c_str(),
                  col(r.ip, "%.2f", r.ip.busbw).c_str(), wrong(r.ip).c_str(), fmt("%.2f", r.raw_oop.us).c_str(),
                  fmt("%.2f", r.raw_oop.busbw).c_str(), col(r.raw_ip, "%.2f", r.raw_ip.us).c_str(),
                  col(r.raw_ip, "%.2f", r.raw_ip.busbw).c_str(), fmt("%.3f", r.raw_oop.us / r.oop.us).c_str());
      std::fflush(stdout);
    }
    rows.push_back(r);
    if (bytes > s.max_bytes / s.factor) break;
  }
  long long total_wrong = 0;
  for (const auto& r : rows) total_wrong += std::max(0LL, r.oop.wrong) + std::max(0LL, r.ip.wrong);
  nlohmann::json stages_json;
  if (!rows.empty()) {
    auto st = stage_report(runner, rows.front().count / parts, s, comm);
    if (!st) return fail(st.error_value().with_context("timing the request stages"));
    if (lead) {
      std::printf("# stages at %zu B, %s (median us on rank 0):", rows.front().bytes,
                  s.blocking ? "each waited for" : "back to back");
      for (std::size_t i = 1; i < cluster::k_trace_stages; ++i) {
        std::printf(" %s %.2f%s", std::string(cluster::to_string(static_cast<cluster::trace_stage>(i))).c_str(),
                    st->medians[i], i + 1 < cluster::k_trace_stages ? "," : "\n");
      }
      std::printf("# request timeline cost at %zu B: off %.2f us, on %.2f us per operation\n", rows.front().bytes,
                  st->off_us, st->on_us);
    }
    stages_json = {{"bytes", rows.front().bytes}, {"timeline_off_us", st->off_us}, {"timeline_on_us", st->on_us}};
    for (std::size_t i = 1; i < cluster::k_trace_stages; ++i) {
      stages_json["median_us"][std::string(cluster::to_string(static_cast<cluster::trace_stage>(i)))] = st->medians[i];
    }
  }
  // What the engine did over the rows (this rank's world): how requests were issued, and how many
  // went through CUDA graphs, alone or in chains.
  const auto run_stats = w.stats();
  if (lead) {
    std::printf(
        "# engine over the rows (rank 0): %llu requests in %llu issues, %llu packed; CUDA graphs: %llu votes (%llu "
        "through shared memory), %llu captures, %llu requests launched, %llu in chains; %llu issues through shared "
        "memory (%llu direct)\n",
        static_cast<unsigned long long>(run_stats.requests), static_cast<unsigned long long>(run_stats.issues),
        static_cast<unsigned long long>(run_stats.packed), static_cast<unsigned long long>(run_stats.graph_votes),
        static_cast<unsigned long long>(run_stats.graph_votes_shared_memory),
        static_cast<unsigned long long>(run_stats.graph_captures),
        static_cast<unsigned long long>(run_stats.graph_launches),
        static_cast<unsigned long long>(run_stats.graph_chained),
        static_cast<unsigned long long>(run_stats.shared_memory),
        static_cast<unsigned long long>(run_stats.shared_memory_direct));
  }
  const nlohmann::json engine_json = {{"requests", run_stats.requests},
                                      {"issues", run_stats.issues},
                                      {"packed", run_stats.packed},
                                      {"graph_votes", run_stats.graph_votes},
                                      {"graph_votes_shared_memory", run_stats.graph_votes_shared_memory},
                                      {"graph_captures", run_stats.graph_captures},
                                      {"graph_launches", run_stats.graph_launches},
                                      {"graph_chained", run_stats.graph_chained},
                                      {"shared_memory", run_stats.shared_memory},
                                      {"shared_memory_direct", run_stats.shared_memory_direct},
                                      {"most_unfreed", run_stats.most_unfreed}};
  nlohmann::json many_json;
  if (s.many > 0 && s.kind == coll_kind::all_reduce && devs.size() == 1) {
    const std::size_t count = std::max<std::size_t>(s.many_bytes / sizeof(T), 1);
    std::vector<double> raw_t, atomr_t, together_t, handed_t, group_t, group_handed_t, prepared_t, prepared_handed_t,
        buffers_t, buffers_handed_t;
    const auto before = w.stats();
    for (int rep = 0; rep < 6; ++rep) {  // the first repetition warms up and is dropped
      auto a = (*raw)->run_sequential_small(count, s.many);
      auto b = runner.many_small(count, s.many);
      if (!a) return fail(a.error_value());
      if (!b) return fail(b.error_value());
      if (rep == 0) continue;
      raw_t.push_back(max_over_ranks(comm, *a));
      atomr_t.push_back(max_over_ranks(comm, *b));
    }
    const auto after = w.stats();
    // The same requests handed over in one submit_all call (after the per-call runs, so that
    // their stats above are theirs alone).
    // And in one submit_group call (one future), taking turns with them.
    using handing = typename coll_runner<T>::handing;
    std::uint64_t group_kept = 0;  // measured submit_group calls submitted as a kept prepared call
    for (int rep = 0; rep < 6; ++rep) {
      auto c = runner.many_small(count, s.many, handing::together);
      if (!c) return fail(c.error_value());
      if (rep > 0) together_t.push_back(max_over_ranks(comm, *c));
      if (rep > 0) handed_t.push_back(max_over_ranks(comm, runner.handed()));
      const auto repeats_before = w.stats().group_repeats;
      auto g = runner.many_small(count, s.many, handing::group);
      if (!g) return fail(g.error_value());
      if (rep > 0) group_kept += w.stats().group_repeats - repeats_before;
      if (rep > 0) group_t.push_back(max_over_ranks(comm, *g));
      if (rep > 0) group_handed_t.push_back(max_over_ranks(comm, runner.handed()));
      auto p = runner.many_small(count, s.many, handing::prepared);
      if (!p) return fail(p.error_value());
      if (rep > 0) prepared_t.push_back(max_over_ranks(comm, *p));
      if (rep > 0) prepared_handed_t.push_back(max_over_ranks(comm, runner.handed()));
      auto u = runner.many_small(count, s.many, handing::buffers);
      if (!u) return fail(u.error_value());
      if (rep > 0) buffers_t.push_back(max_over_ranks(comm, *u));
      if (rep > 0) buffers_handed_t.push_back(max_over_ranks(comm, runner.handed()));
    }
    const auto median_us = [](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2] * 1e6;
    };
    const double raw_us = median_us(raw_t);
    const double atomr_us = median_us(atomr_t);
    const double together_us = median_us(together_t);
    const double handed_us = median_us(handed_t);
    const double group_us = median_us(group_t);
    const double group_handed_us = median_us(group_handed_t);
    const double prepared_us = median_us(prepared_t);
    const double prepared_handed_us = median_us(prepared_handed_t);
    const double buffers_us = median_us(buffers_t);
    const double buffers_handed_us = median_us(buffers_handed_t);
    const auto packed = after.packed - before.packed;
    const auto issues = after.issues - before.issues;
    if (lead) {
      std::printf(
          "# many small: %d x %zu B all_reduce: raw sequential %.1f us, atomr concurrent %.1f us: %.1fx faster"
          " (%llu of %llu requests packed, %llu issues); in one submit_all call %.1f us: %.1fx (the call"
          " returned after %.1f us); in one submit_group call %.1f us: %.1fx (returned after %.1f us; %llu of %zu"
          " as the kept prepared call); prepared once and submitted %.1f us: %.1fx (returned after %.1f us); in one"
          " all_reduce_group call %.1f us: %.1fx (returned after %.1f us)\n",
          s.many, count * sizeof(T), raw_us, atomr_us, raw_us / atomr_us, static_cast<unsigned long long>(packed),
          static_cast<unsigned long long>(after.requests - before.requests), static_cast<unsigned long long>(issues),
          together_us, raw_us / together_us, handed_us, group_us, raw_us / group_us, group_handed_us,
          static_cast<unsigned long long>(group_kept), group_t.size(), prepared_us, raw_us / prepared_us,
          prepared_handed_us, buffers_us, raw_us / buffers_us, buffers_handed_us);
    }
    many_json = {{"requests", s.many},
                 {"bytes", count * sizeof(T)},
                 {"raw_sequential_us", raw_us},
                 {"atomr_concurrent_us", atomr_us},
                 {"speedup", raw_us / atomr_us},
                 {"atomr_submit_all_us", together_us},
                 {"speedup_submit_all", raw_us / together_us},
                 {"submit_all_returned_us", handed_us},
                 {"atomr_submit_group_us", group_us},
                 {"speedup_submit_group", raw_us / group_us},
                 {"submit_group_returned_us", group_handed_us},
                 {"submit_group_kept", group_kept},
                 {"atomr_prepared_us", prepared_us},
                 {"speedup_prepared", raw_us / prepared_us},
                 {"prepared_returned_us", prepared_handed_us},
                 {"atomr_all_reduce_group_us", buffers_us},
                 {"speedup_all_reduce_group", raw_us / buffers_us},
                 {"all_reduce_group_returned_us", buffers_handed_us},
                 {"packed", packed},
                 {"issues", issues}};
  }
  if (lead) {
    std::printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %.3f\n", rows.empty() ? 0.0 : busbw_sum / static_cast<double>(rows.size()));
    if (!s.json_path.empty()) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : rows) {
        out.push_back({{"size", r.bytes},
                       {"count", r.count},
                       {"out_of_place", to_json(r.oop)},
                       {"in_place", to_json(r.ip)},
                       {"raw_out_of_place", to_json(r.raw_oop)},
                       {"raw_in_place", to_json(r.raw_ip)},
                       {"ratio", r.raw_oop.us / r.oop.us}});
      }
      nlohmann::json doc{{"benchmark", "coll"},
                         {"collective", cluster::to_string(s.kind)},
                         {"machine", s.machine},
                         {"commit", k_git_revision},
                         {"date", utc_now()},
                         {"ranks", n},
                         {"backend", to_string(w.backend())},
                         {"type", al::to_string(s.type)},
                         {"op", cluster::to_string(s.op)},
                         {"iters", s.iters},
                         {"warmup", s.warmup},
                         {"rounds", std::clamp(s.rounds, 1, s.iters)},
                         {"init_to_first_all_reduce_ms", startup.total_ms},
                         {"startup", startup.to_json()},
                         {"wrong", total_wrong},
                         {"rows", out}};
      if (!many_json.is_null()) doc["many_small"] = many_json;
      if (!stages_json.is_null()) doc["stages"] = stages_json;
      doc["engine"] = engine_json;
      std::ofstream f(s.json_path);
      f << doc.dump(2) << '\n';
      if (!f) return report_error("cannot write " + s.json_path, 1);
    }
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int run_bench_coll(const std::string& program, const std::vector<std::string>& args) {
  const auto t_start = clock::now();
  settings s;
  std::string kind = "all_reduce", min_b = "8", max_b = "128M", op = "sum", type = "float", many_b = "2K";
  // The step factor is read as a signed number: boost would take "-1" for an unsigned one as 2^64 - 1.
  int check = 1, blocking = 0, graph = 0, factor = static_cast<int>(s.factor);
  po::options_description opts("atomr bench coll options (nccl-tests compatible)");
  opts.add_options()("help,h", "show this help")("minbytes,b", po::value(&min_b), "smallest size (default 8)")(
      "maxbytes,e", po::value(&max_b), "largest size (default 128M)")("stepfactor,f", po::value(&factor),
                                                                      "size multiplier (default 2)")(
      "iters,n", po::value(&s.iters), "timed iterations (default 20)")("warmup_iters,w", po::value(&s.warmup),
                                                                       "warmup iterations (default 5)")(
      "rounds", po::value(&s.rounds),
      "split -n and -w into this many rounds, atomr's and raw's taking turns (default 4)")(
      "check,c", po::value(&check), "check results (default 1)")("op,o", po::value(&op),
                                                                 "sum, prod, min, max, avg (default sum)")(
      "datatype,d", po::value(&type), "float, double, half, bfloat16, int8, uint8, int32, uint32, int64, uint64")(
      "root,r", po::value(&s.root), "root of broadcast/reduce (default 0)")(
      "blocking,z", po::value(&blocking), "1: wait for each operation before the next (default 0)")(
      "output_file,J", po::value(&s.json_path), "write the results as JSON to this file")(
      "ngpus,g", po::value(&s.gpus_per_rank), "GPUs per rank (default: the visible GPUs shared out)")(
      "host", "use the host backend (MPI) even where GPUs are visible")(
      "many", po::value(&s.many), "all_reduce: the many-small-requests mode's count (default 1000; 0: off)")(
      "many-bytes", po::value(&many_b), "size of each small all_reduce (default 2K)")(
      "cudagraph,G", po::value(&graph), "nccl-tests' CUDA graph mode: not supported (only 0 is accepted)");
  po::options_description hidden;
  hidden.add_options()("collective", po::value(&kind), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description positional;
  positional.add("collective", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: atomr bench coll [all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|reduce] [options]";
  const std::string me = program + " coll";  // "bench coll", for the hints
  if (auto done = parse_command_line(me, args, opts, all, positional, usage, vm)) return *done;
  // Every bad value: one line naming the option and what it takes, then the usage line.
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  auto k = cluster::parse_coll_kind(kind);
  if (!k) return bad("<collective>", k.error_value().message());
  if (*k == coll_kind::send || *k == coll_kind::recv || *k == coll_kind::barrier) {
    return bad("<collective>", "'" + kind +
                                   "' is not benchmarked; take all_reduce, all_gather, reduce_scatter, "
                                   "all_to_all, broadcast or reduce");
  }
  s.kind = *k;
  auto o = cluster::parse_reduce_op(op);
  if (!o) return bad("-o/--op", o.error_value().message());
  s.op = *o;
  auto t = cluster::parse_dtype(type);
  if (!t) return bad("-d/--datatype", t.error_value().message());
  s.type = *t;
  for (auto [name, text, out] :
       {std::tuple{"-b/--minbytes", &min_b, &s.min_bytes}, std::tuple{"-e/--maxbytes", &max_b, &s.max_bytes},
        std::tuple{"--many-bytes", &many_b, &s.many_bytes}}) {
    auto v = parse_size(*text);
    if (!v) return bad(name, v.error_value().message());
    *out = *v;
  }
  if (s.min_bytes > s.max_bytes) return bad("-b/--minbytes", min_b + " is larger than -e/--maxbytes " + max_b);
  if (factor < 2) return bad("-f/--stepfactor", "must be at least 2, got " + std::to_string(factor));
  s.factor = static_cast<std::size_t>(factor);
  if (s.iters < 1) return bad("-n/--iters", "must be at least 1, got " + std::to_string(s.iters));
  if (s.warmup < 0) return bad("-w/--warmup_iters", "must not be negative, got " + std::to_string(s.warmup));
  if (s.rounds < 1) return bad("--rounds", "must be at least 1, got " + std::to_string(s.rounds));
  if (check != 0 && check != 1) return bad("-c/--check", "takes 0 or 1, got " + std::to_string(check));
  if (blocking != 0 && blocking != 1) return bad("-z/--blocking", "takes 0 or 1, got " + std::to_string(blocking));
  if (s.root < 0) return bad("-r/--root", "must not be negative, got " + std::to_string(s.root));
  if (s.gpus_per_rank < 0) return bad("-g/--ngpus", "must not be negative, got " + std::to_string(s.gpus_per_rank));
  if (s.many < 0) return bad("--many", "must not be negative, got " + std::to_string(s.many));
  if (s.gpus_per_rank > 0 && vm.count("host"))
    return usage_error(me, "-g/--ngpus and --host exclude each other", usage);
  if (vm.count("output_file")) {
    if (auto f = check_output_file(s.json_path); !f) return bad("-J/--output_file", f.error_value().message());
  }
  if (graph != 0) {
    return bad("-G/--cudagraph",
               "CUDA graphs are not supported (only 0): atomr's collectives are issued by its own threads, not "
               "captured on the caller's stream (atomr replays a collective repeated on the same buffers as a "
               "graph itself: ATOMR_NCCL_GRAPHS)");
  }
  s.check = check != 0;
  s.blocking = blocking != 0;
  s.host = vm.count("host") > 0;

  startup_report startup;
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  const auto& id = (*session)->identity();
  auto t_devices = clock::now();  // (probing CUDA is part of starting the devices)
  // --host never touches CUDA (starting it costs each rank tens of ms on a GPU machine).
  const auto probe = s.host ? result<al::device_probe>(al::device_probe{}) : al::probe_cuda_devices();
  const int visible = probe ? static_cast<int>(probe->devices.size()) : 0;
  auto gpus =
      cluster::choose_devices({.host = s.host, .per_rank = s.gpus_per_rank}, id.local_rank, id.local_size, visible);
  if (!gpus) return report_error(gpus.error_value().describe(), 1);
  s.machine = "host CPU";
  if (!gpus->empty() && probe && static_cast<std::size_t>(gpus->front()) < probe->devices.size()) {
    s.machine = probe->devices[static_cast<std::size_t>(gpus->front())].name;
  }
  s.machine += " (" + id.hostname + ")";
  al::actor_system system;
  std::vector<al::device> devs;
  if (gpus->empty()) {
    devs.push_back(al::device::start(system, 0, al::device_kind::host).value());
  } else {
    for (int g : *gpus) {
      auto d = al::device::start(system, g, al::device_kind::cuda);
      if (!d) return report_error(d.error_value().describe(), 1);
      devs.push_back(*d);
    }
  }
  auto options = cluster::world_options::from_environment();
  if (!options) return report_error(options.error_value().describe(), 2);
  const double devices_ms = since(t_devices) * 1e3;
  // The ranks finish starting their devices at different times (CUDA's start takes tens of ms and
  // varies): meet first, so that the world's phase measures its own creation, not that skew.
  MPI_Barrier((*session)->world());
  auto t_phase = clock::now();
  auto w = cluster::world::create((*session)->world(), devs, *options);
  if (!w) return report_error(w.error_value().describe(), 1);
  const double world_ms = since(t_phase) * 1e3;
  t_phase = clock::now();
  // Startup cost as a user sees it: from MPI_Init to the first all_reduce completed.
  // (The first buffer is timed apart from the all_reduce: in some runs on the GPU machine the
  // phase took 200 ms instead of 33, and which of the two it was is the first question.)
  double buffer_ms = 0;
  {
    std::vector<al::gpu_ref<float>> one;
    for (auto& d : devs) {
      auto b = d.allocate<float>(1).get();
      if (!b) return report_error(b.error_value().describe(), 1);
      one.push_back(*b);
    }
    buffer_ms = since(t_phase) * 1e3;
    if (auto r = (*w)->collective<float>(coll_kind::all_reduce, one, one).get(); !r) {
      return report_error(r.error_value().describe(), 1);
    }
  }
  const double first_ms = since(t_phase) * 1e3;
  {
    const MPI_Comm c = (*session)->world();
    const auto& up = (*session)->startup();
    startup.total_ms = max_over_ranks(c, since(t_start) * 1e3);
    for (auto [name, ms] :
         {std::pair{"MPI_Init", up.mpi_init}, std::pair{"node identity", up.node_identity},
          std::pair{"liveness", up.liveness}, std::pair{"devices", devices_ms}, std::pair{"world", world_ms},
          std::pair{"first all_reduce", first_ms}, std::pair{"of it the first buffer", buffer_ms}}) {
      startup.phases.emplace_back(name, max_over_ranks(c, ms));
    }
    startup.max_rss_mib = max_rss_mib(c);
  }
  switch (s.type) {
    case al::dtype::i8: return run_typed<std::int8_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::u8: return run_typed<std::uint8_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::i32: return run_typed<std::int32_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::u32: return run_typed<std::uint32_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::i64: return run_typed<std::int64_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::u64: return run_typed<std::uint64_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::f16: return run_typed<al::f16_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::bf16: return run_typed<al::bf16_t>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::f32: return run_typed<float>(s, **session, **w, devs, *gpus, startup);
    case al::dtype::f64: return run_typed<double>(s, **session, **w, devs, *gpus, startup);
  }
  return 1;
}

}  // namespace atomr::apps
