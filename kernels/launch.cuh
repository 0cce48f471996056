// Internal helpers for launching kernels: grid sizing from the device's SM count (and, for persistent kernels, the
// occupancy calculator) and launch-error checks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ragged/status.h"

namespace ragged {
namespace detail {

// A process-wide switch's starting value: on unless the environment sets `name` to "0".
inline bool switch_from_environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr || std::string(value) != "0";
}

// A process-wide setting's starting value: the environment's `name` when it is a whole number in [lo, hi],
// else `fallback`.
inline int setting_from_environment(const char* name, int fallback, int lo, int hi) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  return *end == '\0' && v >= lo && v <= hi ? static_cast<int>(v) : fallback;
}

// Multiprocessors of the current device. Querying attributes is allowed during stream capture.
inline Status sm_count(int& count) {
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  return from_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
                   "cudaDeviceGetAttribute(MultiProcessorCount)");
}

// The most blocks grid_size gives any grid: 0 (the default) for no cap. For tests: a grid of 1 to 3 blocks makes
// every grid-stride loop of the kernels sized by grid_size or resident_grid_size (segment ops, conversions, masks,
// offsets, packing, the RNN's state and slot kernels) take many rounds on a small input, where a full grid takes one.
// Safe at any value: no such kernel waits for another block (the segment merge trees' last arrival merges). The
// persistent RNN kernels (cooperative, a grid per hidden slice) are not sized here. Not thread-safe to change.
unsigned grid_cap();
void set_grid_cap(unsigned blocks);

// Blocks for a grid-stride loop over `work_items` items of `items_per_block`: enough to fill the device
// (`waves` blocks per SM) and no more than the work needs (nor than grid_cap(), where a test set one). Always at
// least 1.
inline Status grid_size(std::int64_t work_items, std::int64_t items_per_block, int waves, unsigned& blocks) {
  int sms = 0;
  Status s = sm_count(sms);
  if (s != Status::kSuccess) return s;
  const std::int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * waves;
  blocks = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(needed, cap)));
  if (const unsigned test_cap = grid_cap(); test_cap > 0) blocks = std::min(blocks, test_cap);
  return Status::kSuccess;
}

// Blocks of `threads` threads of `kernel`, with `shared_bytes` of dynamic shared memory each, that fit on one SM
// of the current device at once (at least 1). The occupancy calculator's answer is cached per kernel, block size,
// shared memory and device, so a launch pays for it once.
inline Status resident_blocks_per_sm(const void* kernel, int threads, std::size_t shared_bytes, int& per_sm) {
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, std::size_t, int>, int> cache;
  const auto key = std::make_tuple(kernel, threads, shared_bytes, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto hit = cache.find(key);
    if (hit != cache.end()) {
      per_sm = hit->second;
      return Status::kSuccess;
    }
  }
  s = from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes),
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (s != Status::kSuccess) return s;
  per_sm = std::max(1, per_sm);
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = per_sm;
  return Status::kSuccess;
}

// Blocks for a persistent kernel's grid-stride loop: as many as are resident at once, and no more than the work
// needs. A fixed number of blocks per SM (grid_size) would, for a kernel with room for 2, run in waves: each
// later block starts only when an earlier one has finished its whole loop, so the order in which the grid walks
// its items would no longer be the order in which it touches memory.
template <typename Kernel>
inline Status resident_grid_size(Kernel kernel, int threads, std::int64_t work_items, std::int64_t items_per_block,
                                 unsigned& blocks, std::size_t shared_bytes = 0) {
  int per_sm = 0;
  Status s = resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, shared_bytes, per_sm);
  if (s != Status::kSuccess) return s;
  return grid_size(work_items, items_per_block, per_sm, blocks);
}

// The most dynamic shared memory `kernel` may use on the current device: its opt-in size minus its static shared
// memory (`static_bytes`).
inline Status dynamic_shared_max(const void* kernel, std::size_t& dynamic_max, std::size_t& static_bytes) {
  int device = 0, optin = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (s != Status::kSuccess) return s;
  cudaFuncAttributes attributes{};
  s = from_cuda(cudaFuncGetAttributes(&attributes, kernel), "cudaFuncGetAttributes");
  if (s != Status::kSuccess) return s;
  static_bytes = attributes.sharedSizeBytes;
  dynamic_max = static_cast<std::size_t>(optin) - static_bytes;
  return Status::kSuccess;
}

inline Status dynamic_shared_max(const void* kernel, std::size_t& dynamic_max) {
  std::size_t static_bytes = 0;
  return dynamic_shared_max(kernel, dynamic_max, static_bytes);
}

