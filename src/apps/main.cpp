// `atomr`: the command line. Global options, then a subcommand and its own options.
#include <algorithm>
#include <boost/program_options.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "atomr/common/version.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "tunable_check.hpp"

namespace po = boost::program_options;

namespace {

using command_fn = std::function<int(const std::string&, const std::vector<std::string>&)>;

struct command {
  command_fn run;
  const char* summary;
};

const std::map<std::string, command>& commands() {
  static const std::map<std::string, command> table{
      {"info", {atomr::apps::run_info, "every rank's node, devices and library versions (collective; rank 0 prints)"}},
      {"topo", {atomr::apps::run_topo, "every rank's GPU links, islands and CPU/NUMA locality (--json, --dot)"}},
      {"doctor",
       {atomr::apps::run_doctor,
        "checks every rank's device, every pair's link and the collectives; names the outliers (exit 1)"}},
      {"bench",
       {atomr::apps::run_bench,
        "benchmarks, each against its raw baseline: wire, actors, p2p, device, coll, route, fetch"}},
  };
  return table;
}

constexpr const char* k_usage = "usage: atomr [options] <command> [command options]";

// "bench, info or topo": what a command may be, for the errors.
std::string command_names() {
  std::vector<std::string> names;
  for (const auto& entry : commands()) names.push_back(entry.first);
  return atomr::apps::one_of(names);
}

void print_usage(std::ostream& os, const po::options_description& global) {
  os << k_usage
     << "\n"
        "       launch/atomr-launch -n <ranks> atomr <command> ...   (many ranks)\n\n"
     << global << "\ncommands:\n";
  for (const auto& [name, cmd] : commands()) os << "  " << name << "    " << cmd.summary << '\n';
  os << "\nRun 'atomr <command> --help' for a command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description global("options");
  global.add_options()("help,h", "print this help")("version", "print the version and build configuration");
  po::options_description hidden;
  hidden.add_options()("command", po::value<std::string>(), "")("args", po::value<std::vector<std::string>>(), "");
  po::options_description all;
  all.add(global).add(hidden);
  po::positional_options_description positional;
  positional.add("command", 1).add("args", -1);

  po::variables_map vm;
  std::vector<std::string> rest;
  try {
    auto parsed = po::command_line_parser(argc, argv).options(all).positional(positional).allow_unregistered().run();
    po::store(parsed, vm);
    rest = po::collect_unrecognized(parsed.options, po::include_positional);
  } catch (const po::error& e) {
    return atomr::apps::usage_error("", e.what(), k_usage);
  }

  if (vm.count("version")) {
    std::cout << "atomr " << atomr::k_version << " (" << atomr::k_git_revision << "), CUDA "
              << (atomr::k_built_with_cuda ? "on" : "off") << ", NCCL " << (atomr::k_built_with_nccl ? "on" : "off")
              << '\n';
    return 0;
  }
  if (!vm.count("command")) {
    // Without a command, the only arguments left are options nobody knows.
    if (!rest.empty()) return atomr::apps::usage_error("", "unrecognised option '" + rest.front() + "'", k_usage);
    if (vm.count("help")) {
      print_usage(std::cout, global);
      return 0;
    }
    return atomr::apps::usage_error("", "no command given; take " + command_names(), k_usage);
  }
  const auto name = vm["command"].as<std::string>();
  const auto it = commands().find(name);
  if (it == commands().end()) {
    return atomr::apps::usage_error("", "unknown command '" + name + "'; take " + command_names(), k_usage);
  }
  // `rest` holds the command name itself; a global --help means the command's help.
  rest.erase(std::find(rest.begin(), rest.end(), name));
  if (vm.count("help")) {
    rest.insert(rest.begin(), "--help");
  } else if (const auto bad = atomr::apps::first_bad_tunable()) {
    return atomr::apps::report_error(*bad, 2);
  }
  return it->second.run(name, rest);
}
