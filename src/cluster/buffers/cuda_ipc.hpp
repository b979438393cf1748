// CUDA IPC for the buffer registry: a rank on the same node reads another rank's exported buffer
// GPU to GPU. The owner's buffers come from a memory pool that can be shared (POSIX file
// descriptor handles, see the CUDA device backend); the owner grants a consumer an exported
// buffer's allocation (64 opaque bytes) under a pin, and the pool once per consumer, as a file
// descriptor handed over a Unix socket (fd_exchange). The consumer imports the pool once and the
// allocation once per pin, and copies out of it on its own device's stream at every fetch. When
// the export ends, the owner asks for the pin back (unmap); the consumer frees the import in
// stream order behind its copies and says done, and only then does the owner let the buffer go
// (CUDA requires every import to be freed before the exporter frees).
//
// In builds without CUDA every call fails with errc::unavailable.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
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

// Consumer side: the pools imported from other processes, each once, and the allocations
// imported from them, each kept mapped until its owner asks for it back (unmap): importing a
// large allocation maps it page by page, which costs more than the copy it serves.
class ipc_importer {
 public:
  ipc_importer() = default;
  ~ipc_importer();
  ipc_importer(const ipc_importer&) = delete;
  ipc_importer& operator=(const ipc_importer&) = delete;

  // The pool `pool_id` of rank `owner`, imported (through the fd server `server`) the first time
  // and made readable from `device`, this process's device that copies out of it.
  result<void*> pool(int owner, std::uint64_t pool_id, const std::string& server, int device);
  // The allocation the owner granted under `pin`, imported the first time (on `device`'s thread).
  // Errors: stale_ref once the owner has unmapped the pin (a release raced with this fetch).
  result<void*> allocation(int owner, std::uint64_t pin, void* pool, const std::vector<std::uint8_t>& data, int device);
  // Forgets the pin's import and returns it with the device it was imported on, for the caller
  // to free in stream order behind the copies out of it; nullopt if it was never imported.
  std::optional<std::pair<void*, int>> unmap(int owner, std::uint64_t pin);

  // Enqueues on `stream` (a cudaStream_t): copy `bytes` from the import `src` into `dst`.
  static result<void> copy(void* dst, const void* src, std::size_t bytes, void* stream);
  // Enqueues on `stream`: free an import (after the copies enqueued before it).
  static result<void> release(void* src, void* stream);

 private:
  std::mutex mutex_;
  std::map<std::pair<int, std::uint64_t>, void*> pools_;
  std::set<std::tuple<int, std::uint64_t, int>> readable_;                  // (owner, pool id, device)
  std::map<std::pair<int, std::uint64_t>, std::pair<void*, int>> imports_;  // (owner, pin) -> (ptr, device)
  std::set<std::pair<int, std::uint64_t>> unmapped_;
};

}  // namespace atomr::cluster::detail
