// The one error type of atomr: a code plus a message that carries its context (which call, which
// rank and device, which sizes). Errors are values: they travel in `result<T>` and in futures; no
// exception crosses a mailbox or a thread.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace atomr {

enum class errc {
  invalid_argument,  // the caller passed something wrong
  stale_ref,         // a handle outlived its device state or generation
  out_of_memory,
  cuda,                // a CUDA runtime/driver call failed
  nccl,                // an NCCL call failed
  mpi,                 // an MPI call failed
  timeout,             // a deadline passed
  aborted,             // the operation was cancelled (communicator aborted, actor stopped mid-way)
  protocol,            // bytes from the wire were malformed
  unavailable,         // the target (actor, device, backend) is not there or not running
  internal,            // a broken invariant inside atomr
  resource_exhausted,  // a bounded resource is full (a mailbox, a queue); retrying later may work
};
// The highest code; codes are numbered densely from 0 and new ones are appended, because their
// numbers cross the wire in error_reply.
inline constexpr errc k_errc_last = errc::resource_exhausted;

// Stable lower-case name of a code, e.g. "invalid_argument".
std::string_view to_string(errc code) noexcept;

class error {
 public:
  error(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "<code>: <message>", the form printed to users.
  std::string describe() const;

  // Adds outer context: "while <what>: <message>"; the code is kept.
  error with_context(std::string_view what) const;

  friend bool operator==(const error&, const error&) = default;

 private:
  errc code_;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const error& e);
std::ostream& operator<<(std::ostream& os, errc code);

}  // namespace atomr
