// Internal device helpers shared by the segment kernels: element conversion, vector loads, the plan scan and
// the unit -> row lookup.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "element_convert.cuh"
#include "launch.cuh"
#include "ragged/check.h"
#include "ragged/view.h"
#include "segment_geometry.h"
#include "segment_launch.h"
#include "validate.h"
#include "warp_search.cuh"

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

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) & (kWarpSize - 1); }

__device__ __forceinline__ std::int64_t global_warp() {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
}

__device__ __forceinline__ std::int64_t total_warps() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarpSize;
}

__device__ __forceinline__ RowWork shfl_row_work(const RowWork& w, int src) {
  return RowWork{__shfl_sync(0xffffffffu, w.units, src), __shfl_sync(0xffffffffu, w.partials, src),
                 __shfl_sync(0xffffffffu, w.combine_units, src), __shfl_sync(0xffffffffu, w.second_units, src)};
}

// Inclusive scan of w over the lanes of the warp (lane order).
__device__ __forceinline__ RowWork warp_inclusive_scan(RowWork w) {
  const int lane = lane_id();
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const RowWork other = shfl_row_work(w, lane >= d ? lane - d : lane);
    if (lane >= d) w = w + other;
  }
  return w;
}

// The group of rows that owns item `u` of a plan field: the largest g < groups with plan[g].*field <= u (then
// u < plan[g + 1].*field), found by the whole warp.
__device__ __forceinline__ std::int64_t find_group(const RowWork* plan, std::int64_t groups, std::int64_t u,
                                                   std::int64_t RowWork::*field) {
  const std::int64_t g = warp_search_last(groups, [&](std::int64_t i) { return plan[i].*field <= u; });
  return g < 0 ? 0 : g;  // plan[0] is all zero, so g >= 0
}

// Where item `u` of a plan field lies: the row that owns it and the work of the rows before that row.
struct RowLocation {
  std::int64_t row;
  RowWork before;
};

// Called by the whole warp with the same u < plan[groups].*field: finds the group, then scans the RowWork of the
// group's rows, 32 at a time, until the row whose range of the field holds u.
template <typename OffsetT>
__device__ __forceinline__ RowLocation locate_row(const SegmentLayout<OffsetT>& L, std::int64_t u,
                                                  std::int64_t RowWork::*field) {
  const std::int64_t group = find_group(L.plan, row_groups(L.batch), u, field);
  RowWork base = L.plan[group];
  const std::int64_t first_row = group * kRowsPerGroup;
  const std::int64_t last_row = min(L.batch, first_row + kRowsPerGroup) - 1;
  for (std::int64_t first = first_row; first <= last_row; first += kWarpSize) {
    const std::int64_t b = first + lane_id();
    RowWork w;
    if (b <= last_row) {
      std::int64_t begin = 0, length = 0;
      row_extent(L.offsets, b, L.nnz, begin, length);
      w = row_work(length, L.geometry);
    }
    const RowWork inclusive = warp_inclusive_scan(w);
    const RowWork before = base + inclusive - w;
    const unsigned owner = __ballot_sync(0xffffffffu, before.*field <= u && u < before.*field + w.*field);
    if (owner != 0) {
      const int src = __ffs(owner) - 1;
      return RowLocation{first + src, shfl_row_work(before, src)};
    }
    base = base + shfl_row_work(inclusive, kWarpSize - 1);
  }
  // Not reached: the row pass summed these same RowWork values into the plan. Any row keeps accesses in bounds.
  return RowLocation{last_row, base};
}

