// libFuzzer target over the envelope and payload decoders: arbitrary bytes must never crash,
// read out of bounds (ASan) or hit undefined behaviour (UBSan). Whatever decodes must re-encode
// and decode back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "atomr/serialization/envelope.hpp"

namespace {

namespace wire = atomr::serialization;

// Small limits keep each run fast and make the limit checks reachable.
const wire::wire_limits k_limits{std::size_t{1} << 20, 4096};

template <typename T>
void check_round_trip(const T& value) {
  auto again = wire::decode<T>(wire::encode(value), "round trip", k_limits);
  if (!again || !(*again == value)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);

  // The whole input as an envelope.
  if (auto env = wire::decode_envelope(bytes, k_limits)) {
    (void)wire::dispatch(
        *env, [](const wire::envelope_header&, const auto& message) { check_round_trip(message); }, k_limits);
  }
  // The whole input as a bare payload of each registered type.
  for (const std::uint32_t id : wire::wire_registry::ids) {
    wire::wire_registry::visit_id(id, [&]<typename Entry>() {
      if (auto v = wire::decode<typename Entry::type>(bytes, Entry::name, k_limits)) check_round_trip(*v);
    });
  }
  return 0;
}
