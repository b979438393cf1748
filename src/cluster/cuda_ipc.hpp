// CUDA IPC for the buffer registry: a rank on the same node reads another rank's exported buffer
// GPU to GPU. The owner's buffers come from a memory pool that can be shared (POSIX file
// descriptor handles, see the CUDA device backend); the owner exports the buffer's allocation as
// 64 opaque bytes per fetch, and the pool once per consumer, as a file descriptor handed over a
// Unix socket (fd_exchange). The consumer imports the pool once, imports the allocation for each
// fetch, copies on its own device's stream and frees the import in stream order behind the
// copy; the owner keeps the buffer alive until the consumer says it is done (CUDA requires every
// import to be freed before the exporter frees).
//
// In builds without CUDA every call fails with errc::unavailable.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

// Whether this build has CUDA IPC at all.
bool cuda_ipc_built() noexcept;

// Owner side. The allocation containing `ptr` (from a shareable pool), as bytes for the consumer.
result<std::vector<std::uint8_t>> ipc_export_allocation(int device, void* ptr);
// A new file descriptor for `pool` (a cudaMemPool_t), for fd_exchange to hand over.
result<int> ipc_export_pool(int device, void* pool);

// Consumer side: the pools imported from other processes, each once.
class ipc_importer {
 public:
  ipc_importer() = default;
  ~ipc_importer();
  ipc_importer(const ipc_importer&) = delete;
  ipc_importer& operator=(const ipc_importer&) = delete;

  // The pool `pool_id` of rank `owner`, imported (through the fd server `server`) the first time
  // and made readable from `device`, this process's device that copies out of it.
  result<void*> pool(int owner, std::uint64_t pool_id, const std::string& server, int device);
  // Enqueues on `stream` (a cudaStream_t of `device`): import the allocation, copy `bytes` from it
  // into `dst`, free the import. Done when the stream has passed them.
  static result<void> copy_in(void* pool, const std::vector<std::uint8_t>& allocation, void* dst, std::size_t bytes,
                              void* stream);

 private:
  std::mutex mutex_;
  std::map<std::pair<int, std::uint64_t>, void*> pools_;
};

}  // namespace atomr::cluster::detail
