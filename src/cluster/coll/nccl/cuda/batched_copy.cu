#include <algorithm>
#include <cstdint>
#include <cstring>

#include "batched_copy.hpp"

namespace atomr::cluster::detail {
namespace {

// 16-byte words where source, destination and size allow, bytes otherwise; one block a copy.
__device__ void copy_block(const void* src, void* dst, std::size_t bytes) {
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto t = reinterpret_cast<std::uintptr_t>(dst);
  if (((s | t | bytes) & 15u) == 0) {
    const auto* in = static_cast<const uint4*>(src);
    auto* out = static_cast<uint4*>(dst);
    for (std::size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) out[i] = in[i];
    return;
  }
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  for (std::size_t i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = in[i];
}

// The parameter block's size is fixed by the type, and every launch copies all of it: a few
// capacities keep a small batch's launch small.
template <int N>
struct pack_table {
  unsigned char* pack;
  int gather;
  pack_entry e[N];
};

template <int N>
__global__ void pack_copy(const __grid_constant__ pack_table<N> t) {
  const pack_entry& e = t.e[blockIdx.x];
  unsigned char* slot = t.pack + e.offset;
  if (t.gather) {
    copy_block(e.user, slot, e.bytes);
  } else {
    copy_block(slot, e.user, e.bytes);
  }
}

template <int N>
cudaError_t launch_table(const pack_entry* entries, int count, void* pack, bool gather, cudaStream_t stream) {
  pack_table<N> t;
  t.pack = static_cast<unsigned char*>(pack);
  t.gather = gather ? 1 : 0;
  std::memcpy(t.e, entries, sizeof(pack_entry) * static_cast<std::size_t>(count));
  pack_copy<N><<<count, 128, 0, stream>>>(t);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pack_copy(const pack_entry* entries, int count, void* pack, bool gather, cudaStream_t stream) {
  static_assert(sizeof(pack_table<1024>) <= 32764, "CUDA's kernel parameter limit");
  while (count > 0) {
    const int n = std::min(count, 1024);
    const cudaError_t e = n <= 64    ? launch_table<64>(entries, n, pack, gather, stream)
                          : n <= 256 ? launch_table<256>(entries, n, pack, gather, stream)
                                     : launch_table<1024>(entries, n, pack, gather, stream);
    if (e != cudaSuccess) return e;
    entries += n;
    count -= n;
  }
  return cudaSuccess;
}

}  // namespace atomr::cluster::detail
