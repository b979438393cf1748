// The tunables of heartbeats and what a failed rank means, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable heartbeat{"heartbeat_ms", "ATOMR_HEARTBEAT_MS", "500",
                                   "liveness: each rank's heartbeat period, ms; 0 turns liveness off"};
inline constexpr tunable heartbeat_timeout{"heartbeat_timeout_ms", "ATOMR_HEARTBEAT_TIMEOUT_MS", "10000",
                                           "liveness: a rank silent this long is declared failed, ms"};
inline constexpr tunable on_failure{"on_failure", "ATOMR_ON_FAILURE", "abort",
                                    "after a rank failed: abort (end the job, MPI_Abort) or continue"};

inline constexpr std::array k_liveness{&heartbeat, &heartbeat_timeout, &on_failure};

}  // namespace atomr::tunables
