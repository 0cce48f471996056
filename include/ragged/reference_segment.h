// CPU references for the segment reductions and segment softmax of segment_reduce.h: same arguments as the
// device ops, host pointers, no workspace. Plain loops with double accumulation; each result is rounded to T
// once. Rows are clamped like the kernels clamp them (clamped_row_range), but the results are only meaningful
// for valid offsets (validate_offsets_host first).
//
// Semantics, shared with the device ops:
// - Empty sequence: out = empty_value (rounded to T) for every op, arg = -1.
// - kSum / kMean: a NaN (or +inf with -inf) anywhere in a column gives NaN; kMean = sum / length.
// - kMax / kMin: a column holding a NaN reduces to NaN and its arg is the first NaN's index. Otherwise the arg
//   is the first index (0-based, within the sequence) of the extreme value, +0 and -0 comparing equal, and the
//   output is the element at that index.
// - segment_reduce_backward writes every row of every sequence (rows past offsets[batch] are not written):
//   kSum copies grad_out, kMean divides it by the length, kMax / kMin put grad_out on the row named by arg and 0
//   on the others (an arg outside [0, length) puts it nowhere).
// - segment_softmax: y = exp(x - m) / sum(exp(x - m)), log-softmax: x - m - log(sum(exp(x - m))), m the column
//   maximum; a NaN in a column makes the whole column NaN. Rows past offsets[batch] are not written.
// - segment_softmax_backward: softmax dx = y * (dy - sum(dy * y)); log-softmax dx = dy - exp(y) * sum(dy).
#pragma once

#include <cstdint>

#include "ragged/segment_reduce.h"
#include "ragged/view.h"

namespace ragged {
namespace reference {

// out [batch, inner]; arg [batch, inner] or null (written for kMax / kMin only, ignored for kSum / kMean).
template <typename T, typename OffsetT>
void segment_reduce(RaggedView<const T, OffsetT> src, ReduceOp op, T* out, std::int64_t* arg, float empty_value);

// grad_in [nnz, inner] from grad_out [batch, inner]; arg is read for kMax / kMin only. shape.values is not read.
template <typename T, typename OffsetT>
void segment_reduce_backward(RaggedView<const T, OffsetT> shape, ReduceOp op, const T* grad_out,
                             const std::int64_t* arg, T* grad_in);

// out [nnz, inner].
template <typename T, typename OffsetT>
void segment_softmax(RaggedView<const T, OffsetT> src, bool log, T* out);

// out = segment_softmax(x) in the layout of `shape` (shape.values not read); grad_in [nnz, inner].
template <typename T, typename OffsetT>
void segment_softmax_backward(RaggedView<const T, OffsetT> shape, bool log, const T* out, const T* grad_out,
                              T* grad_in);

}  // namespace reference
}  // namespace ragged
