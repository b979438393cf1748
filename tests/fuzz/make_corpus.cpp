// Writes the fuzzer's seed corpus: envelopes of every registered type built from seeded samples,
// and the same payloads bare. Run by hand when message types change; its output is committed in
// tests/fuzz/corpus/.   make_corpus <dir>
#include <fstream>
#include <iostream>
#include <string>

#include "atomr/serialization/envelope.hpp"
#include "wire_samples.hpp"

namespace wire = atomr::serialization;

namespace {
void write(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_corpus <dir>\n";
    return 2;
  }
  const std::string dir = argv[1];
  for (const std::uint32_t id : wire::wire_registry::ids) {
    wire::wire_registry::visit_id(id, [&]<typename Entry>() {
      for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        const auto message = atomr::test::sample_message<typename Entry::type>(seed);
        const std::string stem = dir + "/" + std::string(Entry::name) + "-" + std::to_string(seed);
        const wire::envelope_route route{
            {seed, seed}, {seed + 1, wire::named_actor("consumer")}, wire::k_flag_ask, seed};
        write(stem + ".envelope", wire::encode_envelope(route, message).value());
        write(stem + ".payload", wire::encode(message));
      }
    });
  }
  return 0;
}
