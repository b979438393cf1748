// The host backend's small all_reduce: point-to-point messages by recursive doubling (internal).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>

#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

// One all_reduce of `count` elements in place in `data`, by log2(P) rounds of one nonblocking
// send and receive with a partner each; ranks beyond the largest power of two first hand their
// data to a partner below it and get the result from it last. Open MPI's MPI_Iallreduce runs a
// general schedule (libnbc) that costs several microseconds more than this at small sizes. Both
// partners of a round combine the same two values in the same operand order (the lower rank's as
// MPI's `in`), so every rank ends with the same bits, NaN and signed zeros included. progress() never blocks; the owner
// calls it for every reduction in flight (not just the oldest) until it says done, so that later reductions' rounds are
// not held back. Reductions in flight on one communicator need tags k_tag_span apart (tag .. tag + k_tag_span-1).
class host_allreduce {
 public:
  static constexpr int k_tag_span = 64;

  host_allreduce(MPI_Comm comm, int rank, int size, void* data, int count, MPI_Datatype type, MPI_Op op, int tag,
                 std::size_t bytes);
  ~host_allreduce();
  host_allreduce(const host_allreduce&) = delete;
  host_allreduce& operator=(const host_allreduce&) = delete;

  // Advances as far as the messages that arrived allow; true once `data` holds the result. The
  // first call posts the first messages.
  result<bool> progress();
  bool done() const { return phase_ == phase::done; }
  // The messages of the step under way, for the owner to test many reductions' at once (MPI sets a
  // finished one to MPI_REQUEST_NULL); then advance() goes on once they have all finished.
  std::span<MPI_Request> requests() { return {requests_, static_cast<std::size_t>(pending_)}; }
  result<void> advance();

 private:
  enum class phase { start, fold_in, round, fold_out, result_in, done };
  result<void> start_step();
  result<void> finish_step();
  result<void> exchange(int peer, int tag, bool send, bool receive);
  result<void> combine(int partner);  // reduces the partner's data (in incoming_) into data_

  MPI_Comm comm_;
  int rank_;
  int size_;
  int p2_;     // the largest power of two <= size
  int extra_;  // size - p2: ranks [p2, size) fold into ranks [0, extra)
  void* data_;
  int count_;
  MPI_Datatype type_;
  MPI_Op op_;
  int tag_;
  std::size_t bytes_;
  std::unique_ptr<std::byte[]> incoming_;
  phase phase_ = phase::start;
  int mask_ = 1;
  int round_ = 0;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int pending_ = 0;
};

}  // namespace atomr::cluster::detail
