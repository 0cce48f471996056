// Internal: a search of a sorted sequence by a whole warp, for kernels that map a flat work index to its owner.
#pragma once

#include <cstdint>

namespace ragged {
namespace detail {

// The last i in [0, n) for which below(i) holds, where below holds on a prefix of [0, n) (a sorted key compared
// with a target), or -1 when it holds nowhere. Every lane of the warp calls it with the same arguments and gets
// the same answer. Each round the lanes probe 32 evenly spaced candidates at once, so 10^6 candidates take 4
// dependent rounds where a binary search takes 20. With an unsorted key (malformed input) the answer is still
// -1 or an index in [0, n).
template <typename Below>
__device__ __forceinline__ std::int64_t warp_search_last(std::int64_t n, Below below) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  std::int64_t lo = 0, hi = n;  // the answer lies in [lo, hi)
  while (true) {
    const std::int64_t step = (hi - lo + 31) / 32;
    const std::int64_t probe = lo + lane * step;
    const unsigned hits = __ballot_sync(0xffffffffu, probe < hi && below(probe));
    if (hits == 0) return -1;  // only in the first round: lane 0 probes lo, a hit of the round before
    lo += static_cast<std::int64_t>(31 - __clz(static_cast<int>(hits))) * step;
    hi = min(hi, lo + step);
    if (hi - lo <= 1) return lo;
  }
}

}  // namespace detail
}  // namespace ragged
