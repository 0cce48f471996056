// Device building blocks of the recurrent kernels (kernels/rnn_step.cu, kernels/rnn_persistent.cu): the
// block-level product of the previous hidden state with the block's slice of the recurrent weights
// (rnn_geometry.h), and the two phases of a step that use it:
//   gates phase: all gates of the block's hidden units for the active slots, fused with the nonlinearities,
//                the cell update and the output / next-state stores;
//   proj phase:  (LSTM with proj_size) h = W_hr r for the block's rows of W_hr.
// The same phase code runs with the weights resident in shared memory for the whole kernel (persistent) or
// streamed through shared memory chunk by chunk (one launch per step).
//
// half / bfloat16 multiply on tensor cores (ldmatrix + mma.sync m16n8k16, float accumulators); float uses FFMA
// in a fixed order (TF32 is never used). Operands move global -> shared by cp.async, two to four chunks deep.
// Activations written by other blocks during a persistent kernel are read through L2 only (cp.async.cg, or
// ld.global.cg on the unaligned path), which bypasses the (non-coherent) L1, after the grid barrier.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "async_copy.cuh"
#include "element_convert.cuh"
#include "launch.cuh"
#include "mma_sync.cuh"
#include "ragged/status.h"
#include "rnn_geometry.h"
#include "rnn_launch.h"

namespace ragged {
namespace detail {
namespace rnn {

// The launch parameters of one recurrent kernel: the layer's arguments plus the block geometry.
template <typename T>
struct KernelParams {
  RnnRecurrenceArgs<T> a;
  int units = 0;       // hidden units per block in the gates phase
  int slices = 0;      // blocks per direction
  int proj_units = 0;  // W_hr rows per block in the proj phase
  RnnGemmGeometry gate, proj;
  RnnSharedLayout shared;
  bool vec_h = false;     // h rows (state elements) can move as 16-byte vectors
  bool vec_r = false;     // r rows (hidden elements) likewise
  bool vec_w_hh = false;  // W_hh rows likewise (both directions aligned)
  bool vec_w_hr = false;
};

// Which operands may move as 16-byte vectors: rows whose byte size is a multiple of 16, from 16-byte aligned
// bases (the state buffers come from the 256-byte aligned workspace).
template <typename T>
void fill_vector_flags(KernelParams<T>& p) {
  const RnnRecurrenceArgs<T>& a = p.a;
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool state_rows = a.state * static_cast<std::int64_t>(sizeof(T)) % 16 == 0;
  const bool hidden_rows = a.hidden * static_cast<std::int64_t>(sizeof(T)) % 16 == 0;
  p.vec_h = state_rows;
  p.vec_r = hidden_rows;
  p.vec_w_hh = state_rows;
  p.vec_w_hr = hidden_rows;
  for (int d = 0; d < a.dirs; ++d) {
    p.vec_w_hh = p.vec_w_hh && aligned16(a.w_hh[d]);
    if (a.proj > 0) p.vec_w_hr = p.vec_w_hr && aligned16(a.w_hr[d]);
  }
}



// Accurate (not __expf) so that float results stay within a few ulps of the double reference.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// ---------------------------------------------------------------------------------------------------------------
// One warp's accumulators for one n-tile: C[m][n] += A[m][k] * W[n][k] for the 16 weight rows n of the tile and
// the chunk's batch rows m (m-tile 0, and m-tile 1 when two_m), over the warp's k-steps of a staged chunk: steps
// first, first + stride, ... below cols (columns of the chunk).

// half / bfloat16: tensor cores (ldmatrix + mma.sync m16n8k16, mma_sync.cuh). A row-major [m][k] tile is the A
// fragment and a row-major [n][k] weight tile the B fragment, both with a plain ldmatrix.x4: the A matrices are
// (rows 0-7 | 8-15) x (k 0-7 | 8-15) in the order a0..a3, the W matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
// (n 8-15, k 0-7), (n 8-15, k 8-15), i.e. b0, b1 of the first 8 columns of C and then of the last 8.
// The warp's k-steps alternate between two accumulator sets (two independent mma chains per output fragment
// instead of one, since consecutive mma on one accumulator wait for each other), added at the end: set =
// (global k-step / splits) % 2, fixed by the shapes like everything else in the summation order.
template <typename T>
struct TileAcc {
  float c[2][2][2][4];  // [m-tile][set][n half][C fragment]
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) c[m][s][h][i] = 0.0f;
  }
  template <int kSet>
  __device__ __forceinline__ void multiply(int m, const unsigned (&a)[4], const unsigned (&w)[4]) {
    mma_16816<T>(c[m][kSet][0], a, w[0], w[1]);
    mma_16816<T>(c[m][kSet][1], a, w[2], w[3]);
  }
  // `first` must be the warp's first step in a chunk that starts at an even multiple of `stride` (see
  // kRnnKChunkBytes), so that the parity of a step within the chunk is its global set. Both steps' fragments
  // are loaded before any multiplies, so the ldmatrix of the second step overlap the first.
  __device__ __forceinline__ void add_steps(const T* a_chunk, int a_ld, bool two_m, const T* w_tile, int w_ld,
                                            int first, int cols, int stride) {
    const int lane = threadIdx.x & 31;
    constexpr unsigned kBytes = sizeof(T);
    const unsigned a0 = smem_address(a_chunk + ((lane & 7) + ((lane >> 3) & 1) * 8) * a_ld + (lane >> 4) * 8);
    const unsigned a1 = a0 + 16 * a_ld * kBytes;
    const unsigned w = smem_address(w_tile + ((lane & 7) + (lane >> 4) * 8) * w_ld + ((lane >> 3) & 1) * 8);
    for (int kk = first; kk < cols; kk += 2 * stride) {
      const bool second = kk + stride < cols;
      const unsigned at = kk * kBytes, next = (kk + stride) * kBytes;
      unsigned w0[4], x0[4], y0[4], w1[4], x1[4], y1[4];  // x: m-tile 0, y: m-tile 1; 0 / 1: the two steps
      ldmatrix_x4(w0, w + at);
      ldmatrix_x4(x0, a0 + at);
      if (two_m) ldmatrix_x4(y0, a1 + at);
      if (second) {
        ldmatrix_x4(w1, w + next);
        ldmatrix_x4(x1, a0 + next);
        if (two_m) ldmatrix_x4(y1, a1 + next);
      }
      multiply<0>(0, x0, w0);
      if (two_m) multiply<0>(1, y0, w0);
      if (second) {
        multiply<1>(0, x1, w1);
        if (two_m) multiply<1>(1, y1, w1);
      }
    }
  }
  // Tile m of the n-tile into out[16][ldc] (the two sets added).
  __device__ __forceinline__ void store(int m, float* out, int ldc) const {
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2, col = 2 * (lane & 3);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      *reinterpret_cast<float2*>(out + g * ldc + h * 8 + col) =
          make_float2(c[m][0][h][0] + c[m][1][h][0], c[m][0][h][1] + c[m][1][h][1]);
      *reinterpret_cast<float2*>(out + (g + 8) * ldc + h * 8 + col) =
          make_float2(c[m][0][h][2] + c[m][1][h][2], c[m][0][h][3] + c[m][1][h][3]);
    }
  }
};

