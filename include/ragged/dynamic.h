// Run-time typed entry points, for frameworks that carry the element type as data (a PyTorch extension, a
// graph compiler): the same ops as the templates, with void pointers and DType tags. A combination without a
// kernel returns kUnsupportedDType and a message naming it; everything else behaves as the typed op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/attention.h"
#include "ragged/check.h"
#include "ragged/convert.h"
#include "ragged/dtype.h"
#include "ragged/packing.h"
#include "ragged/rnn.h"
#include "ragged/segment_reduce.h"
#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {
namespace dynamic {

// A ragged tensor described at run time. `values` is const for inputs; outputs are passed separately.
struct RaggedDesc {
  DType dtype = DType::kFloat32;
  DType offset_dtype = DType::kInt64;  // kInt32 or kInt64
  const void* values = nullptr;         // [nnz, inner]
  const void* offsets = nullptr;        // [batch + 1]
  std::int64_t batch = 0;
  std::int64_t nnz = 0;
  std::int64_t inner = 1;
};

// length_dtype and offset_dtype: kInt32 or kInt64.
Status lengths_to_offsets(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype, const void* d_lengths,
                          std::int64_t batch, DType offset_dtype, void* d_offsets, CheckResult* d_check,
                          cudaStream_t stream);

// The other device functions of offsets.h. offset_dtype and length_dtype: kInt32 or kInt64; the max length is
// int64 whatever the offsets' type.
Status offsets_to_lengths(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                          std::int64_t batch, DType length_dtype, void* d_lengths, cudaStream_t stream);

Status max_length(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                  std::int64_t batch, std::int64_t* d_max_length, cudaStream_t stream);

Status validate_offsets(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                        std::int64_t batch, std::int64_t capacity, std::int64_t expected_nnz, CheckResult* d_check,
                        cudaStream_t stream);

// d_padded: [src.batch, max_len, src.inner] of src.dtype. pad_value is converted to the element type: rounded
// for the floating types, nonzero -> true for bool, truncated toward zero for the integer types, where a value
// the type cannot hold (NaN, an infinity, out of range) returns kInvalidArgument. padded_to_ragged's fill alike.
Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, void* d_padded,
                        std::int64_t max_len, double pad_value, Align align, Truncate trunc, cudaStream_t stream);

// d_values: the ragged output [dst.nnz, dst.inner] (dst.values is ignored); d_padded: [dst.batch, max_len, inner].
Status padded_to_ragged(void* d_workspace, std::size_t& workspace_bytes, const void* d_padded, std::int64_t max_len,
                        const RaggedDesc& dst, void* d_values, double fill, Align align, Truncate trunc,
                        cudaStream_t stream);

Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, ReduceOp op,
                      void* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream);

Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, bool log, void* d_out,
                       cudaStream_t stream);

// Backward passes (segment_reduce.h). `shape` describes the forward input; its `values` are not read. d_grad_out
// and d_out are of shape.dtype: [batch, inner] for the reduction, [nnz, inner] for the softmax; d_grad_in
// [nnz, inner] of shape.dtype.
Status segment_reduce_backward(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& shape, ReduceOp op,
                               const void* d_grad_out, const std::int64_t* d_arg, void* d_grad_in,
                               cudaStream_t stream);

Status segment_softmax_backward(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& shape, bool log,
                                const void* d_out, const void* d_grad_out, void* d_grad_in, cudaStream_t stream);

// Key-padding masks [batch, max_len] from lengths (convert.h). length_dtype: kInt32 or kInt64. The additive
// mask is of mask_dtype: kFloat32, kFloat16 or kBFloat16.
Status lengths_to_mask(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype, const void* d_lengths,
                       std::int64_t batch, std::int64_t max_len, Align align, bool* d_mask, CheckResult* d_check,
                       cudaStream_t stream);

Status lengths_to_additive_mask(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype,
                                const void* d_lengths, std::int64_t batch, std::int64_t max_len, Align align,
                                DType mask_dtype, void* d_mask, CheckResult* d_check, cudaStream_t stream);

// Variable-length attention forward (attention.h) described at run time. Strides are in elements; 0 means the
// dense layout [rows, heads, head_dim] (token stride heads * head_dim, head stride head_dim).
struct HeadsDesc {
  const void* data = nullptr;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
};

