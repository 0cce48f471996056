// Conversions between ragged and padded layouts, and attention masks from lengths.
// Same contract as offsets.h: two-phase workspace, explicit stream, no allocation, no host sync.
//
// Supported T: float, half, bfloat16, int32_t, int64_t, uint8_t, bool. Supported OffsetT: int32_t, int64_t.
// The kernels move bytes, so each row is copied with the widest aligned vector (up to 16 bytes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {

// dst[b, s, :] = the token of sequence b placed in slot s, or pad_value. Sequence b has
// length = offsets[b+1] - offsets[b]; slot_map() (view.h) says which tokens are kept and where they go:
// a sequence longer than dst.max_len keeps its first (Truncate::kRight) or last (Truncate::kLeft) max_len
// tokens; Align::kLeft puts tokens first, Align::kRight puts them last. Requires dst.batch == src.batch and
// dst.inner == src.inner. Every element of dst is written.
template <typename T, typename OffsetT>
Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                        PaddedView<T> dst, T pad_value, Align align, Truncate trunc, cudaStream_t stream);
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> src,
                        PaddedView<T> dst, T pad_value, Align align, Truncate trunc, cudaStream_t stream) {
  return ragged_to_padded<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(src), dst,
                                      pad_value, align, trunc, stream);
}

// The inverse: dst's token t of sequence b takes the padded slot that ragged_to_padded would have put it in.
// Tokens that the padded tensor cannot hold (a sequence longer than src.max_len, with the same `trunc` rule)
// are written with `fill`, so every element of dst[offsets[0], offsets[batch]) is written (rows before
// offsets[0] are left alone).
template <typename T, typename OffsetT>
Status padded_to_ragged(void* d_workspace, std::size_t& workspace_bytes, PaddedView<const T> src,
                        RaggedView<T, OffsetT> dst, T fill, Align align, Truncate trunc, cudaStream_t stream);
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status padded_to_ragged(void* d_workspace, std::size_t& workspace_bytes, PaddedView<T> src,
                        RaggedView<T, OffsetT> dst, T fill, Align align, Truncate trunc, cudaStream_t stream) {
  return padded_to_ragged<T, OffsetT>(d_workspace, workspace_bytes, PaddedView<const T>(src), dst, fill, align,
                                      trunc, stream);
}

// Key-padding masks [batch, max_len] from lengths: mask[b, s] is true (boolean) or 0 (additive) where slot s
// holds a token (same placement as ragged_to_padded with `align`), false or -infinity where it is padding.
// Lengths above max_len fill the row. A negative length is an error: its row is all padding and, when d_check
// is not null, kNegativeLength is recorded there with the lowest such sequence index (check.h; d_check is reset
// first, so it holds this call's result only; with batch or max_len 0 the mask is empty and no length is read).
// LengthT: int32_t or int64_t.
template <typename LengthT>
Status lengths_to_mask(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths,
                       std::int64_t batch, std::int64_t max_len, Align align, bool* d_mask, CheckResult* d_check,
                       cudaStream_t stream);

// T: float, half, bfloat16.
template <typename LengthT, typename T>
Status lengths_to_additive_mask(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths,
                                std::int64_t batch, std::int64_t max_len, Align align, T* d_mask,
                                CheckResult* d_check, cudaStream_t stream);

}  // namespace ragged
