// `atomr doctor`: collective; every rank checks its device, every pair of ranks its link, the world
// its collectives, and rank 0 prints the numbers and a verdict line per outlier or failure. Exit
// code: 0 healthy, 1 an outlier or failure found, 2 a usage error.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "atomr/cluster/doctor.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "text_table.hpp"

namespace po = boost::program_options;
namespace dr = atomr::cluster::doctor;

namespace atomr::apps {
namespace {

constexpr const char* k_usage =
    "usage: atomr doctor [--quick] [--budget 30s] [--json] [-J file] [--device auto|cuda|host] [--threshold 60]\n"
    "Collective over all ranks (run it as the job runs: mpirun/srun atomr doctor). Checks each rank's\n"
    "device (it starts, allocates, runs a kernel, copies; memory and PCIe bandwidth; CPU and NUMA\n"
    "binding), every pair of ranks over the path their fetches take (one pair per rank at a time,\n"
    "beside a raw transfer of the same bytes), and the world's collectives. Rank 0 prints a table and\n"
    "a verdict line naming the rank, node, device and pair of each outlier. Exit code 0: healthy;\n"
    "1: an outlier or failure; 2: a usage error.";

// "30s", "500ms", "2m", "90" (seconds) -> milliseconds; 0 when it is none of these.
long long parse_budget(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v <= 0) return 0;
  const std::string unit(end);
  const double ms = unit == "ms"                   ? v
                    : unit == "s" || unit.empty()  ? v * 1e3
                    : unit == "m" || unit == "min" ? v * 6e4
                                                   : -1;
  return ms < 0 ? 0 : static_cast<long long>(ms);
}

std::string gbps(double v) { return v > 0 ? fixed(v, v >= 10 ? 1 : v >= 1 ? 2 : 3) : "-"; }
std::string us(double v) { return v > 0 ? fixed(v, v >= 100 ? 0 : 1) : "-"; }
std::string ratio(double ours, double raw) { return ours > 0 && raw > 0 ? fixed(ours / raw, 3) : "-"; }

void print_table(std::ostream& os, const dr::report& r) {
  os << "atomr doctor: " << r.ranks << " rank(s) on " << r.nodes << " node(s), " << r.rounds << " round(s) of pairs, "
     << fixed(r.seconds, 1) << " s (budget " << fixed(r.used.budget.count() / 1e3, 0) << " s"
     << (r.used.quick ? ", quick" : "") << ")\n\nranks:\n";
  text_table ranks({"rank", "host", "device", "checks", "copy GB/s", "h2d GB/s", "d2h GB/s", "PCIe", "cpus", "numa"});
  std::vector<std::string> no_gpu;
  for (const auto& rr : r.rank_results) {
    std::string numa;
    for (const int n : rr.cpu_numa) numa += (numa.empty() ? "" : ",") + std::to_string(n);
    if (rr.gpu_numa >= 0) numa += " (GPU " + std::to_string(rr.gpu_numa) + ")";
    const std::string pcie = rr.pcie.generation() > 0
                                 ? "gen" + std::to_string(rr.pcie.generation()) + " x" + std::to_string(rr.pcie.width) +
                                       ", " + gbps(rr.pcie.expected_gbps()) + " GB/s"
                                 : "-";
    ranks.add_row({std::to_string(rr.rank), rr.hostname, rr.device_label() + " (" + rr.device_name + ")",
                   rr.failure.empty() ? "passed" : "FAILED", gbps(rr.device_copy_gbps), gbps(rr.h2d_gbps),
                   gbps(rr.d2h_gbps), pcie, rr.cpus + (rr.bound ? "" : " (unbound)"), numa.empty() ? "-" : numa});
    if (!rr.no_gpu_reason.empty()) no_gpu.push_back("rank " + std::to_string(rr.rank) + ": " + rr.no_gpu_reason);
  }
  ranks.print(os);
  if (!no_gpu.empty()) {
    os << "no GPU (the host device was checked; GPU checks do not apply): " << no_gpu.front()
       << (no_gpu.size() > 1 ? " (and " + std::to_string(no_gpu.size() - 1) + " more)" : "") << '\n';
  }

  if (!r.pairs.empty()) {
    // Beyond 64 pairs only the outliers and failures get a row.
    const bool all = r.pairs.size() <= 64;
    os << "\npairs (" << r.pairs.front().bytes << "-byte fetch by token beside the raw transfer of the same bytes; "
       << "the slower direction" << (all ? "" : "; outliers only") << "):\n";
    text_table pairs(
        {"pair", "class", "lat us", "raw lat us", "GB/s", "raw GB/s", "doctor/raw", "judged against", "share"});
    for (const auto& p : r.pairs) {
      const bool bad = p.outlier || p.latency_outlier || !p.failure.empty();
      if (!all && !bad) continue;
      pairs.add_row(
          {std::to_string(p.a) + "<->" + std::to_string(p.b), p.cls, us(p.latency_us), us(p.raw_latency_us),
           gbps(p.gbps), gbps(p.raw_gbps), ratio(p.gbps, p.raw_gbps),
           p.reference_gbps > 0 ? gbps(p.reference_gbps) + (p.by_model ? " (model)" : " (class)") : "-",
           p.failure.empty()
               ? (p.share > 0 ? std::to_string(static_cast<int>(p.share * 100 + 0.5)) + " %" + (bad ? " <-" : "") : "-")
               : "FAILED"});
    }
    pairs.print(os);
  }
  if (!r.collectives.empty()) {
    os << "\ncollectives (the world's, beside the raw MPI collective on host devices):\n";
    text_table colls({"op", "bytes", "reps", "us", "raw us", "bus GB/s", "raw/atomr"});
    for (const auto& c : r.collectives) {
      colls.add_row({c.op, std::to_string(c.bytes), std::to_string(c.repetitions), us(c.us), us(c.raw_us),
                     gbps(c.bus_gbps), c.failure.empty() ? ratio(c.raw_us, c.us) : "FAILED"});
    }
    colls.print(os);
  }
  os << '\n';
  for (const auto& f : r.findings) os << "doctor: " << f.text << '\n';
  if (r.healthy()) {
    os << "doctor: healthy: no outlier and no failure among " << r.ranks << " rank(s) and " << r.pairs.size()
       << " pair(s)\n";
  } else {
    os << "doctor: " << r.findings.size() << " finding(s)\n";
  }
}

nlohmann::json to_json(const dr::report& r) {
  nlohmann::json ranks = nlohmann::json::array(), pairs = nlohmann::json::array(), colls = nlohmann::json::array(),
                 findings = nlohmann::json::array();
  for (const auto& rr : r.rank_results) {
    ranks.push_back({{"rank", rr.rank},
                     {"node", rr.node},
                     {"hostname", rr.hostname},
                     {"local_rank", rr.local_rank},
                     {"device", rr.device_label()},
                     {"device_name", rr.device_name},
                     {"gpu", rr.gpu},
                     {"no_gpu_reason", rr.no_gpu_reason},
                     {"failure", rr.failure},
                     {"device_copy_gbps", rr.device_copy_gbps},
                     {"h2d_gbps", rr.h2d_gbps},
                     {"d2h_gbps", rr.d2h_gbps},
                     {"pcie",
                      {{"generation", rr.pcie.generation()},
                       {"width", rr.pcie.width},
                       {"max_width", rr.pcie.max_width},
                       {"expected_gbps", rr.pcie.expected_gbps()}}},
                     {"gpu_numa", rr.gpu_numa},
                     {"cpus", rr.cpus},
                     {"bound", rr.bound},
                     {"cpu_numa", rr.cpu_numa},
                     {"nic", {{"name", rr.net.name}, {"speed_mbps", rr.net.speed_mbps}, {"physical", rr.net.physical}}},
                     {"seconds", rr.seconds}});
  }
  for (const auto& p : r.pairs) {
    pairs.push_back({{"a", p.a},
                     {"b", p.b},
                     {"class", p.cls},
                     {"route", p.route},
                     {"bytes", p.bytes},
                     {"gbps", p.gbps},
                     {"raw_gbps", p.raw_gbps},
                     {"link_gbps", p.link_gbps},
                     {"link_latency_us", p.link_latency_us},
                     {"gbps_ab", p.gbps_ab},
                     {"gbps_ba", p.gbps_ba},
                     {"latency_us", p.latency_us},
                     {"raw_latency_us", p.raw_latency_us},
                     {"model_gbps", p.model_gbps},
                     {"reference_gbps", p.reference_gbps},
                     {"share", p.share},
                     {"by_model", p.by_model},
                     {"outlier", p.outlier},
                     {"latency_outlier", p.latency_outlier},
                     {"failure", p.failure}});
  }
  for (const auto& c : r.collectives) {
    colls.push_back({{"op", c.op},
                     {"bytes", c.bytes},
                     {"repetitions", c.repetitions},
                     {"us", c.us},
                     {"raw_us", c.raw_us},
                     {"bus_gbps", c.bus_gbps},
                     {"failure", c.failure}});
  }
  for (const auto& f : r.findings) {
    findings.push_back({{"what", f.what}, {"rank", f.rank}, {"peer", f.peer}, {"node", f.node}, {"text", f.text}});
  }
  return {{"doctor", 1},
          {"ranks", r.ranks},
          {"nodes", r.nodes},
          {"rounds", r.rounds},
          {"seconds", r.seconds},
          {"budget_s", r.used.budget.count() / 1e3},
          {"quick", r.used.quick},
          {"fraction", r.used.fraction},
          {"healthy", r.healthy()},
          {"rank_results", ranks},
          {"pairs", pairs},
          {"collectives", colls},
          {"findings", findings}};
}

}  // namespace

