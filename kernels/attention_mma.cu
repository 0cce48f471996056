// Attention forward for half and bfloat16 on tensor cores (mma.sync m16n8k16, float accumulation), after
// FlashAttention-2: a block of 4 warps owns a tile of query rows of one (sequence, head) and walks the visible
// key tiles once, keeping S = Q K^T, the online-softmax statistics and O in registers. The score matrix never
// leaves the SM.
//
// Per block:  Q tile [64 or 128 rows x D] and two buffers of K and V tiles [64 x D] in shared memory (cp.async,
//             double-buffered: tile n-1 loads while tile n is computed).
// Per warp:   16 or 32 query rows (one or two m16 tiles); for each key tile S [16 x 64] per m16 tile (8 mma
//             n-tiles) from ldmatrix'd Q and K fragments, mask (only on tiles that cross the sequence end or the
//             causal diagonal), online softmax with exp2 (scale folded into log2(e)), then O [16 x D] += P V
//             with P taken straight from the S registers (the C layout of one mma is the A layout of the next).
// Epilogue:   O / rowsum rounded to T, staged through shared memory for 16-byte coalesced stores; LSE.
//
// Fragments (layouts in mma_sync.cuh):
//   Q [rows][d]:  non-transposed ldmatrix gives A directly.
//   K [keys][d]:  B(k = d, n = key) has consecutive k contiguous in a K row: non-transposed ldmatrix.
//   V [keys][d]:  B(k = key, n = d) has consecutive k in different V rows: ldmatrix.trans.
//   P:            the C fragments of S n-tiles 2j and 2j+1 are exactly the A fragment of keys 16j..16j+15.
//
// Shared memory rows are D * 2 bytes (8 or 16 chunks of 16 bytes). Chunk c of row r is stored at chunk
// c ^ (r % 8): the 8 rows an ldmatrix phase reads at one logical chunk then fall in 8 different bank groups,
// and so do the 8 chunks a cp.async phase writes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "attention_common.cuh"
#include "launch.cuh"
#include "mma_sync.cuh"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kKeyTile = 64;

// kRowTiles: m16 tiles per warp, so 64 or 128 query rows per block. 128 halves the K / V shared-memory reads
// per flop (each ldmatrix'd K / V fragment feeds two mma instead of one), which FlashAttention-2 needs on long
// sequences; 64 wastes less on short ones. The host picks (src/attention.cpp), a caller may force either.
template <int kHeadDim, int kRowTiles>
struct MmaConfig {
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  static_assert(kRowTiles == 1 || kRowTiles == 2, "64 or 128 query rows per block");
  static constexpr int kQueryTile = 16 * kRowTiles * kMmaWarps;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static constexpr int kQBytes = kQueryTile * kHeadDim * 2;
  static constexpr int kKVBytes = kKeyTile * kHeadDim * 2;
  static constexpr int kSmemBytes = kQBytes + 4 * kKVBytes;  // Q, K x 2, V x 2
};

// Two floats rounded to T and packed, `lo` in the lower half (the lower column of a fragment register).
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi);

template <>
__device__ __forceinline__ unsigned pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  unsigned u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

template <>
__device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  unsigned u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of kChunks chunks per row.
template <int kChunks>
__device__ __forceinline__ unsigned swizzle(int row, int chunk) {
  static_assert(kChunks % 8 == 0, "the XOR swizzle permutes groups of 8 chunks");
  return static_cast<unsigned>((row * kChunks + (chunk ^ (row & 7))) * 16);
}

// ldmatrix addresses into a swizzled tile with no XOR left in the unrolled loops. A lane reads rows
// row0 + row_in (row0 a compile-time multiple of 8, so row & 7 == row_in & 7 in every read) at logical chunk
// 2j + half (j compile-time). As 2j + half = 8 (j / 4) + (2 (j % 4) ^ half), the swizzled chunk is
// 8 (j / 4) + (2 (j % 4) ^ half ^ (row_in & 7)): four lane-dependent bases, everything else an immediate.
// Computing swizzle() per read instead makes the compiler hoist one address per (row, chunk) pair out of the
// key loop, which spills at 128-row tiles.
template <int kChunks>
struct LdmatrixAddress {
  unsigned base[4];
  __device__ __forceinline__ LdmatrixAddress(unsigned tile, int row_in, int half) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      base[i] = tile + static_cast<unsigned>(row_in * kChunks * 16 + 16 * ((2 * i) ^ half ^ (row_in & 7)));
  }
  __device__ __forceinline__ unsigned at(int row0, int j) const {
    return base[j & 3] + static_cast<unsigned>(row0 * kChunks * 16 + (j >> 2) * 128);
  }
};

