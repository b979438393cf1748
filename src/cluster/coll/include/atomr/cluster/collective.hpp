// The vocabulary of collectives: which operation, which reduction, and the bus-bandwidth factors
// nccl-tests uses to compare them (busbw = algbw * factor).
#pragma once

#include <cstdint>
#include <string_view>

#include "atomr/common/result.hpp"
#include "atomr/local/device/dtype.hpp"

namespace atomr::cluster {

enum class coll_kind : std::uint8_t {
  all_reduce,
  broadcast,
  reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  send,
  recv,
  barrier,
};
enum class reduce_op : std::uint8_t { sum, prod, min, max, avg };

std::string_view to_string(coll_kind k);
std::string_view to_string(reduce_op op);
result<coll_kind> parse_coll_kind(std::string_view text);  // "all_reduce" or "allreduce"
result<reduce_op> parse_reduce_op(std::string_view text);
result<local::dtype> parse_dtype(std::string_view text);  // "f32", or nccl-tests' "float", "half", ...

// nccl-tests' busbw factor for `ranks` ranks: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// all_to_all (n-1)/n; broadcast, reduce, send/recv 1.
double bus_factor(coll_kind k, int ranks);

}  // namespace atomr::cluster
