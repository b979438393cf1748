#include <gtest/gtest.h>

#include <sstream>
#include <unordered_set>

#include "atomr/serialization/envelope.hpp"
#include "wire_samples.hpp"

namespace atomr {
namespace {

namespace wire = serialization;

std::string hex(std::span<const std::byte> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const auto b : bytes) {
    out += digits[static_cast<unsigned>(b) >> 4];
    out += digits[static_cast<unsigned>(b) & 15];
  }
  return out;
}

std::vector<std::byte> unhex(std::string_view text) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<std::byte>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// --- gpu_token --------------------------------------------------------------------------------

TEST(GpuToken, EqualityHashAndPrinting) {
  const gpu_token a{3, 1, 42, 2};
  gpu_token b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::hash<gpu_token>{}(a), std::hash<gpu_token>{}(b));
  b.generation = 3;
  EXPECT_NE(a, b);
  EXPECT_EQ(to_string(a), "gpu_token{node 3, device 1, buffer 42, generation 2}");
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), to_string(a));
}

TEST(GpuToken, HashSpreadsTokensThatDifferInOneField) {
  std::unordered_set<std::size_t> hashes;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    hashes.insert(std::hash<gpu_token>{}({i, 0, 0, 0}));
    hashes.insert(std::hash<gpu_token>{}({0, i + 1, 0, 0}));
    hashes.insert(std::hash<gpu_token>{}({0, 0, i + 1, 0}));
    hashes.insert(std::hash<gpu_token>{}({0, 0, 0, i + 1}));
  }
  EXPECT_EQ(hashes.size(), 4000u);
}

// --- registry and round trips ------------------------------------------------------------------

TEST(Registry, IdsAndNamesAreStable) {
  EXPECT_EQ(wire::wire_registry::id_of<wire::ping>(), 1u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::error_reply>(), 2u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::opaque_bytes>(), 3u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::fetch_request>(), 16u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::fetch_ready>(), 17u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::buffer_manifest>(), 18u);
  EXPECT_EQ(wire::wire_registry::id_of<wire::remote_buffer>(), 19u);
  EXPECT_EQ(wire::wire_registry::name_of<wire::fetch_request>(), "fetch_request");
  EXPECT_FALSE(wire::wire_registry::contains(0));
  EXPECT_FALSE(wire::wire_registry::contains(4));
  static_assert(!wire::wire_message<gpu_token>, "only registered types can be sent");
}

template <typename T>
class EnvelopeRoundTrip : public ::testing::Test {};
using registered_types = ::testing::Types<wire::ping, wire::error_reply, wire::opaque_bytes, wire::fetch_request,
                                          wire::fetch_ready, wire::buffer_manifest, wire::remote_buffer>;
TYPED_TEST_SUITE(EnvelopeRoundTrip, registered_types);

TYPED_TEST(EnvelopeRoundTrip, SeededValuesSurviveEncodeAndDecode) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const TypeParam sent = test::sample_message<TypeParam>(seed);
    const wire::envelope_route route{{seed, 7}, {seed + 1, wire::named_actor("consumer")}, wire::k_flag_ask, seed * 11};
    auto bytes = wire::encode_envelope(route, sent);
    ASSERT_TRUE(bytes) << bytes.error_value();
    auto env = wire::decode_envelope(*bytes);
    ASSERT_TRUE(env) << env.error_value();
    EXPECT_EQ(env->header.type_id, wire::wire_registry::id_of<TypeParam>());
    EXPECT_EQ(env->header.source, route.source);
    EXPECT_EQ(env->header.destination, route.destination);
    EXPECT_EQ(env->header.flags, wire::k_flag_ask);
    EXPECT_EQ(env->header.correlation_id, seed * 11u);
    EXPECT_EQ(env->header.payload_length, bytes->size() - wire::k_envelope_header_size);
    auto got = wire::decode_message<TypeParam>(*env);
    ASSERT_TRUE(got) << got.error_value();
    EXPECT_EQ(*got, sent) << "seed " << seed;

    int visits = 0;
    auto dispatched = wire::dispatch(*env, [&](const wire::envelope_header&, auto&& m) {
      ++visits;
      if constexpr (std::is_same_v<std::decay_t<decltype(m)>, TypeParam>)
        EXPECT_EQ(m, sent);
      else
        ADD_FAILURE() << "dispatched to the wrong type";
    });
    EXPECT_TRUE(dispatched);
    EXPECT_EQ(visits, 1);
  }
}

