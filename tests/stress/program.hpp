// A stress program: a list of steps derived from one seed, the same on every rank, so the ranks
// make the same collectives in the same order. Each step carries a seed of its own, derived from
// the program's seed and the step's index only: a program cut down to some of its steps (to
// shrink a failing one) runs each kept step exactly as the whole program did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace atomr::stress {

enum class step_kind : std::uint8_t {
  single,      // one collective: a typed call, or submit(spec), from this thread or another
  group,       // submit_group(specs): one future for a few collectives
  group_each,  // submit_group(specs, each_request): a future per collective
  prepared,    // prepare_group(specs), then submit_prepared(call) a few times
  bulk,        // more than 128 small in-place all_reduces, as specs or as buffers, repeated
  split,       // split(color, key), checked by an all_reduce and an all_gather on the sub-world
  invalid,     // a call that must fail with its documented error, and submit nothing
  tells,       // router tells to random actors (pool, direct, missing, stopped), from 1-2 threads
  asks,        // router asks: answers, missing and stopped actors, a withheld reply
  buffers,     // export, fetch, release, lease expiry, fetches racing a release
};
inline constexpr std::size_t k_step_kinds = 10;

std::string_view to_string(step_kind k);
// Whether the step makes collectives of the world (what a withholding rank skips).
bool is_collective(step_kind k);

struct step {
  std::size_t index = 0;
  step_kind kind = step_kind::single;
  std::uint64_t seed = 0;
};

// splitmix64: a well-mixed 64-bit value of `x`.
std::uint64_t mix(std::uint64_t x);

// The program of `seed`, `length` steps long.
std::vector<step> make_program(std::uint64_t seed, std::size_t length);

}  // namespace atomr::stress
