// The bytes one rank's router sends another are one ordered stream of envelopes (envelope.hpp),
// back to back. MPI carries the stream in chunks of at most the packet size, so an envelope may
// span chunks (a large payload spans many) and a chunk may hold many envelopes (small messages
// travel together). stream_reader puts one sender's stream back together.
//
// The bytes are untrusted: a header that does not parse poisons the stream (nothing after it can
// be framed, so the rest from that sender is dropped and reported once); an envelope whose
// payload is over the limit is reported with its header (so the sender can be answered) and
// skipped without being stored. Memory held per sender is at most one envelope under the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atomr/serialization/envelope.hpp"
#include "atomr/serialization/wire_limits.hpp"

namespace atomr::cluster::detail {

class stream_sink {
 public:
  virtual ~stream_sink() = default;
  // A whole envelope (header checked for magic, version and flags; its length matches).
  virtual void message(const serialization::envelope_header& header, std::span<const std::byte> payload) = 0;
  // An envelope over the payload limit; its payload is skipped.
  virtual void oversized(const serialization::envelope_header& header) = 0;
  // The stream cannot be framed from here on; everything after is dropped.
  virtual void corrupt(const error& why) = 0;
};

class stream_reader {
 public:
  explicit stream_reader(serialization::wire_limits limits) : limits_(limits) {}

  void feed(std::span<const std::byte> chunk, stream_sink& sink);

  bool poisoned() const noexcept { return poisoned_; }
  // Bytes of an unfinished envelope held until the rest arrives.
  std::size_t buffered() const noexcept { return carry_.size(); }
  // True between envelopes (nothing held, nothing being skipped).
  bool at_boundary() const noexcept { return carry_.empty() && skip_ == 0; }

 private:
  // Handles a header at the front of `bytes` (at least a header's worth); false if it poisoned.
  bool start(std::span<const std::byte> bytes, stream_sink& sink, serialization::envelope_header& out);

  serialization::wire_limits limits_;
  std::vector<std::byte> carry_;
  std::uint64_t skip_ = 0;
  bool poisoned_ = false;
};

}  // namespace atomr::cluster::detail
