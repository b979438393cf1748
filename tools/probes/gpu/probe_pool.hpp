// A memory pool like the device actor's (src/local/device/cuda_backend.cpp), for the probes that
// compare raw NCCL on its buffers with cudaMalloc's: POSIX file descriptor handles (shareable with
// other processes), freed memory kept, and access granted to every peer GPU that can have it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "probe_check.hpp"

inline cudaMemPool_t make_actor_like_pool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CK(cudaMemPoolCreate(&pool, &props));
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  for (int peer = 0; peer < devices; ++peer) {
    int can = 0;
    if (peer == device) continue;
    CK(cudaDeviceCanAccessPeer(&can, peer, device));
    if (!can) continue;
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    CK(cudaMemPoolSetAccess(pool, &access, 1));
  }
  return pool;
}
