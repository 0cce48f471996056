// A warp per row at D = 1 (bench_segment.cu: `segment_sum|segment_max|segment_softmax/floor/.../kind:warp`, the
// uniform and power-law regimes). Not a ragged op: a benchmark kernel that gives every row a warp of its own,
// grid-stride over the rows, and does nothing else: no plan, no first pass, no load balancing, one launch. It is the
// plain design a CSR segment kernel would take, which ragged's D = 1 path is meant to beat: a row pass whose warps
// finish these rows a warp each (warp rows: warp_row_pass) after its own groups, on top of the plan and the
// persistent kernel that stream the others (segment_reduce.cuh stream_rows). Its time against ragged's, in the same
// run, says what that machinery costs or is worth on rows of a few hundred tokens; a long row (the power-law tail) is
// one warp's serial walk here, which bounds it.
//   sum      out[row] = the row's sum (0 for an empty row), accumulated in float
//   max      out[row] = the row's largest value by fmaxf (0 for an empty row)
//   softmax  out = softmax over each row; rows of up to 32 x kWarpRowHeld tokens are read once and written from
//            registers, longer ones read three times (max, sum, write)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace bench {

enum class WarpFloorOp { kSum, kMax, kSoftmax };

// Tokens a lane loads at once (a warp: 32 times as many, 2 KB of floats in flight).
constexpr int kWarpRowHeld = 16;

// Runs `op` over rows [offsets[b], offsets[b + 1]) of values [nnz] (D = 1) into out ([batch] for sum and max,
// [nnz] for softmax). T: float or __nv_bfloat16. kInvalidArgument for a negative batch.
template <typename T>
Status launch_warp_row_floor(WarpFloorOp op, const T* values, const std::int32_t* offsets, std::int64_t batch, T* out,
                             cudaStream_t stream);

}  // namespace bench
}  // namespace ragged
