// `atomr bench <name>`: the benchmarks. Each prints the raw baseline and the atomr path measured in
// the same run, and their ratio; --json prints the same numbers as JSON.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "atomr/common/version.hpp"
#include "atomr/local/devices.hpp"
#include "bench/bench_actors.hpp"
#include "bench/bench_coll.hpp"
#include "bench/bench_device.hpp"
#include "bench/bench_p2p.hpp"
#include "bench/bench_wire.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "text_table.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

int bench_wire(bool json) {
  const auto cases = bench::run_wire_benchmarks();
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : cases) {
      out.push_back({{"case", c.name},
                     {"wire_bytes", c.wire_bytes},
                     {"atomr_ns", c.atomr.ns_per_op},
                     {"raw_memcpy_ns", c.raw.ns_per_op},
                     {"ratio", c.atomr.ns_per_op / c.raw.ns_per_op}});
    }
    std::cout << nlohmann::json{{"benchmark", "wire"}, {"cases", out}}.dump(2) << '\n';
    return 0;
  }
  std::cout
      << "atomr bench wire: encode + decode round trip (atomr) vs memcpy of the same bytes out and back (raw)\n\n";
  text_table table({"case", "wire bytes", "atomr ns/op", "raw ns/op", "atomr/raw"});
  for (const auto& c : cases) {
    table.add_row({c.name, std::to_string(c.wire_bytes), fixed(c.atomr.ns_per_op, 1), fixed(c.raw.ns_per_op, 1),
                   fixed(c.atomr.ns_per_op / c.raw.ns_per_op, 1) + "x"});
  }
  table.print(std::cout);
  return 0;
}

int bench_actors(bool json, long long messages, int producers, int round_trips) {
  const auto r = bench::run_actor_benchmarks(messages, producers, round_trips);
  if (json) {
    nlohmann::json tp = nlohmann::json::array();
    for (const auto& c : r.throughput) {
      tp.push_back({{"case", c.name},
                    {"producers", c.producers},
                    {"messages", c.messages},
                    {"atomr_msgs_per_s", c.atomr_msgs_per_s},
                    {"raw_msgs_per_s", c.raw_msgs_per_s},
                    {"ratio", c.atomr_msgs_per_s / c.raw_msgs_per_s}});
    }
    nlohmann::json lat = nlohmann::json::array();
    for (const auto& c : r.latency) {
      lat.push_back({{"case", c.name},
                     {"samples", c.samples},
                     {"atomr_p50_us", c.atomr_p50_us},
                     {"atomr_p99_us", c.atomr_p99_us},
                     {"raw_p50_us", c.raw_p50_us},
                     {"raw_p99_us", c.raw_p99_us}});
    }
    std::cout << nlohmann::json{{"benchmark", "actors"}, {"throughput", tp}, {"latency", lat}}.dump(2) << '\n';
    return 0;
  }
  std::cout << "atomr bench actors: raw = the same moodycamel queue pushed and popped by plain threads\n\n";
  text_table t({"throughput", "messages", "atomr M msg/s", "raw M msg/s", "atomr/raw"});
  for (const auto& c : r.throughput) {
    t.add_row({c.name, std::to_string(c.messages), fixed(c.atomr_msgs_per_s / 1e6, 2), fixed(c.raw_msgs_per_s / 1e6, 2),
               fixed(c.atomr_msgs_per_s / c.raw_msgs_per_s, 2)});
  }
  t.print(std::cout);
  std::cout << '\n';
  text_table l({"latency", "samples", "atomr p50 us", "atomr p99 us", "raw p50 us", "raw p99 us", "p50 atomr/raw"});
  for (const auto& c : r.latency) {
    l.add_row({c.name, std::to_string(c.samples), fixed(c.atomr_p50_us, 2), fixed(c.atomr_p99_us, 2),
               fixed(c.raw_p50_us, 2), fixed(c.raw_p99_us, 2), fixed(c.atomr_p50_us / c.raw_p50_us, 2)});
  }
  l.print(std::cout);
  return 0;
}

