// Emulator stand-in for CUB's device scans (tests/emu): the same calls and the same two-phase temporary storage
// query, computed on the host as one step of the stream (or of the graph it is capturing).
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu_algorithms.h"

namespace cub {

struct DeviceScan {
  template <typename In, typename Out, typename Op, typename NumItems>
  static cudaError_t InclusiveScan(void* temp, std::size_t& temp_bytes, In in, Out out, Op op, NumItems n,
                                   cudaStream_t stream = nullptr) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, static_cast<std::int64_t>(n));
    return ::emu::shim::step_with_temp("cub::DeviceScan::InclusiveScan", temp, temp_bytes, static_cast<std::int64_t>(n),
                                       stream, [=]() mutable {
      if (n <= 0) return;
      auto acc = in[0];
      out[0] = acc;
      for (std::int64_t i = 1; i < static_cast<std::int64_t>(n); ++i) out[i] = acc = op(acc, in[i]);
    });
  }
  template <typename In, typename Out, typename NumItems>
  static cudaError_t InclusiveSum(void* temp, std::size_t& temp_bytes, In in, Out out, NumItems n,
                                  cudaStream_t stream = nullptr) {
    return InclusiveScan(temp, temp_bytes, in, out, [](auto a, auto b) { return a + b; }, n, stream);
  }
  template <typename In, typename Out, typename NumItems>
  static cudaError_t ExclusiveSum(void* temp, std::size_t& temp_bytes, In in, Out out, NumItems n,
                                  cudaStream_t stream = nullptr) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, static_cast<std::int64_t>(n));
    return ::emu::shim::step_with_temp("cub::DeviceScan::ExclusiveSum", temp, temp_bytes, static_cast<std::int64_t>(n),
                                       stream, [=]() mutable {
      if (n <= 0) return;
      auto acc = in[0];
      acc = acc - acc;
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
        const auto x = in[i];
        out[i] = acc;
        acc = acc + x;
      }
    });
  }
};

}  // namespace cub
