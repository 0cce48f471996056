// The floor of issue 3's short rows at narrow D (bench_segment.cu: `segment_sum|segment_softmax/floor/.../
// kind:subwarp`, the tiny regime at D = 64). Not a ragged op: a benchmark kernel that gives every row a sub-warp of
// its own, D / V lanes (V = 16 bytes of elements), each lane one vector column of the row walked in token order,
// and does nothing else: no plan, no first pass, one launch. ragged's own sub-warp row pass
// (SegmentGeometry::subwarp_rows, subwarp_row_pass in kernels/segment_common.cuh) finishes these rows the same way
// inside its row pass, which also sums the plan of the other rows, and is followed by the first-pass kernel. The
// floor's time against ragged's, in the same run, is what that machinery costs on these rows; against the
// RAGGED_SEGMENT_SUBWARP_ROWS=0 A/B row (a warp per row in the first pass's streams), what the design is worth.
//   sum      out[row, :] = sum of the row's tokens (0 for an empty row), accumulated in float
//   softmax  out = softmax over each row's tokens per column; rows of up to 4 tokens are read once and written
//            from registers, longer ones read three times (max, sum, write)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace bench {

enum class SubwarpFloorOp { kSum, kSoftmax };

// Whether the floor runs this shape: D a multiple of V = 16 / elem_size elements whose D / V vectors divide a
// warp (D = 64: 16 lanes a row in float, 8 in bfloat16).
bool subwarp_floor_fits(std::int64_t inner, std::size_t elem_size);

// Runs `op` over rows [offsets[b], offsets[b + 1]) of values [nnz, inner] into out ([batch, inner] for the sum,
// [nnz, inner] for softmax). T: float or __nv_bfloat16. values and out 16-byte aligned; kUnsupportedShape where
// subwarp_floor_fits says no, kInvalidArgument for a misaligned pointer.
template <typename T>
Status launch_subwarp_row_floor(SubwarpFloorOp op, const T* values, const std::int32_t* offsets, std::int64_t batch,
                                std::int64_t inner, T* out, cudaStream_t stream);

}  // namespace bench
}  // namespace ragged
