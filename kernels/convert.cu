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
// out-of-bounds access.
#include <type_traits>

#include "byte_vector.h"
#include "convert_launch.h"
#include "fast_divmod.h"
#include "launch.cuh"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;                     // independent loads in flight per thread
constexpr int kTile = kThreads * kUnroll;      // output vectors per block per loop iteration
constexpr int kBlocksPerSm = 8;                // 8 x 256 threads fill an SM (sm_80 / sm_90)
constexpr unsigned kFullWarp = 0xffffffffu;

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

// The largest b in [lo, hi] with offsets[b] <= row (the sequence holding `row` when offsets are sorted), or lo
// when there is none. Stays inside [lo, hi] whatever the offsets hold.
template <typename OffsetT>
__device__ __forceinline__ std::int64_t find_sequence(const OffsetT* offsets, std::int64_t lo, std::int64_t hi,
                                                      std::int64_t row) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (static_cast<std::int64_t>(offsets[mid]) <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// find_sequence by a whole warp (all lanes pass the same arguments and get the same answer): each step probes
// 32 evenly spaced entries at once and keeps the sub-range after the last one <= row, so a search over a
// million sequences takes 4 dependent loads instead of 20.
template <typename OffsetT>
__device__ std::int64_t warp_find_sequence(const OffsetT* offsets, std::int64_t lo, std::int64_t hi,
                                           std::int64_t row) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  while (true) {
    const std::int64_t step = (hi - lo + 1 + 31) / 32;
    const std::int64_t probe = lo + lane * step;
    const bool at_or_below = probe <= hi && static_cast<std::int64_t>(offsets[probe]) <= row;
    const unsigned ballot = __ballot_sync(kFullWarp, at_or_below);
    if (ballot == 0) return lo;  // even offsets[lo] > row
    // The highest such lane (for sorted offsets the set lanes are a prefix); the answer lies in its step.
    lo += static_cast<std::int64_t>(31 - __clz(ballot)) * step;
    if (step == 1) return lo;
    hi = min(hi, lo + step - 1);
  }
}

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
