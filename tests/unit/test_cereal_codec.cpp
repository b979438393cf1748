#include <gtest/gtest.h>

#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <random>

#include "atomr/serialization/cereal_codec.hpp"

namespace atomr {
namespace {

struct sample {
  std::uint64_t id = 0;
  std::string name;
  std::vector<std::int32_t> values;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(id, name, values);
  }
  friend bool operator==(const sample&, const sample&) = default;
};

sample make_sample(std::uint32_t seed) {
  std::mt19937 rng(seed);
  sample s;
  s.id = (std::uint64_t{rng()} << 32) | rng();
  s.name = "sample-" + std::to_string(rng() % 1000);
  s.values.resize(rng() % 64);
  for (auto& v : s.values) v = static_cast<std::int32_t>(rng());
  return s;
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

TEST(CerealCodec, RoundTripsSeededValues) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    const sample in = make_sample(seed);
    auto out = serialization::decode<sample>(bytes_of(serialization::encode(in)), "sample");
    ASSERT_TRUE(out) << out.error_value();
    EXPECT_EQ(*out, in) << "seed " << seed;
  }
}

TEST(CerealCodec, TruncatedInputIsAProtocolError) {
  const std::string full = serialization::encode(make_sample(7));
  for (std::size_t len = 0; len < full.size(); ++len) {
    auto out = serialization::decode<sample>(bytes_of(full.substr(0, len)), "sample");
    ASSERT_FALSE(out) << "decoded from only " << len << " of " << full.size() << " bytes";
    EXPECT_EQ(out.error_value().code(), errc::protocol);
  }
}

TEST(CerealCodec, TrailingBytesAreRejected) {
  const std::string bytes = serialization::encode(make_sample(3)) + "x";
  auto out = serialization::decode<sample>(bytes_of(bytes), "sample");
  ASSERT_FALSE(out);
  EXPECT_NE(out.error_value().message().find("trailing bytes"), std::string::npos);
}

TEST(CerealCodec, InputOverTheLimitIsRefusedBeforeParsing) {
  const std::string bytes = serialization::encode(make_sample(9));
  serialization::decode_limits limits;
  limits.max_input_bytes = bytes.size() - 1;
  auto out = serialization::decode<sample>(bytes_of(bytes), "sample", limits);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error_value().code(), errc::protocol);
  EXPECT_NE(out.error_value().message().find("exceeds the limit"), std::string::npos);
}

}  // namespace
}  // namespace atomr
