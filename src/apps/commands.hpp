// The `atomr` subcommands. Each takes the arguments after its name and returns the process exit
// code; errors are printed by the command as one line per rank.
#pragma once

#include <string>
#include <vector>

namespace atomr::apps {

int run_info(const std::string& program, const std::vector<std::string>& args);
int run_bench(const std::string& program, const std::vector<std::string>& args);
int run_topo(const std::string& program, const std::vector<std::string>& args);
int run_doctor(const std::string& program, const std::vector<std::string>& args);

// Prints "atomr: error: <message>" (with the rank when known) to stderr; returns `exit_code`.
int report_error(const std::string& message, int exit_code);

}  // namespace atomr::apps
