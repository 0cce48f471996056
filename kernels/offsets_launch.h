// Internal: launchers for the offsets kernels (kernels/offsets.cu), called by src/offsets.cpp after it has
// validated the arguments. Plain C++ so that host code can include it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/status.h"

namespace ragged {
namespace detail {

// Inclusive scan of max(lengths, 0) into d_scan [batch], int64 sums saturated at INT64_MAX (never wrapping).
// With d_cub_temp == nullptr only sets cub_temp_bytes.
template <typename LengthT>
Status launch_length_scan(void* d_cub_temp, std::size_t& cub_temp_bytes, const LengthT* d_lengths,
                          std::int64_t batch, std::int64_t* d_scan, cudaStream_t stream);

// offsets[0] = 0, offsets[i+1] = saturate<OffsetT>(scan[i]); records negative lengths and overflow in d_check.
template <typename LengthT, typename OffsetT>
Status launch_finish_offsets(const LengthT* d_lengths, const std::int64_t* d_scan, std::int64_t batch,
                             OffsetT* d_offsets, CheckResult* d_check, cudaStream_t stream);

template <typename OffsetT, typename LengthT>
Status launch_offsets_to_lengths(const OffsetT* d_offsets, std::int64_t batch, LengthT* d_lengths,
                                 cudaStream_t stream);

// With d_cub_temp == nullptr only sets cub_temp_bytes.
template <typename OffsetT>
Status launch_max_length(void* d_cub_temp, std::size_t& cub_temp_bytes, const OffsetT* d_offsets,
                         std::int64_t batch, std::int64_t* d_max_length, cudaStream_t stream);

template <typename OffsetT>
Status launch_validate_offsets(const OffsetT* d_offsets, std::int64_t batch, std::int64_t capacity,
                               std::int64_t expected_nnz, CheckResult* d_check, cudaStream_t stream);

// Resets *d_check to "no failure" (stream-ordered memset, graph-capturable).
Status reset_check(CheckResult* d_check, cudaStream_t stream);

}  // namespace detail
}  // namespace ragged
