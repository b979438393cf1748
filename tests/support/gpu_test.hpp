// Test support for `gpu`-labelled tests: skip, with the reason, where no GPU is visible. The probe
// result is the same on every rank of a single-machine job, so the skip is collective there.
#pragma once

#include <gtest/gtest.h>

#include "atomr/local/devices.hpp"

// Skips the current test unless at least `n` CUDA devices are visible. The skip text starts with
// "no GPU" so CTest reports the test as skipped (SKIP_REGULAR_EXPRESSION), not passed.
#define ATOMR_REQUIRE_GPUS(n)                                                                                     \
  do {                                                                                                            \
    auto atomr_probe_ = ::atomr::local::probe_cuda_devices();                                                     \
    ASSERT_TRUE(atomr_probe_.has_value()) << atomr_probe_.error_value();                                          \
    if (atomr_probe_->devices.size() < static_cast<std::size_t>(n)) {                                             \
      GTEST_SKIP() << "no GPU: need " << (n) << " visible CUDA device(s), found " << atomr_probe_->devices.size() \
                   << " (" << atomr_probe_->absent_reason << ")";                                                 \
    }                                                                                                             \
  } while (false)