// float: lane (n = lane % 16, half = lane / 16) owns column n of rows half * 8 .. half * 8 + 7 of each m-tile,
// and adds the products in k order (TF32 is never used). 16-byte shared loads: the 8 lanes of a phase read 8 W
// rows (distinct banks thanks to the row skew) and one broadcast A row; each W vector feeds both m-tiles.
template <>
struct TileAcc<float> {
  float v[2][8];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 8; ++i) v[m][i] = 0.0f;
  }
  template <int kTiles>
  __device__ __forceinline__ void step(const float* a, int lda, const float* w, int ldw) {
    const int lane = threadIdx.x & 31;
    const int n = lane & 15, row0 = (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < 16; kk += 4) {
      const float4 wv = *reinterpret_cast<const float4*>(w + n * ldw + kk);
#pragma unroll
      for (int m = 0; m < kTiles; ++m)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 av = *reinterpret_cast<const float4*>(a + (m * 16 + row0 + i) * lda + kk);
          v[m][i] = fmaf(av.x, wv.x, v[m][i]);
          v[m][i] = fmaf(av.y, wv.y, v[m][i]);
          v[m][i] = fmaf(av.z, wv.z, v[m][i]);
          v[m][i] = fmaf(av.w, wv.w, v[m][i]);
        }
    }
  }
  __device__ __forceinline__ void add_steps(const float* a_chunk, int a_ld, bool two_m, const float* w_tile, int w_ld,
                                            int first, int cols, int stride) {
    if (two_m) {
      for (int kk = first; kk < cols; kk += stride) step<2>(a_chunk + kk, a_ld, w_tile + kk, w_ld);
    } else {
      for (int kk = first; kk < cols; kk += stride) step<1>(a_chunk + kk, a_ld, w_tile + kk, w_ld);
    }
  }
  __device__ __forceinline__ void store(int m, float* c, int ldc) const {
    const int lane = threadIdx.x & 31;
    const int n = lane & 15, row0 = (lane >> 4) * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) c[(row0 + i) * ldc + n] = v[m][i];
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Staging: rows [0, rows) x columns [k0, k0 + cols) of a row-major source (src_ld elements per row, k valid
// columns) into shared dst [rows][ld]; zeros where row_of(q) < 0 or the column is >= k.
// vec (16-byte rows and bases): cp.async, which the caller commits and waits for; it reads through L2 only, so
// data other blocks wrote during this kernel is seen after the grid barrier. Otherwise the copy is done when
// this returns, with kCoherent choosing L2-only loads over the read-only path, and four loads in flight per
// thread.

template <bool kCoherent, typename V>
__device__ __forceinline__ V load_global(const V* p) {
  if constexpr (kCoherent) return __ldcg(p);
  else return __ldg(p);
}

template <typename T, bool kCoherent, typename RowOf>
__device__ __forceinline__ void stage_rows(T* dst, int ld, int rows, int cols, const T* src, std::int64_t src_ld,
                                           int k0, int k, bool vec, RowOf row_of) {
  if (vec) {
    constexpr int kV = 16 / sizeof(T);
    const int vecs_per_row = cols / kV;  // cols is a multiple of 16 elements
    const unsigned dst_base = smem_address(dst);
    // Thread i copies vectors i, i + blockDim.x, ...: (row q, vector v) advanced without a division per copy.
    int q = static_cast<int>(threadIdx.x) / vecs_per_row, v = static_cast<int>(threadIdx.x) - q * vecs_per_row;
    const int q_step = static_cast<int>(blockDim.x) / vecs_per_row;
    const int v_step = static_cast<int>(blockDim.x) - q_step * vecs_per_row;
    while (q < rows) {
      const int col = k0 + v * kV;
      const std::int64_t row = row_of(q);
      const bool valid = row >= 0 && col < k;
      cp_async_16(dst_base + static_cast<unsigned>((q * ld + v * kV) * sizeof(T)),
                  valid ? static_cast<const void*>(src + row * src_ld + col) : static_cast<const void*>(src), valid);
      q += q_step;
      v += v_step;
      if (v >= vecs_per_row) {
        v -= vecs_per_row;
        ++q;
      }
    }
  } else {
    constexpr int kInFlight = 4;
    const int count = rows * cols;
    for (int i0 = threadIdx.x; i0 < count; i0 += kInFlight * blockDim.x) {
      T value[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x);
        const int q = i / cols;
        const int col = k0 + (i - q * cols);
        const std::int64_t row = i < count ? row_of(q) : -1;
        value[u] = row >= 0 && col < k ? load_global<kCoherent>(src + row * src_ld + col) : from_float<T>(0.0f);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x);
        const int q = i / cols;
        if (i < count) dst[q * ld + (i - q * cols)] = value[u];
      }
    }
  }
}

