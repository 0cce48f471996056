// Emulator replacement for kernels/grid_dependency.cuh (tests/emu/build.sh copies it over the original). The
// launch goes through emu::launch_body, which records what the kernel writes, and, after_prior, runs each block
// to its wait with what the kernel before it wrote unreadable and the rest of device memory read-only
// (cuda_emu.h): what the original's contract asks of code before the wait.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "dependent_launch.h"
#include "ragged/status.h"

namespace ragged {
namespace detail {

__device__ __forceinline__ void wait_for_prior_grid() { ::emu::wait_for_prior_grid(); }
__device__ __forceinline__ void allow_dependent_grid() { ::emu::allow_dependent_grid(); }

template <typename... Params, typename... Args>
Status launch_after_prior(bool after_prior, const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                          std::size_t shared, cudaStream_t stream, Args&&... args) {
  ::emu::launch_body(
      name, ::emu::config_of(kernel, ::emu::config(grid, block, shared, stream)),
      [kernel, emu_args = std::make_tuple(std::decay_t<Params>(std::forward<Args>(args))...)] {
        std::apply(kernel, emu_args);
      },
      false, after_prior, true);
  return from_cuda(cudaGetLastError(), name);
}

}  // namespace detail
}  // namespace ragged
