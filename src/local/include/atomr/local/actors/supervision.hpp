// Supervision vocabulary: what a parent decides when a child fails, the restart budget, the
// termination notice watchers get, and actor_failure (throw it from a handler to fail with a
// specific error; any other exception fails the actor with errc::internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "atomr/common/error.hpp"

namespace atomr::local {

enum class directive {
  resume,    // keep the actor's state, continue with the next message
  restart,   // fresh instance (on_stop on the old one, on_start on the new), mailbox kept
  stop,      // stop the child; its watchers get the failure as the reason
  escalate,  // stop the child and fail the parent itself with the child's error
};

// At most `max_restarts` restarts within `window`; one more failure stops the child.
struct restart_budget {
  int max_restarts = 3;
  std::chrono::steady_clock::duration window = std::chrono::seconds(60);
};

// How an actor treats the failures of its children. `decide` empty means always restart.
struct supervisor_strategy {
  std::function<directive(const error&)> decide;
  restart_budget budget;

  directive operator()(const error& e) const { return decide ? decide(e) : directive::restart; }
};

// The notice a watcher gets when an actor has terminated. `reason` is empty for a normal stop.
struct terminated {
  std::uint64_t id = 0;
  std::string name;
  std::optional<error> reason;
};

class actor_failure : public std::exception {
 public:
  explicit actor_failure(error e) : error_(std::move(e)) {}
  const char* what() const noexcept override { return error_.message().c_str(); }
  const error& failure() const noexcept { return error_; }

 private:
  error error_;
};

}  // namespace atomr::local
