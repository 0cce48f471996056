// Internal device helpers shared by the segment kernels: element conversion, vector loads, the plan scan and
// the unit -> row lookup.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ragged/check.h"
#include "ragged/view.h"
#include "segment_geometry.h"

namespace ragged {
namespace detail {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// V consecutive elements moved as one access (16 bytes when V * sizeof(T) == 16).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void load_floats(const T* ptr, float (&out)[V]) {
  const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(ptr);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_float(x.v[i]);
}

template <typename T, int V>
__device__ __forceinline__ void store_floats(T* ptr, const float (&in)[V]) {
  Vec<T, V> x;
#pragma unroll
  for (int i = 0; i < V; ++i) x.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Vec<T, V>*>(ptr) = x;
}

// Row b's clamped row range (view.h), as begin and length.
template <typename OffsetT>
__device__ __forceinline__ void row_extent(const OffsetT* offsets, std::int64_t b, std::int64_t nnz,
                                           std::int64_t& begin, std::int64_t& length) {
  std::int64_t end = 0;
  clamped_row_range(offsets, b, nnz, begin, end);
  length = end - begin;
}

// The row that owns item `u` of a plan field: the b with plan[b].*field <= u < plan[b+1].*field.
// plan holds batch + 1 entries, plan[0] all zero.
__device__ __forceinline__ std::int64_t find_row(const RowWork* plan, std::int64_t batch, std::int64_t u,
                                                 std::int64_t RowWork::*field) {
  std::int64_t lo = 0, hi = batch;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (plan[mid].*field <= u) lo = mid;
    else hi = mid;
  }
  return lo;
}

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) & (kWarpSize - 1); }

__device__ __forceinline__ std::int64_t global_warp() {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
}

__device__ __forceinline__ std::int64_t total_warps() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarpSize;
}

// Which vector column and token phase a lane takes in a (chunk, tile) unit, and whether it reads at all
// (segment_geometry.h describes the layout).
struct LaneSlot {
  std::int64_t vcol;
  int phase;
  bool active;
};

__device__ __forceinline__ LaneSlot lane_slot(const SegmentGeometry& g, std::int64_t tile) {
  const int lane = lane_id();
  if (g.narrow) {
    const int phase = lane / static_cast<int>(g.vcols);
    return LaneSlot{lane % g.vcols, phase, phase < g.phases};
  }
  const std::int64_t vcol = tile * kWarpSize + lane;
  return LaneSlot{vcol, 0, vcol < g.vcols};
}

}  // namespace detail
}  // namespace ragged
