// Ragged <-> padded copies. Both directions are batched contiguous copies: in a padded sequence the kept tokens
// are one contiguous block, and so are they in the ragged values, so each output vector either copies one
// input vector or is the pad/fill value. The kernels therefore
//   - move untyped vectors of the widest width (16..1 bytes) that divides the row and both base pointers,
//     so one kernel per offset type serves every dtype and rows of >= 4 floats move as 16-byte accesses;
//   - map threads to output vectors in tiles of kThreads * kUnroll: kUnroll independent loads per thread are
//     in flight before the first store, and consecutive threads touch consecutive vectors (coalesced);
//   - find the owning sequence cheaply: ragged_to_padded divides the flat index by the vectors per padded
//     sequence (multiply-high divider while indices fit 32 bits), padded_to_ragged binary-searches the offsets
//     once per tile (one warp, 32 probes per step) and then each thread searches only the tile's few sequences.
// Every row range goes through clamped_row_range(), so malformed offsets give wrong values but no
// out-of-bounds access. Narrow rows (1, 2, 4 or 8 bytes: D = 1, ...) go to the token-group kernels of
// convert_tokens.cu where their alignment allows, which pay this index arithmetic per 16 bytes, not per token.
#include <type_traits>

#include "byte_vector.h"
#include "convert_launch.h"
#include "fast_divmod.h"
#include "launch.cuh"
#include "sequence_search.cuh"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;                     // independent loads in flight per thread
constexpr int kTile = kThreads * kUnroll;      // output vectors per block per loop iteration
constexpr int kBlocksPerSm = 8;                // 8 x 256 threads fill an SM (sm_80 / sm_90)

// ---------------------------------------------------------------------------------------------------------
// ragged -> padded
// ---------------------------------------------------------------------------------------------------------

template <typename Vec, typename OffsetT, typename Divider>
struct ToPaddedParams {
  const Vec* src;  // ragged values, as vectors
  const OffsetT* offsets;
  Vec* dst;  // [batch, max_len * row_vecs]
  Vec pad;   // the pad value replicated across the vector
  std::int64_t nnz;
  std::int64_t max_len;
  std::int64_t row_vecs;  // vectors per token row
  std::int64_t total;     // batch * max_len * row_vecs output vectors
  Divider per_sequence;   // divides by max_len * row_vecs
  Align align;
  Truncate trunc;
};

// The source vector of output vector i, or -1 where i is padding.
template <typename Params>
__device__ __forceinline__ std::int64_t padded_source(const Params& p, std::int64_t i) {
  std::int64_t b = 0, within = 0;  // sequence, and vector index inside its padded block
  p.per_sequence.divmod(i, b, within);
  std::int64_t begin = 0, end = 0;
  clamped_row_range(p.offsets, b, p.nnz, begin, end);
  const SlotMap m = slot_map(end - begin, p.max_len, p.align, p.trunc);
  // The kept tokens are the contiguous vectors [lead, lead + kept) * row_vecs of the block.
  const std::int64_t k = within - m.lead * p.row_vecs;
  return k >= 0 && k < m.kept * p.row_vecs ? (begin + m.skip) * p.row_vecs + k : -1;
}

