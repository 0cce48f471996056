// A lane's register tile: N items of V consecutive elements each, loaded with one vector access per item and read
// back as floats (tile(i, v)) or written back unchanged (store). Items past the count hold a pad. Between the
// loads and the first read comes widen(), once the loads of every tile used together (x and dy) are issued.
//
// How the tile is held decides how many of its loads are in flight at once. Widened to floats as they landed, the
// 16-bit tiles of segment_softmax took twice the registers, and under the softmax kernels' 128-register cap ptxas
// put each 16-byte load into the registers of the one before, after that one's conversion: the warp waited on DRAM
// once per load (sm_90 SASS, nvcc 13.0: 4 waits for a forward tile's 4 loads at V = 8, where float waits once for
// 8; in the H200 run of 087a77a bfloat16 softmax took 1.5x to 2.2x float's time per byte at D = 64 and 1024). So:
// - float: the items as loaded;
// - 16-bit, V even: the loaded 32-bit words, each widened where it is read (a shift for bfloat16, a conversion
//   for half). A pad is written into the words before the load, which then lands in them; ptxas issues all of a
//   tile's loads before the first wait;
// - 16-bit, V = 1: scalar loads into 16-bit registers, widened into a float tile by widen(), after the loads of
//   both tiles of a backward pass are issued (widened as they are read instead, the forward kernels spilled; widened
//   at the end of each tile's loads, the backward waited on x before issuing dy).
// The widening is exact, so every variant reads the same floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "element_convert.cuh"
#include "segment_common.cuh"

namespace ragged {
namespace detail {

template <typename T, int N, int V, typename Enable = void>
struct RegisterTile {
  static_assert(sizeof(T) == sizeof(float), "float items");
  float item[N][V];

  __device__ __forceinline__ float operator()(int i, int v) const { return item[i][v]; }
  __device__ __forceinline__ void widen() {}
  // Items 0 .. n - 1 from at(i), the others `pad`.
  template <typename At>
  __device__ __forceinline__ void load(int n, At at, float pad) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i < n) {
        load_floats<T, V>(at(i), item[i]);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) item[i][v] = pad;
      }
    }
  }
  // Item i written back in T, exactly (its values came from T).
  __device__ __forceinline__ void store(int i, T* at) const { store_floats<T, V>(at, item[i]); }
};

// 16-bit elements, V even: V / 2 words per item.
template <typename T, int N, int V>
struct RegisterTile<T, N, V, std::enable_if_t<sizeof(T) == 2 && V % 2 == 0>> {
  static constexpr int kWords = V / 2;
  std::uint32_t word[N][kWords];

  __device__ __forceinline__ float operator()(int i, int v) const {
    const std::uint16_t bits = static_cast<std::uint16_t>(v % 2 ? word[i][v / 2] >> 16 : word[i][v / 2]);
    T t;
    memcpy(&t, &bits, sizeof(T));
    return to_float(t);
  }
  __device__ __forceinline__ void widen() {}
  template <typename At>
  __device__ __forceinline__ void load(int n, At at, float pad) {
    const T p = from_float<T>(pad);  // the pads used (-inf, 0) are exact in 16 bits
    std::uint16_t bits;
    memcpy(&bits, &p, sizeof(T));
    const std::uint32_t pad_word = bits | static_cast<std::uint32_t>(bits) << 16;
#pragma unroll
    for (int i = 0; i < N; ++i) {
#pragma unroll
      for (int k = 0; k < kWords; ++k) word[i][k] = pad_word;
      if (i < n) {
        const Vec<std::uint32_t, kWords> w = *reinterpret_cast<const Vec<std::uint32_t, kWords>*>(at(i));
#pragma unroll
        for (int k = 0; k < kWords; ++k) word[i][k] = w.v[k];
      }
    }
  }
  __device__ __forceinline__ void store(int i, T* at) const {
    Vec<std::uint32_t, kWords> w;
#pragma unroll
    for (int k = 0; k < kWords; ++k) w.v[k] = word[i][k];
    *reinterpret_cast<Vec<std::uint32_t, kWords>*>(at) = w;
  }
};

// 16-bit elements, V = 1.
template <typename T, int N>
struct RegisterTile<T, N, 1, std::enable_if_t<sizeof(T) == 2>> {
  float item[N][1];

  __device__ __forceinline__ float operator()(int i, int) const { return item[i][0]; }
  T raw[N];

  template <typename At>
  __device__ __forceinline__ void load(int n, At at, float pad) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      raw[i] = from_float<T>(pad);
      if (i < n) raw[i] = *at(i);
    }
  }
  __device__ __forceinline__ void widen() {
#pragma unroll
    for (int i = 0; i < N; ++i) item[i][0] = to_float(raw[i]);
  }
  __device__ __forceinline__ void store(int i, T* at) const { *at = from_float<T>(item[i][0]); }
};

}  // namespace detail
}  // namespace ragged
