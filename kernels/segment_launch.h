// Internal: launch arguments and launchers of the segment kernels (kernels/segment_*.cu), called by
// src/segment_reduce.cpp after it has validated the arguments and laid out the workspace.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "launch.cuh"
#include "ragged/segment_reduce.h"
#include "ragged/status.h"
#include "segment_geometry.h"

namespace ragged {
namespace detail {

// Elements per lane per unit (divided by the vector width V to get tokens per lane). Reductions stream, so a
// unit is up to 32 * 256 elements; the softmax family keeps its unit in registers (32 floats per lane forward,
// 16 of each input backward) so that a row of one unit is read once.
constexpr int kReduceFloatsPerLane = 256;
constexpr int kSoftmaxFloatsPerLane = 32;
constexpr int kSoftmaxBackwardFloatsPerLane = 16;

// Whether segment_reduce and segment_softmax stream the short rows of geometries that allow it (streams_rows,
// softmax_streams_rows: segment_geometry.h); on unless the process started with RAGGED_SEGMENT_STREAM=0. Not
// thread-safe to change: tests set it to compare the streams with the unit walk.
bool segment_stream_enabled();
void set_segment_stream_enabled(bool enabled);

// How many groups of loads ahead segment_reduce's stream loop asks L2 for the data it will load
// (prefetch.global.L2: no registers held, nothing to wait for), and whether the segment ops' row pass asks for
// the offsets of its groups ahead: kSegmentPrefetchGroups unless the process started with RAGGED_SEGMENT_PREFETCH
// set to 0 (off) .. 4. Not thread-safe to change, as above.
constexpr int kSegmentPrefetchGroups = 2;
constexpr int kSegmentMaxPrefetchGroups = 4;
int segment_prefetch_groups();
void set_segment_prefetch_groups(int groups);

// Whether the row passes of segment_reduce and segment_softmax (forward and backward) ask L2 for the values of the
// rows they will load next while they finish the current ones (prefetch.global.L2): the warp rows at D = 1
// (warp_row_pass), the sub-warp rows (subwarp_row_pass) and the wide short rows (wide_short_row_pass, which also asks
// for the current row's later column tiles), and segment_softmax's units of several register tiles (16-bit elements
// with 16-byte vectors: forward at D > 64, backward at D > 128) ask for their later tiles (normalize_unit); on unless
// the process started with RAGGED_SEGMENT_ROW_PREFETCH=0. The same results either way (a prefetch loads nothing into
// registers); read when src/segment_reduce.cpp lays out the workspace. Not thread-safe to change, as above.
bool segment_row_prefetch_enabled();
void set_segment_row_prefetch_enabled(bool enabled);

// Whether segment_reduce's and segment_softmax's row pass at D = 1 is their scalar kernel (scalar_row_pass,
// segment_common.cuh: 32-bit indices, a lane per tiny or empty row) where every element index fits 32 bits; on
// unless the process started with RAGGED_SEGMENT_SCALAR_ROWS=0 (then row_pass, as at every other D). The same
// results either way. Not thread-safe to change, as above.
bool segment_scalar_rows_enabled();
void set_segment_scalar_rows_enabled(bool enabled);

// Whether the row pass at D = 1 (the scalar one) of segment_reduce and segment_softmax (forward and backward) also
// finishes the rows of more than tiny_tokens and at most kWarpRowTokens tokens, a warp per row (is_warp_row,
// segment_geometry.h); on unless the process started with RAGGED_SEGMENT_WARP_ROWS=0 (those rows then take the first
// pass's streams, or its units where a softmax row does not fit a window). The same results either way (the same
// order of operations); read by take_warp_rows. Not thread-safe to change, as above.
bool segment_warp_rows_enabled();
void set_segment_warp_rows_enabled(bool enabled);

// Whether segment_reduce's and segment_softmax's (forward and backward) row pass finishes the rows of at most
// kSubwarpRowTokens tokens at D > 32 with a sub-warp per row (subwarp_rows_fit, segment_geometry.h); on unless the
// process started with RAGGED_SEGMENT_SUBWARP_ROWS=0 (those rows then take the first pass's streams and units, as
// before 2026-11-29). Read when the geometry is made (src/segment_reduce.cpp). Not thread-safe to change, as above.
bool segment_subwarp_rows_enabled();
void set_segment_subwarp_rows_enabled(bool enabled);

// Whether the first-pass kernels of segment_reduce and segment_softmax (forward and backward) merge the nodes of
// their merge trees that are wider than a warp through shared memory (stages_merges, segment_geometry.h), where the
// geometry allows it; on unless the process started with RAGGED_SEGMENT_STAGED_MERGES=0 (then a column at a time
// through registers, as before 2026-11-30). The same results either way; read when src/segment_reduce.cpp lays
// out the workspace. Not thread-safe to change, as above.
bool segment_staged_merges_enabled();
void set_segment_staged_merges_enabled(bool enabled);

// The most merge staging a warp of a first-pass kernel takes, in bytes: kMergeStageBytes unless a test lowered it
// (to kMergeStageMinBytes at least: a value is rounded down to kMergeStageBytes / 2^k, below the least to 0, the
// staging off). The launchers take less where the device's shared memory asks it (fit_merge_stage_bytes). Not
// thread-safe to change, as above.
int segment_merge_stage_cap();
void set_segment_merge_stage_cap(int bytes);

// Whether segment_softmax holds its block rows in shared memory (is_block_row: segment_geometry.h); on unless
// the process started with RAGGED_SEGMENT_BLOCK_ROWS=0 (those rows then take the chunks and the second pass).
// Not thread-safe to change, as above.
bool segment_block_rows_enabled();
void set_segment_block_rows_enabled(bool enabled);

// The softmax's geometry at vector width `vec`: its unit is one register tile of kSoftmax(Backward)FloatsPerLane
// per lane, or several where that holds too few tokens (softmax_min_chunk_tokens). block_tokens stays 0: the
// launcher sets it from the device (softmax_block_tokens below).
inline SegmentGeometry make_softmax_geometry(std::int64_t inner, int vec, std::size_t elem_size, bool backward,
                                             bool subwarp_rows = false) {
  const int floats = backward ? kSoftmaxBackwardFloatsPerLane : kSoftmaxFloatsPerLane;
  return make_segment_geometry(inner, vec, floats / vec, kLocalFinishChunks,
                               softmax_min_chunk_tokens(backward, elem_size), subwarp_rows);
}

// What every segment kernel reads: the ragged layout, its geometry and plan, and the partials scratch.
template <typename OffsetT>
struct SegmentLayout {
  const OffsetT* offsets = nullptr;
  std::int64_t batch = 0;
  std::int64_t nnz = 0;
  SegmentGeometry geometry;
  RowWork* group_work = nullptr;  // [row_groups(batch)]: the row pass's sum of RowWork per group of rows
  RowWork* plan = nullptr;        // [row_groups(batch) + 1]: plan[0] = 0, plan[g + 1] = plan[g] + group_work[g]
  void* cub_temp = nullptr;       // the plan scan's CUB storage (none when plan_scanned_in_kernel(batch))
  std::size_t cub_temp_bytes = 0;
  std::int64_t partial_capacity = 0;  // chunks the partial arrays hold (each chunk: D entries)
  // [partial_capacity * tiles]: the merge trees' arrival counters (merge_tile_partials), zeroed by the row pass;
  // null when the op keeps no partials (reduce backward).
  int* arrivals = nullptr;
  // L2 prefetch distance in groups of loads (segment_prefetch_groups, read when src/segment_reduce.cpp lays out
  // the workspace): segment_reduce's unit and stream loops use it; every op's row pass prefetches its offsets two
  // groups ahead unless it is 0.
  int prefetch_groups = 0;
  // Whether the row passes ask L2 for the rows they load next, and the softmax's units of several register tiles
  // for their later tiles (segment_row_prefetch_enabled, read when src/segment_reduce.cpp lays out the workspace).
  bool prefetch_rows = false;
  // Whether segment_reduce's unit loop asks L2 for a unit's whole data when it starts (prefetch_unit,
  // segment_common.cuh): set by its launcher on small inputs (take_unit_prefetch, below).
  bool prefetch_units = false;
  // Bytes of merge staging per warp after the plan in the first-pass kernel's shared memory, through which it merges
  // wide nodes; 0: none. src/segment_reduce.cpp asks for kMergeStageBytes where stages_merges(geometry) and
  // segment_staged_merges_enabled() (segment_merge_stage_cap() at most), and the launcher lowers it to what fits
  // the device (fit_first_pass_shared).
  int merge_stage_bytes = 0;
};

// Inputs of at most this many bytes of values take the unit prefetch (prefetch_units). A quarter of the smallest L2
// of the data-centre GPUs ragged builds for (A100: 40 MB) would be 10 MB; 4 MB leaves room on smaller parts.
constexpr std::int64_t kUnitPrefetchMaxBytes = std::int64_t{4} << 20;

// Sets L.prefetch_units for segment_reduce's launch: where the L2 prefetch is on (prefetch_groups > 0) and the
// values hold at most kUnitPrefetchMaxBytes. Why: a unit is up to 8 groups of loads a lane (256 elements a lane,
// at most 128 bytes a group), each waiting for the one before, so a warp with one unit to do waits up to 8 DRAM round
// trips in a row; on a small input few warps have work, and nothing else hides that (one row of 4096 floats: 4
// groups, in ragged's ~14 us against CUB's ~4, H200, 087a77a). Asked for whole when it starts, the unit's later
// groups meet L2. Why only small inputs: on large ones every warp has units, DRAM is busy anyway, and asking each
// unit whole would put far more than L2 in flight (an earlier prefetch 2 groups ahead made the unit walk 4-11%
// slower on 64 MiB inputs, H200, a910134). The same bits either way; the choice depends on the input's size, not
// on any row.
template <typename OffsetT>
inline void take_unit_prefetch(SegmentLayout<OffsetT>& L, std::size_t elem_size) {
  const std::int64_t row_bytes = std::max<std::int64_t>(L.geometry.inner, 1) * static_cast<std::int64_t>(elem_size);
  L.prefetch_units = L.prefetch_groups > 0 && L.nnz <= kUnitPrefetchMaxBytes / row_bytes;
}

// plan[0] = 0 and CUB's inclusive scan of the `groups` entries of group_work into plan + 1. With
// d_cub_temp == nullptr only sets cub_temp_bytes.
Status launch_segment_plan(void* d_cub_temp, std::size_t& cub_temp_bytes, const RowWork* d_group_work,
                           std::int64_t groups, RowWork* d_plan, cudaStream_t stream);

template <typename T, typename OffsetT>
struct SegmentReduceArgs {
  SegmentLayout<OffsetT> layout;
  const T* values = nullptr;
  ReduceOp op = ReduceOp::kSum;
  T* out = nullptr;
  std::int64_t* arg = nullptr;
  float empty_value = 0.0f;
  float* partial_value = nullptr;        // [partial_capacity * D]
  std::int64_t* partial_index = nullptr; // [partial_capacity * D], kMax / kMin only
};

template <typename T, typename OffsetT>
Status launch_segment_reduce(const SegmentReduceArgs<T, OffsetT>& args, cudaStream_t stream);

template <typename T, typename OffsetT>
struct SegmentReduceBackwardArgs {
  SegmentLayout<OffsetT> layout;
  ReduceOp op = ReduceOp::kSum;
  const T* grad_out = nullptr;
  const std::int64_t* arg = nullptr;
  T* grad_in = nullptr;
};

template <typename T, typename OffsetT>
Status launch_segment_reduce_backward(const SegmentReduceBackwardArgs<T, OffsetT>& args, cudaStream_t stream);

// Softmax forward (x -> y) and backward (y, dy -> dx) share one kernel family: a statistic per row and column
// (max and sum of exponentials; or the sum of dy * y / of dy), then an elementwise write.
template <typename T, typename OffsetT>
struct SegmentSoftmaxArgs {
  SegmentLayout<OffsetT> layout;
  bool log = false;
  bool backward = false;
  const T* x = nullptr;   // forward: the input; backward: y, the forward output
  const T* dy = nullptr;  // backward only
  T* out = nullptr;       // forward: y; backward: dx
  float* partial_a = nullptr;  // [partial_capacity * D] running max (forward) or sum (backward)
  float* partial_b = nullptr;  // [partial_capacity * D] sum of exponentials (forward only)
};

template <typename T, typename OffsetT>
Status launch_segment_softmax(const SegmentSoftmaxArgs<T, OffsetT>& args, cudaStream_t stream);

// The geometry.block_tokens the launcher of segment_softmax (backward: segment_softmax_backward) gives geometry g
// on the current device: rows longer than g.local_finish_chunks chunks and at most this long are block rows.
// 0 when block rows are off (segment_block_rows_enabled) or the device's shared memory holds no token of them.
template <typename T, typename OffsetT>
Status segment_softmax_block_tokens(const SegmentGeometry& g, bool backward, bool log, std::int64_t& tokens);

}  // namespace detail
}  // namespace ragged