// "4K" -> 4096, "1G" -> 2^30; plain numbers are bytes.
int bench_p2p(bool json, int src, int dst, const std::string& min_text, const std::string& max_text) {
  auto min_bytes = parse_size(min_text);
  auto max_bytes = parse_size(max_text);
  if (!min_bytes || !max_bytes) return report_error((!min_bytes ? min_bytes : max_bytes).error_value().message(), 2);
  if (*min_bytes > *max_bytes) return report_error("--min-bytes is larger than --max-bytes", 2);
  const auto gpus = local::probe_cuda_devices();
  const int count = gpus ? static_cast<int>(gpus->devices.size()) : 0;
  if (src == dst || src < 0 || dst < 0 || std::max(src, dst) >= count) {
    return report_error("atomr bench p2p needs two distinct GPUs (--src " + std::to_string(src) + ", --dst " +
                            std::to_string(dst) + "); " + std::to_string(count) + " visible" +
                            (gpus && count == 0 ? " (" + gpus->absent_reason + ")" : ""),
                        1);
  }
  auto rows = bench::run_p2p_benchmarks(src, dst, *min_bytes, *max_bytes, 4);
  if (!rows) return report_error(rows.error_value().describe(), 1);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *rows) {
      out.push_back({{"bytes", r.bytes},
                     {"iterations", r.iterations},
                     {"raw_gbps", r.raw_gbps},
                     {"atomr_gbps", r.atomr_gbps},
                     {"bw_ratio", r.atomr_gbps / r.raw_gbps},
                     {"raw_us", r.raw_us},
                     {"atomr_us", r.atomr_us},
                     {"overhead_us", r.atomr_us - r.raw_us}});
    }
    std::cout << nlohmann::json{{"benchmark", "p2p"},
                                {"machine", gpus->devices[static_cast<std::size_t>(src)].name},
                                {"commit", k_git_revision},
                                {"src", src},
                                {"dst", dst},
                                {"rows", out}}
                     .dump(2)
              << '\n';
    return 0;
  }
  std::cout << "atomr bench p2p: GPU" << src << " -> GPU" << dst
            << "; raw = cudaMemcpyPeerAsync on the destination's stream, atomr = device::copy_from_peer\n"
               "bandwidth: copies back to back, one wait; latency: each copy waited for\n\n";
  text_table t({"bytes", "iters", "raw GB/s", "atomr GB/s", "atomr/raw", "raw us", "atomr us", "overhead us"});
  for (const auto& r : *rows) {
    t.add_row({std::to_string(r.bytes), std::to_string(r.iterations), fixed(r.raw_gbps, 2), fixed(r.atomr_gbps, 2),
               fixed(r.atomr_gbps / r.raw_gbps, 3), fixed(r.raw_us, 2), fixed(r.atomr_us, 2),
               fixed(r.atomr_us - r.raw_us, 2)});
  }
  t.print(std::cout);
  return 0;
}

int bench_device(bool json, int index, bool host) {
  const auto gpus = local::probe_cuda_devices();
  const int count = gpus ? static_cast<int>(gpus->devices.size()) : 0;
  const auto kind = host || count == 0 ? local::device_kind::host : local::device_kind::cuda;
  if (kind == local::device_kind::cuda && (index < 0 || index >= count)) {
    return report_error("--device " + std::to_string(index) + ": " + std::to_string(count) + " GPU(s) visible", 2);
  }
  auto cases = bench::run_device_benchmarks(kind, index);
  if (!cases) return report_error(cases.error_value().describe(), 1);
  const std::string where = (kind == local::device_kind::cuda ? "GPU" : "host device ") + std::to_string(index);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : *cases) {
      out.push_back({{"case", c.name},
                     {"bytes", c.bytes},
                     {"raw_us", c.raw_us},
                     {"atomr_us", c.atomr_us},
                     {"overhead_us", c.atomr_us - c.raw_us},
                     {"ratio", c.atomr_us / c.raw_us}});
    }
    std::cout << nlohmann::json{{"benchmark", "device"}, {"device", where}, {"cases", out}}.dump(2) << '\n';
    return 0;
  }
  std::cout << "atomr bench device: " << where
            << "; round trips, each waited for. raw = the CUDA runtime calls on a stream of their own, then\n"
               "cudaStreamSynchronize (host device: malloc/memcpy); atomr = the device actor's future\n\n";
  text_table t({"case", "bytes", "raw us", "atomr us", "overhead us", "atomr/raw"});
  for (const auto& c : *cases) {
    t.add_row({c.name, std::to_string(c.bytes), fixed(c.raw_us, 2), fixed(c.atomr_us, 2),
               fixed(c.atomr_us - c.raw_us, 2), fixed(c.atomr_us / c.raw_us, 2)});
  }
  t.print(std::cout);
  return 0;
}

}  // namespace

