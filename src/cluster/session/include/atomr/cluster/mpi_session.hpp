// The process's MPI lifetime. start() initializes MPI with MPI_THREAD_MULTIPLE (or joins an MPI
// that the caller already initialized, e.g. a test main), makes MPI return errors instead of
// aborting, duplicates MPI_COMM_WORLD for atomr's own traffic, discovers the node identity and
// records the rank for error messages and logs. When it initializes MPI itself it also starts
// liveness (heartbeats: a silent or exited rank is named and, by default, ends the job; see
// liveness.hpp). The destructor finalizes MPI only if start() initialized it. One session per
// process; not copyable.
#pragma once

#include <mpi.h>

#include <memory>

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/node_identity.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster {

class mpi_session {
 public:
  static result<std::unique_ptr<mpi_session>> start(int* argc, char*** argv);
  ~mpi_session();
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;

  const node_identity& identity() const noexcept { return identity_; }
  // atomr's duplicate of MPI_COMM_WORLD (MPI_ERRORS_RETURN set); valid for the session's lifetime.
  MPI_Comm world() const noexcept { return world_; }
  // The heartbeats, when this session runs them (nullptr otherwise).
  const cluster::liveness* liveness() const noexcept { return liveness_.get(); }

  // What start() spent, on this rank, in ms (for the startup phases bench coll reports).
  struct startup_times {
    double mpi_init = 0;       // MPI_Init_thread (0 when MPI was up already)
    double node_identity = 0;  // the duplicate of MPI_COMM_WORLD and the node identity
    double liveness = 0;       // liveness's start (its communicator and the exchange of names)
  };
  const startup_times& startup() const noexcept { return startup_; }

 private:
  mpi_session(bool owns_mpi, MPI_Comm world, node_identity identity);

  bool owns_mpi_;
  MPI_Comm world_;
  node_identity identity_;
  std::unique_ptr<cluster::liveness> liveness_;
  startup_times startup_;
};

}  // namespace atomr::cluster
