// `atomr bench <name>`: the benchmarks. Each prints the raw baseline and the atomr path measured in
// the same run, and their ratio; --json prints the same numbers as JSON.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/bench_wire.hpp"
#include "commands.hpp"
#include "text_table.hpp"

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

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

}  // namespace

int run_bench(const std::string& program, const std::vector<std::string>& args) {
  po::options_description opts("atomr " + program + " options");
  opts.add_options()("help,h", "print this help")("json", "print the results as JSON");
  po::options_description hidden;
  hidden.add_options()("name", po::value<std::string>(), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description positional;
  positional.add("name", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  } catch (const po::error& e) {
    return report_error(std::string(e.what()) + " (try 'atomr bench --help')", 2);
  }
  if (vm.count("help")) {
    std::cout << "usage: atomr bench <name> [--json]\n"
                 "benchmarks:\n"
                 "  wire    encode+decode of a gpu_token and of 64 B / 4 KiB envelopes vs memcpy\n\n"
              << opts;
    return 0;
  }
  if (!vm.count("name")) return report_error("which benchmark? (try 'atomr bench --help')", 2);
  const auto name = vm["name"].as<std::string>();
  if (name == "wire") return bench_wire(vm.count("json") > 0);
  return report_error("unknown benchmark '" + name + "' (try 'atomr bench --help')", 2);
}

}  // namespace atomr::apps
