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
#include "bench/coll_runner.hpp"
#include "command_line.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

using namespace coll_bench_parts;
using cluster::coll_kind;
using cluster::reduce_op;
namespace al = atomr::local;

// One run of the benchmark over one element type: the table of sizes, then the request stages,
// the engine's counts and the many-small comparison, then the JSON.
template <typename T>
class coll_bench {
 public:
  coll_bench(const settings& s, cluster::mpi_session& session, cluster::world& w, std::vector<al::device>& devs,
             const startup_report& startup)
      : s_(s),
        comm_(session.world()),
        lead_(session.identity().world_rank == 0),
        w_(w),
        devs_(devs),
        startup_(startup),
        runner_(s, w, devs),
        n_(w.size()),
        parts_(splits(s.kind) ? static_cast<std::size_t>(w.size()) : 1) {}

  int run(const std::vector<int>& gpus) {
    // Which sizes hold an element depends on the world's size, so the options alone cannot say.
    const std::vector<std::size_t> counts = row_counts();
    if (counts.empty()) {
      if (lead_) {
        report_error("-b/--minbytes, -e/--maxbytes: no size from " + std::to_string(s_.min_bytes) + " to " +
                         std::to_string(s_.max_bytes) + " B holds one " + std::string(al::to_string(s_.type)) +
                         " element per rank (" + std::string(cluster::to_string(s_.kind)) + " at " +
                         std::to_string(n_) + " ranks needs at least " + std::to_string(sizeof(T) * parts_) +
                         " B); nothing to measure",
                     2);
      }
      return 2;
    }
    if (auto r = runner_.allocate(); !r) return fail(r.error_value());
    // The many-small mode reuses these buffers: big enough for either.
    auto raw = bench::make_raw_collectives(
        {comm_, gpus, s_.type, s_.op, s_.root, std::max({s_.max_bytes, s_.many_bytes, sizeof(T)})});
    if (!raw) return fail(raw.error_value());
    raw_ = std::move(*raw);
    if (lead_) print_header();
    for (const std::size_t count : counts) {
      auto r = measure(count);
      if (!r) return fail(r.error_value());
      if (lead_) print_row(*r);
      rows_.push_back(std::move(*r));
    }
    long long total_wrong = 0;
    for (const auto& r : rows_) total_wrong += std::max(0LL, r.oop.wrong) + std::max(0LL, r.ip.wrong);
    nlohmann::json stages_json;
    if (!rows_.empty()) {
      auto st = stages_section();
      if (!st) return fail(st.error_value().with_context("timing the request stages"));
      stages_json = std::move(*st);
    }
    const nlohmann::json engine_json = engine_section();
    nlohmann::json many_json;
    if (s_.many > 0 && s_.kind == coll_kind::all_reduce && devs_.size() == 1) {
      auto many = many_small_section();
      if (!many) return fail(many.error_value());
      many_json = std::move(*many);
    }
    if (lead_) {
      double busbw_sum = 0;
      for (const auto& r : rows_) busbw_sum += r.oop.busbw;
      std::printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
      std::printf("# Avg bus bandwidth    : %.3f\n",
                  rows_.empty() ? 0.0 : busbw_sum / static_cast<double>(rows_.size()));
      if (!s_.json_path.empty() && !write_json(total_wrong, stages_json, engine_json, many_json)) {
        return report_error("cannot write " + s_.json_path, 1);
      }
    }
    return total_wrong == 0 ? 0 : 1;
  }

 private:
  int fail(const error& e) const { return report_error(e.describe(), 1); }

  // The per-rank element count of each size from -b to -e that holds at least one.
  std::vector<std::size_t> row_counts() const {
    std::vector<std::size_t> counts;
    for (std::size_t bytes = s_.min_bytes; bytes <= s_.max_bytes; bytes *= s_.factor) {
      if (const std::size_t count = bytes / sizeof(T) / parts_; count != 0) counts.push_back(count);
      if (bytes > s_.max_bytes / s_.factor) break;
    }
    return counts;
  }
  bool no_in_place() const { return s_.kind == coll_kind::all_to_all; }
  int rounds() const { return std::clamp(s_.rounds, 1, s_.iters); }

