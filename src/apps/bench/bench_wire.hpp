// The wire benchmark's cases and results (see bench_wire.cpp).
#pragma once

#include <string>
#include <vector>

#include "bench/measure.hpp"

namespace atomr::apps::bench {

struct wire_case {
  std::string name;
  std::size_t wire_bytes = 0;  // bytes on the wire (whole envelope, or the token's payload)
  measurement atomr;           // encode + decode through atomr
  measurement raw;             // memcpy of the same bytes out and back
};

std::vector<wire_case> run_wire_benchmarks();

}  // namespace atomr::apps::bench
