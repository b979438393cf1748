// Logging through spdlog. Every line carries the world rank (and the thread's device, if bound):
//   [12:00:01.123] [rank 2] [cluster] [info] message
// Levels come from ATOMR_LOG: a default level then per-subsystem overrides, e.g.
// "warn,cluster=debug". Loggers are created on first use and are thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "atomr/common/result.hpp"

namespace atomr::log {

// The logger of one subsystem ("core", "local", "cluster", "serialization", "app", ...).
std::shared_ptr<spdlog::logger> get(std::string_view subsystem);

// Applies a level spec (the ATOMR_LOG syntax) to existing and future loggers. An unknown level or
// malformed entry is an invalid_argument error and changes nothing.
result<void> configure(std::string_view spec);

}  // namespace atomr::log
