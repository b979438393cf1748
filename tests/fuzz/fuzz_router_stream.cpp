// libFuzzer target over the router's receive path: arbitrary bytes, cut into arbitrary packets
// from arbitrary senders, go through the per-sender stream readers (framing, reassembly across
// packets, oversized skips, poisoning) and every whole envelope is decoded as the registry's
// types. Nothing may crash, leak or hit UB; and cutting the same bytes differently must yield
// the same envelopes (a reader's output cannot depend on how MPI chunked the stream).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "atomr/cluster/router/stream.hpp"
#include "atomr/serialization/envelope.hpp"

namespace {

namespace wire = atomr::serialization;
using atomr::cluster::detail::stream_reader;
using atomr::cluster::detail::stream_sink;

const wire::wire_limits k_limits{std::size_t{1} << 16, 4096};

// Records what the reader produced, and decodes each whole envelope.
class recording_sink final : public stream_sink {
 public:
  void message(const wire::envelope_header& h, std::span<const std::byte> payload) override {
    if (payload.size() != h.payload_length) std::abort();
    log.push_back('m');
    log.append(std::to_string(h.type_id)).append(":").append(std::to_string(payload.size()));
    log.append(reinterpret_cast<const char*>(payload.data()), payload.size());
    std::vector<std::byte> whole(wire::k_envelope_header_size);
    wire::detail::write_header(whole.data(), h);
    whole.insert(whole.end(), payload.begin(), payload.end());
    if (auto env = wire::decode_envelope(whole, k_limits)) {
      (void)wire::dispatch(
          *env, [](const wire::envelope_header&, const auto&) {}, k_limits);
    }
  }
  void oversized(const wire::envelope_header& h) override { log.append("o").append(std::to_string(h.payload_length)); }
  void corrupt(const atomr::error&) override { log.push_back('c'); }
  std::string log;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The first byte picks the chunking; the rest is the stream.
  const unsigned seed = data[0];
  const std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data + 1), size - 1);

  recording_sink whole_sink;
  stream_reader whole(k_limits);
  whole.feed(stream, whole_sink);

  recording_sink cut_sink;
  stream_reader cut(k_limits);
  std::size_t at = 0;
  unsigned state = seed * 2654435761u + 1;
  while (at < stream.size()) {
    state = state * 1103515245u + 12345u;
    const std::size_t n = std::min<std::size_t>(stream.size() - at, 1 + (state >> 16) % 97);
    cut.feed(stream.subspan(at, n), cut_sink);
    at += n;
  }
  if (whole_sink.log != cut_sink.log) std::abort();
  if (whole.poisoned() != cut.poisoned() || whole.buffered() != cut.buffered()) std::abort();
  return 0;
}