int run_doctor(const std::string& program, const std::vector<std::string>& args) {
  std::string budget = "30s", device = "auto", json_path;
  int threshold = 60;
  po::options_description opts("atomr " + program + " options");
  opts.add_options()("help,h", "print this help")("quick", "smaller buffers, fewer sizes (about a third of the time)")(
      "budget", po::value(&budget), "time for the whole run: 30s (default), 500ms, 2m; 10s with --quick")(
      "json", "print the report as JSON instead of tables")(
      "output_file,J", po::value(&json_path), "also write the JSON report to this file (atomr-report draws it)")(
      "device", po::value(&device), "auto (a GPU where one is visible, else the host device), cuda or host")(
      "threshold", po::value(&threshold), "percent of its reference below which a number is an outlier (default 60)");
  po::variables_map vm;
  if (auto done = parse_command_line(program, args, opts, k_usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(program, option + ": " + what, k_usage);
  };
  dr::options o;
  o.quick = vm.count("quick") > 0;
  if (!vm.count("budget") && o.quick) budget = "10s";
  const long long ms = parse_budget(budget);
  if (ms <= 0) return bad("--budget", "takes a duration such as 30s, 500ms or 2m, got '" + budget + "'");
  if (ms < 1000) return bad("--budget", "must be at least 1s, got '" + budget + "'");
  o.budget = std::chrono::milliseconds(ms);
  if (device == "auto") {
    o.device = dr::device_choice::automatic;
  } else if (device == "cuda") {
    o.device = dr::device_choice::cuda;
  } else if (device == "host") {
    o.device = dr::device_choice::host;
  } else {
    return bad("--device", "takes " + one_of({"auto", "cuda", "host"}) + ", got '" + device + "'");
  }
  if (threshold < 1 || threshold > 99) {
    return bad("--threshold", "a percentage from 1 to 99, got " + std::to_string(threshold));
  }
  o.fraction = threshold / 100.0;
  if (vm.count("output_file")) {
    if (auto f = check_output_file(json_path); !f) return bad("-J/--output_file", f.error_value().message());
  }
  o.for_mode();

  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  auto r = dr::run(**session, o);
  int rc = 0;
  if (!r) {
    rc = report_error("doctor: " + r.error_value().describe(), 1);
  } else if ((*session)->identity().world_rank == 0) {
    if (vm.count("json")) {
      std::cout << to_json(*r).dump(2) << '\n';
    } else {
      print_table(std::cout, *r);
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << to_json(*r).dump(2) << '\n';
      if (!f) rc = report_error("cannot write " + json_path, 1);
    }
    if (!r->healthy()) rc = 1;
  }
  // Every rank ends with rank 0's verdict, so that `srun atomr doctor && srun app` reads it
  // whichever rank the launcher reports.
  if (r) MPI_Bcast(&rc, 1, MPI_INT, 0, (*session)->world());
  return rc;
}

}  // namespace atomr::apps
