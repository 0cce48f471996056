// CPU reference of the packing order and of pack / unpack: plain loops with the device ops' semantics.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "ragged/reference.h"

namespace ragged {
namespace reference {

template <typename OffsetT>
HostPackedLayout<OffsetT> packing_order(const OffsetT* offsets, std::int64_t batch, std::int64_t max_steps) {
  HostPackedLayout<OffsetT> layout;
  const std::size_t n = static_cast<std::size_t>(batch);
  // Packed length of each sequence: its length (negative counts as 0), truncated to max_steps.
  const std::int64_t cap = std::min<std::int64_t>(max_steps, std::numeric_limits<OffsetT>::max());
  std::vector<OffsetT> packed_length(n);
  for (std::size_t b = 0; b < n; ++b) {
    const std::int64_t length = std::max<std::int64_t>(
        0, sequence_length(offsets, b));
    packed_length[b] = static_cast<OffsetT>(std::min(length, cap));
  }

  layout.sorted_indices.resize(n);
  std::iota(layout.sorted_indices.begin(), layout.sorted_indices.end(), std::int64_t{0});
  std::stable_sort(layout.sorted_indices.begin(), layout.sorted_indices.end(),
                   [&](std::int64_t a, std::int64_t b) { return packed_length[a] > packed_length[b]; });

  layout.unsorted_indices.resize(n);
  layout.sorted_lengths.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    const std::int64_t b = layout.sorted_indices[j];
    layout.unsorted_indices[b] = static_cast<std::int64_t>(j);
    layout.sorted_lengths[j] = packed_length[b];
  }

  // Each sequence is active at steps [0, packed length).
  layout.batch_sizes.assign(static_cast<std::size_t>(max_steps), OffsetT{0});
  for (std::size_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(packed_length[b]); ++t) ++layout.batch_sizes[t];

  // Running sum saturated to OffsetT, as on the device (only malformed offsets can reach the bound).
  constexpr std::int64_t kMax = std::numeric_limits<OffsetT>::max();
  layout.step_offsets.resize(static_cast<std::size_t>(max_steps) + 1);
  std::int64_t total = 0;
  for (std::int64_t t = 0; t <= max_steps; ++t) {
    layout.step_offsets[t] = static_cast<OffsetT>(std::min(total, kMax));
    if (t < max_steps) total += static_cast<std::int64_t>(layout.batch_sizes[t]);
  }
  return layout;
}

template <typename T, typename OffsetT>
void pack_sequences(RaggedView<const T, OffsetT> src, const HostPackedLayout<OffsetT>& layout, T* packed) {
  const std::size_t row_bytes = static_cast<std::size_t>(src.inner) * sizeof(T);
  for (std::size_t t = 0; t < layout.batch_sizes.size(); ++t)
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(layout.batch_sizes[t]); ++j) {
      const std::int64_t sequence = layout.sorted_indices[j];
      const std::int64_t row = static_cast<std::int64_t>(src.offsets[sequence]) + static_cast<std::int64_t>(t);
      const std::int64_t packed_row = static_cast<std::int64_t>(layout.step_offsets[t]) + j;
      std::memcpy(packed + packed_row * src.inner, src.values + row * src.inner, row_bytes);
    }
}

template <typename T, typename OffsetT>
void unpack_sequences(const T* packed, const HostPackedLayout<OffsetT>& layout, RaggedView<T, OffsetT> dst) {
  const std::size_t row_bytes = static_cast<std::size_t>(dst.inner) * sizeof(T);
  for (std::size_t t = 0; t < layout.batch_sizes.size(); ++t)
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(layout.batch_sizes[t]); ++j) {
      const std::int64_t sequence = layout.sorted_indices[j];
      const std::int64_t row = static_cast<std::int64_t>(dst.offsets[sequence]) + static_cast<std::int64_t>(t);
      const std::int64_t packed_row = static_cast<std::int64_t>(layout.step_offsets[t]) + j;
      std::memcpy(dst.values + row * dst.inner, packed + packed_row * dst.inner, row_bytes);
    }
}

#define RAGGED_INSTANTIATE_REFERENCE_PACK(T, O)                                                           \
  template void pack_sequences<T, O>(RaggedView<const T, O>, const HostPackedLayout<O>&, T*);             \
  template void unpack_sequences<T, O>(const T*, const HostPackedLayout<O>&, RaggedView<T, O>);
#define RAGGED_INSTANTIATE_REFERENCE_PACKING(O)                                                           \
  template HostPackedLayout<O> packing_order<O>(const O*, std::int64_t, std::int64_t);                    \
  RAGGED_INSTANTIATE_REFERENCE_PACK(float, O)                                                             \
  RAGGED_INSTANTIATE_REFERENCE_PACK(half, O)                                                              \
  RAGGED_INSTANTIATE_REFERENCE_PACK(bfloat16, O)                                                          \
  RAGGED_INSTANTIATE_REFERENCE_PACK(std::int32_t, O)                                                      \
  RAGGED_INSTANTIATE_REFERENCE_PACK(std::int64_t, O)                                                      \
  RAGGED_INSTANTIATE_REFERENCE_PACK(std::uint8_t, O)

RAGGED_INSTANTIATE_REFERENCE_PACKING(std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_PACKING(std::int64_t)

}  // namespace reference
}  // namespace ragged
