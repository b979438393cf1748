// `atomr bench <name>`: the benchmarks. Each prints the raw baseline and the atomr path measured in
// the same run, and their ratio; --json prints the same numbers as JSON.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstring>
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

int bench_actors(bool json, long long messages, int producers, int round_trips, bool remote) {
  std::optional<bench::coroutine_case> remote_case;
  if (remote) {
    auto c = bench::run_remote_ask_case(std::max(1000, round_trips / 5));
    if (!c) return report_error(c.error_value().describe(), 1);
    if (!*c) return 0;  // rank 1 only serves
    remote_case = **c;
  }
  auto r = bench::run_actor_benchmarks(messages, producers, round_trips);
  if (remote_case) r.coroutines.push_back(*remote_case);
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
    nlohmann::json co = nlohmann::json::array();
    for (const auto& c : r.coroutines) {
      co.push_back({{"case", c.name},
                    {"operations", c.operations},
                    {"callback_us", c.callback_us},
                    {"coroutine_us", c.coroutine_us},
                    {"ratio", c.coroutine_us / c.callback_us}});
    }
    std::cout << nlohmann::json{{"benchmark", "actors"}, {"throughput", tp}, {"latency", lat}, {"coroutines", co}}.dump(
                     2)
              << '\n';
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
  std::cout << '\n';
  text_table k({"coroutine vs callback", "operations", "callback us/op", "coroutine us/op", "coroutine/callback"});
  for (const auto& c : r.coroutines) {
    k.add_row({c.name, std::to_string(c.operations), fixed(c.callback_us, 4), fixed(c.coroutine_us, 4),
               fixed(c.coroutine_us / c.callback_us, 3)});
  }
  k.print(std::cout);
  return 0;
}

// Sizes and GPUs are checked by run_p2p: here they are valid and the GPUs visible.
int bench_p2p(bool json, int src, int dst, std::size_t min_bytes, std::size_t max_bytes,
              const local::device_probe& gpus) {
  auto rows = bench::run_p2p_benchmarks(src, dst, min_bytes, max_bytes, 4);
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
                     {"overhead_us", r.atomr_us - r.raw_us},
                     {"bw_inline", r.bw_inline},
                     {"lat_inline", r.lat_inline}});
    }
    std::cout << nlohmann::json{{"benchmark", "p2p"},
                                {"machine", gpus.devices[static_cast<std::size_t>(src)].name},
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
  text_table t(
      {"bytes", "iters", "raw GB/s", "atomr GB/s", "atomr/raw", "raw us", "atomr us", "overhead us", "inline bw/lat"});
  for (const auto& r : *rows) {
    t.add_row({std::to_string(r.bytes), std::to_string(r.iterations), fixed(r.raw_gbps, 2), fixed(r.atomr_gbps, 2),
               fixed(r.atomr_gbps / r.raw_gbps, 3), fixed(r.raw_us, 2), fixed(r.atomr_us, 2),
               fixed(r.atomr_us - r.raw_us, 2), fixed(r.bw_inline, 2) + "/" + fixed(r.lat_inline, 2)});
  }
  t.print(std::cout);
  std::cout << "(inline: the share of atomr's copies their caller enqueued itself; the rest went by mail to the "
               "device thread)\n";
  return 0;
}

int bench_device(bool json, int index, local::device_kind kind) {
  auto cases = bench::run_device_benchmarks(kind, index);
  if (!cases) return report_error(cases.error_value().describe(), 1);
  auto hops = bench::run_device_hops(kind, index);
  if (!hops) return report_error(hops.error_value().describe(), 1);
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
    std::cout
        << nlohmann::json{{"benchmark", "device"},
                          {"device", where},
                          {"cases", out},
                          {"run_hops_us",
                           {{"to_actor", hops->to_actor}, {"to_done", hops->to_done}, {"to_caller", hops->to_caller}}}}
               .dump(2)
        << '\n';
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
  std::cout << "\nempty run, hops (p50, us): caller to the device actor " << fixed(hops->to_actor, 2)
            << ", to its completion seen " << fixed(hops->to_done, 2) << ", to the caller " << fixed(hops->to_caller, 2)
            << "\n";
  return 0;
}

