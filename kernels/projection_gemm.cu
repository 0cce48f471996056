// The batch-invariant input-projection GEMM (projection_launch.h): out = x w^T, float output, with each output's
// summation order fixed by the inner size alone.
//
// One block computes a 128 x 128 tile of out (128 rows of x by 128 rows of w) with 256 threads, walking k in
// tiles staged in shared memory two deep. Rows and k past the ends are staged as zeros, so every block runs the
// same instruction sequence and a row's products do not depend on where its tile starts or ends.
//   half / bfloat16: k tiles of 32; 8 warps as 2 x 4, each 64 x 32 outputs of mma.sync m16n8k16 (float
//                    accumulators, one per output: k is summed 16 at a time in ascending order), fragments from
//                    ldmatrix; operands arrive by cp.async when rows are 16-byte aligned.
//   float:           k tiles of 8; each thread 8 x 8 outputs by FFMA, k ascending (never TF32); operands pass
//                    through registers, the x tile transposed so a thread's 8 rows are two float4 reads.
// No split of k across warps or blocks, no atomics: the result is the same bits whatever the grid.
#include "element_convert.cuh"
#include "launch.cuh"
#include "mma_sync.cuh"
#include "async_copy.cuh"
#include "projection_launch.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 128;  // rows of x (tokens) per block
constexpr int kTileCols = 128;  // rows of w (output columns) per block
static_assert(kTileRows == kTileCols, "both operand tiles are staged by the same TileStager shape");

template <typename T>
struct ProjectionParams {
  const T* x = nullptr;
  const T* w = nullptr;
  float* out = nullptr;
  std::int64_t rows = 0;
  std::int64_t ld_out = 0;
  std::int64_t first_row_tile = 0;  // tiles before this launch (grids are capped; big shapes take several)
  std::int64_t first_col_tile = 0;
  int k_size = 0;
  int cols = 0;
  bool wide_stores = false;  // out rows take float2 (16-bit kernel) / float4 (float kernel) stores
};

// ---------------------------------------------------------------------------------------------------------------
// half / bfloat16: tensor cores.

constexpr int kTileK = 32;
// 80-byte shared rows: the 8 rows of one ldmatrix matrix start in 8 different 16-byte bank groups.
constexpr int kSharedLd = kTileK + 8;
constexpr int kSharedBytes16 = 2 * (kTileRows + kTileCols) * kSharedLd * 2;  // two stages of both operands

// One thread's share of staging a 128-row operand tile: pieces of 8 elements (16 bytes), 512 per tile, two per
// thread, at a fixed row and k offset within the tile. Rows and addresses are worked out once per block; each k
// tile only adds k0. Outside the matrix (rows past row_count, k past k_size) the piece is zeros.
template <typename T, bool kVectorRows>
struct TileStager {
  static constexpr int kPieces = kTileRows * (kTileK / 8) / kThreads;
  static_assert(kTileRows * (kTileK / 8) % kThreads == 0, "every thread stages the same number of pieces");
  const T* row_start[kPieces];  // the piece's row (the matrix's first row when the row is outside)
  bool row_inside[kPieces];
  int offset[kPieces];  // the piece's element offset in the shared tile
  int kc[kPieces];      // the piece's k within a k tile

  __device__ __forceinline__ TileStager(const T* matrix, std::int64_t first_row, std::int64_t row_count,
                                        int k_size) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int piece = static_cast<int>(threadIdx.x) + i * kThreads;
      const int r = piece >> 2;
      kc[i] = (piece & 3) * 8;
      const std::int64_t row = first_row + r;
      row_inside[i] = row < row_count;
      row_start[i] = row_inside[i] ? matrix + row * k_size : matrix;
      offset[i] = r * kSharedLd + kc[i];
    }
  }

  __device__ __forceinline__ void stage(T* tile, int k_size, int k0) const {
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int k = k0 + kc[i];
      if constexpr (kVectorRows) {
        // k_size is a multiple of 8 here, so a piece is wholly inside or wholly outside.
        const bool inside = row_inside[i] && k < k_size;
        cp_async_16(smem_address(tile + offset[i]), inside ? row_start[i] + k : row_start[i], inside);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          tile[offset[i] + e] = row_inside[i] && k + e < k_size ? row_start[i][k + e] : from_float<T>(0.0f);
      }
    }
  }
};

