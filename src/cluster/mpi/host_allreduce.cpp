#include "atomr/cluster/mpi/host_allreduce.hpp"

#include <cstring>

#include "atomr/cluster/mpi_check.hpp"

namespace atomr::cluster::detail {

host_allreduce::host_allreduce(MPI_Comm comm, int rank, int size, void* data, int count, MPI_Datatype type, MPI_Op op,
                               int tag, std::size_t bytes)
    : comm_(comm),
      rank_(rank),
      size_(size),
      p2_(1),
      data_(data),
      count_(count),
      type_(type),
      op_(op),
      tag_(tag),
      bytes_(bytes),
      incoming_(new std::byte[bytes > 0 ? bytes : 1]) {
  while (p2_ * 2 <= size_) p2_ *= 2;
  extra_ = size_ - p2_;
}

host_allreduce::~host_allreduce() {
  // Abandoned in flight (the world failed): the requests are left to MPI, which may still write
  // into the buffer, so it is left too.
  if (pending_ > 0) (void)incoming_.release();
}

result<bool> host_allreduce::progress() {
  while (true) {
    if (pending_ > 0) {
      int done = 0;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Testall(pending_, requests_, &done, MPI_STATUSES_IGNORE)));
      if (!done) return false;
      pending_ = 0;
      ATOMR_TRY(finish_step());
    }
    if (phase_ == phase::done) return true;
    ATOMR_TRY(start_step());
  }
}

result<void> host_allreduce::advance() {
  for (int i = 0; i < pending_; ++i) {
    if (requests_[i] != MPI_REQUEST_NULL) return ok();
  }
  if (pending_ > 0) {
    pending_ = 0;
    ATOMR_TRY(finish_step());
  }
  if (phase_ != phase::done && pending_ == 0) ATOMR_TRY(start_step());
  return ok();
}

result<void> host_allreduce::exchange(int peer, int tag, bool send, bool receive) {
  if (receive) {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Irecv(incoming_.get(), count_, type_, peer, tag, comm_, &requests_[pending_])));
    ++pending_;
  }
  if (send) {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Isend(data_, count_, type_, peer, tag, comm_, &requests_[pending_])));
    ++pending_;
  }
  return ok();
}

// Tags: tag_ for the fold-in, tag_ + 1 + round for the rounds, tag_ + k_tag_span - 1 for the result.
result<void> host_allreduce::start_step() {
  const int last_tag = tag_ + k_tag_span - 1;
  switch (phase_) {
    case phase::start:
      if (size_ == 1) {
        phase_ = phase::done;
        return ok();
      }
      if (rank_ >= p2_) {
        phase_ = phase::result_in;
        ATOMR_TRY(exchange(rank_ - p2_, tag_, true, false));
        return exchange(rank_ - p2_, last_tag, false, true);
      }
      if (rank_ < extra_) {
        phase_ = phase::fold_in;
        return exchange(rank_ + p2_, tag_, false, true);
      }
      phase_ = phase::round;
      return exchange(rank_ ^ mask_, tag_ + 1 + round_, true, true);
    case phase::round: return exchange(rank_ ^ mask_, tag_ + 1 + round_, true, true);
    case phase::fold_out: return exchange(rank_ + p2_, last_tag, true, false);
    case phase::fold_in:
    case phase::result_in:
    case phase::done: return ok();
  }
  return ok();
}

// Both partners compute op(in = the lower rank's data, inout = the higher rank's): a commutative
// op is not symmetric in every bit (min and max of NaN or of +0 and -0 keep the inout operand).
result<void> host_allreduce::combine(int partner) {
  if (partner < rank_) return ATOMR_MPI_CHECK(MPI_Reduce_local(incoming_.get(), data_, count_, type_, op_));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Reduce_local(data_, incoming_.get(), count_, type_, op_)));
  std::memcpy(data_, incoming_.get(), bytes_);
  return ok();
}

result<void> host_allreduce::finish_step() {
  switch (phase_) {
    case phase::fold_in:
      ATOMR_TRY(combine(rank_ + p2_));
      phase_ = phase::round;
      return ok();
    case phase::round:
      ATOMR_TRY(combine(rank_ ^ mask_));
      mask_ <<= 1;
      ++round_;
      if (mask_ >= p2_) phase_ = rank_ < extra_ ? phase::fold_out : phase::done;
      return ok();
    case phase::result_in: std::memcpy(data_, incoming_.get(), bytes_); [[fallthrough]];
    case phase::fold_out: phase_ = phase::done; return ok();
    case phase::start:
    case phase::done: return ok();
  }
  return ok();
}

}  // namespace atomr::cluster::detail