// Where each sequence's tokens are, as SequenceLayout (attention.h): ragged (offsets [batch + 1]; rows = the
// tokens the buffer holds) or padded (lengths [batch], max_len slots per sequence, rows = batch * max_len).
struct SequenceDesc {
  const void* offsets = nullptr;
  const void* lengths = nullptr;
  std::int64_t max_len = 0;
  std::int64_t rows = 0;
};

struct AttentionDesc {
  DType dtype = DType::kBFloat16;     // Q, K, V and O: kFloat32, kFloat16 or kBFloat16
  DType offset_dtype = DType::kInt32;  // offsets / lengths of both layouts: kInt32 or kInt64
  HeadsDesc q, k, v;
  void* o = nullptr;  // written with o_token_stride / o_head_stride (0: dense)
  std::int64_t o_token_stride = 0;
  std::int64_t o_head_stride = 0;
  float* lse = nullptr;  // [q rows, heads_q] or null
  SequenceDesc q_seq, k_seq;
  std::int64_t batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  float scale = 0.0f;  // > 0; usually 1 / sqrt(head_dim)
  bool causal = false;
  int query_tile = 0;  // 0: automatic (AttentionArgs::query_tile)
};

Status varlen_attention_forward(void* d_workspace, std::size_t& workspace_bytes, const AttentionDesc& desc,
                                cudaStream_t stream);

// Packing order for recurrent layers (packing.h). The layout's length arrays are of the offsets' dtype.
struct PackedLayoutDesc {
  std::int64_t batch = 0;
  std::int64_t max_steps = 0;
  std::int64_t* sorted_indices = nullptr;    // [batch]
  std::int64_t* unsorted_indices = nullptr;  // [batch]
  void* sorted_lengths = nullptr;            // [batch]
  void* batch_sizes = nullptr;               // [max_steps]
  void* step_offsets = nullptr;              // [max_steps + 1]
};

// offset_dtype: kInt32 or kInt64, for d_offsets ([layout.batch + 1]) and the layout's length arrays.
Status packing_order(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                     const PackedLayoutDesc& layout, CheckResult* d_check, cudaStream_t stream);

// src.dtype: kFloat32, kFloat16, kBFloat16, kInt32, kInt64 or kUInt8; the layout's arrays are of
// src.offset_dtype. d_packed holds src.nnz rows of src.dtype.
Status pack_sequences(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src,
                      const PackedLayoutDesc& layout, void* d_packed, cudaStream_t stream);

// The inverse: d_values (dst's values, [dst.nnz, dst.inner] of dst.dtype; dst.values is ignored) from the packed
// rows.
Status unpack_sequences(void* d_workspace, std::size_t& workspace_bytes, const void* d_packed,
                        const PackedLayoutDesc& layout, const RaggedDesc& dst, void* d_values, cudaStream_t stream);

// Packed LSTM / GRU forward (rnn.h) described at run time: the fields of RnnArgs, with void pointers of `dtype`
// (kFloat32, kFloat16 or kBFloat16; the input's RaggedDesc must have the same dtype).
struct RnnForwardDesc {
  DType dtype = DType::kFloat32;
  ragged::RnnDesc desc;
  const RnnLayerWeights<void>* weights = nullptr;  // HOST array, [layer * directions + direction]
  RaggedDesc input;                                // [nnz, input_size], offsets in the caller's order
  std::int64_t max_steps = 0;
  const void* h0 = nullptr;
  const void* c0 = nullptr;
  void* output = nullptr;
  void* hn = nullptr;
  void* cn = nullptr;
  RnnProjection projection = RnnProjection::kCublas;  // as RnnArgs
  cublasHandle_t cublas = nullptr;
  std::size_t cublas_workspace_bytes = 0;  // as RnnArgs
  RnnAlgo algo = RnnAlgo::kAuto;
  CheckResult* check = nullptr;
};

// One limit the typed op lacks: num_layers > 65536 returns kUnsupportedShape, since the call builds the typed
// weight table (num_layers * directions entries) on the host.
Status rnn_forward(void* d_workspace, std::size_t& workspace_bytes, const RnnForwardDesc& args, cudaStream_t stream);

}  // namespace dynamic
}  // namespace ragged
