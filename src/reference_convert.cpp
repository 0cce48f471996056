// CPU references for the conversions and masks: one loop per output element, placement from slot_map().
// Rows are clamped like the kernels do, so even malformed offsets cannot make a reference read out of bounds.
#include <algorithm>
#include <cstdint>

#include "mask_values.h"
#include "ragged/reference.h"

namespace ragged {
namespace reference {

template <typename T, typename OffsetT>
void ragged_to_padded(RaggedView<const T, OffsetT> src, PaddedView<T> dst, T pad_value, Align align,
                      Truncate trunc) {
  const std::int64_t inner = dst.inner;
  for (std::int64_t b = 0; b < dst.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(src.offsets, b, src.nnz, begin, end);
    const SlotMap m = slot_map(end - begin, dst.max_len, align, trunc);
    for (std::int64_t s = 0; s < dst.max_len; ++s) {
      T* out = dst.data + (b * dst.max_len + s) * inner;
      if (s >= m.lead && s < m.lead + m.kept) {
        const T* in = src.values + (begin + m.skip + (s - m.lead)) * inner;
        for (std::int64_t e = 0; e < inner; ++e) out[e] = in[e];
      } else {
        for (std::int64_t e = 0; e < inner; ++e) out[e] = pad_value;
      }
    }
  }
}

template <typename T, typename OffsetT>
void padded_to_ragged(PaddedView<const T> src, RaggedView<T, OffsetT> dst, T fill, Align align, Truncate trunc) {
  const std::int64_t inner = dst.inner;
  for (std::int64_t b = 0; b < dst.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(dst.offsets, b, dst.nnz, begin, end);
    const SlotMap m = slot_map(end - begin, src.max_len, align, trunc);
    for (std::int64_t t = 0; t < end - begin; ++t) {
      T* out = dst.values + (begin + t) * inner;
      if (t >= m.skip && t < m.skip + m.kept) {
        const T* in = src.data + (b * src.max_len + m.lead + (t - m.skip)) * inner;
        for (std::int64_t e = 0; e < inner; ++e) out[e] = in[e];
      } else {
        for (std::int64_t e = 0; e < inner; ++e) out[e] = fill;
      }
    }
  }
}

namespace {
// Calls set(b, s, token) for every slot of a [batch, max_len] mask.
template <typename LengthT, typename Set>
void for_each_mask_slot(const LengthT* lengths, std::int64_t batch, std::int64_t max_len, Align align, Set&& set) {
  for (std::int64_t b = 0; b < batch; ++b) {
    const SlotMap m = slot_map(static_cast<std::int64_t>(lengths[b]), max_len, align, Truncate::kRight);
    for (std::int64_t s = 0; s < max_len; ++s) set(b * max_len + s, s >= m.lead && s < m.lead + m.kept);
  }
}
}  // namespace

template <typename LengthT>
void lengths_to_mask(const LengthT* lengths, std::int64_t batch, std::int64_t max_len, Align align, bool* mask) {
  for_each_mask_slot(lengths, batch, max_len, align, [&](std::int64_t i, bool token) { mask[i] = token; });
}

template <typename LengthT, typename T>
void lengths_to_additive_mask(const LengthT* lengths, std::int64_t batch, std::int64_t max_len, Align align,
                              T* mask) {
  const T token_value = detail::additive_mask_value<T>(true);
  const T pad_value = detail::additive_mask_value<T>(false);
  for_each_mask_slot(lengths, batch, max_len, align,
                     [&](std::int64_t i, bool token) { mask[i] = token ? token_value : pad_value; });
}

#define RAGGED_INSTANTIATE_REFERENCE_CONVERT(T, O)                                                               \
  template void ragged_to_padded<T, O>(RaggedView<const T, O>, PaddedView<T>, T, Align, Truncate);              \
  template void padded_to_ragged<T, O>(PaddedView<const T>, RaggedView<T, O>, T, Align, Truncate);
#define RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(T)      \
  RAGGED_INSTANTIATE_REFERENCE_CONVERT(T, std::int32_t) \
  RAGGED_INSTANTIATE_REFERENCE_CONVERT(T, std::int64_t)

RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(float)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(half)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(bfloat16)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(std::int64_t)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(std::uint8_t)
RAGGED_INSTANTIATE_REFERENCE_CONVERT_T(bool)

#define RAGGED_INSTANTIATE_REFERENCE_MASK(L)                                                                     \
  template void lengths_to_mask<L>(const L*, std::int64_t, std::int64_t, Align, bool*);                         \
  template void lengths_to_additive_mask<L, float>(const L*, std::int64_t, std::int64_t, Align, float*);        \
  template void lengths_to_additive_mask<L, half>(const L*, std::int64_t, std::int64_t, Align, half*);          \
  template void lengths_to_additive_mask<L, bfloat16>(const L*, std::int64_t, std::int64_t, Align, bfloat16*);

RAGGED_INSTANTIATE_REFERENCE_MASK(std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_MASK(std::int64_t)

}  // namespace reference
}  // namespace ragged
