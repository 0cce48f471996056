// Emulator stand-in for CUB's segmented reductions (tests/emu/shim), as far as the benchmarks call them: Sum, Max
// and ArgMax over [begin[i], end[i]), computed on the host as one stream step. Empty segments get what CUB
// documents: 0 for Sum, the lowest value for Max, {1, lowest} for ArgMax.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cub/util_type.cuh"
#include "emu_algorithms.h"

namespace cub {

struct DeviceSegmentedReduce {
  template <typename In, typename Out, typename Begin, typename End>
  static cudaError_t Sum(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t segments, Begin begin,
                         End end, cudaStream_t stream = nullptr) {
    using T = std::remove_cv_t<std::remove_reference_t<decltype(in[0])>>;
    return fold("cub::DeviceSegmentedReduce::Sum", temp, temp_bytes, in, out, segments, begin, end, stream, T{},
                [](T acc, T x) { return acc + x; });
  }

  template <typename In, typename Out, typename Begin, typename End>
  static cudaError_t Max(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t segments, Begin begin,
                         End end, cudaStream_t stream = nullptr) {
    using T = std::remove_cv_t<std::remove_reference_t<decltype(in[0])>>;
    return fold("cub::DeviceSegmentedReduce::Max", temp, temp_bytes, in, out, segments, begin, end, stream,
                std::numeric_limits<T>::lowest(), [](T acc, T x) { return acc < x ? x : acc; });
  }

  template <typename In, typename Out, typename Begin, typename End>
  static cudaError_t ArgMax(void* temp, std::size_t& temp_bytes, In in, Out out, std::int64_t segments, Begin begin,
                            End end, cudaStream_t stream = nullptr) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, segments);
    return ::emu::shim::step_with_temp("cub::DeviceSegmentedReduce::ArgMax", temp, temp_bytes, segments, stream, [=] {
      using T = std::remove_cv_t<std::remove_reference_t<decltype(in[0])>>;
      for (std::int64_t s = 0; s < segments; ++s) {
        KeyValuePair<int, T> best(1, std::numeric_limits<T>::lowest());
        for (std::int64_t i = begin[s]; i < end[s]; ++i) {
          const int key = static_cast<int>(i - begin[s]);
          if (i == begin[s] || best.value < in[i]) best = KeyValuePair<int, T>(key, in[i]);
        }
        out[s] = best;
      }
    });
  }

 private:
  // out[s] = op(...op(op(init, in[begin[s]]), in[begin[s] + 1])..., in[end[s] - 1]) for every segment s.
  template <typename In, typename Out, typename Begin, typename End, typename T, typename Op>
  static cudaError_t fold(const char* name, void* temp, std::size_t& temp_bytes, In in, Out out,
                          std::int64_t segments, Begin begin, End end, cudaStream_t stream, T init, Op op) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, segments);
    return ::emu::shim::step_with_temp(name, temp, temp_bytes, segments, stream, [=] {
      for (std::int64_t s = 0; s < segments; ++s) {
        T acc = init;
        for (std::int64_t i = begin[s]; i < end[s]; ++i) acc = op(acc, in[i]);
        out[s] = acc;
      }
    });
  }
};

}  // namespace cub
