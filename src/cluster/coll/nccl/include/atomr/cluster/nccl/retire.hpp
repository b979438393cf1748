// Destroys finalized NCCL communicators off the thread that lets a world go.
//
// Why: ncclCommDestroy joins NCCL's UDS service thread, which polls its socket with a 500 ms
// timeout and notices its stop flag only when that poll returns, so each destroy waits out most
// of 500 ms (measured on an H200 with NCCL 2.28.3: 466-474 ms, where the rest of a world's
// teardown takes under 2 ms, with or without NCCL_CUMEM_ENABLE). A finalized communicator has no work and no peer left
// to wait for, so nothing is lost by destroying it on a thread of its own: the world's teardown returns at once, and
// communicators that go in quick succession (split worlds, shrinks, tests) wait out their polls together, not one after
// another.
//
// Every retired communicator is destroyed before the process exits (the retirer's threads are
// joined at exit) and by wait_for_retired_communicators().
#pragma once

#include <nccl.h>

#include <vector>

namespace atomr::cluster::detail {

struct retired_comm {
  ncclComm_t comm = nullptr;
  int device = 0;  // (for the log)
  int rank = 0;    // the communicator's rank (for the log)
};

// Destroys `comms` (finalized, not aborted) in order on a new thread, and returns at once (where
// no thread can be made, it destroys them before it returns). A failed destroy is logged with its
// rank and device.
void retire_nccl_comms(const std::vector<retired_comm>& comms);
// Returns once every communicator retired before the call is destroyed.
void wait_retired_nccl_comms();

}  // namespace atomr::cluster::detail
