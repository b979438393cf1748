// Parsing a subcommand's arguments the same way everywhere: `--help` prints the usage text and the
// options; a bad argument prints one error line naming the option and what it takes, then the
// usage line, and the exit code is 2.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::apps {

// Returns the exit code if the command should end now (0 after --help, 2 after a usage error).
// `all` holds the options to parse (the visible ones plus hidden ones, if any); `visible` is what
// --help lists. The options must include "help". Arguments beyond those `positional` takes are
// usage errors.
std::optional<int> parse_command_line(const std::string& program, const std::vector<std::string>& args,
                                      const boost::program_options::options_description& visible,
                                      const boost::program_options::options_description& all,
                                      const boost::program_options::positional_options_description& positional,
                                      const std::string& usage, boost::program_options::variables_map& vm);

inline std::optional<int> parse_command_line(const std::string& program, const std::vector<std::string>& args,
                                             const boost::program_options::options_description& options,
                                             const std::string& usage, boost::program_options::variables_map& vm) {
  return parse_command_line(program, args, options, options, {}, usage, vm);
}

// A usage error: "atomr: error: <message> (try 'atomr <program> --help')", then the first line of
// `usage`; returns 2, the exit code for usage errors. An empty `program` is atomr itself.
int usage_error(const std::string& program, const std::string& message, const std::string& usage);

// "must be at least 10, got 2": a number below what an option allows.
std::string must_be_at_least(long long min, long long got);

// {"a", "b", "c"} -> "a, b or c": the choices an option takes, for its error line.
std::string one_of(const std::vector<std::string>& choices);

// "4096", "4K", "64M", "1G" -> bytes; a clear error otherwise (zero is not a size).
result<std::size_t> parse_size(const std::string& text);

// An output file named on the command line (-J): checked before the run, so that a mistyped path
// does not cost a whole benchmark. The error says what is wrong with the path.
result<void> check_output_file(const std::string& path);

}  // namespace atomr::apps