// Starts the copy of rows [first, first + kRows) of one head of a [tokens, heads, D] tensor into a swizzled
// tile; rows at or past `valid` (counted from `first`) are zero-filled. `base` points at token 0 of the
// sequence in this head; `fallback` is any mapped address (never read: zero-filled copies read nothing).
// Thread i copies chunk i % kChunks of rows i / kChunks + j * kRowStep: the same chunk and the same swizzle
// in every row it touches (kRowStep is a multiple of 8), so one pointer stepping by kRowStep tokens and
// compile-time shared-memory offsets do; precomputing every address would cost two registers per chunk.
template <int kRows, int kHeadDim, typename T>
__device__ __forceinline__ void copy_rows_async(unsigned tile, const T* base, std::int64_t token_stride,
                                                std::int64_t first, std::int64_t valid, const void* fallback) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kRowStep = kMmaThreads / kChunks;
  static_assert(kMmaThreads % kChunks == 0 && kRowStep % 8 == 0 && kRows % kRowStep == 0, "copy geometry");
  const int row = static_cast<int>(threadIdx.x) / kChunks, chunk = static_cast<int>(threadIdx.x) % kChunks;
  const T* src = base + (first + row) * token_stride + chunk * 8;
  const std::int64_t step = kRowStep * token_stride;
  const unsigned dst = tile + swizzle<kChunks>(row, chunk);
