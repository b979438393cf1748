// A tunable: a knob read from one environment variable, declared once by the library that reads
// it (as NCCL_PARAM does), with its default and meaning. Each library lists its own (k_common here,
// k_local in atomr/local/tunables.hpp, one list per cluster subsystem); `atomr info` prints the
// user-facing ones with the values in effect, `atomr info --all` every one. Read a tunable with
// tunable_value()/tunable_int() where the owner's options are built.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "atomr/common/result.hpp"

namespace atomr {

struct tunable {
  std::string_view name;
  std::string_view env;
  std::string_view default_value;
  std::string_view description;
  // Expert knobs tune a mechanism's internals (thresholds, spin times); the defaults suit the
  // machines atomr is measured on. `atomr info` lists them only with --all.
  enum level_kind { user, expert };
  level_kind level = user;
};

namespace tunables {
inline constexpr tunable log{"log", "ATOMR_LOG", "info", "log level, then per-subsystem overrides: warn,cluster=debug"};
inline constexpr tunable spin{
    "spin", "ATOMR_SPIN", "auto",
    "how polling threads wait between looks: pause (spin with the CPU's pause hint), yield (give the core up), "
    "auto: pause where a rank has 4 CPUs or more",
    tunable::expert};

inline constexpr std::array k_common{&log, &spin};
}  // namespace tunables

// The value in effect: the environment variable if set and non-empty, else the default.
std::string tunable_value(const tunable& t);
// True when the value comes from the environment.
bool tunable_is_set(const tunable& t);
// The value parsed as a base-10 integer; a clear invalid_argument error names the variable otherwise.
result<std::int64_t> tunable_int(const tunable& t);
// The value as microseconds, at least 0, for a look or a wait read once at start: where it is not
// one, `fallback`, with a warning (subsystem `log_name`) that names the variable and what serves.
std::chrono::microseconds tunable_us_or(const tunable& t, std::chrono::microseconds fallback,
                                        std::string_view log_name);

}  // namespace atomr