  void print_header() const {
    std::printf("# atomr bench coll: %s, %d ranks (%s backend, %zu device(s) per rank), %s, %s, root %d\n",
                std::string(cluster::to_string(s_.kind)).c_str(), n_, std::string(to_string(w_.backend())).c_str(),
                devs_.size(), std::string(al::to_string(s_.type)).c_str(),
                std::string(cluster::to_string(s_.op)).c_str(), s_.root);
    std::printf(
        "# iters %d, warmup %d, rounds %d (atomr and raw taking turns), check %d, blocking %d; MPI_Init to first "
        "all_reduce done: %.1f ms\n",
        s_.iters, s_.warmup, rounds(), s_.check ? 1 : 0, s_.blocking ? 1 : 0, startup_.total_ms);
    std::printf("# startup, max over ranks (ms):");
    for (const auto& [name, ms] : startup_.phases)
      std::printf(" %s %.1f%s", name.c_str(), ms, &name == &startup_.phases.back().first ? "" : ",");
    std::printf("; max RSS per rank %.1f MiB\n", startup_.max_rss_mib);
    std::printf("#%76s%34s%36s\n", "atomr out-of-place", "atomr in-place", "raw out-of-place   raw in-place");
    std::printf("#%12s %12s %6s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "time",
                "busbw", "time", "busbw", "ratio");
    std::printf("#%12s %12s %6s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(us)",
                "(GB/s)", "");
  }

  // One size: checked first (with -c), then the four columns timed taking turns.
  result<row> measure(std::size_t count) {
    row r;
    r.count = count * parts_;
    r.bytes = r.count * sizeof(T);
    if (no_in_place()) r.ip.wrong = r.raw_ip.wrong = -2;
    if (s_.check) {
      for (bool in_place : {false, true}) {
        if (in_place && no_in_place()) continue;
        auto checked = runner_.check(count, in_place);
        if (!checked) {
          return checked.error_value().with_context(std::string(in_place ? "in-place" : "out-of-place") + " at " +
                                                    std::to_string(r.bytes) + " B");
        }
        (in_place ? r.ip : r.oop).wrong = sum_over_ranks(comm_, *checked);
      }
    }
    ATOMR_TRY(time_columns(count, r));
    const double factor = cluster::bus_factor(s_.kind, n_);
    for (timing* t : {&r.oop, &r.ip, &r.raw_oop, &r.raw_ip}) {
      if (t->us > 0) {
        t->algbw = static_cast<double>(r.bytes) / (t->us * 1e-6) / 1e9;
        t->busbw = t->algbw * factor;
      }
    }
    return r;
  }

  // Each of the four columns runs iters / rounds timed iterations per round (after warmup /
  // rounds untimed ones), and the rounds take turns: atomr out of place, in place, raw out of
  // place, in place. A column's time is its total over the rounds per iteration.
  result<void> time_columns(std::size_t count, row& r) {
    static const char* names[] = {"out-of-place", "in-place", "raw out-of-place", "raw in-place"};
    double sec[4] = {0, 0, 0, 0};
    std::vector<double> round_sec[4];  // per iteration, each round's
    for (int round = 0; round < rounds(); ++round) {
      const int timed_n = s_.iters / rounds() + (round < s_.iters % rounds() ? 1 : 0);
      const int warm_n = s_.warmup / rounds() + (round < s_.warmup % rounds() ? 1 : 0);
      for (int col = 0; col < 4; ++col) {
        const bool in_place = (col % 2) == 1;
        if (in_place && no_in_place()) continue;
        auto timed = time_column(col, count, warm_n, timed_n);
        if (!timed) {
          return timed.error_value().with_context(std::string(names[col]) + " at " + std::to_string(r.bytes) + " B");
        }
        sec[col] += *timed;
        round_sec[col].push_back(timed_n > 0 ? *timed / timed_n : 0.0);
      }
    }
    timing* cols[4] = {&r.oop, &r.ip, &r.raw_oop, &r.raw_ip};
    for (int col = 0; col < 4; ++col) {
      if ((col % 2) == 1 && no_in_place()) continue;
      cols[col]->us = mean_over_ranks(comm_, sec[col] / s_.iters) * 1e6;
      for (double v : round_sec[col]) cols[col]->rounds_us.push_back(mean_over_ranks(comm_, v) * 1e6);
    }
    return ok();
  }