TEST(Envelope, DecodingAsTheWrongTypeIsAProtocolError) {
  auto bytes = wire::encode_envelope({}, wire::ping{1, "x"});
  auto env = wire::decode_envelope(bytes.value());
  auto wrong = wire::decode_message<wire::fetch_ready>(env.value());
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error_value().message(),
            "malformed envelope: expected fetch_ready (type id 17), envelope holds type id 1 at offset 8");
}

TEST(Envelope, NamedActorIdsAreStableAndDistinctFromSpawnedIds) {
  EXPECT_EQ(wire::named_actor("consumer"), wire::named_actor("consumer"));
  EXPECT_NE(wire::named_actor("consumer"), wire::named_actor("producer"));
  EXPECT_NE(wire::named_actor("") & wire::k_named_actor_bit, 0u);
  static_assert(wire::named_actor("a") == (0xaf63dc4c8601ec8cULL | wire::k_named_actor_bit));  // FNV-1a 64("a")
}

TEST(Envelope, OversizedPayloadIsRefusedAtTheSender) {
  wire::wire_limits limits;
  limits.max_payload_bytes = 100;
  wire::opaque_bytes big;
  big.bytes.resize(200);
  auto bytes = wire::encode_envelope({}, big, limits);
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error_value().code(), errc::invalid_argument);
  EXPECT_NE(bytes.error_value().message().find("opaque_bytes: payload of 209 bytes exceeds the limit of 100"),
            std::string::npos)
      << bytes.error_value();
}

// --- golden bytes: an accidental format change fails here ---------------------------------------

constexpr gpu_token k_golden_token{3, 1, 0x0123456789abcdefULL, 7};
constexpr std::string_view k_golden_token_hex =
    "01"                                                 // little-endian marker
    "0300000001000000efcdab89674523010700000000000000";  // node 3, device 1, buffer, generation 7

TEST(Golden, TokenPayload) {
  EXPECT_EQ(hex(wire::encode(k_golden_token)), k_golden_token_hex);
  auto back = wire::decode<gpu_token>(unhex(k_golden_token_hex), "gpu_token");
  ASSERT_TRUE(back) << back.error_value();
  EXPECT_EQ(*back, k_golden_token);
}

const wire::fetch_request k_golden_request{k_golden_token, 4096, 65536, 9};
const wire::envelope_route k_golden_route{{1, 5}, {3, wire::named_actor("consumer")}, wire::k_flag_ask, 77};
constexpr std::string_view k_golden_envelope_hex =
    "41544d52"                                          // magic "ATMR"
    "0100"                                              // version 1
    "0100"                                              // flags: ask
    "10000000"                                          // type id 16 (fetch_request)
    "2d000000"                                          // payload length 45
    "4d00000000000000"                                  // correlation id 77
    "01000000"                                          // source rank 1
    "03000000"                                          // destination rank 3
    "0500000000000000"                                  // source actor 5
    "0000000000000000"                                  // destination actor: named_actor("consumer"), patched in below
    "01"                                                // payload: little-endian marker
    "0300000001000000efcdab89674523010700000000000000"  // token
    "0010000000000000"                                  // offset 4096
    "0000010000000000"                                  // length 65536
    "09000000";                                         // transfer tag 9

std::vector<std::byte> golden_envelope() {
  auto bytes = unhex(k_golden_envelope_hex);
  const std::uint64_t consumer = wire::named_actor("consumer");
  std::memcpy(bytes.data() + 40, &consumer, sizeof(consumer));
  return bytes;
}

TEST(Golden, EnvelopeBytes) {
  auto bytes = wire::encode_envelope(k_golden_route, k_golden_request);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(hex(*bytes), hex(golden_envelope()));
  const auto golden = golden_envelope();  // the view points into these bytes
  auto env = wire::decode_envelope(golden);
  ASSERT_TRUE(env) << env.error_value();
  EXPECT_EQ(env->header.correlation_id, 77u);
  EXPECT_EQ(env->header.destination, k_golden_route.destination);
  EXPECT_EQ(wire::decode_message<wire::fetch_request>(*env).value(), k_golden_request);
}

