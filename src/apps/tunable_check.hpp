// Bad tunable values are configuration errors, found before a command starts: every command then
// ends the same way (one line naming the variable, exit code 2), instead of failing where, and if,
// the owning library happens to read it.
#pragma once

#include <optional>
#include <string>

namespace atomr::apps {

// The first set tunable whose default is an integer but whose value is not one, as the error line
// tunable_int() gives ("ATOMR_X='abc' is not an integer (default 5)"); nullopt when all are good.
std::optional<std::string> first_bad_tunable();

}  // namespace atomr::apps
