// Gathers one variable-length byte string from every rank of `comm` to `root`. Collective; on the
// root the result holds comm-size byte vectors in rank order, elsewhere it is empty.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/serialization/payload_codec.hpp"

namespace atomr::cluster {

result<std::vector<std::vector<std::byte>>> gather_bytes(MPI_Comm comm, std::span<const std::byte> mine, int root = 0);

// Gathers one Cereal-serializable value from every rank to `root` (in rank order there, empty
// elsewhere). A value that does not decode is an errc::protocol error naming its rank.
template <typename T>
result<std::vector<T>> gather_values(MPI_Comm comm, const T& mine, std::string_view type_name, int root = 0) {
  ATOMR_ASSIGN_OR_RETURN(auto blobs, gather_bytes(comm, serialization::encode(mine), root));
  std::vector<T> out;
  out.reserve(blobs.size());
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    auto decoded = serialization::decode<T>(blobs[i], type_name);
    if (!decoded) return decoded.error_value().with_context("reading the value of rank " + std::to_string(i));
    out.push_back(std::move(decoded).value());
  }
  return out;
}

}  // namespace atomr::cluster
