// Links every atomr layer through atomr::atomr and uses one function of each.
#include <atomr/cluster/versions.hpp>
#include <atomr/common/result.hpp>
#include <atomr/common/version.hpp>
#include <atomr/local/host_info.hpp>
#include <atomr/serialization/cereal_codec.hpp>
#include <cstdint>
#include <iostream>

int main() {
  const std::uint32_t value = 0xC0FFEEu;
  const std::string bytes = atomr::serialization::encode(value);
  auto back = atomr::serialization::decode<std::uint32_t>(std::as_bytes(std::span(bytes.data(), bytes.size())), "u32");
  auto host = atomr::local::probe_host();
  if (!back || *back != value || !host) return 1;
  std::cout << "consumer ok: atomr " << atomr::k_version << ", " << atomr::cluster::mpi_library_version() << ", "
            << host->hostname << '\n';
  return 0;
}
