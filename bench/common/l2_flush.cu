#include "bench/common/l2_flush.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ragged {
namespace bench {
namespace {

constexpr int kEvictThreads = 256;
// Loads per thread at the least: on the GPU the block cap decides (a full grid, ~24 loads a thread for an
// H100's 100 MB); on the kernel emulator, where every thread is a fiber, fewer threads are much faster.
constexpr std::size_t kEvictLoadsPerThread = 16;

__global__ void read_to_evict_kernel(const uint4* __restrict__ data, std::int64_t count, unsigned* sink) {
  unsigned folded = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = data[i];
    folded ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // Every byte of the buffer is the same (memsets), so each vector folds to 0 and this store never runs; the
  // compiler cannot know that, so the loads stay.
  if (folded == 0x9e3779b9u) *sink = folded;
}

}  // namespace

const char* l2_flush_name(L2Flush how) { return how == L2Flush::kClean ? "clean" : "dirty"; }

L2Flush l2_flush_from_env() {
  const char* value = std::getenv("RAGGED_BENCH_FLUSH");
  if (value == nullptr || *value == '\0' || std::string(value) == "clean") return L2Flush::kClean;
  if (std::string(value) == "dirty") return L2Flush::kDirty;
  throw std::invalid_argument(std::string("RAGGED_BENCH_FLUSH='") + value + "' is neither 'clean' nor 'dirty'");
}

cudaError_t read_to_evict(const void* buffer, std::size_t bytes, unsigned* sink, int max_blocks, cudaStream_t stream) {
  const std::size_t words = bytes / sizeof(uint4);
  if (words == 0) return cudaSuccess;
  const std::size_t per_block = static_cast<std::size_t>(kEvictThreads) * kEvictLoadsPerThread;
  const std::size_t wanted = (words + per_block - 1) / per_block;
  const int blocks = static_cast<int>(std::min<std::size_t>(wanted, static_cast<std::size_t>(std::max(max_blocks, 1))));
  read_to_evict_kernel<<<blocks, kEvictThreads, 0, stream>>>(static_cast<const uint4*>(buffer),
                                                              static_cast<std::int64_t>(words), sink);
  return cudaGetLastError();
}

}  // namespace bench
}  // namespace ragged
