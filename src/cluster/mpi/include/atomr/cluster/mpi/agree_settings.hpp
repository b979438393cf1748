// Settings that shape a collective protocol (pack sizes, shared-memory sizes, graph thresholds)
// must be the same on every rank: a rank that packs differently, or reduces in a segment the others
// did not size, hangs them or computes wrong values. One check when the protocol starts names the
// setting and the ranks that differ, as an error on every rank.
#pragma once

#include <mpi.h>

#include <chrono>
#include <span>
#include <string>

#include "atomr/common/result.hpp"
#include "atomr/common/tunables.hpp"

namespace atomr::cluster::detail {

// A setting by the name a user knows it by, and its value in effect on this rank.
struct setting {
  std::string name;
  std::string value;
};

// Every rank of `comm` must call it with the same names in the same order. invalid_argument on
// every rank when a value (its first 63 characters) differs:
// "<step>: ATOMR_HOST_SHM_BYTES must be the same on every rank: '0' on rank 1, '4194304' on ranks 0, 2-3".
// A timeout if a rank does not take part by `deadline`.
result<void> agree_settings(MPI_Comm comm, std::span<const setting> settings,
                            std::chrono::steady_clock::time_point deadline, const std::string& step);

// The same for tunables, by their variables' names and values (tunable_value()).
result<void> agree_settings(MPI_Comm comm, std::span<const tunable* const> tunables,
                            std::chrono::steady_clock::time_point deadline, const std::string& step);

}  // namespace atomr::cluster::detail
