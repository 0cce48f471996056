// Programmatic dependent launch (sm_90+): a kernel launched with launch_after_prior may start while the kernel
// before it in the stream is still running, so that its launch and the work that does not need that kernel's
// results overlap the other's tail. Why: an op here is a chain of dependent launches (a segment op 2-3, the
// per-step RNN path one or two per step, hundreds per layer), and each boundary costs a drain of the grid and a
// launch before the next kernel's first load.
//
// The contract, for every kernel launched with launch_after_prior:
//   - before wait_for_prior_grid() it reads only what was complete before the op's first (ordinarily launched)
//     kernel started: its inputs, weights, batch sizes, input projections; never what the kernel before it
//     writes, and it writes no global memory;
//   - every thread reaches wait_for_prior_grid() before it exits, so that the grid cannot complete before the one
//     it follows (completion then stays ordered along the chain, and an ordinary launch after it waits for all).
// A kernel that others follow is launched through launch_after_prior too (after_prior false for the chain's
// first) and may call allow_dependent_grid(): the next grid may then be scheduled once every block of this one
// has called it or exited (its blocks wait at their wait_for_prior_grid() for this grid's end and its memory).
// On devices before sm_90, or with RAGGED_DEPENDENT_LAUNCH=0 in the environment, the launches are ordinary and
// both calls do nothing. The kernel emulator (tests/emu) replaces this file: it runs each block's
// code before the wait with the bytes the previous kernel changed unreadable and the rest of device memory
// read-only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "dependent_launch.h"
#include "ragged/status.h"

namespace ragged {
namespace detail {

// Waits until the grid this one follows has completed and its writes are visible (griddepcontrol.wait); returns
// at once for an ordinary launch.
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Lets the grid that follows this one (launched with launch_after_prior) be scheduled once every block of this
// grid has called it or exited (griddepcontrol.launch_dependents).
__device__ __forceinline__ void allow_dependent_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Launches kernel<<<grid, block, shared, stream>>>(args...), as a programmatic dependent of the kernel before it
// in the stream when `after_prior` (else an ordinary launch); `name` labels a launch error.
template <typename... Params, typename... Args>
Status launch_after_prior(bool after_prior, const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                          std::size_t shared, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = after_prior ? 1 : 0;
  return from_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
}

}  // namespace detail
}  // namespace ragged
