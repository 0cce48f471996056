// Key-padding masks from lengths: a write-only kernel over [batch, max_len]. Each thread builds one vector of
// up to 16 bytes (16 bool slots, 8 half slots, 4 float slots) of a single mask row and stores it at once,
// because 1- or 2-byte stores would leave most of the store bandwidth unused. The element type is erased: the
// caller gives the bit patterns of "token" and "padding" (bool 1 / 0, additive 0 / -inf).
#include <cstring>

#include "byte_vector.h"
#include "check.cuh"
#include "convert_launch.h"
#include "fast_divmod.h"
#include "launch.cuh"
#include "offsets_launch.h"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;

template <typename Vec, typename LengthT, typename Divider>
struct MaskParams {
  const LengthT* lengths;
  Vec* mask;  // [batch, row_vecs]
  std::int64_t max_len;
  std::int64_t row_vecs;  // vectors per mask row
  std::int64_t total;     // batch * row_vecs
  Divider per_row;        // divides by row_vecs
  int elem_shift;         // log2 of the element size in bytes
  std::uint32_t token_bits;
  std::uint32_t pad_bits;
  Align align;
  CheckResult* check;  // may be null
};

template <typename Vec, typename LengthT, typename Divider>
__global__ void __launch_bounds__(kThreads)
    lengths_to_mask_kernel(const __grid_constant__ MaskParams<Vec, LengthT, Divider> p) {
  constexpr int kBytes = static_cast<int>(sizeof(Vec));
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total; i += stride) {
    std::int64_t b = 0, v = 0;
    p.per_row.divmod(i, b, v);
    // Same placement as ragged_to_padded; slot_map counts negative lengths as 0 and caps them at max_len.
    const std::int64_t length = static_cast<std::int64_t>(p.lengths[b]);
    if (length < 0 && v == 0) record_failure(p.check, Status::kNegativeLength, b);
    const SlotMap m = slot_map(length, p.max_len, p.align, Truncate::kRight);
    const std::int64_t first_slot = (v * kBytes) >> p.elem_shift;
    const int elem_byte_mask = (1 << p.elem_shift) - 1;
    std::uint32_t words[(kBytes + 3) / 4] = {};
#pragma unroll
    for (int byte = 0; byte < kBytes; ++byte) {
      const std::int64_t slot = first_slot + (byte >> p.elem_shift);
      const std::uint32_t bits = slot >= m.lead && slot < m.lead + m.kept ? p.token_bits : p.pad_bits;
      const std::uint32_t value = (bits >> (8 * (byte & elem_byte_mask))) & 0xffu;  // little-endian element
      words[byte / 4] |= value << (8 * (byte % 4));
    }
    Vec out;
    memcpy(&out, words, kBytes);
    p.mask[i] = out;
  }
}

}  // namespace

template <typename LengthT>
Status launch_lengths_to_mask(const LengthT* d_lengths, std::int64_t batch, std::int64_t max_len, Align align,
                              void* d_mask, int elem_bytes, std::uint32_t token_bits, std::uint32_t pad_bits,
                              CheckResult* d_check, cudaStream_t stream, bool allow_32bit_index) {
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4)
    return fail(Status::kUnsupportedDType, "mask elements of " + std::to_string(elem_bytes) + " bytes");
  RAGGED_RETURN_IF_ERROR(reset_check(d_check, stream));
  if (batch == 0 || max_len == 0) return Status::kSuccess;
  const int elem_shift = elem_bytes == 1 ? 0 : (elem_bytes == 2 ? 1 : 2);
  const std::int64_t row_bytes = max_len * elem_bytes;
  return with_vector_width(widest_vector_bytes(row_bytes, elem_bytes, {d_mask}), [&](auto width_constant) {
    constexpr int kBytes = decltype(width_constant)::value;
    using Vec = byte_vector_t<kBytes>;
    const std::int64_t row_vecs = row_bytes / kBytes;
    const std::int64_t total = batch * row_vecs;
    unsigned blocks = 0;
    RAGGED_RETURN_IF_ERROR(grid_size(total, kThreads, kBlocksPerSm, blocks));
    return with_divider(total, row_vecs, allow_32bit_index, [&](auto divider) {
      using Divider = decltype(divider);
      const MaskParams<Vec, LengthT, Divider> params{
          d_lengths, static_cast<Vec*>(d_mask), max_len, row_vecs, total, divider, elem_shift, token_bits, pad_bits,
          align, d_check};
      lengths_to_mask_kernel<<<blocks, kThreads, 0, stream>>>(params);
      return check_launch("lengths_to_mask_kernel");
    });
  });
}

template Status launch_lengths_to_mask<std::int32_t>(const std::int32_t*, std::int64_t, std::int64_t, Align, void*,
                                                     int, std::uint32_t, std::uint32_t, CheckResult*, cudaStream_t,
                                                     bool);
template Status launch_lengths_to_mask<std::int64_t>(const std::int64_t*, std::int64_t, std::int64_t, Align, void*,
                                                     int, std::uint32_t, std::uint32_t, CheckResult*, cudaStream_t,
                                                     bool);

}  // namespace detail
}  // namespace ragged
