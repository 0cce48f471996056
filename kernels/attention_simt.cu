// Attention forward for float on the FMA units: the same scheme as the tensor-core kernel (one pass over key
// tiles, online softmax in registers, the score matrix never in device memory), written for correctness and
// clarity first.
//
// Block: 4 warps, 32 query rows (8 per warp) of one (sequence, head); key tiles of 32.
// Scores: lane j computes the 8 scores of key j (K row j in shared memory, the Q rows read as broadcasts).
// Softmax: per row, a warp-wide max; lane j keeps p = exp2(...) of its key and its share of the row sum.
// O += P V: lane c owns D / 32 contiguous output columns; p of every key comes back through shared memory
// as a broadcast, V rows are read with one vector load per lane.
// K rows are padded by 4 floats so that the 8 lanes of a 16-byte-load phase hit 8 different bank groups.
#include <cuda_runtime.h>

#include "attention_common.cuh"
#include "launch.cuh"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kSimtWarps = 4;
constexpr int kSimtThreads = kSimtWarps * 32;
constexpr int kRowsPerWarp = 8;
constexpr int kSimtQueryTile = kSimtWarps * kRowsPerWarp;  // 32
constexpr int kSimtKeyTile = 32;                            // one key per lane

template <int kHeadDim>
struct SimtConfig {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  static constexpr int kCols = kHeadDim / 32;  // output columns per lane
  static constexpr int kKStride = kHeadDim + 4;
  static constexpr int kQFloats = kSimtQueryTile * kHeadDim;
  static constexpr int kKFloats = kSimtKeyTile * kKStride;
  static constexpr int kVFloats = kSimtKeyTile * kHeadDim;
  static constexpr int kPFloats = kSimtWarps * kRowsPerWarp * kSimtKeyTile;
  static constexpr int kSmemBytes = (kQFloats + kKFloats + kVFloats + kPFloats) * 4;
};

template <int kCols>
struct alignas(4 * kCols) FloatVec {
  float v[kCols];
};

// Starts the copy of rows [first, first + kRows) (zero-filling rows at or past `valid`) into a tile with
// `kStride` floats per row.
template <int kRows, int kHeadDim, int kStride>
__device__ __forceinline__ void copy_rows_async_f32(float* tile, const float* base, std::int64_t token_stride,
                                                    std::int64_t first, std::int64_t valid, const void* fallback) {
  constexpr int kChunks = kHeadDim / 4;  // 16-byte chunks per row
  static_assert(kRows * kChunks % kSimtThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kSimtThreads; ++i) {
    const int index = i * kSimtThreads + static_cast<int>(threadIdx.x);
    const int row = index / kChunks, chunk = index % kChunks;
    const bool ok = row < valid;
    const void* src = ok ? static_cast<const void*>(base + (first + row) * token_stride + chunk * 4) : fallback;
    cp_async_16(smem_address(tile + row * kStride + chunk * 4), src, ok);
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(kSimtThreads) attention_simt_kernel(const __grid_constant__ AttentionParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = SimtConfig<kHeadDim>;
  constexpr int kCols = Cfg::kCols;
  extern __shared__ __align__(16) float smem_f[];
  float* s_q = smem_f;                  // [32][D]
  float* s_k = s_q + Cfg::kQFloats;     // [32][D + 4]
  float* s_v = s_k + Cfg::kKFloats;     // [32][D]
  float* s_p = s_v + Cfg::kVFloats;     // [warp][row][key]

  const QueryTile tile = find_query_tile(p, kSimtQueryTile, blockIdx.x);
  if (!tile.valid) return;
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / p.heads_per_kv;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_row0 = warp * kRowsPerWarp;
  float* s_pw = s_p + warp * kRowsPerWarp * kSimtKeyTile;

  const float* q = static_cast<const float*>(p.q) + tile.q.start * p.q_token_stride + head * p.q_head_stride;
  const float* k = static_cast<const float*>(p.k) + tile.k.start * p.k_token_stride + kv_head * p.k_head_stride;
  const float* v = static_cast<const float*>(p.v) + tile.k.start * p.v_token_stride + kv_head * p.v_head_stride;

  const std::int64_t key_end = visible_key_end(tile, p.causal);
  const int key_tiles = static_cast<int>((key_end + kSimtKeyTile - 1) / kSimtKeyTile);
  const std::int64_t diagonal = tile.k.length - tile.q.length;

  copy_rows_async_f32<kSimtQueryTile, kHeadDim, kHeadDim>(s_q, q, p.q_token_stride, tile.m0, tile.rows, p.q);
  cp_async_commit();

  float o[kRowsPerWarp][kCols];
  float row_max[kRowsPerWarp];  // running max of the raw scores (the same in every lane)
  float row_sum[kRowsPerWarp];  // this lane's share of the sum of exponentials
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[r][c] = 0.0f;
  }

  for (int it = 0; it < key_tiles; ++it) {
    const int n = key_tiles - 1 - it;  // last tile first, as the tensor-core kernel does
    const std::int64_t key0 = static_cast<std::int64_t>(n) * kSimtKeyTile;
    __syncthreads();  // the previous tile's K, V and P are no longer read
    copy_rows_async_f32<kSimtKeyTile, kHeadDim, Cfg::kKStride>(s_k, k, p.k_token_stride, key0,
                                                               tile.k.length - key0, p.k);
    copy_rows_async_f32<kSimtKeyTile, kHeadDim, kHeadDim>(s_v, v, p.v_token_stride, key0, tile.k.length - key0, p.v);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // Scores of key `lane` against the warp's 8 rows, in dimension order.
    float s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < kHeadDim; d += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(s_k + lane * Cfg::kKStride + d);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float4 qv = *reinterpret_cast<const float4*>(s_q + (warp_row0 + r) * kHeadDim + d);
        s[r] = fmaf(qv.x, kv.x, s[r]);
        s[r] = fmaf(qv.y, kv.y, s[r]);
        s[r] = fmaf(qv.z, kv.z, s[r]);
        s[r] = fmaf(qv.w, kv.w, s[r]);
      }
    }
    const std::int64_t key = key0 + lane;
    const bool masked_tile = key_tile_needs_mask(tile, p.causal, key0, kSimtKeyTile);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const std::int64_t row = tile.m0 + warp_row0 + r;
      if (masked_tile && key_hidden(row, key, tile.k.length, diagonal, p.causal)) s[r] = -INFINITY;
      float m = fmaxf(row_max[r], s[r]);
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
      // All masked so far: base 0 keeps exp2(-inf) = 0. Both products round alike (no FMA contraction), so an
      // unchanged max rescales by exactly 1 instead of drifting by base's rounding error every key tile.
      const float base = m == -INFINITY ? 0.0f : __fmul_rn(m, p.scale_log2);
      const float rescale = fast_exp2(__fmul_rn(row_max[r], p.scale_log2) - base);
      row_max[r] = m;
      const float e = fast_exp2(s[r] * p.scale_log2 - base);
      row_sum[r] = row_sum[r] * rescale + e;
#pragma unroll
      for (int c = 0; c < kCols; ++c) o[r][c] *= rescale;
      s_pw[r * kSimtKeyTile + lane] = e;
    }
    __syncwarp();

    // O += P V: keys in order, 4 at a time (one broadcast vector load of P per row).