#pragma unroll
  for (int j = 0; j < kRows / kRowStep; ++j) {
    const bool ok = row + j * kRowStep < valid;
    cp_async_16(dst + j * kRowStep * kChunks * 16, ok ? static_cast<const void*>(src) : fallback, ok);
    src += step;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The kernel. Grid: x = query-tile slot (attention_common.cuh), y = query head.
// ---------------------------------------------------------------------------------------------------------------

template <typename T, int kHeadDim, int kRowTiles>
__global__ void __launch_bounds__(kMmaThreads)
    attention_mma_kernel(const __grid_constant__ AttentionParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Cfg = MmaConfig<kHeadDim, kRowTiles>;
  constexpr int kChunks = Cfg::kChunks;
  constexpr int kScoreTiles = kKeyTile / 8;  // n8 tiles of S per m16 tile
  constexpr int kOutTiles = kHeadDim / 8;    // n8 tiles of O per m16 tile
  extern __shared__ __align__(128) unsigned char smem[];

  const QueryTile tile = find_query_tile(p, Cfg::kQueryTile, blockIdx.x);
  if (!tile.valid) return;
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / p.heads_per_kv;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_row0 = warp * 16 * kRowTiles;  // the warp's first row within the tile

  const T* q = static_cast<const T*>(p.q) + tile.q.start * p.q_token_stride + head * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + tile.k.start * p.k_token_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + tile.k.start * p.v_token_stride + kv_head * p.v_head_stride;

  const unsigned s_q = smem_address(smem);
  const unsigned s_k = s_q + Cfg::kQBytes;        // K buffer i at s_k + i * kKVBytes
  const unsigned s_v = s_k + 2 * Cfg::kKVBytes;   // V buffer i at s_v + i * kKVBytes

  // Q: rows 0-7 / 8-15 (lane bit 3) x k 0-7 / 8-15 (lane bit 4). K: keys 0-7 / 8-15 of an n-tile pair (lane
  // bit 4) x k 0-7 / 8-15 (lane bit 3). V (transposed): keys 0-7 / 8-15 (lane bit 3) x d-tile pair (lane bit 4).
  const LdmatrixAddress<kChunks> q_frag(s_q + warp_row0 * kChunks * 16, lane & 15, lane >> 4);
  const LdmatrixAddress<kChunks> k_frag(s_k, ((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
  const LdmatrixAddress<kChunks> v_frag(s_v, lane & 15, lane >> 4);

  const std::int64_t key_end = visible_key_end(tile, p.causal);
  const int key_tiles = static_cast<int>((key_end + kKeyTile - 1) / kKeyTile);
  const std::int64_t diagonal = tile.k.length - tile.q.length;

  // Key tiles run from the last to the first, so the masked ones (sequence end, diagonal) come first.
  auto load_key_tile = [&](int n, int buffer) {
    const std::int64_t key0 = static_cast<std::int64_t>(n) * kKeyTile;
    const std::int64_t valid = tile.k.length - key0;
    copy_rows_async<kKeyTile, kHeadDim>(s_k + buffer * Cfg::kKVBytes, k, p.k_token_stride, key0, valid, p.k);
    copy_rows_async<kKeyTile, kHeadDim>(s_v + buffer * Cfg::kKVBytes, v, p.v_token_stride, key0, valid, p.v);
  };
  copy_rows_async<Cfg::kQueryTile, kHeadDim>(s_q, q, p.q_token_stride, tile.m0, tile.rows, p.q);
  if (key_tiles > 0) load_key_tile(key_tiles - 1, 0);
  cp_async_commit();

  float o[kRowTiles][kOutTiles][4];
  float row_max[kRowTiles][2];  // running max of the raw scores of rows g and g + 8 (same in the 4 lanes of a group)
  float row_sum[kRowTiles][2];  // this lane's share of the row's sum of exponentials
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kOutTiles; ++dt)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[mt][dt][c] = 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.0f;
    }
  }

  for (int it = 0; it < key_tiles; ++it) {
    const int n = key_tiles - 1 - it;
    const int buffer = it & 1;
    if (it + 1 < key_tiles) {
      load_key_tile(n - 1, buffer ^ 1);  // that buffer was released by the barrier ending the last iteration
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const unsigned buffer_offset = buffer * Cfg::kKVBytes;

    // ---- S = Q K^T --------------------------------------------------------------------------------------------
    float s[kRowTiles][kScoreTiles][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[mt][nt][c] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      unsigned a[kRowTiles][4];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) ldmatrix_x4(a[mt], q_frag.at(mt * 16, kk));
#pragma unroll
      for (int np = 0; np < kScoreTiles / 2; ++np) {
        unsigned b[4];  // b0, b1 of n-tile 2np, then b0, b1 of n-tile 2np + 1
        ldmatrix_x4(b, k_frag.at(np * 16, kk) + buffer_offset);
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          mma_16816<T>(s[mt][2 * np], a[mt], b[0], b[1]);
          mma_16816<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // ---- mask: only tiles that cross the sequence end or the diagonal ----------------------------------------
    const std::int64_t key0 = static_cast<std::int64_t>(n) * kKeyTile;
    if (key_tile_needs_mask(tile, p.causal, key0, kKeyTile)) {
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const std::int64_t row = tile.m0 + warp_row0 + mt * 16 + g + (c >= 2 ? 8 : 0);
            const std::int64_t key = key0 + nt * 8 + 2 * t + (c & 1);
            if (key_hidden(row, key, tile.k.length, diagonal, p.causal)) s[mt][nt][c] = -INFINITY;
          }
    }

    // ---- online softmax: new max, rescale what came before, P = exp2(S * scale_log2 - max * scale_log2) ----
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float m = row_max[mt][r];
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt) m = fmaxf(m, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));  // the 4 lanes of a group share a row
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        // A row that has seen only masked keys keeps max -inf; subtracting 0 keeps exp2(-inf) = 0, not NaN.
        // Both products round the same way (no FMA contraction), so an unchanged max rescales by exactly 1:
        // a fused multiply-subtract would leave the rounding error of `base` in the exponent of every tile.
        const float base = m == -INFINITY ? 0.0f : __fmul_rn(m, p.scale_log2);
        const float rescale = fast_exp2(__fmul_rn(row_max[mt][r], p.scale_log2) - base);
        row_max[mt][r] = m;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kScoreTiles; ++nt)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float e = fast_exp2(s[mt][nt][2 * r + c] * p.scale_log2 - base);
            s[mt][nt][2 * r + c] = e;
            sum += e;
          }
        row_sum[mt][r] = row_sum[mt][r] * rescale + sum;
#pragma unroll
        for (int dt = 0; dt < kOutTiles; ++dt) {
          o[mt][dt][2 * r] *= rescale;
          o[mt][dt][2 * r + 1] *= rescale;
        }
      }

    // ---- O += P V ---------------------------------------------------------------------------------------------