template <typename Vec, typename OffsetT, typename Divider>
__global__ void __launch_bounds__(kThreads)
    ragged_to_padded_kernel(const __grid_constant__ ToPaddedParams<Vec, OffsetT, Divider> p) {
  const std::int64_t grid_stride = static_cast<std::int64_t>(gridDim.x) * kTile;
  for (std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTile; tile < p.total; tile += grid_stride) {
    Vec value[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = tile + k * kThreads + threadIdx.x;
      value[k] = p.pad;
      if (i < p.total) {
        const std::int64_t source = padded_source(p, i);
        if (source >= 0) value[k] = __ldg(p.src + source);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = tile + k * kThreads + threadIdx.x;
      if (i < p.total) p.dst[i] = value[k];
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// padded -> ragged
// ---------------------------------------------------------------------------------------------------------

template <typename Vec, typename OffsetT, typename Divider>
struct ToRaggedParams {
  const Vec* src;  // [batch, max_len * row_vecs]
  Vec* dst;        // ragged values, as vectors
  const OffsetT* offsets;
  Vec fill;  // the fill value replicated across the vector
  std::int64_t batch;
  std::int64_t nnz;
  std::int64_t max_len;
  std::int64_t row_vecs;
  std::int64_t total;  // nnz * row_vecs output vectors
  Divider per_row;     // divides by row_vecs
  Align align;
  Truncate trunc;
};

template <typename Vec, typename OffsetT, typename Divider>
__global__ void __launch_bounds__(kThreads)
    padded_to_ragged_kernel(const __grid_constant__ ToRaggedParams<Vec, OffsetT, Divider> p) {
  // The sequences of the tile's first and last rows: every row in between belongs to one in that range.
  __shared__ std::int64_t tile_sequences[2];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const std::int64_t grid_stride = static_cast<std::int64_t>(gridDim.x) * kTile;
  for (std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTile; tile < p.total; tile += grid_stride) {
    if (warp < 2) {  // warp 0 searches for the first row, warp 1 for the last, concurrently
      const std::int64_t vector = warp == 0 ? tile : min(tile + kTile, p.total) - 1;
      std::int64_t row = 0, column = 0;
      p.per_row.divmod(vector, row, column);
      const std::int64_t b = warp_find_sequence(p.offsets, 0, p.batch - 1, row);
      if (threadIdx.x % 32 == 0) tile_sequences[warp] = b;
    }
    __syncthreads();
    const std::int64_t lo = tile_sequences[0];
    const std::int64_t hi = max(lo, tile_sequences[1]);  // max(): unsorted offsets may invert them

    Vec value[kUnroll];
    bool owned[kUnroll];  // false for rows outside every sequence: they are not written
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t j = tile + k * kThreads + threadIdx.x;
      owned[k] = false;
      value[k] = p.fill;
      if (j < p.total) {
        std::int64_t row = 0, column = 0;
        p.per_row.divmod(j, row, column);
        const std::int64_t b = find_sequence(p.offsets, lo, hi, row);
        std::int64_t begin = 0, end = 0;
        clamped_row_range(p.offsets, b, p.nnz, begin, end);
        owned[k] = row >= begin && row < end;
        const SlotMap m = slot_map(end - begin, p.max_len, p.align, p.trunc);
        const std::int64_t kept_index = row - begin - m.skip;  // position among the kept tokens
        if (owned[k] && kept_index >= 0 && kept_index < m.kept)
          value[k] = __ldg(p.src + (b * p.max_len + m.lead + kept_index) * p.row_vecs + column);
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t j = tile + k * kThreads + threadIdx.x;
      if (owned[k]) p.dst[j] = value[k];
    }
    __syncthreads();  // tile_sequences is rewritten for the next tile
  }
}

// ---------------------------------------------------------------------------------------------------------
// Launchers: pick the vector width (with_vector_width), then the divider (with_divider).
// ---------------------------------------------------------------------------------------------------------

}  // namespace

template <typename OffsetT>
Status launch_ragged_to_padded(const void* d_src, const OffsetT* d_offsets, std::int64_t batch, std::int64_t nnz,
                               void* d_dst, std::int64_t max_len, std::int64_t row_bytes, std::int64_t elem_bytes,
                               const void* pad_element, Align align, Truncate trunc, cudaStream_t stream,
                               bool allow_32bit_index) {
  if (batch == 0 || max_len == 0 || row_bytes == 0) return Status::kSuccess;
  if (token_groups_fit(row_bytes, d_src, d_dst))
    return launch_ragged_to_padded_tokens(d_src, d_offsets, batch, nnz, d_dst, max_len, row_bytes, elem_bytes,
                                          pad_element, align, trunc, stream, allow_32bit_index);
  // src may be null when it holds no rows; it is then never read, so it cannot narrow the width.
  const int width = d_src != nullptr ? widest_vector_bytes(row_bytes, elem_bytes, {d_src, d_dst})
                                     : widest_vector_bytes(row_bytes, elem_bytes, {d_dst});
  return with_vector_width(width, [&](auto width_constant) {
    constexpr int kBytes = decltype(width_constant)::value;
    using Vec = byte_vector_t<kBytes>;
    const std::int64_t row_vecs = row_bytes / kBytes;
    const std::int64_t total = batch * max_len * row_vecs;
    unsigned blocks = 0;
    RAGGED_RETURN_IF_ERROR(grid_size(total, kTile, kBlocksPerSm, blocks));
    return with_divider(total, max_len * row_vecs, allow_32bit_index, [&](auto divider) {
      using Divider = decltype(divider);
      const ToPaddedParams<Vec, OffsetT, Divider> params{static_cast<const Vec*>(d_src),
                                                         d_offsets,
                                                         static_cast<Vec*>(d_dst),
                                                         replicate<kBytes>(pad_element, elem_bytes),
                                                         nnz,
                                                         max_len,
                                                         row_vecs,
                                                         total,
                                                         divider,
                                                         align,
                                                         trunc};
      ragged_to_padded_kernel<<<blocks, kThreads, 0, stream>>>(params);
      return check_launch("ragged_to_padded_kernel");
    });
  });
}

template <typename OffsetT>
Status launch_padded_to_ragged(const void* d_src, std::int64_t max_len, void* d_dst, const OffsetT* d_offsets,
                               std::int64_t batch, std::int64_t nnz, std::int64_t row_bytes, std::int64_t elem_bytes,
                               const void* fill_element, Align align, Truncate trunc, cudaStream_t stream,
                               bool allow_32bit_index) {
  if (batch == 0 || nnz == 0 || row_bytes == 0) return Status::kSuccess;
  if (token_groups_fit(row_bytes, d_src, d_dst))
    return launch_padded_to_ragged_tokens(d_src, max_len, d_dst, d_offsets, batch, nnz, row_bytes, elem_bytes,
                                          fill_element, align, trunc, stream);
  // src is null when it holds no slots (max_len == 0): then every token is fill and src is never read.
  const int width = d_src != nullptr ? widest_vector_bytes(row_bytes, elem_bytes, {d_src, d_dst})
                                     : widest_vector_bytes(row_bytes, elem_bytes, {d_dst});
  return with_vector_width(width, [&](auto width_constant) {
    constexpr int kBytes = decltype(width_constant)::value;
    using Vec = byte_vector_t<kBytes>;
    const std::int64_t row_vecs = row_bytes / kBytes;
    const std::int64_t total = nnz * row_vecs;
    unsigned blocks = 0;
    RAGGED_RETURN_IF_ERROR(grid_size(total, kTile, kBlocksPerSm, blocks));
    return with_divider(total, row_vecs, allow_32bit_index, [&](auto divider) {
      using Divider = decltype(divider);
      const ToRaggedParams<Vec, OffsetT, Divider> params{static_cast<const Vec*>(d_src),
                                                         static_cast<Vec*>(d_dst),
                                                         d_offsets,
                                                         replicate<kBytes>(fill_element, elem_bytes),
                                                         batch,
                                                         nnz,
                                                         max_len,
                                                         row_vecs,
                                                         total,
                                                         divider,
                                                         align,
                                                         trunc};
      padded_to_ragged_kernel<<<blocks, kThreads, 0, stream>>>(params);
      return check_launch("padded_to_ragged_kernel");
    });
  });
}

#define RAGGED_INSTANTIATE_CONVERT_LAUNCH(O)                                                                     \
  template Status launch_ragged_to_padded<O>(const void*, const O*, std::int64_t, std::int64_t, void*,           \
                                             std::int64_t, std::int64_t, std::int64_t, const void*, Align,       \
                                             Truncate, cudaStream_t, bool);                                      \
  template Status launch_padded_to_ragged<O>(const void*, std::int64_t, void*, const O*, std::int64_t,           \
                                             std::int64_t, std::int64_t, std::int64_t, const void*, Align,       \
                                             Truncate, cudaStream_t, bool);

RAGGED_INSTANTIATE_CONVERT_LAUNCH(std::int32_t)
RAGGED_INSTANTIATE_CONVERT_LAUNCH(std::int64_t)

}  // namespace detail
}  // namespace ragged
