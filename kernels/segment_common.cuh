// Internal device helpers shared by the segment kernels: element conversion, vector loads, the plan scan and
// the unit -> row lookup.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "element_convert.cuh"
#include "ragged/check.h"
#include "ragged/view.h"
#include "segment_geometry.h"
#include "segment_launch.h"

namespace ragged {
namespace detail {

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

// The combine step shared by every segment op: the warp merges, in chunk order, the partials of the multi-chunk
// row that owns combine unit `u` (lanes take (column, phase) pairs for D <= 32, else one column of a 32-column
// tile each), then calls finish(b, col, acc, length) on the lane that holds each column's result.
// `load(at)` reads the partial at flat index `at` = chunk * D + col. Acc needs merge() and shfl().
template <typename Acc, typename OffsetT, typename Load, typename Finish>
__device__ __forceinline__ void combine_unit(const SegmentLayout<OffsetT>& L, std::int64_t u, Load load,
                                             Finish finish) {
  const SegmentGeometry& g = L.geometry;
  const std::int64_t D = g.inner;
  const int lane = lane_id();
  const std::int64_t b = find_row(L.plan, L.batch, u, &RowWork::combine_units);
  const std::int64_t tile = u - L.plan[b].combine_units;
  std::int64_t begin = 0, length = 0;
  row_extent(L.offsets, b, L.nnz, begin, length);
  const std::int64_t chunks = chunks_of(length, g);
  const std::int64_t first = L.plan[b].partials;
  const bool narrow = D <= kWarpSize;
  const std::int64_t col = narrow ? lane % D : tile * kWarpSize + lane;
  const int phase = narrow ? lane / static_cast<int>(D) : 0;
  const bool active = narrow ? phase < g.combine_phases : col < D;
  Acc acc;
  if (active)
    for (std::int64_t k = phase; k < chunks && first + k < L.partial_capacity; k += g.combine_phases)
      acc.merge(load((first + k) * D + col));
  if (narrow)
    for (int q = 1; q < g.combine_phases; ++q) {
      const Acc other = acc.shfl(static_cast<int>(col + q * D));
      if (phase == 0) acc.merge(other);
    }
  if (narrow ? phase == 0 : active) finish(b, col, acc, length);
}

}  // namespace detail
}  // namespace ragged
