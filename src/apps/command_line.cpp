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
    return usage_error(program, e.what(), usage);
  }
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << visible;
    return 0;
  }
  po::notify(vm);
  return std::nullopt;
}

int usage_error(const std::string& program, const std::string& message, const std::string& usage) {
  report_error(message + " (try 'atomr " + program + " --help')", 2);
  std::cerr << usage.substr(0, usage.find('\n')) << '\n';
  return 2;
}

result<std::size_t> parse_size(const std::string& text) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    return error(errc::invalid_argument, "'" + text + "' is not a size (e.g. 4096, 4K, 64M, 1G)");
  }
  const std::string unit = text.substr(pos);
  const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (shift < 0 || v == 0)
    return error(errc::invalid_argument, "'" + text + "' is not a size (e.g. 4096, 4K, 64M, 1G)");
  return static_cast<std::size_t>(v) << shift;
}

}  // namespace atomr::apps
