#include <algorithm>

#include "atomr/cluster/router/stream.hpp"

namespace atomr::cluster::detail {

using serialization::envelope_header;
using serialization::k_envelope_header_size;

bool stream_reader::start(std::span<const std::byte> bytes, stream_sink& sink, envelope_header& out) {
  auto h = serialization::detail::peek_header(bytes.first(k_envelope_header_size));
  if (!h) {
    poisoned_ = true;
    carry_.clear();
    carry_.shrink_to_fit();
    sink.corrupt(h.error_value());
    return false;
  }
  out = *h;
  return true;
}

void stream_reader::feed(std::span<const std::byte> chunk, stream_sink& sink) {
  while (!chunk.empty() && !poisoned_) {
    if (skip_ != 0) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(skip_, chunk.size()));
      skip_ -= n;
      chunk = chunk.subspan(n);
      continue;
    }
    envelope_header h;
    if (carry_.empty()) {
      // The common case: whole envelopes inside the chunk, read in place.
      if (chunk.size() < k_envelope_header_size) {
        carry_.assign(chunk.begin(), chunk.end());
        return;
      }
      if (!start(chunk, sink, h)) return;
      if (h.payload_length > limits_.max_payload_bytes) {
        sink.oversized(h);
        skip_ = h.payload_length;
        chunk = chunk.subspan(k_envelope_header_size);
        continue;
      }
      const std::size_t total = k_envelope_header_size + h.payload_length;
      if (chunk.size() >= total) {
        sink.message(h, chunk.subspan(k_envelope_header_size, h.payload_length));
        chunk = chunk.subspan(total);
        continue;
      }
      carry_.reserve(total);
      carry_.assign(chunk.begin(), chunk.end());
      return;
    }
    // An envelope begun in an earlier chunk.
    if (carry_.size() < k_envelope_header_size) {
      const std::size_t take = std::min(k_envelope_header_size - carry_.size(), chunk.size());
      carry_.insert(carry_.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(take));
      chunk = chunk.subspan(take);
      if (carry_.size() < k_envelope_header_size) return;
      if (!start(carry_, sink, h)) return;
      if (h.payload_length > limits_.max_payload_bytes) {
        sink.oversized(h);
        skip_ = h.payload_length;
        carry_.clear();
        continue;
      }
      carry_.reserve(k_envelope_header_size + h.payload_length);
    } else {
      h = *serialization::detail::peek_header(carry_);  // checked when it was started
    }
    const std::size_t total = k_envelope_header_size + h.payload_length;
    const std::size_t take = std::min(total - carry_.size(), chunk.size());
    carry_.insert(carry_.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(take));
    chunk = chunk.subspan(take);
    if (carry_.size() == total) {
      sink.message(h, std::span<const std::byte>(carry_).subspan(k_envelope_header_size));
      carry_.clear();
      // Do not keep a large envelope's worth of memory per sender.
      if (carry_.capacity() > (std::size_t{1} << 20)) carry_.shrink_to_fit();
    }
  }
}

}  // namespace atomr::cluster::detail
