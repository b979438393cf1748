// `atomr bench wire`: encode+decode round trips of a gpu_token and of envelopes with a 64 B and a
// 4 KiB payload, each against memcpy of the same bytes out and back in the same run.
#include "bench/bench_wire.hpp"

#include <cstring>
#include <iostream>

#include "atomr/serialization/envelope.hpp"
#include "bench/measure.hpp"
#include "text_table.hpp"

namespace atomr::apps::bench {
namespace {

namespace wire = serialization;

// The raw baseline: the same number of bytes copied out to a wire buffer and back.
measurement memcpy_round_trip(std::size_t bytes) {
  std::vector<std::byte> src(bytes, std::byte{7});
  std::vector<std::byte> buf(bytes);
  std::vector<std::byte> dst(bytes);
  return measure([&] {
    std::memcpy(buf.data(), src.data(), bytes);
    keep(buf.data());
    std::memcpy(dst.data(), buf.data(), bytes);
    keep(dst.data());
  });
}

wire_case token_case() {
  const gpu_token token{3, 1, 0x0123456789abcdefULL, 7};
  std::vector<std::byte> out;
  out.reserve(64);
  const std::size_t bytes = wire::encode(token).size();
  const auto atomr_time = measure([&] {
    out.clear();
    wire::encode_into(out, token);
    auto back = wire::decode<gpu_token>(out, "gpu_token");
    keep(back);
  });
  return {"gpu_token", bytes, atomr_time, memcpy_round_trip(sizeof(token))};
}

// An envelope whose payload is exactly `payload_bytes` (opaque_bytes adds a marker and a length).
wire_case envelope_case(const char* name, std::size_t payload_bytes) {
  wire::opaque_bytes message;
  message.bytes.assign(payload_bytes - 1 - sizeof(std::uint64_t), 0x5a);
  const wire::envelope_route route{{0, 1}, {1, wire::named_actor("consumer")}, wire::k_flag_ask, 1};
  const std::size_t bytes = wire::encode_envelope(route, message).value().size();
  const auto atomr_time = measure([&] {
    auto encoded = wire::encode_envelope(route, message);
    auto env = wire::decode_envelope(*encoded);
    auto back = wire::decode_message<wire::opaque_bytes>(*env);
    keep(back);
  });
  return {name, bytes, atomr_time, memcpy_round_trip(bytes)};
}

}  // namespace

std::vector<wire_case> run_wire_benchmarks() {
  return {token_case(), envelope_case("envelope, 64 B payload", 64), envelope_case("envelope, 4 KiB payload", 4096)};
}

}  // namespace atomr::apps::bench
