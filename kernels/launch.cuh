// Internal helpers for launching kernels: grid sizing from the device's SM count and launch-error checks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace detail {

// Multiprocessors of the current device. Querying attributes is allowed during stream capture.
inline Status sm_count(int& count) {
  int device = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  return from_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
                   "cudaDeviceGetAttribute(MultiProcessorCount)");
}

// Blocks for a grid-stride loop over `work_items` items of `items_per_block`: enough to fill the device
// (`waves` blocks per SM) and no more than the work needs. Always at least 1.
inline Status grid_size(std::int64_t work_items, std::int64_t items_per_block, int waves, unsigned& blocks) {
  int sms = 0;
  Status s = sm_count(sms);
  if (s != Status::kSuccess) return s;
  const std::int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  const std::int64_t cap = static_cast<std::int64_t>(sms) * waves;
  blocks = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(needed, cap)));
  return Status::kSuccess;
}

// The error of the launch just made (configuration errors; asynchronous faults surface later).
inline Status check_launch(const char* kernel) { return from_cuda(cudaGetLastError(), kernel); }

}  // namespace detail
}  // namespace ragged