  // Seconds for `timed_n` iterations of one column, after `warm_n` untimed ones.
  result<double> time_column(int col, std::size_t count, int warm_n, int timed_n) {
    const bool in_place = (col % 2) == 1;
    if (col < 2) {
      if (warm_n > 0) ATOMR_TRY(runner_.time(count, in_place, warm_n));
      ATOMR_ASSIGN_OR_RETURN(const double per_op, runner_.time(count, in_place, timed_n));
      return per_op * timed_n;
    }
    if (warm_n > 0) ATOMR_TRY(raw_->run(s_.kind, count, in_place, warm_n, s_.blocking));
    return raw_->run(s_.kind, count, in_place, timed_n, s_.blocking);
  }

  void print_row(const row& r) const {
    const int root = s_.kind == coll_kind::broadcast || s_.kind == coll_kind::reduce ? s_.root : -1;
    auto wrong = [](const timing& t) {
      return t.wrong == -2 ? std::string("n/a") : t.wrong < 0 ? std::string("-") : std::to_string(t.wrong);
    };
    auto col = [](const timing& t, const char* f, double v) { return t.wrong == -2 ? std::string("n/a") : fmt(f, v); };
    std::printf(" %12zu %12zu %6s %6s %5d %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %9s %7s %6s\n", r.bytes, r.count,
                std::string(al::to_string(s_.type)).c_str(), std::string(cluster::to_string(s_.op)).c_str(), root,
                fmt("%.2f", r.oop.us).c_str(), fmt("%.2f", r.oop.algbw).c_str(), fmt("%.2f", r.oop.busbw).c_str(),
                wrong(r.oop).c_str(), col(r.ip, "%.2f", r.ip.us).c_str(), col(r.ip, "%.2f", r.ip.algbw).c_str(),
                col(r.ip, "%.2f", r.ip.busbw).c_str(), wrong(r.ip).c_str(), fmt("%.2f", r.raw_oop.us).c_str(),
                fmt("%.2f", r.raw_oop.busbw).c_str(), col(r.raw_ip, "%.2f", r.raw_ip.us).c_str(),
                col(r.raw_ip, "%.2f", r.raw_ip.busbw).c_str(), fmt("%.3f", r.raw_oop.us / r.oop.us).c_str());
    std::fflush(stdout);
  }

  // The request stages at the smallest size (stage_report), printed and as JSON.
  result<nlohmann::json> stages_section() {
    ATOMR_ASSIGN_OR_RETURN(const auto st, stage_report(runner_, rows_.front().count / parts_, s_, comm_));
    if (lead_) {
      std::printf("# stages at %zu B, %s (median us on rank 0):", rows_.front().bytes,
                  s_.blocking ? "each waited for" : "back to back");
      for (std::size_t i = 1; i < cluster::k_trace_stages; ++i) {
        std::printf(" %s %.2f%s", std::string(cluster::to_string(static_cast<cluster::trace_stage>(i))).c_str(),
                    st.medians[i], i + 1 < cluster::k_trace_stages ? "," : "\n");
      }
      std::printf("# request timeline cost at %zu B: off %.2f us, on %.2f us per operation\n", rows_.front().bytes,
                  st.off_us, st.on_us);
    }
    nlohmann::json out = {{"bytes", rows_.front().bytes}, {"timeline_off_us", st.off_us}, {"timeline_on_us", st.on_us}};
    for (std::size_t i = 1; i < cluster::k_trace_stages; ++i) {
      out["median_us"][std::string(cluster::to_string(static_cast<cluster::trace_stage>(i)))] = st.medians[i];
    }
    return out;
  }

