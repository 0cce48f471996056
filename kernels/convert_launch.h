// Internal: launchers for the conversion and mask kernels (kernels/convert.cu, kernels/mask.cu), called by
// src/convert.cpp after it has validated the arguments. The element type is erased: the kernels move bytes,
// so one kernel per offset type serves every dtype. Plain C++ so that host code can include it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/check.h"
#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {
namespace detail {

// Sequence b owns rows [offsets[b], offsets[b+1]) of `row_bytes` bytes, clamped to [0, nnz) on the device;
// a row holds row_bytes / elem_bytes elements.
//
// dst [batch, max_len, row] from src; `pad_element` points to elem_bytes bytes (the pad value).
// `allow_32bit_index` = false forces the 64-bit index path (tests use it; it is chosen anyway for >= 2^32
// vectors).
template <typename OffsetT>
Status launch_ragged_to_padded(const void* d_src, const OffsetT* d_offsets, std::int64_t batch, std::int64_t nnz,
                               void* d_dst, std::int64_t max_len, std::int64_t row_bytes, std::int64_t elem_bytes,
                               const void* pad_element, Align align, Truncate trunc, cudaStream_t stream,
                               bool allow_32bit_index = true);

// dst rows of every sequence from src [batch, max_len, row]; tokens src cannot hold get `fill_element`.
template <typename OffsetT>
Status launch_padded_to_ragged(const void* d_src, std::int64_t max_len, void* d_dst, const OffsetT* d_offsets,
                               std::int64_t batch, std::int64_t nnz, std::int64_t row_bytes, std::int64_t elem_bytes,
                               const void* fill_element, Align align, Truncate trunc, cudaStream_t stream,
                               bool allow_32bit_index = true);

// The token-group kernels (convert_tokens.cu), which the two launchers above hand the conversions of narrow rows:
// token_groups_fit says whether a conversion is one (rows of 1, 2, 4 or 8 bytes, src aligned to that size, dst to
// 16 bytes) and the switch is on. The switch: on unless the process started with RAGGED_CONVERT_TOKEN_GROUPS=0
// (convert.cu's vector kernels then take those rows); the same bytes either way for sorted offsets. Not
// thread-safe to change: tests set it to compare the two.
bool convert_token_groups_enabled();
void set_convert_token_groups_enabled(bool enabled);
bool token_groups_fit(std::int64_t row_bytes, const void* src, const void* dst);

template <typename OffsetT>
Status launch_ragged_to_padded_tokens(const void* d_src, const OffsetT* d_offsets, std::int64_t batch,
                                      std::int64_t nnz, void* d_dst, std::int64_t max_len, std::int64_t row_bytes,
                                      std::int64_t elem_bytes, const void* pad_element, Align align, Truncate trunc,
                                      cudaStream_t stream, bool allow_32bit_index);

template <typename OffsetT>
Status launch_padded_to_ragged_tokens(const void* d_src, std::int64_t max_len, void* d_dst, const OffsetT* d_offsets,
                                      std::int64_t batch, std::int64_t nnz, std::int64_t row_bytes,
                                      std::int64_t elem_bytes, const void* fill_element, Align align, Truncate trunc,
                                      cudaStream_t stream);

// mask [batch, max_len] of elem_bytes-wide elements (1, 2 or 4): the low elem_bytes bytes of `token_bits`
// where a slot holds a token, of `pad_bits` where it is padding (bool: 1 / 0; additive: 0 / -inf). Resets
// d_check (if not null) and records the first negative length there.
template <typename LengthT>
Status launch_lengths_to_mask(const LengthT* d_lengths, std::int64_t batch, std::int64_t max_len, Align align,
                              void* d_mask, int elem_bytes, std::uint32_t token_bits, std::uint32_t pad_bits,
                              CheckResult* d_check, cudaStream_t stream, bool allow_32bit_index = true);

}  // namespace detail
}  // namespace ragged