// The W_hh row of the block's gate row q (gate q / units, unit u0 + q % units), or -1 for the padding rows past
// its gates * units and the units past the hidden size.
struct GateWeightRows {
  int units;
  int gates;
  std::int64_t hidden;
  std::int64_t u0;
  __device__ __forceinline__ std::int64_t operator()(int q) const {
    const int gate = q / units, u = q - gate * units;
    return q < gates * units && u0 + u < hidden ? gate * hidden + u0 + u : -1;
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The block product for the `rows_here` batch rows of `act` (act_ld elements apart; rows up to the next
// multiple of 16 are zero, later ones are not computed): fills partials[split][m][q] (ld rows_pad + 4) for the
// block's weight rows q. With kResident the weights already sit in shared memory [rows_pad][ld(k_pad)] at
// weights_at; otherwise each k chunk of them is staged next to the activations, layout.stages buffers deep like
// them. Streamed weights: the first kept_chunks chunks are not staged, they sit at layout.kept_weights for the
// whole kernel (stage_kept_chunks), chunk c one weight_buffer after chunk c - 1; the summation order is the same
// either way, so are the bits.
//
// Two calls: begin_chunk_product stages the first stages - 1 k chunks, chunk_product the rest while it
// multiplies, and ends with a barrier after which the partials may be read and the stage buffers are free. So a
// phase begins the next batch chunk's product before the epilogue of this one (gates_phase, proj_phase): its
// first loads then overlap that epilogue instead of following it (by cp.async; rows that are not 16-byte
// aligned are copied before begin returns, ahead of the epilogue but not beside it). Why: a step with more than
// kRnnMChunk active rows ran its batch chunks one after the other, each a chain of the first chunk's round trip,
// the product, and the epilogue's own loads (H200, 087a77a: bfloat16 H = 1024, 9.3 us a step at batch 16, one
// chunk, and 14.3 at batch 64, two chunks in about half the steps; batch 256 slower than cuDNN).
template <typename T, typename WeightRowOf>
struct ProductOperands {
  std::size_t weights_at;  // resident weights, or the streamed weights' first stage buffer
  int kept_chunks;         // streamed: leading k chunks kept in shared memory (0 where resident)
  const T* act;
  std::int64_t act_ld;
  bool act_vec;
  int rows_here;
  const T* w;
  bool w_vec;
  WeightRowOf w_row_of;
};

// Stages k chunk c of the operands into buffer b and commits one cp.async group for it.
template <typename T, bool kResident, typename WeightRowOf>
__device__ __forceinline__ void stage_product_chunk(const RnnGemmGeometry& g, const RnnSharedLayout& layout,
                                                    unsigned char* shared, const ProductOperands<T, WeightRowOf>& o,
                                                    int c, int b) {
  const int k0 = c * g.k_chunk;
  const int cols = rnn_chunk_columns(g, k0);
  const int m_rows = (o.rows_here + 15) / 16 * 16;
  const int rows_here = o.rows_here;
  auto act_row = [&](int m) -> std::int64_t { return m < rows_here ? m : -1; };
  stage_rows<T, true>(reinterpret_cast<T*>(shared + layout.activations + b * layout.activation_buffer),
                      rnn_shared_ld(g.k_chunk, sizeof(T)), m_rows, cols, o.act, o.act_ld, k0, g.k, o.act_vec, act_row);
  if constexpr (!kResident) {
    if (c >= o.kept_chunks)
      stage_rows<T, false>(reinterpret_cast<T*>(shared + o.weights_at + b * layout.weight_buffer),
                           rnn_shared_ld(g.k_chunk, sizeof(T)), g.rows_pad, cols, o.w, g.k, k0, g.k, o.w_vec,
                           o.w_row_of);
  }
  cp_async_commit();
}

// Chunk c sits in buffer c % stages. Every pass commits one group, empty past the last chunk, so that waiting
// for all but the newest stages - 1 groups always means chunk c has landed.
template <typename T, bool kResident, typename WeightRowOf>
__device__ __forceinline__ void begin_chunk_product(const RnnGemmGeometry& g, const RnnSharedLayout& layout,
                                                    unsigned char* shared, const ProductOperands<T, WeightRowOf>& o) {
  const int chunks = rnn_k_chunks(g);
  for (int c = 0; c < layout.stages - 1; ++c) {
    if (c < chunks) stage_product_chunk<T, kResident>(g, layout, shared, o, c, c);
    else cp_async_commit();
  }
}

// Waits for all but the newest stages - 1 cp.async groups (wait_group takes an immediate: exact up to
// kRnnResidentMaxStages buffers, more than needed past it, still correct).
__device__ __forceinline__ void wait_for_chunk(int stages) {
  static_assert(kRnnResidentMaxStages == 4 && kRnnStreamedStages <= 4, "one case per stage count");
  if (stages >= 4) cp_async_wait<3>();
  else if (stages == 3) cp_async_wait<2>();
  else cp_async_wait<1>();
}

// 16-bit chunks must start at an even multiple of the k-step stride of every split (TileAcc's two sets).
static_assert(kRnnKChunkBytes / 2 / 16 % (2 * kRnnWarps) == 0, "a 16-bit chunk holds an even number of split rounds");

// The product itself; begin_chunk_product must have run for the same operands, with nothing committed since.
template <typename T, bool kResident, typename WeightRowOf>
__device__ void chunk_product(const RnnGemmGeometry& g, const RnnSharedLayout& layout, unsigned char* shared,
                              const ProductOperands<T, WeightRowOf>& o) {
  const int warp = threadIdx.x >> 5;
  const int w_ld = rnn_shared_ld(kResident ? g.k_pad : g.k_chunk, sizeof(T));
  const int a_ld = rnn_shared_ld(g.k_chunk, sizeof(T));
  auto act_buffer = [&](int b) {
    return reinterpret_cast<const T*>(shared + layout.activations + b * layout.activation_buffer);
  };
  auto w_buffer = [&](int b) {
    return reinterpret_cast<const T*>(shared + o.weights_at + (kResident ? 0 : b * layout.weight_buffer));
  };
  auto kept_buffer = [&](int c) {
    return reinterpret_cast<const T*>(shared + layout.kept_weights + c * layout.weight_buffer);
  };
  float* partials = reinterpret_cast<float*>(shared + layout.partials);

  // This warp's n-tiles and split (rnn_geometry.h); the second m-tile only when rows_here > 16.
  const int split = rnn_warp_split(g, warp);
  int my_tile[kRnnMaxNTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kRnnMaxNTilesPerWarp; ++i) my_tile[i] = rnn_warp_n_tile(g, warp, i);
  const bool two_m = o.rows_here > 16;
  TileAcc<T> acc[kRnnMaxNTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kRnnMaxNTilesPerWarp; ++i) acc[i].zero();

  const int chunks = rnn_k_chunks(g);
  const int stages = layout.stages;
  for (int c = 0; c < chunks; ++c) {
    const int k0 = c * g.k_chunk;
    const int ahead = c + stages - 1;
    // Overwrites the buffer chunk c - 1 used: read before the last barrier.
    if (ahead < chunks) stage_product_chunk<T, kResident>(g, layout, shared, o, ahead, ahead % stages);
    else cp_async_commit();
    wait_for_chunk(stages);
    __syncthreads();
    const int cols = rnn_chunk_columns(g, k0);
    const int buffer = c % stages;
    const T* a_chunk = act_buffer(buffer);
    const T* w_chunk = kResident ? w_buffer(0) + k0 : c < o.kept_chunks ? kept_buffer(c) : w_buffer(buffer);
    const int first = rnn_first_step_column(g, split, k0);
#pragma unroll
    for (int i = 0; i < kRnnMaxNTilesPerWarp; ++i) {
      if (my_tile[i] < 0) continue;
      acc[i].add_steps(a_chunk, a_ld, two_m, w_chunk + my_tile[i] * 16 * w_ld, w_ld, first, cols, 16 * g.splits);
    }
    __syncthreads();
  }
  const int p_ld = g.rows_pad + 4;
#pragma unroll
  for (int i = 0; i < kRnnMaxNTilesPerWarp; ++i) {
    if (my_tile[i] < 0) continue;
    acc[i].store(0, partials + split * kRnnMChunk * p_ld + my_tile[i] * 16, p_ld);
    if (two_m) acc[i].store(1, partials + (split * kRnnMChunk + 16) * p_ld + my_tile[i] * 16, p_ld);
  }
  __syncthreads();
}

// The finished product for chunk row m and weight row q: the splits' partials added in split order.
__device__ __forceinline__ float product_at(const RnnGemmGeometry& g, const float* partials, int m, int q) {
  const int p_ld = g.rows_pad + 4;
  float sum = partials[m * p_ld + q];
  for (int s = 1; s < g.splits; ++s) sum += partials[(s * kRnnMChunk + m) * p_ld + q];
  return sum;
}

// Row of the caller's tensors that slot j processes at step t in direction d; -1 when the slot has no token
// there (only possible with malformed offsets, as active[t] counts slots longer than t).
template <typename T>
__device__ __forceinline__ std::int64_t token_row(const RnnRecurrenceArgs<T>& a, std::int64_t j, std::int64_t t,
                                                  int d) {
  const std::int64_t length = a.slot_length[j];
  if (t >= length) return -1;
  return a.slot_begin[j] + (d == 0 ? t : length - 1 - t);
}

template <typename T>
__device__ __forceinline__ std::int64_t active_at(const RnnRecurrenceArgs<T>& a, std::int64_t t) {
  return t < a.max_steps ? a.active[t] : 0;
}

template <typename T>
__device__ __forceinline__ T* state_h(const RnnRecurrenceArgs<T>& a, int d, std::int64_t parity) {
  return a.h + (static_cast<std::int64_t>(d) * 2 + parity) * a.batch * a.state;
}

// Batch rows of the chunk at m0 when `active` slots run: kRnnMChunk, or fewer in the last chunk.
__device__ __forceinline__ int chunk_rows(std::int64_t active, std::int64_t m0) {
  return active - m0 < kRnnMChunk ? static_cast<int>(active - m0) : kRnnMChunk;
}

// ---------------------------------------------------------------------------------------------------------------
// Gates phase of step t for direction d and the block's units [slice * units, + units).
//
// Epilogue item idx of the chunk at m0 is batch row m = idx / units, unit u = idx % units: the same thread owns
// the same item at every step. Everything an item needs besides the recurrent product (its token row, input
// projections, biases and the state it updates) is the block's own or read-only, so it can be loaded before the
// product, and the persistent kernel loads it for the next step while it waits at the grid barrier. A thread
// holds its first kRnnHeldItems items of chunk 0 that way, in registers; other items load in the epilogue.

constexpr int kRnnHeldItems = 2;  // chunk 0 has kRnnMChunk x units items: all of them for units <= 16

struct ItemInputs {
  std::int64_t row;   // token row the item writes; -1: no item (unit past H, or the slot has no token at t)
  float in[4];        // per gate: x W_ih^T + b_ih
  float rec_bias[4];  // per gate: b_hh
  float state;        // LSTM: c before the step; GRU: h before the step (as stored)
};

struct HeldItems {
  ItemInputs item[kRnnHeldItems];
};

// Token row an item of `unit` and slot j writes at step t; -1: none.
template <typename T>
__device__ __forceinline__ std::int64_t item_token_row(const RnnRecurrenceArgs<T>& a, std::int64_t unit,
                                                       std::int64_t j, std::int64_t t, int d) {
  return unit < a.hidden ? token_row(a, j, t, d) : -1;
}

// Input projection of gate 0 for `unit` of direction d in token `row` (gate g is g * hidden further).
template <typename T>
__device__ __forceinline__ const float* xproj_gate0(const RnnRecurrenceArgs<T>& a, std::int64_t row, int d,
                                                    std::int64_t unit) {
  return a.xproj + row * (a.dirs * a.gates * a.hidden) + d * a.gates * a.hidden + unit;
}

// The state before step t of slot j's `unit`: c (LSTM) or h as stored (GRU). Both through L2 only: on the
// per-step path another SM wrote them, possibly two grids back, and this SM's L1 may hold a line of an older
// step (griddepcontrol.wait should make them visible anyway; a plain load would depend on it).
template <typename T>
__device__ __forceinline__ float load_item_state(const RnnRecurrenceArgs<T>& a, int d, std::int64_t t,
                                                 std::int64_t j, std::int64_t unit) {
  if (a.mode == RnnMode::kLstm) return __ldcg(a.c + (static_cast<std::int64_t>(d) * a.batch + j) * a.hidden + unit);
  return to_float(__ldcg(state_h(a, d, t & 1) + j * a.state + unit));
}

// Item (slot j, unit u of the block) of step t; with_state false keeps item.state (the persistent kernel carries
// it from the previous step in registers: the same thread computed it). j must be < active.
template <typename T>
__device__ __forceinline__ void load_item_inputs(const KernelParams<T>& p, int d, int slice, std::int64_t t,
                                                 std::int64_t j, int u, bool with_state, ItemInputs& item) {
  const RnnRecurrenceArgs<T>& a = p.a;
  const std::int64_t H = a.hidden, G = a.gates;
  const std::int64_t unit = static_cast<std::int64_t>(slice) * p.units + u;
  item.row = item_token_row(a, unit, j, t, d);
  if (item.row < 0) return;
  const float* x = xproj_gate0(a, item.row, d, unit);
#pragma unroll
  for (int gate = 0; gate < 4; ++gate) {
    item.in[gate] = 0.0f;
    item.rec_bias[gate] = 0.0f;
    if (gate >= G) continue;
    item.in[gate] = x[gate * H];
    if (a.bias) {
      item.in[gate] += to_float(a.b_ih[d][gate * H + unit]);
      item.rec_bias[gate] = to_float(a.b_hh[d][gate * H + unit]);
    }
  }
  if (with_state) item.state = load_item_state(a, d, t, j, unit);
}

// The thread's held items of step t (chunk 0, idx = threadIdx.x + i * blockDim.x). carried: the items of step
// t - 1 went through gates_phase, so the state of each one that had a token then is in item.state already.
// with_state false loads no state at all: the per-step kernels read their inputs before wait_for_prior_grid()
// and the states, which the step before writes, after it (load_held_states).
template <typename T>
__device__ __forceinline__ void load_held_items(const KernelParams<T>& p, int d, int slice, std::int64_t t,
                                                std::int64_t active, bool carried, HeldItems& held,
                                                bool with_state = true) {
#pragma unroll
  for (int i = 0; i < kRnnHeldItems; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    const int m = idx / p.units, u = idx - m * p.units;
    const bool had_state = carried && held.item[i].row >= 0;
    if (m < kRnnMChunk && m < active) load_item_inputs(p, d, slice, t, m, u, with_state && !had_state, held.item[i]);
    else held.item[i].row = -1;
  }
}

template <typename T>
__device__ __forceinline__ void load_held_states(const KernelParams<T>& p, int d, int slice, std::int64_t t,
                                                 HeldItems& held) {
#pragma unroll
  for (int i = 0; i < kRnnHeldItems; ++i) {
    if (held.item[i].row < 0) continue;
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    const int m = idx / p.units, u = idx - m * p.units;
    held.item[i].state = load_item_state(p.a, d, t, m, static_cast<std::int64_t>(slice) * p.units + u);
  }
}

// Starts the L2 reads of the block's gate rows of W_hh over k chunks first .. first + chunks - 1 (streamed
// weights: the per-step kernel before wait_for_prior_grid, the persistent one while it waits at the grid barrier,
// from its first streamed chunk; the weights do not change during a layer), so that the product's first stages
// find them there rather than in DRAM.
template <typename T>
__device__ __forceinline__ void prefetch_weight_chunks(const KernelParams<T>& p, int d, int slice, int first,
                                                       int chunks) {
  constexpr int kLine = 128;
  const RnnGemmGeometry& g = p.gate;
  const std::int64_t H = p.a.hidden;
  const std::int64_t u0 = static_cast<std::int64_t>(slice) * p.units;
  const int col0 = first * g.k_chunk, col1 = min(g.k, (first + chunks) * g.k_chunk);
  if (col0 >= col1) return;  // every chunk kept
  const int line0 = col0 * static_cast<int>(sizeof(T)) / kLine;  // within a row
  const int end_byte = col1 * static_cast<int>(sizeof(T));        // within a row
  const int lines = (end_byte + kLine - 1) / kLine - line0;
  const char* w = reinterpret_cast<const char*>(p.a.w_hh[d]);
  const std::int64_t row_bytes = g.k * static_cast<std::int64_t>(sizeof(T));
  // Lines are counted from each row's start. Where rows do not start on 128-byte lines (a row length or a base
  // that is not a multiple of 128), that misses the line of the span's last bytes: each row also asks for it.
  const int per_row =
      lines + ((reinterpret_cast<std::uintptr_t>(w) | static_cast<std::uintptr_t>(row_bytes)) % kLine != 0 ? 1 : 0);
  for (int i = threadIdx.x; i < p.a.gates * p.units * per_row; i += blockDim.x) {
    const int q = i / per_row, line = line0 + i - q * per_row;
    const int gate = q / p.units, u = q - gate * p.units;
    if (u0 + u >= H) continue;
    prefetch_l2(w + ((gate * H + u0 + u) * row_bytes + min(line * kLine, end_byte - 1)));
  }
}

// The persistent kernel with streamed weights, before its first step: the block's gate rows over the layout's
// kept chunks into their buffers (chunk_product then reads them there every step). Ends with a barrier.
template <typename T>
__device__ void stage_kept_chunks(const KernelParams<T>& p, unsigned char* shared, int d, int slice) {
  const RnnGemmGeometry& g = p.gate;
  const GateWeightRows rows{p.units, p.a.gates, p.a.hidden, static_cast<std::int64_t>(slice) * p.units};
  for (int c = 0; c < p.shared.kept_chunks; ++c) {
    const int k0 = c * g.k_chunk;
    stage_rows<T, false>(reinterpret_cast<T*>(shared + p.shared.kept_weights + c * p.shared.weight_buffer),
                         rnn_shared_ld(g.k_chunk, sizeof(T)), g.rows_pad, rnn_chunk_columns(g, k0), p.a.w_hh[d], g.k,
                         k0, g.k, p.vec_w_hh, rows);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Starts the DRAM reads (L2 prefetch) of the input projections of step t's items idx >= first_idx of the chunk
// at m0: they come from a GEMM over every token, far too large for L2, so that the epilogue finds them there.
template <typename T>
__device__ __forceinline__ void prefetch_item_inputs(const KernelParams<T>& p, int d, int slice, std::int64_t t,
                                                     std::int64_t m0, int rows_here, int first_idx) {
  const RnnRecurrenceArgs<T>& a = p.a;
  for (int idx = first_idx; idx < rows_here * p.units; idx += blockDim.x) {
    const int m = idx / p.units, u = idx - m * p.units;
    const std::int64_t unit = static_cast<std::int64_t>(slice) * p.units + u;
    const std::int64_t row = item_token_row(a, unit, m0 + m, t, d);
    if (row < 0) continue;
    const float* x = xproj_gate0(a, row, d, unit);
    for (int gate = 0; gate < a.gates; ++gate) prefetch_l2(x + gate * a.hidden);
  }
}

// First item index of the chunk at m0 that the thread does not hold.
__device__ __forceinline__ int first_unheld_item(std::int64_t m0) {
  return static_cast<int>(threadIdx.x) + (m0 == 0 ? kRnnHeldItems * static_cast<int>(blockDim.x) : 0);
}

// The gates of one item from the product (chunk row m) and its inputs, the state update and the stores; returns
// the new state (c, or h as stored) for the next step.
template <typename T>
__device__ __forceinline__ float finish_item(const KernelParams<T>& p, const float* partials, int d, int slice,
                                             std::int64_t t, std::int64_t j, int m, int u, const ItemInputs& item) {
  const RnnRecurrenceArgs<T>& a = p.a;
  const std::int64_t H = a.hidden, S = a.state, G = a.gates;
  const std::int64_t unit = static_cast<std::int64_t>(slice) * p.units + u;
  T* h_next = state_h(a, d, (t + 1) & 1);
  T* out = a.out + item.row * (a.dirs * S) + d * S + unit;
  float in_part[4], rec_part[4];
#pragma unroll
  for (int gate = 0; gate < 4; ++gate) {
    in_part[gate] = item.in[gate];
    rec_part[gate] = gate < G ? product_at(p.gate, partials, m, gate * p.units + u) : 0.0f;
    if (a.bias) rec_part[gate] += item.rec_bias[gate];
  }
  if (a.mode == RnnMode::kLstm) {
    const float in_gate = sigmoid(in_part[0] + rec_part[0]);
    const float forget_gate = sigmoid(in_part[1] + rec_part[1]);
    const float cell_gate = tanhf(in_part[2] + rec_part[2]);
    const float out_gate = sigmoid(in_part[3] + rec_part[3]);
    const float c_new = forget_gate * item.state + in_gate * cell_gate;
    a.c[(static_cast<std::int64_t>(d) * a.batch + j) * H + unit] = c_new;
    const T h = from_float<T>(out_gate * tanhf(c_new));
    if (a.proj > 0) {
      a.r[(static_cast<std::int64_t>(d) * a.batch + j) * H + unit] = h;
    } else {
      h_next[j * S + unit] = h;
      *out = h;
    }
    return c_new;
  }
  const float reset_gate = sigmoid(in_part[0] + rec_part[0]);
  const float update_gate = sigmoid(in_part[1] + rec_part[1]);
  const float candidate = tanhf(in_part[2] + reset_gate * rec_part[2]);
  const T h = from_float<T>((1.0f - update_gate) * candidate + update_gate * item.state);
  h_next[j * S + unit] = h;
  *out = h;
  return to_float(h);
}

// `held`: the thread's held items of step t (load_held_items); their states come back updated. `prefetched`:
// the input projections of the other items are on their way to L2 already (the persistent kernel's wait).
template <typename T, bool kResident>
__device__ void gates_phase(const KernelParams<T>& p, unsigned char* shared, int d, int slice, std::int64_t t,
                            std::int64_t active, HeldItems& held, bool prefetched) {
  const RnnRecurrenceArgs<T>& a = p.a;
  const RnnGemmGeometry& g = p.gate;
  const int units = p.units;
  const std::int64_t H = a.hidden, S = a.state, G = a.gates;
  const std::int64_t u0 = static_cast<std::int64_t>(slice) * units;
  const float* partials = reinterpret_cast<const float*>(shared + p.shared.partials);
  const T* h_cur = state_h(a, d, t & 1);
  const GateWeightRows w_row{units, static_cast<int>(G), H, u0};
  // The product of the batch chunk at m0; the input projections of its unheld items are asked of L2 first.
  auto operands = [&](std::int64_t m0) {
    return ProductOperands<T, GateWeightRows>{p.shared.gate_weights, kResident ? 0 : p.shared.kept_chunks,
                                              h_cur + m0 * S, S, p.vec_h, chunk_rows(active, m0), a.w_hh[d],
                                              p.vec_w_hh, w_row};
  };
  auto begin = [&](std::int64_t m0) {
    if (!prefetched) prefetch_item_inputs(p, d, slice, t, m0, chunk_rows(active, m0), first_unheld_item(m0));
    begin_chunk_product<T, kResident>(g, p.shared, shared, operands(m0));
  };

  begin(0);
  for (std::int64_t m0 = 0; m0 < active; m0 += kRnnMChunk) {
    const int rows_here = chunk_rows(active, m0);
    chunk_product<T, kResident>(g, p.shared, shared, operands(m0));
    if (m0 + kRnnMChunk < active) begin(m0 + kRnnMChunk);  // its loads overlap this chunk's epilogue
    if (m0 == 0) {
#pragma unroll
      for (int i = 0; i < kRnnHeldItems; ++i) {
        ItemInputs& item = held.item[i];
        if (item.row < 0) continue;
        const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
        const int m = idx / units;
        item.state = finish_item(p, partials, d, slice, t, m, m, idx - m * units, item);
      }
    }
    for (int idx = first_unheld_item(m0); idx < rows_here * units; idx += blockDim.x) {
      const int m = idx / units, u = idx - m * units;
      ItemInputs item;
      load_item_inputs(p, d, slice, t, m0 + m, u, true, item);
      if (item.row < 0) continue;
      finish_item(p, partials, d, slice, t, m0 + m, m, u, item);
    }
    __syncthreads();
  }
}

// Proj phase of step t (LSTM with proj_size): h = W_hr r for the block's rows [slice * proj_units, + proj_units).
// kResident: W_hr sits in the proj_weights region; otherwise it streams through the gate_weights region.
template <typename T, bool kResident>
__device__ void proj_phase(const KernelParams<T>& p, unsigned char* shared, int d, int slice, std::int64_t t,
                           std::int64_t active) {
  const RnnRecurrenceArgs<T>& a = p.a;
  const RnnGemmGeometry& g = p.proj;
  const int rows = p.proj_units;
  const std::int64_t H = a.hidden, P = a.proj;
  const std::int64_t p0 = static_cast<std::int64_t>(slice) * rows;
  const float* partials = reinterpret_cast<const float*>(shared + p.shared.partials);
  const T* r = a.r + static_cast<std::int64_t>(d) * a.batch * H;
  T* h_next = state_h(a, d, (t + 1) & 1);
  const std::int64_t out_ld = a.dirs * P;
  auto w_row = [&](int q) -> std::int64_t { return q < rows && p0 + q < P ? p0 + q : -1; };
  auto operands = [&](std::int64_t m0) {
    return ProductOperands<T, decltype(w_row)>{kResident ? p.shared.proj_weights : p.shared.gate_weights, 0,
                                               r + m0 * H, H, p.vec_r, chunk_rows(active, m0), a.w_hr[d],
                                               p.vec_w_hr, w_row};
  };

  begin_chunk_product<T, kResident>(g, p.shared, shared, operands(0));
  for (std::int64_t m0 = 0; m0 < active; m0 += kRnnMChunk) {
    const int rows_here = chunk_rows(active, m0);
    chunk_product<T, kResident>(g, p.shared, shared, operands(m0));
    if (m0 + kRnnMChunk < active) begin_chunk_product<T, kResident>(g, p.shared, shared, operands(m0 + kRnnMChunk));
    for (int idx = threadIdx.x; idx < rows_here * rows; idx += blockDim.x) {
      const int m = idx / rows, q = idx - m * rows;
      const std::int64_t j = m0 + m;
      if (p0 + q >= P) continue;
      const std::int64_t row = token_row(a, j, t, d);
      if (row < 0) continue;
      const T h = from_float<T>(product_at(g, partials, m, q));
      h_next[j * P + p0 + q] = h;
      a.out[row * out_ld + d * P + p0 + q] = h;
    }
    __syncthreads();
  }
}

}  // namespace rnn
}  // namespace detail
}  // namespace ragged