// "GPU 3 is not visible (1 visible)", saying why none is where none is.
std::string not_visible(int index, const result<local::device_probe>& gpus) {
  const int count = gpus ? static_cast<int>(gpus->devices.size()) : 0;
  std::string why = !gpus ? ": " + gpus.error_value().describe() : count == 0 ? ": " + gpus->absent_reason : "";
  return "GPU " + std::to_string(index) + " is not visible (" + std::to_string(count) + " visible" + why + ")";
}

int run_wire(const std::string& program, const std::vector<std::string>& args) {
  po::options_description opts("atomr bench wire options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON");
  po::variables_map vm;
  const std::string usage =
      "usage: atomr bench wire [--json]\n"
      "Encode + decode of a gpu_token and of 64 B / 4 KiB envelopes, against memcpy of the same bytes.";
  if (auto done = parse_command_line(program + " wire", args, opts, usage, vm)) return *done;
  return bench_wire(vm.count("json") > 0);
}

int run_actors(const std::string& program, const std::vector<std::string>& args) {
  // Each producer is a thread; beyond this many the case measures the scheduler, not the queue.
  constexpr int k_max_producers = 1024;
  long long messages = 5'000'000;
  int producers = 2, round_trips = 100'000;
  po::options_description opts("atomr bench actors options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON")(
      "messages", po::value(&messages)->default_value(messages), "messages per throughput case")(
      "producers", po::value(&producers)->default_value(producers),
      "producer threads for the many-producer case (1 to 1024)")(
      "round-trips", po::value(&round_trips)->default_value(round_trips), "ask round trips to time")(
      "remote", "under mpirun -n 2: also an awaited remote ask beside then() (rank 0 prints)");
  po::variables_map vm;
  const std::string me = program + " actors";
  const std::string usage =
      "usage: atomr bench actors [--messages N] [--producers P] [--round-trips R] [--remote] [--json]\n"
      "Tell throughput (1 and P producers), ask round trip and wake-up latency, against the raw queue.";
  if (auto done = parse_command_line(me, args, opts, usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  if (messages < 1) return bad("--messages", must_be_at_least(1, messages));
  if (producers < 1 || producers > k_max_producers) {
    return bad("--producers", "takes 1 to " + std::to_string(k_max_producers) + ", got " + std::to_string(producers));
  }
  // Each producer sends messages / producers: with more producers than messages some send none.
  if (producers > messages) {
    return bad("--producers",
               "at most --messages (" + std::to_string(messages) + "), got " + std::to_string(producers));
  }
  if (round_trips < 1) return bad("--round-trips", must_be_at_least(1, round_trips));
  return bench_actors(vm.count("json") > 0, messages, producers, round_trips, vm.count("remote") > 0);
}

int run_p2p(const std::string& program, const std::vector<std::string>& args) {
  int src = 0, dst = 1;
  std::string min_text = "4K", max_text = "1G";
  po::options_description opts("atomr bench p2p options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON")(
      "src", po::value(&src)->default_value(src), "source GPU")("dst", po::value(&dst)->default_value(dst),
                                                                "destination GPU")(
      "min-bytes", po::value(&min_text)->default_value(min_text), "smallest copy")(
      "max-bytes", po::value(&max_text)->default_value(max_text), "largest copy (sizes step by 4x)");
  po::variables_map vm;
  const std::string me = program + " p2p";
  const std::string usage =
      "usage: atomr bench p2p [--src GPU] [--dst GPU] [--min-bytes SIZE] [--max-bytes SIZE] [--json]\n"
      "GPU-to-GPU copy bandwidth and latency against cudaMemcpyPeerAsync (needs two GPUs).";
  if (auto done = parse_command_line(me, args, opts, usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  if (src < 0) return bad("--src", "must not be negative, got " + std::to_string(src));
  if (dst < 0) return bad("--dst", "must not be negative, got " + std::to_string(dst));
  if (src == dst) {
    return usage_error(me, "--src and --dst must be two different GPUs, both are " + std::to_string(src), usage);
  }
  auto min_bytes = parse_size(min_text);
  if (!min_bytes) return bad("--min-bytes", min_bytes.error_value().message());
  auto max_bytes = parse_size(max_text);
  if (!max_bytes) return bad("--max-bytes", max_bytes.error_value().message());
  if (*min_bytes > *max_bytes) return bad("--min-bytes", min_text + " is larger than --max-bytes " + max_text);
  const auto gpus = local::probe_cuda_devices();
  const int count = gpus ? static_cast<int>(gpus->devices.size()) : 0;
  if (src >= count) return bad("--src", not_visible(src, gpus));
  if (dst >= count) return bad("--dst", not_visible(dst, gpus));
  return bench_p2p(vm.count("json") > 0, src, dst, *min_bytes, *max_bytes, *gpus);
}

int run_device(const std::string& program, const std::vector<std::string>& args) {
  int index = 0;
  po::options_description opts("atomr bench device options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON")(
      "device", po::value(&index)->default_value(index), "the GPU to measure")(
      "host", "measure the host device kind even where a GPU is visible");
  po::variables_map vm;
  const std::string me = program + " device";
  const std::string usage =
      "usage: atomr bench device [--device GPU | --host] [--json]\n"
      "Allocate, upload, download and run round trips through a device actor, against the direct calls\n"
      "(the host device where no GPU is visible).";
  if (auto done = parse_command_line(me, args, opts, usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  const bool host = vm.count("host") > 0;
  const bool chosen = !vm["device"].defaulted();
  if (chosen && host) return usage_error(me, "--device and --host exclude each other", usage);
  if (index < 0) return bad("--device", "must not be negative, got " + std::to_string(index));
  const auto gpus = local::probe_cuda_devices();
  const int count = gpus ? static_cast<int>(gpus->devices.size()) : 0;
  // Without a GPU the default measures the host device; a GPU asked for by number must be there.
  if (chosen && index >= count) return bad("--device", not_visible(index, gpus));
  const auto kind = host || count == 0 ? local::device_kind::host : local::device_kind::cuda;
  return bench_device(vm.count("json") > 0, index, kind);
}

// A benchmark: its name, what it measures ('atomr bench --help') and its own command line.
struct benchmark {
  const char* name;
  const char* summary;
  int (*run)(const std::string& program, const std::vector<std::string>& args);
};

constexpr benchmark k_benchmarks[] = {
    {"wire", "encode+decode of a gpu_token and of 64 B / 4 KiB envelopes vs memcpy", run_wire},
    {"actors", "tell throughput (1 and N producers), ask round trip and wake-up latency vs the raw queue", run_actors},
    {"p2p", "GPU-to-GPU copy bandwidth and latency vs cudaMemcpyPeerAsync (needs two GPUs)", run_p2p},
    {"device", "allocate, upload, download and run round trips through a device actor vs direct calls", run_device},
    {"coll", "collectives through atomr vs direct NCCL (or MPI on the host backend); run under mpirun", run_bench_coll},
    {"route", "remote ask round trip and tell rate between 2 ranks vs raw MPI", run_bench_route},
    {"fetch", "token fetch latency and bandwidth between 2 ranks vs the raw transfer", run_bench_fetch},
};

std::string benchmark_names() {
  std::vector<std::string> names;
  for (const auto& b : k_benchmarks) names.emplace_back(b.name);
  return one_of(names);
}

}  // namespace

int run_bench(const std::string& program, const std::vector<std::string>& args) {
  // The benchmark's name is the first argument that is not an option; the rest are its options
  // (`atomr bench coll --help` arrives as "--help coll": the global --help goes first).
  const auto named =
      std::find_if(args.begin(), args.end(), [](const std::string& a) { return a.empty() || a[0] != '-'; });
  std::string usage = "usage: atomr bench <name> [options]\nbenchmarks:\n";
  for (const auto& b : k_benchmarks)
    usage += "  " + std::string(b.name) + std::string(8 - std::strlen(b.name), ' ') + b.summary + '\n';
  usage += "Run 'atomr bench <name> --help' for a benchmark's options.";
  if (named == args.end()) {
    const bool help = std::find_if(args.begin(), args.end(),
                                   [](const std::string& a) { return a == "--help" || a == "-h"; }) != args.end();
    if (help) {
      std::cout << usage << '\n';
      return 0;
    }
    return usage_error(program, "no benchmark named; take " + benchmark_names(), usage);
  }
  for (const auto& b : k_benchmarks) {
    if (*named != b.name) continue;
    std::vector<std::string> rest(args.begin(), named);
    rest.insert(rest.end(), named + 1, args.end());
    return b.run(program, rest);
  }
  return usage_error(program, "unknown benchmark '" + *named + "'; take " + benchmark_names(), usage);
}

}  // namespace atomr::apps
