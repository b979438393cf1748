// The tunables of the wire decoder, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable wire_max_payload{"wire_max_payload", "ATOMR_WIRE_MAX_PAYLOAD", "67108864",
                                          "largest message payload a rank accepts from the wire, bytes"};
inline constexpr tunable wire_max_container{"wire_max_container", "ATOMR_WIRE_MAX_CONTAINER", "16777216",
                                            "longest container or string a rank decodes from the wire, elements"};

inline constexpr std::array k_serialization{&wire_max_payload, &wire_max_container};

}  // namespace atomr::tunables
