#include "cuda_ipc.hpp"

#include <unistd.h>

#include <cstring>

#include "atomr/cluster/buffers/fd_exchange.hpp"
#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::cluster::detail {

#if ATOMR_HAVE_CUDA

bool cuda_ipc_built() noexcept { return true; }

result<std::vector<std::uint8_t>> ipc_export_allocation(int device, void* ptr) {
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(device)));
  cudaMemPoolPtrExportData data{};
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolExportPointer(&data, ptr)));
  std::vector<std::uint8_t> out(sizeof(data));
  std::memcpy(out.data(), &data, sizeof(data));
  return out;
}

result<int> ipc_export_pool(int device, void* pool) {
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(device)));
  int fd = -1;
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolExportToShareableHandle(&fd, static_cast<cudaMemPool_t>(pool),
                                                                cudaMemHandleTypePosixFileDescriptor, 0)));
  return fd;
}

ipc_importer::~ipc_importer() {
  // Imported pools and allocations go with the process (freeing one that a stream might still be
  // copying out of is worse than keeping it).
}

result<void*> ipc_importer::pool(int owner, std::uint64_t pool_id, const std::string& server, int device) {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(owner, pool_id);
  auto it = pools_.find(key);
  if (it == pools_.end()) {
    ATOMR_ASSIGN_OR_RETURN(const int fd, request_fd(server, pool_id, std::chrono::seconds(10)));
    cudaMemPool_t pool = nullptr;
    const auto imported = ATOMR_CUDA_CHECK(cudaMemPoolImportFromShareableHandle(
        &pool, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), cudaMemHandleTypePosixFileDescriptor, 0));
    ::close(fd);  // the pool holds its own reference now
    if (!imported) return imported.error_value().with_context("importing rank " + std::to_string(owner) + "'s pool");
    it = pools_.emplace(key, pool).first;
  }
  auto* pool = static_cast<cudaMemPool_t>(it->second);
  if (readable_.insert({owner, pool_id, device}).second) {
    // The pool is readable from its own device; a consumer on another device asks for access.
    cudaMemLocation here{};
    here.type = cudaMemLocationTypeDevice;
    here.id = device;
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolGetAccess(&flags, pool, &here)));
    if (flags == cudaMemAccessFlagsProtNone) {
      // Read and write: the driver refuses read-only access to another device's pool
      // (cudaErrorNotSupported on two H100s joined by NVLink); the fetch only ever reads.
      cudaMemAccessDesc access{};
      access.location = here;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1)));
    }
  }
  return static_cast<void*>(pool);
}

result<void*> ipc_importer::allocation(int owner, std::uint64_t pin, void* pool, const std::vector<std::uint8_t>& data,
                                       int device) {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(owner, pin);
  if (unmapped_.contains(key)) {
    return error(errc::stale_ref, "rank " + std::to_string(owner) + " ended the export while it was being fetched");
  }
  if (const auto it = imports_.find(key); it != imports_.end()) return it->second.first;
  cudaMemPoolPtrExportData export_data{};
  if (data.size() != sizeof(export_data)) {
    return error(errc::protocol, "an exported allocation of " + std::to_string(data.size()) + " bytes (expected " +
                                     std::to_string(sizeof(export_data)) + ")");
  }
  std::memcpy(&export_data, data.data(), sizeof(export_data));
  void* src = nullptr;
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolImportPointer(&src, static_cast<cudaMemPool_t>(pool), &export_data)));
  imports_.emplace(key, std::make_pair(src, device));
  return src;
}

std::optional<std::pair<void*, int>> ipc_importer::unmap(int owner, std::uint64_t pin) {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(owner, pin);
  unmapped_.insert(key);
  const auto it = imports_.find(key);
  if (it == imports_.end()) return std::nullopt;
  auto out = it->second;
  imports_.erase(it);
  return out;
}

result<void> ipc_importer::copy(void* dst, const void* src, std::size_t bytes, void* stream) {
  return ATOMR_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

result<void> ipc_importer::release(void* src, void* stream) {
  return ATOMR_CUDA_CHECK(cudaFreeAsync(src, static_cast<cudaStream_t>(stream)));
}

#else

bool cuda_ipc_built() noexcept { return false; }
namespace {
error no_cuda() { return error(errc::unavailable, "CUDA IPC: this build has no CUDA"); }
}  // namespace
result<std::vector<std::uint8_t>> ipc_export_allocation(int, void*) { return no_cuda(); }
result<int> ipc_export_pool(int, void*) { return no_cuda(); }
ipc_importer::~ipc_importer() = default;
result<void*> ipc_importer::pool(int, std::uint64_t, const std::string&, int) { return no_cuda(); }
result<void*> ipc_importer::allocation(int, std::uint64_t, void*, const std::vector<std::uint8_t>&, int) {
  return no_cuda();
}
std::optional<std::pair<void*, int>> ipc_importer::unmap(int, std::uint64_t) { return std::nullopt; }
result<void> ipc_importer::copy(void*, const void*, std::size_t, void*) { return no_cuda(); }
result<void> ipc_importer::release(void*, void*) { return no_cuda(); }

#endif

}  // namespace atomr::cluster::detail
