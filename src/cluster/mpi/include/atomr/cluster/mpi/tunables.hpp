// The tunables of waiting callers, declared where they are read (atomr info lists them).
#pragma once

#include <array>

#include "atomr/common/tunables.hpp"

namespace atomr::tunables {

inline constexpr tunable wait_assist{
    "wait_assist", "ATOMR_WAIT_ASSIST", "auto",
    "a caller waiting for a collective or a remote ask polls for it itself: 1, 0, auto (where a rank has 4+ CPUs)",
    tunable::expert};

inline constexpr std::array k_mpi{&wait_assist};

}  // namespace atomr::tunables
