// Emulator stand-in for CUB's radix sort of key-value pairs (tests/emu/shim): a stable sort on the host, as one
// stream step. Like CUB in double-buffer mode it leaves the result in the alternate buffers (the selector says
// so), which is what CUB does for an odd number of digit passes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    if (temp == nullptr) return ::emu::shim::temp_query(temp_bytes);
    K* in_k = keys.Current();
    V* in_v = values.Current();
    K* out_k = keys.Alternate();
    V* out_v = values.Alternate();
    keys.selector ^= 1;
    values.selector ^= 1;
    return ::emu::shim::step("cub::DeviceRadixSort::SortPairsDescending", stream, [=] {
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
      std::copy(k.begin(), k.end(), out_k);
      std::copy(v.begin(), v.end(), out_v);
    });
  }
};

}  // namespace cub
