// Loading NCCL's kernels ahead of the first world.
//
// NCCL loads its kernels into a device's context the first time a communicator is made on it: on
// the two-H200 machine 0.28-0.41 s of the 0.64-0.72 s that a world's ncclCommInitRankConfig took
// (NCCL's own "Init timings", docs/benchmarks.md, twenty-seventh session). A later communicator on
// the device skips the load (the raw baseline's, in the same runs: "kernels 0.00"). warm_nccl makes
// that first communicator, of one rank, on a thread of its own and destroys it, so that the load
// overlaps what the rank does before its first world: starting its devices and the world's own
// agreements. Nothing else changes: the world still makes its communicator (a load still under
// way is finished by whichever thread gets to a kernel first), and waits for the warm-up of its
// devices to end before it is used (the one-rank communicator's destruction frees device memory).
#pragma once

#include <span>

#include "atomr/common/result.hpp"

namespace atomr::cluster {

// Starts the warm-up of each device (CUDA device indices) and returns at once; once per device
// and process. Does nothing without NCCL or with ATOMR_NCCL_WARM_UP=0; a malformed
// ATOMR_NCCL_WARM_UP is an invalid_argument error. A failure of the warm-up itself is logged (at
// debug level) and otherwise ignored: the world's own init meets it and reports it.
result<void> warm_nccl(std::span<const int> devices);

// Waits until the warm-up of `device`, if one was started, has finished (world creation calls it).
void wait_nccl_warm(int device);

}  // namespace atomr::cluster