#pragma unroll 2
    for (int j = 0; j < kSimtKeyTile; j += 4) {
      float4 pj[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) pj[r] = *reinterpret_cast<const float4*>(s_pw + r * kSimtKeyTile + j);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const FloatVec<kCols> vv = *reinterpret_cast<const FloatVec<kCols>*>(s_v + (j + jj) * kHeadDim + lane * kCols);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          const float pr = jj == 0 ? pj[r].x : jj == 1 ? pj[r].y : jj == 2 ? pj[r].z : pj[r].w;
#pragma unroll
          for (int c = 0; c < kCols; ++c) o[r][c] = fmaf(pr, vv.v[c], o[r][c]);
        }
      }
    }
  }
  cp_async_wait<0>();  // Q's copy, when there was no key tile

  float* out = static_cast<float*>(p.o) + (tile.q.start + tile.m0) * p.o_token_stride + head * p.o_head_stride;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    float sum = row_sum[r];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
    const int row = warp_row0 + r;
    if (row >= tile.rows) continue;
    // No visible key (or only scores of -inf): O = 0, LSE = -inf (log of an empty sum). A NaN score makes the
    // sum NaN, and with it O and LSE, as in the reference.
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    FloatVec<kCols> result;
#pragma unroll
    for (int c = 0; c < kCols; ++c) result.v[c] = o[r][c] * inv;
    *reinterpret_cast<FloatVec<kCols>*>(out + row * p.o_token_stride + lane * kCols) = result;
    if (p.lse != nullptr && lane == 0)
      p.lse[(tile.q.start + tile.m0 + row) * p.heads_q + head] =
          sum == 0.0f ? -INFINITY : row_max[r] * p.scale + logf(sum);
  }
#endif
}

template <int kHeadDim>
Status launch(const AttentionParams& p, cudaStream_t stream) {
  using Cfg = SimtConfig<kHeadDim>;
  dim3 grid;
  RAGGED_RETURN_IF_ERROR(attention_grid(p, kSimtQueryTile, grid));
  RAGGED_RETURN_IF_ERROR(from_cuda(cudaFuncSetAttribute(attention_simt_kernel<kHeadDim>,
                                                        cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes),
                                   "cudaFuncSetAttribute(attention_simt_kernel)"));
  attention_simt_kernel<kHeadDim><<<grid, kSimtThreads, Cfg::kSmemBytes, stream>>>(p);
  return check_launch("attention_simt_kernel");
}

}  // namespace

int attention_simt_query_tile(int head_dim) { return head_dim == 64 || head_dim == 128 ? kSimtQueryTile : 0; }

Status launch_attention_simt(const AttentionParams& params, int head_dim, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return launch<64>(params, stream);
    case 128: return launch<128>(params, stream);
    default:
      return fail(Status::kUnsupportedShape,
                  "attention: no float kernel for head_dim " + std::to_string(head_dim) + " (64 or 128)");
  }
}

}  // namespace detail
}  // namespace ragged
