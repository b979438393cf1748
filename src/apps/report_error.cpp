#include <iostream>

#include "atomr/common/context.hpp"
#include "commands.hpp"

namespace atomr::apps {

int report_error(const std::string& message, int exit_code) {
  const int rank = context::rank();
  std::cerr << "atomr: ";
  if (rank != context::k_unknown) std::cerr << "rank " << rank << ": ";
  std::cerr << "error: " << message << std::endl;
  return exit_code;
}

}  // namespace atomr::apps
