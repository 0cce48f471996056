// Plain CPU references with the same semantics as the device ops, for tests and for users' regression tests.
// Simple loops, no tiling, double accumulation where anything accumulates. Offsets are trusted to be valid
// (validate_offsets_host first).
#pragma once

#include <cstdint>
#include <vector>

#include "ragged/view.h"

namespace ragged {
namespace reference {

template <typename T, typename OffsetT>
void ragged_to_padded(RaggedView<const T, OffsetT> src, PaddedView<T> dst, T pad_value, Align align,
                      Truncate trunc);

template <typename T, typename OffsetT>
void padded_to_ragged(PaddedView<const T> src, RaggedView<T, OffsetT> dst, T fill, Align align, Truncate trunc);

template <typename LengthT>
void lengths_to_mask(const LengthT* lengths, std::int64_t batch, std::int64_t max_len, Align align, bool* mask);

template <typename LengthT, typename T>
void lengths_to_additive_mask(const LengthT* lengths, std::int64_t batch, std::int64_t max_len, Align align,
                              T* mask);

// Packing order on the host: fills the vectors (resized here) with the PackedLayout arrays, with the semantics
// of ragged::packing_order (stable sort, sequences longer than max_steps truncated to max_steps).
template <typename OffsetT>
struct HostPackedLayout {
  std::vector<std::int64_t> sorted_indices, unsorted_indices;
  std::vector<OffsetT> sorted_lengths, batch_sizes, step_offsets;
};

template <typename OffsetT>
HostPackedLayout<OffsetT> packing_order(const OffsetT* offsets, std::int64_t batch, std::int64_t max_steps);

template <typename T, typename OffsetT>
void pack_sequences(RaggedView<const T, OffsetT> src, const HostPackedLayout<OffsetT>& layout, T* packed);

template <typename T, typename OffsetT>
void unpack_sequences(const T* packed, const HostPackedLayout<OffsetT>& layout, RaggedView<T, OffsetT> dst);

}  // namespace reference
}  // namespace ragged
#include "ragged/reference_segment.h"
#include "ragged/reference_rnn.h"
#include "ragged/reference_attention.h"
