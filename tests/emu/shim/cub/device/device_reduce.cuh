// Emulator stand-in for CUB's device reductions (tests/emu), computed on the host as one stream step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "emu_algorithms.h"

namespace cub {

struct DeviceReduce {
  template <typename In, typename Out, typename NumItems, typename Op, typename T>
  static cudaError_t Reduce(void* temp, std::size_t& temp_bytes, In in, Out out, NumItems n, Op op, T init,
                            cudaStream_t stream = nullptr) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, static_cast<std::int64_t>(n));
    return ::emu::shim::step_with_temp("cub::DeviceReduce::Reduce", temp, temp_bytes, static_cast<std::int64_t>(n),
                                       stream, [=]() mutable {
      T acc = init;
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) acc = op(acc, in[i]);
      *out = acc;
    });
  }

  // CUB sums in a tree; this sums in order, in the output's type from 0, which the callers' tolerances absorb.
  template <typename In, typename Out, typename NumItems>
  static cudaError_t Sum(void* temp, std::size_t& temp_bytes, In in, Out out, NumItems n,
                         cudaStream_t stream = nullptr) {
    using T = typename std::remove_reference<decltype(*out)>::type;
    return Reduce(temp, temp_bytes, in, out, n, [](T a, T b) { return a + b; }, T{}, stream);
  }
};

}  // namespace cub