// A kernel's static shared memory and the most dynamic shared memory it may use (dynamic_shared_max), cached per
// kernel and device: for launchers that may raise a limit on every call, where the attribute queries would
// otherwise be paid again each time.
struct KernelSharedLimits {
  std::size_t static_bytes = 0;
  std::size_t dynamic_max = 0;
};

inline Status kernel_shared_limits(const void* kernel, KernelSharedLimits& limits) {
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, KernelSharedLimits> cache;
  const auto key = std::make_pair(kernel, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto hit = cache.find(key);
    if (hit != cache.end()) {
      limits = hit->second;
      return Status::kSuccess;
    }
  }
  s = dynamic_shared_max(kernel, limits.dynamic_max, limits.static_bytes);
  if (s != Status::kSuccess) return s;
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = limits;
  return Status::kSuccess;
}

// Lets the kernel use `bytes` of dynamic shared memory, where `dynamic_max` is dynamic_shared_max's answer for
// it; kUnsupportedShape when the device allows less. The limit is always set to the device's whole opt-in size,
// never to `bytes`: a limit that followed each call's shape could be lowered by one host thread (or a smaller
// call) between another's set and its launch.
inline Status set_shared_limit(const void* kernel, std::size_t bytes, std::size_t dynamic_max, const char* name) {
  if (bytes > dynamic_max)
    return fail(Status::kUnsupportedShape, std::string(name) + " needs " + std::to_string(bytes) +
                                               " bytes of shared memory, the device allows " +
                                               std::to_string(dynamic_max));
  return from_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic_max)),
      "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

// The same, asking the device for `dynamic_max`.
inline Status set_shared_limit(const void* kernel, std::size_t bytes, const char* name) {
  std::size_t dynamic_max = 0;
  const Status s = dynamic_shared_max(kernel, dynamic_max);
  if (s != Status::kSuccess) return s;
  return set_shared_limit(kernel, bytes, dynamic_max, name);
}

// Dynamic shared memory per block with which `blocks_per_sm` blocks of `kernel` fit on one SM of the current
// device: the SM's shared memory split evenly, less each block's reserved and static shared memory, and at most
// what the kernel may use (dynamic_shared_max), rounded down to 128 bytes; 0 when that leaves nothing. Where it
// is more than 0 the kernel's limit is raised (set_shared_limit) on every call: the size is cached per kernel,
// count and device (a launch pays for the queries once), but the limit belongs to the context, and a
// cudaDeviceReset leaves the next context's at the 48 KB default (FlashAttention and CUTLASS set it at every
// launch too).
inline Status shared_bytes_for_residency(const void* kernel, int blocks_per_sm, std::size_t& bytes) {
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  struct Fit {
    std::size_t bytes;
    std::size_t dynamic_max;
  };
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int>, Fit> cache;
  const auto key = std::make_tuple(kernel, blocks_per_sm, device);
  Fit fit{};
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto hit = cache.find(key);
    if (hit != cache.end()) {
      fit = hit->second;
      cached = true;
    }
  }
  if (!cached) {
    int per_sm = 0, reserved = 0;
    s = from_cuda(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
                  "cudaDeviceGetAttribute(MaxSharedMemoryPerMultiprocessor)");
    if (s != Status::kSuccess) return s;
    s = from_cuda(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device),
                  "cudaDeviceGetAttribute(ReservedSharedMemoryPerBlock)");
    if (s != Status::kSuccess) return s;
    std::size_t static_bytes = 0;
    s = dynamic_shared_max(kernel, fit.dynamic_max, static_bytes);
    if (s != Status::kSuccess) return s;
    const std::int64_t share = static_cast<std::int64_t>(per_sm) / std::max(1, blocks_per_sm) - reserved -
                               static_cast<std::int64_t>(static_bytes);
    const std::int64_t fitting =
        std::min<std::int64_t>(share, static_cast<std::int64_t>(fit.dynamic_max)) / 128 * 128;
    fit.bytes = fitting > 0 ? static_cast<std::size_t>(fitting) : 0;
    std::lock_guard<std::mutex> lock(mutex);
    cache[key] = fit;
  }
  bytes = fit.bytes;
  if (bytes > 0) return set_shared_limit(kernel, bytes, fit.dynamic_max, "shared_bytes_for_residency");
  return Status::kSuccess;
}

// The error of the launch just made (configuration errors; asynchronous faults surface later).
inline Status check_launch(const char* kernel) { return from_cuda(cudaGetLastError(), kernel); }

}  // namespace detail
}  // namespace ragged