// acc[m-tile][n-tile] += the warp's 64 x 32 outputs over one staged k tile, k ascending.
// A fragments (x rows, row-major [m][k]) and B fragments (w rows, [n][k]) both come from a plain ldmatrix.x4:
// for A, lanes 0-15 address rows 0-15 at k 0-7 and lanes 16-31 the same rows at k 8-15 (a0..a3); for B, the
// four matrices are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b0, b1 of two n-tiles.
template <typename T>
__device__ __forceinline__ void multiply_tile(float (&acc)[4][4][4], const T* a_tile, const T* b_tile, int warp_m,
                                              int warp_n, int lane) {
  constexpr unsigned kBytes = sizeof(T);
  const unsigned a_base = smem_address(a_tile + (warp_m * 64 + (lane & 15)) * kSharedLd + (lane >> 4) * 8);
  const unsigned b_base =
      smem_address(b_tile + (warp_n * 32 + (lane & 7) + (lane >> 4) * 8) * kSharedLd + ((lane >> 3) & 1) * 8);
#pragma unroll
  for (int ks = 0; ks < kTileK; ks += 16) {
    unsigned a[4][4], b[2][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) ldmatrix_x4(a[mt], a_base + (mt * 16 * kSharedLd + ks) * kBytes);
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) ldmatrix_x4(b[pair], b_base + (pair * 16 * kSharedLd + ks) * kBytes);
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        mma_16816<T>(acc[mt][nt], a[mt], b[nt >> 1][(nt & 1) * 2], b[nt >> 1][(nt & 1) * 2 + 1]);
  }
}

template <typename T, bool kVectorRows>
__global__ void __launch_bounds__(kThreads) projection_gemm_mma_kernel(const __grid_constant__ ProjectionParams<T> p) {
  extern __shared__ __align__(128) unsigned char shared[];
  T* a_tiles = reinterpret_cast<T*>(shared);               // [2][kTileRows][kSharedLd]
  T* b_tiles = a_tiles + 2 * kTileRows * kSharedLd;         // [2][kTileCols][kSharedLd]
  const std::int64_t m0 = (p.first_row_tile + blockIdx.x) * kTileRows;
  const std::int64_t n0 = (p.first_col_tile + blockIdx.y) * kTileCols;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int warp_m = warp >> 2, warp_n = warp & 3;

  float acc[4][4][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  const TileStager<T, kVectorRows> x_stager(p.x, m0, p.rows, p.k_size);
  const TileStager<T, kVectorRows> w_stager(p.w, n0, p.cols, p.k_size);
  const int k_tiles = (p.k_size + kTileK - 1) / kTileK;
  x_stager.stage(a_tiles, p.k_size, 0);
  w_stager.stage(b_tiles, p.k_size, 0);
  cp_async_commit();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < k_tiles) {
      const int next = stage ^ 1;
      x_stager.stage(a_tiles + next * kTileRows * kSharedLd, p.k_size, (kt + 1) * kTileK);
      w_stager.stage(b_tiles + next * kTileCols * kSharedLd, p.k_size, (kt + 1) * kTileK);
      cp_async_commit();
      cp_async_wait<1>();  // all but the newest group: tile kt has landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    multiply_tile<T>(acc, a_tiles + stage * kTileRows * kSharedLd, b_tiles + stage * kTileCols * kSharedLd, warp_m,
                     warp_n, lane);
    __syncthreads();  // everyone is done with this stage before the next iteration refills it
  }

  // C fragment: c0, c1 at (row g, columns 2t, 2t + 1), c2, c3 at row g + 8.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int half_row = 0; half_row < 2; ++half_row) {
      const std::int64_t row = m0 + warp_m * 64 + mt * 16 + g + half_row * 8;
      if (row >= p.rows) continue;
      float* out_row = p.out + row * p.ld_out;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const std::int64_t col = n0 + warp_n * 32 + nt * 8 + 2 * t;
        const float v0 = acc[mt][nt][half_row * 2], v1 = acc[mt][nt][half_row * 2 + 1];
        if (p.wide_stores && col + 1 < p.cols) {
          *reinterpret_cast<float2*>(out_row + col) = make_float2(v0, v1);
        } else {
          if (col < p.cols) out_row[col] = v0;
          if (col + 1 < p.cols) out_row[col + 1] = v1;
        }
      }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// float: FFMA.

