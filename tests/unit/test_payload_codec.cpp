#include <gtest/gtest.h>

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <cstring>
#include <random>
#include <sstream>

#include "atomr/serialization/payload_codec.hpp"

namespace atomr {
namespace {

using serialization::wire_limits;

struct sample {
  std::uint64_t id = 0;
  double weight = 0;
  std::string name;
  std::vector<std::int32_t> values;
  std::map<std::string, std::vector<std::uint16_t>> tags;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(id, weight, name, values, tags);
  }
  friend bool operator==(const sample&, const sample&) = default;
};

sample make_sample(std::uint32_t seed) {
  std::mt19937 rng(seed);
  sample s;
  s.id = (std::uint64_t{rng()} << 32) | rng();
  s.weight = static_cast<double>(rng()) / 7.0;
  s.name = "sample-" + std::to_string(rng() % 1000);
  s.values.resize(rng() % 64);
  for (auto& v : s.values) v = static_cast<std::int32_t>(rng());
  for (unsigned t = rng() % 4; t > 0; --t) s.tags["t" + std::to_string(t)] = std::vector<std::uint16_t>(t, 7);
  return s;
}

std::vector<std::byte> to_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(PayloadCodec, RoundTripsSeededValues) {
  for (std::uint32_t seed = 1; seed <= 50; ++seed) {
    const sample in = make_sample(seed);
    auto out = serialization::decode<sample>(serialization::encode(in), "sample");
    ASSERT_TRUE(out) << out.error_value();
    EXPECT_EQ(*out, in) << "seed " << seed;
  }
}

// The wire archives speak Cereal's portable binary format: stock Cereal reads what they write and
// they read what stock Cereal writes.
TEST(PayloadCodec, ByteCompatibleWithCerealPortableBinary) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    const sample in = make_sample(seed);
    std::ostringstream os;
    {
      cereal::PortableBinaryOutputArchive ar(os);
      ar(in);
    }
    const auto ours = serialization::encode(in);
    EXPECT_EQ(ours, to_bytes(os.str())) << "seed " << seed;

    std::istringstream is(os.str());
    cereal::PortableBinaryInputArchive ar(is);
    sample back;
    ar(back);
    EXPECT_EQ(back, in);
  }
}

TEST(PayloadCodec, EveryTruncationIsAProtocolError) {
  const auto full = serialization::encode(make_sample(7));
  for (std::size_t len = 0; len < full.size(); ++len) {
    auto out = serialization::decode<sample>(std::span(full).first(len), "sample");
    ASSERT_FALSE(out) << "decoded from only " << len << " of " << full.size() << " bytes";
    EXPECT_EQ(out.error_value().code(), errc::protocol);
  }
}

TEST(PayloadCodec, TrailingBytesAreRejectedWithTheirOffset) {
  auto bytes = serialization::encode(std::uint32_t{5});
  bytes.push_back(std::byte{0});
  auto out = serialization::decode<std::uint32_t>(bytes, "u32");
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error_value().message(),
            "cannot decode u32 from 6 payload byte(s): 1 trailing byte(s) at payload offset 5");
}

TEST(PayloadCodec, WrongByteOrderMarkerIsRejected) {
  auto bytes = serialization::encode(std::uint32_t{5});
  bytes[0] = std::byte{0};
  auto out = serialization::decode<std::uint32_t>(bytes, "u32");
  ASSERT_FALSE(out);
  EXPECT_NE(out.error_value().message().find("byte-order marker is 0, expected 1 (little-endian) at payload offset 0"),
            std::string::npos)
      << out.error_value();
}

TEST(PayloadCodec, LyingContainerLengthFailsBeforeAllocating) {
  // A vector<u64> that claims 2^60 elements: resize() would throw length_error or exhaust memory.
  std::vector<std::uint64_t> v{1, 2, 3};
  auto bytes = serialization::encode(v);
  const std::uint64_t lie = std::uint64_t{1} << 60;
  std::memcpy(bytes.data() + 1, &lie, sizeof(lie));
  wire_limits limits;
  limits.max_container_length = std::uint64_t{1} << 62;  // only the bytes-left check stands in the way
  auto out = serialization::decode<std::vector<std::uint64_t>>(bytes, "vector<u64>", limits);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error_value().code(), errc::protocol);
  EXPECT_NE(out.error_value().message().find("container length 1152921504606846976 exceeds the 24 byte(s) left at "
                                             "payload offset 1"),
            std::string::npos)
      << out.error_value();
}

TEST(PayloadCodec, ContainerLengthLimitIsEnforced) {
  const std::string text(100, 'x');
  const auto bytes = serialization::encode(text);
  wire_limits limits;
  limits.max_container_length = 99;
  auto out = serialization::decode<std::string>(bytes, "string", limits);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error_value().message().find("container length 100 exceeds the limit of 99 at payload offset 1"),
            std::string::npos)
      << out.error_value();
  limits.max_container_length = 100;
  EXPECT_EQ(serialization::decode<std::string>(bytes, "string", limits).value(), text);
}

TEST(PayloadCodec, PayloadSizeLimitIsEnforcedBeforeParsing) {
  const auto bytes = serialization::encode(make_sample(9));
  wire_limits limits;
  limits.max_payload_bytes = bytes.size() - 1;
  auto out = serialization::decode<sample>(bytes, "sample", limits);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error_value().code(), errc::protocol);
  EXPECT_NE(out.error_value().message().find("exceeds the limit"), std::string::npos);
}

}  // namespace
}  // namespace atomr
