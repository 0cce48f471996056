// Which sequence holds a given row of the ragged values: a binary search over the offsets, by one thread or by a
// whole warp. Both stay inside the range they are given whatever the offsets hold (unsorted offsets give some
// sequence of the range, never an access outside it). Used by the padded -> ragged kernels (convert.cu,
// convert_tokens.cu).
#pragma once

#include <cstdint>

namespace ragged {
namespace detail {

// The largest b in [lo, hi] with offsets[b] <= row (the sequence holding `row` when offsets are sorted), or lo
// when there is none. Stays inside [lo, hi] whatever the offsets hold.
template <typename OffsetT>
__device__ __forceinline__ std::int64_t find_sequence(const OffsetT* offsets, std::int64_t lo, std::int64_t hi,
                                                      std::int64_t row) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (static_cast<std::int64_t>(offsets[mid]) <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// find_sequence by a whole warp (all lanes pass the same arguments and get the same answer): each step probes
// 32 evenly spaced entries at once and keeps the sub-range after the last one <= row, so a search over a
// million sequences takes 4 dependent loads instead of 20.
template <typename OffsetT>
__device__ std::int64_t warp_find_sequence(const OffsetT* offsets, std::int64_t lo, std::int64_t hi,
                                           std::int64_t row) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (true) {
    const std::int64_t step = (hi - lo + 1 + 31) / 32;
    const std::int64_t probe = lo + lane * step;
    const bool at_or_below = probe <= hi && static_cast<std::int64_t>(offsets[probe]) <= row;
    const unsigned ballot = __ballot_sync(0xffffffffu, at_or_below);
    if (ballot == 0) return lo;  // even offsets[lo] > row
    // The highest such lane (for sorted offsets the set lanes are a prefix); the answer lies in its step.
    lo += static_cast<std::int64_t>(31 - __clz(ballot)) * step;
    if (step == 1) return lo;
    hi = min(hi, lo + step - 1);
  }
}

}  // namespace detail
}  // namespace ragged
