// Segment reductions over the ragged dimension: out[b, d] = op over the rows of sequence b of values[row, d],
// and softmax / log-softmax over the ragged dimension per inner column; with their backward passes.
//
// Semantics (the CPU references in reference.h implement the same):
// - T in {float, half, bfloat16}; accumulation in float; the result is rounded to T once. The references
//   accumulate in double, so a sum whose float partial sums overflow is +-inf here where the reference may be
//   finite (float inputs near 3e38); kMean divides by the length as a float.
// - inner >= 1 (0 returns kUnsupportedShape); the conversions, by contrast, accept 0.
// - Empty sequences: out = empty_value (converted to T), arg = -1; their softmax rows do not exist.
// - kMax / kMin propagate NaN: a column holding a NaN reduces to NaN and its arg is the first NaN's index (in
//   half / bfloat16 the NaN's payload is not kept: the reference returns the element's bits). Otherwise the arg
//   is the index within the sequence (0-based) of the first occurrence of the extreme value. +0 and -0 compare
//   equal, so the first of them wins. The backward routes the whole gradient to that one index (ties are not
//   split).
// - Softmax: a column holding a NaN, a +inf, or only -inf is NaN in every row (exp(inf - inf), exp(-inf - -inf));
//   a -inf among finite values gives 0 (log-softmax: -inf).
// - Deterministic: no float atomics; each sequence is reduced in an order that depends only on its own length,
//   the inner size and whether the buffers are 16-byte aligned (which sets the vector width; cudaMalloc'd
//   buffers and inner sizes that keep rows aligned always take the same path), so the output is bitwise the
//   same on every run and does not depend on the other sequences in the batch.
// - The work split is chosen on the device from the offsets (no host sync), so one launch holds its bandwidth
//   for many tiny sequences, one huge sequence, or anything between.
// Same contract as the other device ops: two-phase workspace, explicit stream, no allocation, no host sync.
//
// Workspace: a row longer than one chunk of work keeps a partial result per chunk and column there, so the query
// (which cannot see the lengths) sizes for the batch that has the most such chunks: as many rows as fit just one
// token longer than a chunk. At most F x (nnz x inner x sizeof(T)) + 48 bytes per 128 sequences + 2 KiB, plus
// CUB's scan storage past 131072 sequences, with F:
//                          sum / mean   max / min   softmax   softmax backward   reduce backward
//   float                     0.032       0.093      0.45          0.41                0
//   half / bfloat16           0.123       0.365      0.476         0.81                0
// At most 5/8 of that when fewer sequences than nnz / chunk hold the values (a few long rows); F is reached when
// every sequence is a chunk plus one token long (wide inner sizes; tests/cpu/test_segment_workspace.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {

enum class ReduceOp : int { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
const char* reduce_op_name(ReduceOp op);

// d_out [batch, inner]. d_arg [batch, inner] (optional, kMax / kMin only; must be null for kSum / kMean).
template <typename T, typename OffsetT>
Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                      ReduceOp op, T* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream);

// d_grad_in [nnz, inner] from d_grad_out [batch, inner]: kSum copies the gradient to every row, kMean divides it
// by the length, kMax / kMin route it to the row named by d_arg (which must come from segment_reduce) and write
// 0 elsewhere; d_arg must be null for kSum / kMean. `shape.values` is not read and may be null.
template <typename T, typename OffsetT>
Status segment_reduce_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> shape,
                               ReduceOp op, const T* d_grad_out, const std::int64_t* d_arg, T* d_grad_in,
                               cudaStream_t stream);

// d_out [nnz, inner]: softmax (log = false) or log-softmax (log = true) of each sequence along its rows,
// independently for each inner column. Rows past offsets[batch] are not written.
template <typename T, typename OffsetT>
Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src, bool log,
                       T* d_out, cudaStream_t stream);

// Given y = segment_softmax(x) (d_out, in its ragged layout `shape`) and dL/dy, writes dL/dx:
// softmax: dx = y * (dy - sum(dy * y)); log-softmax: dx = dy - exp(y) * sum(dy), sums over the sequence.
template <typename T, typename OffsetT>
Status segment_softmax_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> shape,
                                bool log, const T* d_out, const T* d_grad_out, T* d_grad_in, cudaStream_t stream);

// The same ops on views of mutable values (view.h: deduction does not see the conversion to a read-only view).
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> src, ReduceOp op,
                      T* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream) {
  return segment_reduce<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(src), op, d_out, d_arg,
                                    empty_value, stream);
}
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status segment_reduce_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> shape,
                               ReduceOp op, const T* d_grad_out, const std::int64_t* d_arg, T* d_grad_in,
                               cudaStream_t stream) {
  return segment_reduce_backward<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(shape), op,
                                             d_grad_out, d_arg, d_grad_in, stream);
}
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> src, bool log,
                       T* d_out, cudaStream_t stream) {
  return segment_softmax<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(src), log, d_out,
                                     stream);
}
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status segment_softmax_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> shape,
                                bool log, const T* d_out, const T* d_grad_out, T* d_grad_in, cudaStream_t stream) {
  return segment_softmax_backward<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(shape), log,
                                              d_out, d_grad_out, d_grad_in, stream);
}

}  // namespace ragged
