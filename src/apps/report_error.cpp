#include <unistd.h>

#include <cstdio>
#include <string>

#include "atomr/common/context.hpp"
#include "commands.hpp"

namespace atomr::apps {

int report_error(const std::string& message, int exit_code) {
  const int rank = context::rank();
  std::string line = "atomr: ";
  if (rank != context::k_unknown) line += "rank " + std::to_string(rank) + ": ";
  line += "error: " + message + "\n";
  // One write(2) per line: the ranks of a job share the launcher's stderr, and a line written in
  // parts (as iostream does, a piece per <<) interleaves with the others' ("atomr: atomr: rank 0:").
  std::fflush(stderr);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;  // stderr is gone: there is nowhere left to say it
    done += static_cast<std::size_t>(n);
  }
  return exit_code;
}

}  // namespace atomr::apps