int run_bench(const std::string& program, const std::vector<std::string>& args) {
  // coll has its own, nccl-tests compatible, options.
  // (`atomr bench coll --help` arrives as "--help coll": the global --help goes first.)
  const auto named =
      std::find_if(args.begin(), args.end(), [](const std::string& a) { return a.empty() || a[0] != '-'; });
  // So do route and fetch (MPI programs, run under mpirun).
  if (named != args.end() && (*named == "coll" || *named == "route" || *named == "fetch")) {
    std::vector<std::string> rest(args.begin(), named);
    rest.insert(rest.end(), named + 1, args.end());
    if (*named == "route") return run_bench_route(program, rest);
    if (*named == "fetch") return run_bench_fetch(program, rest);
    return run_bench_coll(program, rest);
  }
  po::options_description opts("atomr " + program + " options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON")(
      "messages", po::value<long long>()->default_value(5'000'000), "actors: messages per throughput case")(
      "producers", po::value<int>()->default_value(2), "actors: producer threads for the many-producer case")(
      "round-trips", po::value<int>()->default_value(100'000), "actors: ask round trips to time")(
      "src", po::value<int>()->default_value(0), "p2p: source GPU")("dst", po::value<int>()->default_value(1),
                                                                    "p2p: destination GPU")(
      "min-bytes", po::value<std::string>()->default_value("4K"), "p2p: smallest copy")(
      "max-bytes", po::value<std::string>()->default_value("1G"), "p2p: largest copy (sizes step by 4x)")(
      "device", po::value<int>()->default_value(0), "device: the GPU to measure")(
      "host", "device: measure the host device kind even where a GPU is visible");
  po::options_description hidden;
  hidden.add_options()("name", po::value<std::string>(), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description positional;
  positional.add("name", 1);
  po::variables_map vm;
  if (auto done = parse_command_line(
          program, args, opts, all, positional,
          "usage: atomr bench <name> [--json]\n"
          "benchmarks:\n"
          "  wire    encode+decode of a gpu_token and of 64 B / 4 KiB envelopes vs memcpy\n"
          "  actors  tell throughput (1 and N producers), ask round trip and wake-up latency vs the raw queue\n"
          "  p2p     GPU-to-GPU copy bandwidth and latency vs cudaMemcpyPeerAsync (needs two GPUs)\n"
          "  device  allocate, upload, download and run round trips through a device actor vs direct calls\n"
          "  coll    collectives through atomr vs direct NCCL (or MPI on the host backend); run under mpirun;\n"
          "          nccl-tests options: 'atomr bench coll --help'\n"
          "  route   remote ask round trip and tell rate between 2 ranks vs raw MPI ('atomr bench route --help')\n"
          "  fetch   token fetch latency and bandwidth between 2 ranks vs the raw transfer ('atomr bench fetch "
          "--help')",
          vm)) {
    return *done;
  }
  if (!vm.count("name")) return report_error("which benchmark? (try 'atomr bench --help')", 2);
  const auto name = vm["name"].as<std::string>();
  const bool json = vm.count("json") > 0;
  if (name == "wire") return bench_wire(json);
  if (name == "p2p") {
    return bench_p2p(json, vm["src"].as<int>(), vm["dst"].as<int>(), vm["min-bytes"].as<std::string>(),
                     vm["max-bytes"].as<std::string>());
  }
  if (name == "device") return bench_device(json, vm["device"].as<int>(), vm.count("host") > 0);
  if (name == "actors") {
    const auto messages = vm["messages"].as<long long>();
    const auto producers = vm["producers"].as<int>();
    const auto round_trips = vm["round-trips"].as<int>();
    if (messages < 1 || producers < 1 || round_trips < 1) {
      return report_error("--messages, --producers and --round-trips must be positive", 2);
    }
    return bench_actors(json, messages, producers, round_trips);
  }
  return report_error("unknown benchmark '" + name + "' (try 'atomr bench --help')", 2);
}

}  // namespace atomr::apps
