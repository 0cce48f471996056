// Emulator stand-in for CUB's radix sort of key-value pairs (tests/emu/shim): a stable sort on the host, as one
// stream step. In double-buffer mode CUB leaves the result in the alternate buffers after an odd number of digit
// passes and in the current ones after an even number (it flips the selector on the host, per pass); this
// counts passes of 4-bit digits over [begin_bit, end_bit), so that the key widths the tests sort (max_steps from
// 1 to thousands) land in both. (CUB's own passes are 8-bit digits for large inputs on sm_80 / sm_90, and its
// single-tile path always ends in the alternate buffers: a caller must read the selector, as packing_order does.)
// No items: nothing moves, as in CUB.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cub/util_type.cuh"
#include "emu_algorithms.h"

namespace cub {

struct DeviceRadixSort {
  template <typename K, typename V, typename NumItems>
  static cudaError_t SortPairsDescending(void* temp, std::size_t& temp_bytes, DoubleBuffer<K>& keys,
                                         DoubleBuffer<V>& values, NumItems n, int begin_bit = 0,
                                         int end_bit = sizeof(K) * 8, cudaStream_t stream = nullptr) {
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes, static_cast<std::int64_t>(n));
    if (temp_bytes < ::emu::shim::temp_bytes_for(static_cast<std::int64_t>(n))) return cudaErrorInvalidValue;
    K* in_k = keys.Current();
    V* in_v = values.Current();
    const bool odd_passes = n > 0 && (end_bit - begin_bit + 3) / 4 % 2 != 0;
    K* out_k = odd_passes ? keys.Alternate() : in_k;
    V* out_v = odd_passes ? values.Alternate() : in_v;
    K* scratch_k = odd_passes ? in_k : keys.Alternate();  // what the passes leave behind: not the sorted pairs
    V* scratch_v = odd_passes ? in_v : values.Alternate();
    if (odd_passes) {
      keys.selector ^= 1;
      values.selector ^= 1;
    }
    return ::emu::shim::step_with_temp("cub::DeviceRadixSort::SortPairsDescending", temp, temp_bytes,
                                       static_cast<std::int64_t>(n), stream, [=] {
      using U = std::make_unsigned_t<K>;
      auto digit = [&](K k) {
        U u = static_cast<U>(k);
        if (std::is_signed<K>::value) u ^= U{1} << (sizeof(K) * 8 - 1);  // CUB's order for signed keys
        const int bits = end_bit - begin_bit;
        const U mask = bits >= static_cast<int>(sizeof(U) * 8) ? ~U{0} : static_cast<U>((U{1} << bits) - 1);
        return static_cast<U>((u >> begin_bit) & mask);
      };
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::int64_t a, std::int64_t b) { return digit(in_k[a]) > digit(in_k[b]); });
      std::vector<K> k(order.size());
      std::vector<V> v(order.size());
      for (std::size_t i = 0; i < order.size(); ++i) {
        k[i] = in_k[order[i]];
        v[i] = in_v[order[i]];
      }
      std::memset(static_cast<void*>(scratch_k), 0xE7, order.size() * sizeof(K));
      std::memset(static_cast<void*>(scratch_v), 0xE7, order.size() * sizeof(V));
      std::copy(k.begin(), k.end(), out_k);
      std::copy(v.begin(), v.end(), out_v);
    });
  }
};

}  // namespace cub