constexpr int kTileKF = 8;
// x is staged transposed ([k][row]); 132-float rows put the two k rows a warp stores at once in different banks.
constexpr int kSharedLdF = kTileRows + 4;
constexpr int kSharedBytesF = 2 * 2 * kTileKF * kSharedLdF * static_cast<int>(sizeof(float));

// The 4 elements k .. k + 3 of `row` of a row-major [row_count, k_size] matrix; zeros outside it.
template <bool kVectorRows>
__device__ __forceinline__ void fetch_quad(float (&v)[4], const float* matrix, std::int64_t row,
                                           std::int64_t row_count, int k_size, int k) {
  if constexpr (kVectorRows) {
    // k_size is a multiple of 4 here.
    if (row < row_count && k < k_size) {
      const float4 q = *reinterpret_cast<const float4*>(matrix + row * k_size + k);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      v[0] = v[1] = v[2] = v[3] = 0.0f;
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = row < row_count && k + e < k_size ? matrix[row * k_size + k + e] : 0.0f;
  }
}

// Thread (tx, ty) of the 16 x 16 owns rows {ty * 4 + i, 64 + ty * 4 + i} and columns {tx * 4 + j, 64 + tx * 4 + j}
// (i, j < 4) of the block tile: its shared reads are float4, and a warp's 16 column quads are contiguous.
template <bool kVectorRows>
__global__ void __launch_bounds__(kThreads, 2)
    projection_gemm_ffma_kernel(const __grid_constant__ ProjectionParams<float> p) {
  extern __shared__ __align__(16) float shared_f[];
  float* a_tiles = shared_f;                            // [2][kTileKF][kSharedLdF]  (x, transposed)
  float* b_tiles = a_tiles + 2 * kTileKF * kSharedLdF;  // [2][kTileKF][kSharedLdF]  (w, transposed)
  const std::int64_t m0 = (p.first_row_tile + blockIdx.x) * kTileRows;
  const std::int64_t n0 = (p.first_col_tile + blockIdx.y) * kTileCols;
  const int tx = static_cast<int>(threadIdx.x & 15), ty = static_cast<int>(threadIdx.x >> 4);
  // Staging: thread i moves k quad (i % 2) of tile row i / 2 of each operand.
  const int load_row = static_cast<int>(threadIdx.x >> 1), load_k = static_cast<int>(threadIdx.x & 1) * 4;

  float a_next[4], b_next[4];
  auto fetch = [&](int k0) {
    fetch_quad<kVectorRows>(a_next, p.x, m0 + load_row, p.rows, p.k_size, k0 + load_k);
    fetch_quad<kVectorRows>(b_next, p.w, n0 + load_row, p.cols, p.k_size, k0 + load_k);
  };
  auto store = [&](int stage) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      a_tiles[(stage * kTileKF + load_k + e) * kSharedLdF + load_row] = a_next[e];
      b_tiles[(stage * kTileKF + load_k + e) * kSharedLdF + load_row] = b_next[e];
    }
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

  const int k_tiles = (p.k_size + kTileKF - 1) / kTileKF;
  fetch(0);
  store(0);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < k_tiles) fetch((kt + 1) * kTileKF);  // in flight while this tile multiplies
    const float* a = a_tiles + stage * kTileKF * kSharedLdF;
    const float* b = b_tiles + stage * kTileKF * kSharedLdF;
