#include "command_line.hpp"

#include <iostream>

#include "commands.hpp"

namespace po = boost::program_options;

namespace atomr::apps {

std::optional<int> parse_command_line(const std::string& program, const std::vector<std::string>& args,
                                      const po::options_description& visible, const po::options_description& all,
                                      const po::positional_options_description& positional, const std::string& usage,
                                      po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  } catch (const po::error& e) {
    return report_error(std::string(e.what()) + " (try 'atomr " + program + " --help')", 2);
  }
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << visible;
    return 0;
  }
  po::notify(vm);
  return std::nullopt;
}

}  // namespace atomr::apps
