// Run-time typed entry points, for frameworks that carry the element type as data (a PyTorch extension, a
// graph compiler): the same ops as the templates, with void pointers and DType tags. A combination without a
// kernel returns kUnsupportedDType and a message naming it; everything else behaves as the typed op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/dtype.h"
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

// d_padded: [src.batch, max_len, src.inner] of src.dtype. pad_value is converted to the element type.
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

}  // namespace dynamic
}  // namespace ragged