#pragma unroll
    for (int ks = 0; ks < kKeyTile / 16; ++ks) {
      unsigned pa[kRowTiles][4];  // A fragment of keys 16ks..16ks+15 from the C fragments of n-tiles 2ks, 2ks+1
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        pa[mt][0] = pack2<T>(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kOutTiles / 2; ++dp) {
        unsigned b[4];  // b0, b1 of d-tile 2dp, then b0, b1 of d-tile 2dp + 1
        ldmatrix_x4_trans(b, v_frag.at(ks * 16, dp) + buffer_offset);
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          mma_16816<T>(o[mt][2 * dp], pa[mt], b[0], b[1]);
          mma_16816<T>(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }

  // ---- epilogue ---------------------------------------------------------------------------------------------
  cp_async_wait<0>();  // with no key tile, Q's copy may still be landing in the staging area
  __syncthreads();
  const std::int64_t lse_row0 = tile.q.start + tile.m0;
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[mt][r];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      // No visible key (or only scores of -inf): O = 0, LSE = -inf (log of an empty sum). A NaN score makes the
      // sum NaN, and with it O and LSE, as in the reference.
      const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
      const int row = warp_row0 + mt * 16 + g + 8 * r;
#pragma unroll
      for (int dt = 0; dt < kOutTiles; ++dt)
        *reinterpret_cast<unsigned*>(smem + swizzle<kChunks>(row, dt) + 4 * t) =
            pack2<T>(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
      if (p.lse != nullptr && t == 0 && row < tile.rows)
        p.lse[(lse_row0 + row) * p.heads_q + head] =
            sum == 0.0f ? -INFINITY : row_max[mt][r] * p.scale + logf(sum);
    }
  __syncthreads();
  T* out = static_cast<T*>(p.o) + (tile.q.start + tile.m0) * p.o_token_stride + head * p.o_head_stride;
#pragma unroll
  for (int i = 0; i < Cfg::kQueryTile * kChunks / kMmaThreads; ++i) {
    const int index = i * kMmaThreads + static_cast<int>(threadIdx.x);
    const int row = index / kChunks, chunk = index % kChunks;
    if (row < tile.rows)
      *reinterpret_cast<uint4*>(out + row * p.o_token_stride + chunk * 8) =
          *reinterpret_cast<const uint4*>(smem + swizzle<kChunks>(row, chunk));
  }
#endif
}

template <typename T, int kHeadDim, int kRowTiles>
Status launch(const AttentionParams& p, cudaStream_t stream) {
  using Cfg = MmaConfig<kHeadDim, kRowTiles>;
  auto* kernel = attention_mma_kernel<T, kHeadDim, kRowTiles>;
  dim3 grid;
  RAGGED_RETURN_IF_ERROR(attention_grid(p, Cfg::kQueryTile, grid));
  // More than 48 KB of dynamic shared memory needs an explicit opt-in (any device this kernel runs on has it).
  RAGGED_RETURN_IF_ERROR(
      from_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes),
                "cudaFuncSetAttribute(attention_mma_kernel)"));
  kernel<<<grid, kMmaThreads, Cfg::kSmemBytes, stream>>>(p);
  return check_launch("attention_mma_kernel");
}

template <typename T, int kHeadDim>
Status launch_tile(const AttentionParams& p, int query_tile, cudaStream_t stream) {
  switch (query_tile) {
    case MmaConfig<kHeadDim, 1>::kQueryTile: return launch<T, kHeadDim, 1>(p, stream);
    case MmaConfig<kHeadDim, 2>::kQueryTile: return launch<T, kHeadDim, 2>(p, stream);
    default:
      return fail(Status::kInvalidArgument, "attention: the tensor-core kernel has no query tile of " +
                                                std::to_string(query_tile) + " rows (64 or 128)");
  }
}

}  // namespace

bool attention_mma_supports(int head_dim, int query_tile) {
  return (head_dim == 64 || head_dim == 128) && (query_tile == 64 || query_tile == 128);
}

template <typename T>
Status launch_attention_mma(const AttentionParams& params, int head_dim, int query_tile, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return launch_tile<T, 64>(params, query_tile, stream);
    case 128: return launch_tile<T, 128>(params, query_tile, stream);
    default:
      return fail(Status::kUnsupportedShape,
                  "attention: no tensor-core kernel for head_dim " + std::to_string(head_dim) + " (64 or 128)");
  }
}

template Status launch_attention_mma<__half>(const AttentionParams&, int, int, cudaStream_t);
template Status launch_attention_mma<__nv_bfloat16>(const AttentionParams&, int, int, cudaStream_t);

}  // namespace detail
}  // namespace ragged