#pragma unroll
    for (int kk = 0; kk < kTileKF; ++kk) {
      const float4 a_lo = *reinterpret_cast<const float4*>(a + kk * kSharedLdF + ty * 4);
      const float4 a_hi = *reinterpret_cast<const float4*>(a + kk * kSharedLdF + 64 + ty * 4);
      const float4 b_lo = *reinterpret_cast<const float4*>(b + kk * kSharedLdF + tx * 4);
      const float4 b_hi = *reinterpret_cast<const float4*>(b + kk * kSharedLdF + 64 + tx * 4);
      const float av[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float bv[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    // The other stage was last read in the previous iteration, before its closing barrier.
    if (kt + 1 < k_tiles) store(stage ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const std::int64_t row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (row >= p.rows) continue;
    float* out_row = p.out + row * p.ld_out;
#pragma unroll
    for (int half_cols = 0; half_cols < 2; ++half_cols) {
      const std::int64_t col = n0 + half_cols * 64 + tx * 4;
      const float* v = &acc[i][half_cols * 4];
      if (p.wide_stores && col + 3 < p.cols) {
        *reinterpret_cast<float4*>(out_row + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (col + e < p.cols) out_row[col + e] = v[e];
      }
    }
  }
}

bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

template <typename T>
Status launch_projection_gemm(const T* x, const T* w, std::int64_t rows, int k_size, int cols, float* out,
                              std::int64_t ld_out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::kSuccess;
  if (k_size > kProjectionGemmMaxK)
    return fail(Status::kSizeOverflow, "projection GEMM: k_size = " + std::to_string(k_size) + " exceeds 2^30");
  constexpr bool kFloat = std::is_same<T, float>::value;
  ProjectionParams<T> p;
  p.x = x;
  p.w = w;
  p.out = out;
  p.rows = rows;
  p.ld_out = ld_out;
  p.k_size = k_size;
  p.cols = cols;
  const bool vector_rows = static_cast<std::int64_t>(k_size) * sizeof(T) % 16 == 0 && aligned_to(x, 16) &&
                           aligned_to(w, 16);
  p.wide_stores = kFloat ? ld_out % 4 == 0 && aligned_to(out, 16) : ld_out % 2 == 0 && aligned_to(out, 8);

  // Grids are capped at 2^31 - 1 blocks in x and 65535 in y: larger shapes take several launches.
  constexpr std::int64_t kMaxGridX = 0x7fffffff, kMaxGridY = 65535;
  const std::int64_t row_tiles = (rows + kTileRows - 1) / kTileRows;
  const std::int64_t col_tiles = (static_cast<std::int64_t>(cols) + kTileCols - 1) / kTileCols;
  for (std::int64_t ct = 0; ct < col_tiles; ct += kMaxGridY)
    for (std::int64_t rt = 0; rt < row_tiles; rt += kMaxGridX) {
      p.first_row_tile = rt;
      p.first_col_tile = ct;
      const dim3 grid(static_cast<unsigned>(std::min(kMaxGridX, row_tiles - rt)),
                      static_cast<unsigned>(std::min(kMaxGridY, col_tiles - ct)));
      if constexpr (kFloat) {
        if (vector_rows) projection_gemm_ffma_kernel<true><<<grid, kThreads, kSharedBytesF, stream>>>(p);
        else projection_gemm_ffma_kernel<false><<<grid, kThreads, kSharedBytesF, stream>>>(p);
      } else {
        if (vector_rows) projection_gemm_mma_kernel<T, true><<<grid, kThreads, kSharedBytes16, stream>>>(p);
        else projection_gemm_mma_kernel<T, false><<<grid, kThreads, kSharedBytes16, stream>>>(p);
      }
      const Status s = check_launch("projection_gemm");
      if (s != Status::kSuccess) return s;
    }
  return Status::kSuccess;
}

template Status launch_projection_gemm<float>(const float*, const float*, std::int64_t, int, int, float*,
                                              std::int64_t, cudaStream_t);
template Status launch_projection_gemm<__half>(const __half*, const __half*, std::int64_t, int, int, float*,
                                               std::int64_t, cudaStream_t);
template Status launch_projection_gemm<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, std::int64_t, int,
                                                      int, float*, std::int64_t, cudaStream_t);

}  // namespace detail
}  // namespace ragged
