// GoogleTest main for multi-rank tests (linked instead of gtest_main). It makes every verdict
// collective: a failure on any rank fails that test on every rank; only rank 0 prints (and writes
// --gtest_output), showing which rank failed and why; every rank exits with the same code.
//
// Rules for tests run under it: every rank runs the same test list in the same order (the shuffle
// seed is broadcast), and GTEST_SKIP must be decided the same way on all ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace {

void die(const char* what, int code) {
  std::fprintf(stderr, "mpi_gtest_main: %s failed (MPI error %d)\n", what, code);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

#define MPI_OR_DIE(call)                                       \
  do {                                                         \
    if (int rc_ = (call); rc_ != MPI_SUCCESS) die(#call, rc_); \
  } while (false)

// Gathers every rank's outcome of the test that just ended and re-raises remote failures locally.
class collective_result_listener : public ::testing::EmptyTestEventListener {
 public:
  collective_result_listener() {
    MPI_OR_DIE(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    MPI_OR_DIE(MPI_Comm_rank(comm_, &rank_));
    MPI_OR_DIE(MPI_Comm_size(comm_, &size_));
  }
  ~collective_result_listener() override { MPI_Comm_free(&comm_); }

  void OnTestStart(const ::testing::TestInfo&) override { local_failures_.clear(); }

  // Only failing ranks get this callback, so it must not communicate.
  void OnTestPartResult(const ::testing::TestPartResult& part) override {
    if (reraising_ || !part.failed()) return;
    local_failures_ += std::string(part.file_name() ? part.file_name() : "?") + ":" +
                       std::to_string(part.line_number()) + ": " + part.summary() + "\n";
  }

  // Runs before the default printer's OnTestEnd (gtest calls OnTestEnd in reverse listener order),
  // so failures added here are printed and counted.
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    const int mine[2] = {r->Failed() ? 1 : 0, r->Skipped() ? 1 : 0};
    std::vector<int> all(static_cast<std::size_t>(2 * size_));
    MPI_OR_DIE(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_));
    int failed = 0;
    int skipped = 0;
    for (int i = 0; i < size_; ++i) {
      failed += all[2 * i];
      skipped += all[2 * i + 1];
    }
    reraising_ = true;
    if (skipped != 0 && skipped != size_) {
      ADD_FAILURE() << "GTEST_SKIP() on " << skipped << " of " << size_
                    << " ranks only; skip decisions must be collective";
    }
    if (failed != 0) report_failures(mine[0] != 0, failed);
    reraising_ = false;
  }

 private:
  void report_failures(bool failed_here, int failed_ranks) {
    const std::string text = failed_here ? local_failures_ : std::string();
    const int len = static_cast<int>(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_));
    MPI_OR_DIE(MPI_Gather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_));
    std::vector<int> offsets(static_cast<std::size_t>(size_));
    int total = 0;
    for (int i = 0; i < size_; ++i) {
      offsets[static_cast<std::size_t>(i)] = total;
      total += lengths[static_cast<std::size_t>(i)];
    }
    std::string all(static_cast<std::size_t>(rank_ == 0 ? total : 0), '\0');
    MPI_OR_DIE(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm_));
    if (rank_ == 0) {
      for (int i = 1; i < size_; ++i) {
        const auto n = static_cast<std::size_t>(lengths[static_cast<std::size_t>(i)]);
        if (n == 0) continue;
        ADD_FAILURE() << "[rank " << i << "/" << size_ << "] "
                      << all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(i)]), n);
      }
      if (!failed_here) ADD_FAILURE() << failed_ranks << " of " << size_ << " rank(s) failed (rank 0 passed)";
    } else if (!failed_here) {
      ADD_FAILURE() << "failed on " << failed_ranks << " other rank(s)";
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool reraising_ = false;
  std::string local_failures_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_OR_DIE(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "mpi_gtest_main: MPI does not provide MPI_THREAD_MULTIPLE (got %d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_OR_DIE(MPI_Comm_rank(MPI_COMM_WORLD, &rank));

  // gtest picks a time-based seed per rank when none is given; ranks must shuffle alike.
  int seed = GTEST_FLAG_GET(random_seed);
  if (rank == 0 && seed == 0) seed = static_cast<int>(std::random_device{}() % 99999) + 1;
  MPI_OR_DIE(MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD));
  GTEST_FLAG_SET(random_seed, seed);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    delete listeners.Release(listeners.default_xml_generator());
    // --gtest_list_tests prints with printf, not through a listener.
    if (GTEST_FLAG_GET(list_tests) && std::freopen("/dev/null", "w", stdout) == nullptr) {
      std::fprintf(stderr, "mpi_gtest_main: cannot silence stdout on rank %d\n", rank);
    }
  }
  auto* collective = new collective_result_listener;
  listeners.Append(collective);

  const int local_rc = RUN_ALL_TESTS();
  // gtest would delete the listener after MPI_Finalize; its communicator must be freed before.
  delete listeners.Release(collective);
  int global_rc = 0;
  MPI_OR_DIE(MPI_Allreduce(&local_rc, &global_rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  std::cout.flush();
  MPI_Finalize();
  return global_rc;
}
