// Every tunable of atomr, declared once: name, environment variable, default and meaning.
// `atomr info` prints this table with the values in effect. Add a tunable by adding one line to the
// list below; read it with tunable_value()/tunable_int().
#pragma once

#include <array>
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
};

namespace tunables {
inline constexpr tunable log{"log", "ATOMR_LOG", "info", "log level, then per-subsystem overrides: warn,cluster=debug"};
inline constexpr tunable wire_max_payload{"wire_max_payload", "ATOMR_WIRE_MAX_PAYLOAD", "67108864",
                                          "largest message payload a rank accepts from the wire, bytes"};
inline constexpr tunable wire_max_container{"wire_max_container", "ATOMR_WIRE_MAX_CONTAINER", "16777216",
                                            "longest container or string a rank decodes from the wire, elements"};

inline constexpr std::array k_all{&log, &wire_max_payload, &wire_max_container};
}  // namespace tunables

// The value in effect: the environment variable if set and non-empty, else the default.
std::string tunable_value(const tunable& t);
// True when the value comes from the environment.
bool tunable_is_set(const tunable& t);
// The value parsed as a base-10 integer; a clear invalid_argument error names the variable otherwise.
result<std::int64_t> tunable_int(const tunable& t);

}  // namespace atomr
