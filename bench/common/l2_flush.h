// How a GPU benchmark leaves the L2 cold before each timed iteration (bench/common/gpu_timer.h).
//
// Both ways touch a buffer twice the L2's size, which evicts whatever the previous iteration left there. They
// differ in what they leave behind:
//   kClean  a kernel reads the buffer: L2 ends up holding clean lines of unrelated data, which the timed op
//           evicts for free. The default.
//   kDirty  cudaMemsetAsync writes the buffer (the only way up to commit 6a97180, the first H100 run's included):
//           L2 ends up holding up to its size in dirty lines (50 MB on an H100), which L2 writes back to DRAM
//           when the timed op's reads evict them. A 64 MiB reduction then moves up to ~114 MB, not 64.
// RAGGED_BENCH_FLUSH=dirty brings the old way back for a whole run; the `device_reduce` benchmarks of the
// segment suite time one op after each way in every run, so the difference is measured, not assumed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ragged {
namespace bench {

enum class L2Flush { kClean, kDirty };

// "clean" or "dirty".
const char* l2_flush_name(L2Flush how);

// RAGGED_BENCH_FLUSH: "clean" (or unset) or "dirty"; throws std::invalid_argument for anything else.
L2Flush l2_flush_from_env();

// Enqueues a kernel that reads `bytes` (a multiple of 16) at `buffer` (16-byte aligned) and writes at most one
// word to `sink` (what keeps the loads from being optimised away). At most `max_blocks` blocks of 256 threads.
cudaError_t read_to_evict(const void* buffer, std::size_t bytes, unsigned* sink, int max_blocks, cudaStream_t stream);

}  // namespace bench
}  // namespace ragged
