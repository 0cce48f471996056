// Building and checking offsets: lengths -> offsets on the device (CUB scan, no host sync), host equivalents,
// device and host validation, lengths from offsets and the maximum length on the device.
//
// Every device function follows the CUB contract: when `d_workspace` is null it only writes
// `workspace_bytes` and returns kSuccess; otherwise it enqueues its work on `stream` and returns without
// allocating or synchronising, so it can be captured in a CUDA graph. Argument errors are returned at once
// (see last_error_message()); errors in the data on the device are recorded in an optional CheckResult.
// The workspace may start at any address (the size includes the slack to align its pieces) and may hold
// anything; every typed pointer must be aligned to its element type (kInvalidArgument otherwise).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/status.h"

namespace ragged {

// offsets[0] = 0, offsets[b+1] = offsets[b] + max(lengths[b], 0). If `d_check` is non-null it is overwritten
// with the first failure, by sequence: kNegativeLength (index = the sequence) or kSizeOverflow (index = the first
// sequence that does not fit OffsetT offsets: offsets[index + 1] and the entries after it saturate to the type's
// maximum), as lengths_to_offsets_host checks them.
// LengthT: int32_t or int64_t. OffsetT: int32_t or int64_t.
template <typename LengthT, typename OffsetT>
Status lengths_to_offsets(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths,
                          std::int64_t batch, OffsetT* d_offsets, CheckResult* d_check, cudaStream_t stream);

// lengths[b] = offsets[b+1] - offsets[b], saturated to LengthT (no workspace needed: the query sets 1 byte).
template <typename OffsetT, typename LengthT>
Status offsets_to_lengths(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                          std::int64_t batch, LengthT* d_lengths, cudaStream_t stream);

// *d_max_length = max over b of (offsets[b+1] - offsets[b]), 0 for an empty batch (negative lengths count as 0).
template <typename OffsetT>
Status max_length(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets, std::int64_t batch,
                  std::int64_t* d_max_length, cudaStream_t stream);

// Checks, on the device, offsets[0] == 0, offsets[b] <= offsets[b+1], offsets[batch] <= capacity and, when
// expected_nnz >= 0, offsets[batch] == expected_nnz. Overwrites *d_check with the first failure
// (kInvalidOffsets, index = the offsets entry). No workspace needed.
template <typename OffsetT>
Status validate_offsets(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                        std::int64_t batch, std::int64_t capacity, std::int64_t expected_nnz, CheckResult* d_check,
                        cudaStream_t stream);

// Host versions. They return the first failure and name the bad index in last_error_message().
// lengths_to_offsets_host stops there: on a failure at sequence b, offsets[0..b] are written and the entries
// after them are left as they were (the device version writes every entry, saturating).
template <typename LengthT, typename OffsetT>
Status lengths_to_offsets_host(const LengthT* lengths, std::int64_t batch, OffsetT* offsets);

template <typename OffsetT>
Status validate_offsets_host(const OffsetT* offsets, std::int64_t batch, std::int64_t capacity,
                             std::int64_t expected_nnz = -1);

}  // namespace ragged