  // What the engine did over the rows (this rank's world): how requests were issued, and how many
  // went through CUDA graphs, alone or in chains.
  nlohmann::json engine_section() const {
    const auto st = w_.stats();
    if (lead_) {
      std::printf(
          "# engine over the rows (rank 0): %llu requests in %llu issues, %llu packed; CUDA graphs: %llu votes (%llu "
          "through shared memory), %llu captures, %llu requests launched, %llu in chains; %llu issues through "
          "shared memory (%llu direct)\n",
          static_cast<unsigned long long>(st.requests), static_cast<unsigned long long>(st.issues),
          static_cast<unsigned long long>(st.packed), static_cast<unsigned long long>(st.graph_votes),
          static_cast<unsigned long long>(st.graph_votes_shared_memory),
          static_cast<unsigned long long>(st.graph_captures), static_cast<unsigned long long>(st.graph_launches),
          static_cast<unsigned long long>(st.graph_chained), static_cast<unsigned long long>(st.shared_memory),
          static_cast<unsigned long long>(st.shared_memory_direct));
    }
    return {{"requests", st.requests},
            {"issues", st.issues},
            {"packed", st.packed},
            {"graph_votes", st.graph_votes},
            {"graph_votes_shared_memory", st.graph_votes_shared_memory},
            {"graph_captures", st.graph_captures},
            {"graph_launches", st.graph_launches},
            {"graph_chained", st.graph_chained},
            {"shared_memory", st.shared_memory},
            {"shared_memory_direct", st.shared_memory_direct},
            {"most_unfreed", st.most_unfreed}};
  }

