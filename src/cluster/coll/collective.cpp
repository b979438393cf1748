#include "atomr/cluster/collective.hpp"

#include <array>
#include <string>
#include <utility>

namespace atomr::cluster {
namespace {

constexpr std::array<std::pair<std::string_view, coll_kind>, 15> k_kinds{{
    {"all_reduce", coll_kind::all_reduce},
    {"allreduce", coll_kind::all_reduce},
    {"broadcast", coll_kind::broadcast},
    {"reduce", coll_kind::reduce},
    {"all_gather", coll_kind::all_gather},
    {"allgather", coll_kind::all_gather},
    {"reduce_scatter", coll_kind::reduce_scatter},
    {"reducescatter", coll_kind::reduce_scatter},
    {"all_to_all", coll_kind::all_to_all},
    {"alltoall", coll_kind::all_to_all},
    {"send", coll_kind::send},
    {"recv", coll_kind::recv},
    {"sendrecv", coll_kind::send},
    {"barrier", coll_kind::barrier},
    {"bcast", coll_kind::broadcast},
}};

constexpr std::array<std::pair<std::string_view, reduce_op>, 5> k_ops{{
    {"sum", reduce_op::sum},
    {"prod", reduce_op::prod},
    {"min", reduce_op::min},
    {"max", reduce_op::max},
    {"avg", reduce_op::avg},
}};

constexpr std::array<std::pair<std::string_view, local::dtype>, 22> k_types{{
    {"i8", local::dtype::i8},      {"int8", local::dtype::i8},    {"char", local::dtype::i8},
    {"u8", local::dtype::u8},      {"uint8", local::dtype::u8},   {"i32", local::dtype::i32},
    {"int32", local::dtype::i32},  {"int", local::dtype::i32},    {"u32", local::dtype::u32},
    {"uint32", local::dtype::u32}, {"i64", local::dtype::i64},    {"int64", local::dtype::i64},
    {"u64", local::dtype::u64},    {"uint64", local::dtype::u64}, {"f16", local::dtype::f16},
    {"half", local::dtype::f16},   {"bf16", local::dtype::bf16},  {"bfloat16", local::dtype::bf16},
    {"f32", local::dtype::f32},    {"float", local::dtype::f32},  {"f64", local::dtype::f64},
    {"double", local::dtype::f64},
}};

template <typename Table>
auto lookup(const Table& table, std::string_view text, const char* what) -> result<decltype(table[0].second)> {
  for (const auto& [name, value] : table) {
    if (name == text) return value;
  }
  std::string known;
  for (const auto& [name, value] : table) known += (known.empty() ? "" : ", ") + std::string(name);
  return error(errc::invalid_argument,
               "unknown " + std::string(what) + " '" + std::string(text) + "' (known: " + known + ")");
}

}  // namespace

std::string_view to_string(coll_kind k) {
  switch (k) {
    case coll_kind::all_reduce: return "all_reduce";
    case coll_kind::broadcast: return "broadcast";
    case coll_kind::reduce: return "reduce";
    case coll_kind::all_gather: return "all_gather";
    case coll_kind::reduce_scatter: return "reduce_scatter";
    case coll_kind::all_to_all: return "all_to_all";
    case coll_kind::send: return "send";
    case coll_kind::recv: return "recv";
    case coll_kind::barrier: return "barrier";
  }
  return "unknown";
}

std::string_view to_string(reduce_op op) {
  for (const auto& [name, value] : k_ops) {
    if (value == op) return name;
  }
  return "unknown";
}

result<coll_kind> parse_coll_kind(std::string_view text) { return lookup(k_kinds, text, "collective"); }
result<reduce_op> parse_reduce_op(std::string_view text) { return lookup(k_ops, text, "reduction"); }
result<local::dtype> parse_dtype(std::string_view text) { return lookup(k_types, text, "data type"); }

double bus_factor(coll_kind k, int ranks) {
  const double n = ranks;
  switch (k) {
    case coll_kind::all_reduce: return n > 0 ? 2.0 * (n - 1) / n : 0;
    case coll_kind::all_gather:
    case coll_kind::reduce_scatter:
    case coll_kind::all_to_all: return n > 0 ? (n - 1) / n : 0;
    default: return 1.0;
  }
}

}  // namespace atomr::cluster