// The row pass, a warp per group of kRowsPerGroup rows (grid-stride), kWarpSize rows at a time with a lane per
// row. A tiny non-empty row is finished by its lane, tiny(b, begin, length) (lanes diverge there); the empty rows
// of each 32 are handed to the whole warp, empty(first, mask) (bit i: row first + i). The RowWork of the other
// rows is summed into the group's entry of group_work, which the plan scans.
// The many-tiny-rows regime is latency-bound (offsets -> values -> store per row), so all the group's offsets
// are loaded first, one per lane per 32 rows plus the group's end (one memory round trip per group instead of
// one per 32 rows), and a row's end comes from the next lane by a shuffle.
template <typename OffsetT, typename Tiny, typename Empty>
__device__ __forceinline__ void row_pass(const SegmentLayout<OffsetT>& L, Tiny tiny, Empty empty) {
  constexpr int kBatches = static_cast<int>(kRowsPerGroup / kWarpSize);
  const int lane = lane_id();
  const std::int64_t groups = row_groups(L.batch);
  for (std::int64_t group = global_warp(); group < groups; group += total_warps()) {
    const std::int64_t first_row = group * kRowsPerGroup;
    const std::int64_t end = min(L.batch, first_row + kRowsPerGroup);
    OffsetT raw[kBatches + 1];  // raw[j] = offsets[first_row + 32 j + lane] (offsets has batch + 1 entries)
#pragma unroll
    for (int j = 0; j <= kBatches; ++j) {
      const std::int64_t at = first_row + j * kWarpSize + lane;
      raw[j] = at <= L.batch && (j < kBatches || lane == 0) ? L.offsets[at] : OffsetT{0};
    }
    RowWork sum;
#pragma unroll
    for (int j = 0; j < kBatches; ++j) {
      const std::int64_t first = first_row + j * kWarpSize;
      if (first >= end) break;  // warp-uniform
      const OffsetT next = __shfl_down_sync(0xffffffffu, raw[j], 1);       // offsets[b + 1] for lanes < 31
      const OffsetT after = __shfl_sync(0xffffffffu, raw[j + 1], 0);       // offsets[first + 32], for lane 31
      const std::int64_t b = first + lane;
      const bool in_group = b < end;
      std::int64_t begin = 0, stop = 0;
      clamp_row_range(static_cast<std::int64_t>(raw[j]), static_cast<std::int64_t>(lane == kWarpSize - 1 ? after : next),
                      L.nnz, begin, stop);
      const std::int64_t length = in_group ? stop - begin : 0;
      if (length > 0) {
        if (is_tiny(length, L.geometry)) tiny(b, begin, length);
        else sum = sum + row_work(length, L.geometry);
      }
      const unsigned empties = __ballot_sync(0xffffffffu, in_group && length == 0);
      if (empties != 0) empty(first, empties);
    }
    for (int d = 1; d < kWarpSize; d <<= 1) sum = sum + shfl_row_work(sum, lane ^ d);
    if (lane == 0) L.group_work[group] = sum;
  }
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

// The combine step shared by every segment op, called by the whole warp: merges, in chunk order, the partials of
// the multi-chunk row that owns combine unit `u` (lanes take (column, phase) pairs for D <= 32, else one column
// of a 32-column tile each), then calls finish(b, col, acc, length, first) on the lane that holds each column's
// result (first: the row's first partial slot).
// `load(at)` reads the partial at flat index `at` = chunk * D + col. Acc needs merge() and shfl().
template <typename Acc, typename OffsetT, typename Load, typename Finish>
__device__ __forceinline__ void combine_unit(const SegmentLayout<OffsetT>& L, std::int64_t u, Load load,
                                             Finish finish) {
  const SegmentGeometry& g = L.geometry;
  const std::int64_t D = g.inner;
  const int lane = lane_id();
  const RowLocation at = locate_row(L, u, &RowWork::combine_units);
  const std::int64_t b = at.row;
  const std::int64_t tile = u - at.before.combine_units;
  std::int64_t begin = 0, length = 0;
  row_extent(L.offsets, b, L.nnz, begin, length);
  const std::int64_t chunks = chunks_of(length, g);
  const std::int64_t first = at.before.partials;
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
  if (narrow ? phase == 0 : active) finish(b, col, acc, length, first);
}

// Threads per block of every segment kernel.
constexpr int kSegmentThreads = 256;

// Blocks for a persistent segment kernel that walks `warp_items` warp-sized items.
template <typename Kernel>
inline Status persistent_grid(Kernel kernel, std::int64_t warp_items, unsigned& blocks) {
  return resident_grid_size(kernel, kSegmentThreads, warp_items, kSegmentThreads / kWarpSize, blocks);
}

// The first two launches of every segment op: its row pass (`rows_kernel`, a kernel calling row_pass, which
// finishes the tiny and empty rows and writes group_work), then the plan scan of group_work.
template <typename Args, typename OffsetT>
inline Status build_plan(void (*rows_kernel)(Args), const Args& args, const SegmentLayout<OffsetT>& L,
                         const char* kernel_name, cudaStream_t stream) {
  unsigned blocks = 0;
  RAGGED_RETURN_IF_ERROR(persistent_grid(rows_kernel, row_groups(L.batch), blocks));
  rows_kernel<<<blocks, kSegmentThreads, 0, stream>>>(args);
  RAGGED_RETURN_IF_ERROR(check_launch(kernel_name));
  std::size_t bytes = L.cub_temp_bytes;
  return launch_segment_plan(L.cub_temp, bytes, L.group_work, row_groups(L.batch), L.plan, stream);
}

}  // namespace detail
}  // namespace ragged