  // Median over repetitions (the first warms up and is dropped) of the slowest rank's seconds.
  struct samples {
    std::vector<double> took, returned;
    double took_us() { return median_us(took); }
    double returned_us() { return median_us(returned); }
    static double median_us(std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2] * 1e6;
    }
  };

  // `many` small all_reduces: raw NCCL (or MPI) one after the other against atomr's submission
  // forms, each timed to the last one's completion and to the call's return.
  result<nlohmann::json> many_small_section() {
    using handing = typename coll_runner<T>::handing;
    const std::size_t count = std::max<std::size_t>(s_.many_bytes / sizeof(T), 1);
    samples raw, each;
    const auto before = w_.stats();
    for (int rep = 0; rep < 6; ++rep) {
      ATOMR_ASSIGN_OR_RETURN(const double a, raw_->run_sequential_small(count, s_.many));
      ATOMR_ASSIGN_OR_RETURN(const double b, runner_.many_small(count, s_.many));
      if (rep == 0) continue;
      raw.took.push_back(max_over_ranks(comm_, a));
      each.took.push_back(max_over_ranks(comm_, b));
    }
    const auto after = w_.stats();
    // The same requests in one call of each other form (after the per-request runs, so that the
    // stats above are theirs alone), taking turns.
    constexpr std::array forms{handing::together, handing::group, handing::prepared, handing::buffers};
    std::array<samples, forms.size()> by_form;
    std::uint64_t group_kept = 0;  // measured submit_group calls submitted as a kept prepared call
    for (int rep = 0; rep < 6; ++rep) {
      for (std::size_t f = 0; f < forms.size(); ++f) {
        const auto repeats_before = w_.stats().group_repeats;
        ATOMR_ASSIGN_OR_RETURN(const double t, runner_.many_small(count, s_.many, forms[f]));
        if (rep == 0) continue;
        if (forms[f] == handing::group) group_kept += w_.stats().group_repeats - repeats_before;
        by_form[f].took.push_back(max_over_ranks(comm_, t));
        by_form[f].returned.push_back(max_over_ranks(comm_, runner_.handed()));
      }
    }
    const double raw_us = raw.took_us(), atomr_us = each.took_us();
    std::array<double, forms.size()> took{}, returned{};
    for (std::size_t f = 0; f < forms.size(); ++f) {
      took[f] = by_form[f].took_us();
      returned[f] = by_form[f].returned_us();
    }
    const auto packed = after.packed - before.packed;
    const auto issues = after.issues - before.issues;
    if (lead_) {
      std::printf(
          "# many small: %d x %zu B all_reduce: raw sequential %.1f us, atomr concurrent %.1f us: %.1fx faster"
          " (%llu of %llu requests packed, %llu issues); in one per-request group %.1f us: %.1fx (the call"
          " returned after %.1f us); in one submit_group call %.1f us: %.1fx (returned after %.1f us; %llu of %zu"
          " as the kept prepared call); prepared once and submitted %.1f us: %.1fx (returned after %.1f us); in one"
          " submit_group call of buffers %.1f us: %.1fx (returned after %.1f us)\n",
          s_.many, count * sizeof(T), raw_us, atomr_us, raw_us / atomr_us, static_cast<unsigned long long>(packed),
          static_cast<unsigned long long>(after.requests - before.requests), static_cast<unsigned long long>(issues),
          took[0], raw_us / took[0], returned[0], took[1], raw_us / took[1], returned[1],
          static_cast<unsigned long long>(group_kept), by_form[1].took.size(), took[2], raw_us / took[2], returned[2],
          took[3], raw_us / took[3], returned[3]);
    }
    nlohmann::json out = {{"requests", s_.many},
                          {"bytes", count * sizeof(T)},
                          {"raw_sequential_us", raw_us},
                          {"atomr_concurrent_us", atomr_us},
                          {"speedup", raw_us / atomr_us},
                          {"submit_group_kept", group_kept},
                          {"packed", packed},
                          {"issues", issues}};
    // (The JSON keeps the forms' earlier names, which atomr-report and the recorded results use:
    // submit_all is submit_group with each_request, all_reduce_group submit_group of buffers.)
    constexpr std::array<const char*, forms.size()> names{"submit_all", "submit_group", "prepared", "all_reduce_group"};
    for (std::size_t f = 0; f < forms.size(); ++f) {
      out[std::string("atomr_") + names[f] + "_us"] = took[f];
      out[std::string("speedup_") + names[f]] = raw_us / took[f];
      out[std::string(names[f]) + "_returned_us"] = returned[f];
    }
    return out;
  }

  bool write_json(long long total_wrong, const nlohmann::json& stages_json, const nlohmann::json& engine_json,
                  const nlohmann::json& many_json) const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows_) {
      out.push_back({{"size", r.bytes},
                     {"count", r.count},
                     {"out_of_place", to_json(r.oop)},
                     {"in_place", to_json(r.ip)},
                     {"raw_out_of_place", to_json(r.raw_oop)},
                     {"raw_in_place", to_json(r.raw_ip)},
                     {"ratio", r.raw_oop.us / r.oop.us}});
    }
    nlohmann::json doc{{"benchmark", "coll"},
                       {"collective", cluster::to_string(s_.kind)},
                       {"machine", s_.machine},
                       {"commit", k_git_revision},
                       {"date", utc_now()},
                       {"ranks", n_},
                       {"backend", to_string(w_.backend())},
                       {"type", al::to_string(s_.type)},
                       {"op", cluster::to_string(s_.op)},
                       {"iters", s_.iters},
                       {"warmup", s_.warmup},
                       {"rounds", rounds()},
                       {"init_to_first_all_reduce_ms", startup_.total_ms},
                       {"startup", startup_.to_json()},
                       {"wrong", total_wrong},
                       {"rows", out}};
    if (!many_json.is_null()) doc["many_small"] = many_json;
    if (!stages_json.is_null()) doc["stages"] = stages_json;
    doc["engine"] = engine_json;
    std::ofstream f(s_.json_path);
    f << doc.dump(2) << '\n';
    return static_cast<bool>(f);
  }

  const settings& s_;
  MPI_Comm comm_;
  bool lead_;
  cluster::world& w_;
  std::vector<al::device>& devs_;
  const startup_report& startup_;
  coll_runner<T> runner_;
  std::unique_ptr<bench::raw_collectives> raw_;
  int n_;
  std::size_t parts_;
  std::vector<row> rows_;
};

template <typename T>
int run_typed(const settings& s, cluster::mpi_session& session, cluster::world& w, std::vector<al::device>& devs,
              const std::vector<int>& gpus, const startup_report& startup) {
  return coll_bench<T>(s, session, w, devs, startup).run(gpus);
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
  // --host never touches CUDA (starting it costs each rank tens of ms on a host with GPUs).
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
  // (The first buffer is timed apart from the all_reduce: on an H200 host this phase can take
  // 200 ms instead of 33, and which of the two it was is the first question.)
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