// --- malformed envelopes: each error case, with what and where ----------------------------------

std::string decode_error_of(const std::vector<std::byte>& bytes, const wire::wire_limits& limits = {}) {
  auto env = wire::decode_envelope(bytes, limits);
  if (!env) return env.error_value().describe();
  auto msg = wire::decode_message<wire::fetch_request>(*env, limits);
  return msg ? std::string("decoded") : msg.error_value().describe();
}

TEST(Malformed, TruncatedHeader) {
  auto bytes = golden_envelope();
  bytes.resize(20);
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: malformed envelope: truncated: 20 byte(s), the header needs 48 at offset 20");
}

TEST(Malformed, WrongMagic) {
  auto bytes = golden_envelope();
  bytes[0] = std::byte{'X'};
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: malformed envelope: bad magic 0x58544d52 (expected \"ATMR\") at offset 0");
}

TEST(Malformed, UnknownVersion) {
  auto bytes = golden_envelope();
  bytes[4] = std::byte{2};
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: malformed envelope: unsupported wire version 2 (this build speaks 1) at offset 4");
}

TEST(Malformed, UnknownFlags) {
  auto bytes = golden_envelope();
  bytes[7] = std::byte{0x80};
  EXPECT_EQ(decode_error_of(bytes), "protocol: malformed envelope: unknown flag bits 0x8000 at offset 6");
  bytes[7] = std::byte{0};
  bytes[6] = std::byte{3};
  EXPECT_EQ(decode_error_of(bytes), "protocol: malformed envelope: flags ask and reply are both set at offset 6");
}

TEST(Malformed, UnknownTypeId) {
  auto bytes = golden_envelope();
  bytes[8] = std::byte{99};
  EXPECT_EQ(decode_error_of(bytes), "protocol: malformed envelope: unknown message type id 99 at offset 8");
}

TEST(Malformed, PayloadLengthThatLies) {
  auto bytes = golden_envelope();
  bytes[12] = std::byte{42};
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: malformed envelope: payload length 42 but 45 byte(s) follow the header at offset 12");
  bytes = golden_envelope();
  bytes.pop_back();
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: malformed envelope: payload length 45 but 44 byte(s) follow the header at offset 12");
}

TEST(Malformed, PayloadOverTheLimit) {
  wire::wire_limits limits;
  limits.max_payload_bytes = 44;
  EXPECT_EQ(decode_error_of(golden_envelope(), limits),
            "protocol: malformed envelope: payload length 45 exceeds the limit of 44 at offset 12");
}

TEST(Malformed, PayloadShorterThanItsTypeNeeds) {
  // A consistent header around a payload that ends inside the token.
  auto bytes = golden_envelope();
  bytes.resize(wire::k_envelope_header_size + 10);
  bytes[12] = std::byte{10};
  EXPECT_EQ(decode_error_of(bytes),
            "protocol: while reading an envelope (payload at offset 48): cannot decode fetch_request from 10 payload "
            "byte(s): truncated payload: need 8 byte(s), 1 left at payload offset 9");
}

TEST(Malformed, OversizedContainerInPayload) {
  wire::buffer_manifest m;
  m.buffers.resize(3);
  auto bytes = wire::encode_envelope({}, m).value();
  wire::wire_limits limits;
  limits.max_container_length = 2;
  auto env = wire::decode_envelope(bytes, limits);
  ASSERT_TRUE(env);
  auto got = wire::decode_message<wire::buffer_manifest>(*env, limits);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error_value().message().find("container length 3 exceeds the limit of 2 at payload offset 1"),
            std::string::npos)
      << got.error_value();
}

TEST(Malformed, UnknownErrorCodeFromAPeerBecomesProtocol) {
  const error e = wire::to_error(wire::error_reply{500, "from the future"});
  EXPECT_EQ(e.code(), errc::protocol);
  EXPECT_EQ(e.message(), "peer sent unknown error code 500: from the future");
  const error timeout(errc::timeout, "ask 9 timed out");
  EXPECT_EQ(wire::to_error(wire::to_reply(timeout)), timeout);
}

}  // namespace
}  // namespace atomr
