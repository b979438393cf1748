// Links every atomr layer through atomr::atomr and uses one function of each.
#include <atomr/cluster/versions.hpp>
#include <atomr/common/result.hpp>
#include <atomr/common/version.hpp>
#include <atomr/local/host_info.hpp>
#include <atomr/serialization/envelope.hpp>
#include <cstdint>
#include <iostream>

int main() {
  namespace wire = atomr::serialization;
  const wire::ping sent{7, "hello"};
  auto bytes = wire::encode_envelope({{0, 1}, {1, wire::named_actor("consumer")}}, sent);
  if (!bytes) return 1;
  auto env = wire::decode_envelope(*bytes);
  auto back = env ? wire::decode_message<wire::ping>(*env) : atomr::result<wire::ping>(env.error_value());
  auto host = atomr::local::probe_host();
  if (!back || *back != sent || !host) return 1;
  std::cout << "consumer ok: atomr " << atomr::k_version << ", " << atomr::cluster::mpi_library_version() << ", "
            << host->hostname << '\n';
  return 0;
}
