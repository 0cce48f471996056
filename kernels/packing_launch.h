// Internal: launchers for the packing kernels (kernels/packing.cu), called by src/packing.cpp after it has
// validated the arguments. Plain C++ so that host code can include it.
//
// packing_order runs as: packing keys -> stable descending radix sort -> finish order (copy-out + inverse
// permutation) -> batch sizes -> step offsets scan. pack / unpack are one gather kernel run either way.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/packing.h"
#include "ragged/status.h"

namespace ragged {
namespace detail {

// keys[b] = min(max(offsets[b+1] - offsets[b], 0), key_cap), values[b] = b. Records kInvalidArgument for a
// sequence longer than max_steps in d_check (which the caller has reset). key_cap = min(max_steps, OffsetT max).
template <typename OffsetT>
Status launch_packing_keys(const OffsetT* d_offsets, std::int64_t batch, std::int64_t max_steps,
                           OffsetT* d_keys, std::int64_t* d_values, CheckResult* d_check, cudaStream_t stream);

// Stable descending radix sort of (keys, values) pairs over key bits [0, end_bit), end_bit >= 1. The pairs
// start in (d_keys, d_values); (d_keys_alt, d_values_alt) is the second buffer of each pair, and
// `result_in_alt` says which buffer holds the result (known on the host: it follows from the pass count).
// With d_cub_temp == nullptr only sets cub_temp_bytes.
template <typename OffsetT>
Status launch_sort_by_length(void* d_cub_temp, std::size_t& cub_temp_bytes, OffsetT* d_keys, OffsetT* d_keys_alt,
                             std::int64_t* d_values, std::int64_t* d_values_alt, std::int64_t batch, int end_bit,
                             bool& result_in_alt, cudaStream_t stream);

// unsorted_indices[sorted_values[j]] = j; also copies the sorted pairs into layout.sorted_lengths /
// layout.sorted_indices when they are not already there.
template <typename OffsetT>
Status launch_finish_order(const OffsetT* d_sorted_keys, const std::int64_t* d_sorted_values,
                           PackedLayout<OffsetT> layout, cudaStream_t stream);

// batch_sizes[t] = number of entries of the (descending) layout.sorted_lengths greater than t.
template <typename OffsetT>
Status launch_batch_sizes(PackedLayout<OffsetT> layout, cudaStream_t stream);

// step_offsets[t] = sum of batch_sizes[0..t) for t in [0, max_steps], saturated to OffsetT's maximum so that it
// stays non-decreasing even for malformed offsets. With d_cub_temp == nullptr only sets cub_temp_bytes.
template <typename OffsetT>
Status launch_step_offsets(void* d_cub_temp, std::size_t& cub_temp_bytes, const OffsetT* d_batch_sizes,
                           std::int64_t max_steps, OffsetT* d_step_offsets, cudaStream_t stream);

// Which way rows move between a ragged tensor (caller's order) and the packed buffer.
enum class PackDirection : int { kPack, kUnpack };

// Moves every packed row p < min(step_offsets[max_steps], rows) from / to its ragged row
// begin(sorted_indices[j]) + t. The element type is erased: a row is `row_bytes` bytes of `elem_bytes`
// elements, copied with the widest vector that the row size and both base pointers allow (a pointer not
// aligned to its element size fails). `rows` is the ragged tensor's nnz, also the packed buffer's capacity.
template <typename OffsetT>
Status launch_move_packed_rows(PackDirection direction, const void* d_from, void* d_to, std::size_t row_bytes,
                               std::size_t elem_bytes, const OffsetT* d_offsets, std::int64_t rows,
                               PackedLayout<const OffsetT> layout, cudaStream_t stream);

}  // namespace detail
}  // namespace ragged
