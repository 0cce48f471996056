// Device building blocks of the recurrent kernels (kernels/rnn_step.cu, kernels/rnn_persistent.cu): the
// block-level product of the previous hidden state with the block's slice of the recurrent weights
// (rnn_geometry.h), and the two phases of a step that use it:
//   gates phase: all gates of the block's hidden units for the active slots, fused with the nonlinearities,
//                the cell update and the output / next-state stores;
//   proj phase:  (LSTM with proj_size) h = W_hr r for the block's rows of W_hr.
// The same phase code runs with the weights resident in shared memory for the whole kernel (persistent) or
// streamed through shared memory chunk by chunk (one launch per step).
//
// half / bfloat16 multiply on tensor cores (WMMA 16x16x16, float accumulators); float uses FFMA in a fixed
// order (TF32 is never used). Activations written by other blocks during a persistent kernel are read with
// ld.global.cg, which bypasses the (non-coherent) L1, after the grid barrier.
#pragma once

#include "element_convert.cuh"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <string>

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

// Lets the kernel use `bytes` of dynamic shared memory; kUnsupportedShape when the device allows less. The limit
// is always set to the device's whole opt-in size, never to `bytes`: a limit that followed each call's shape
// could be lowered by one host thread (or a smaller call) between another's set and its launch.
inline Status set_shared_limit(const void* kernel, std::size_t bytes, const char* name) {
  int device = 0, optin = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  if (s != Status::kSuccess) return s;
  cudaFuncAttributes attributes{};
  s = from_cuda(cudaFuncGetAttributes(&attributes, kernel), "cudaFuncGetAttributes");
  if (s != Status::kSuccess) return s;
  const std::size_t dynamic_max = static_cast<std::size_t>(optin) - attributes.sharedSizeBytes;  // minus static
  if (bytes > dynamic_max)
    return fail(Status::kUnsupportedShape, std::string(name) + " needs " + std::to_string(bytes) +
                                               " bytes of shared memory, the device allows " +
                                               std::to_string(dynamic_max));
  return from_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic_max)),
      "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}


// Accurate (not __expf) so that float results stay within a few ulps of the double reference.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// ---------------------------------------------------------------------------------------------------------------
// One warp's 16 x 16 float accumulator tile: C += A (16 rows x 16 k) * W^T (16 weight rows x 16 k).

template <typename T>
struct TileAcc {  // half / bfloat16: tensor cores
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> frag;
  __device__ __forceinline__ void zero() { nvcuda::wmma::fill_fragment(frag, 0.0f); }
  __device__ __forceinline__ void mma(const T* a, int lda, const T* w, int ldw) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::col_major> fb;
    nvcuda::wmma::load_matrix_sync(fa, a, lda);
    nvcuda::wmma::load_matrix_sync(fb, w, ldw);  // W [n][k] row-major is W^T [k][n] column-major
    nvcuda::wmma::mma_sync(frag, fa, fb, frag);
  }
  __device__ __forceinline__ void store(float* c, int ldc) const {
    nvcuda::wmma::store_matrix_sync(c, frag, ldc, nvcuda::wmma::mem_row_major);
  }
};

// float: lane (n = lane % 16, half = lane / 16) owns column n of rows half * 8 .. half * 8 + 7, and adds the
// products in k order. 16-byte shared loads: the 8 lanes of a phase read 8 W rows (distinct banks thanks to the
// row skew) and one broadcast A row.
template <>
struct TileAcc<float> {
  float v[8];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0.0f;
  }
  __device__ __forceinline__ void mma(const float* a, int lda, const float* w, int ldw) {
    const int lane = threadIdx.x & 31;
    const int n = lane & 15, row0 = (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < 16; kk += 4) {
      const float4 wv = *reinterpret_cast<const float4*>(w + n * ldw + kk);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 av = *reinterpret_cast<const float4*>(a + (row0 + i) * lda + kk);
        v[i] = fmaf(av.x, wv.x, v[i]);
        v[i] = fmaf(av.y, wv.y, v[i]);
        v[i] = fmaf(av.z, wv.z, v[i]);
        v[i] = fmaf(av.w, wv.w, v[i]);
      }
    }
  }
  __device__ __forceinline__ void store(float* c, int ldc) const {
    const int lane = threadIdx.x & 31;
    const int n = lane & 15, row0 = (lane >> 4) * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) c[(row0 + i) * ldc + n] = v[i];
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Staging: rows [0, rows) x columns [k0, k0 + cols) of a row-major source (src_ld elements per row, k valid
// columns) into shared dst [rows][ld]; zeros where row_of(q) < 0 or the column is >= k. kCoherent reads through
// L2 only (data other blocks wrote during this kernel); otherwise through the read-only path.

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
    const int count = rows * vecs_per_row;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const int q = i / vecs_per_row;
      const int col = k0 + (i - q * vecs_per_row) * kV;
      const std::int64_t row = row_of(q);
      uint4 value = make_uint4(0u, 0u, 0u, 0u);
      if (row >= 0 && col < k) value = load_global<kCoherent>(reinterpret_cast<const uint4*>(src + row * src_ld + col));
      *reinterpret_cast<uint4*>(dst + q * ld + (col - k0)) = value;
    }
  } else {
    const int count = rows * cols;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const int q = i / cols;
      const int col = k0 + (i - q * cols);
      const std::int64_t row = row_of(q);
      T value = from_float<T>(0.0f);
      if (row >= 0 && col < k) value = load_global<kCoherent>(src + row * src_ld + col);
      dst[q * ld + (col - k0)] = value;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The block product for batch rows [m0, m0 + kRnnMChunk) of `act` (rows >= active are zero): fills
// partials[split][m][q] (ld rows_pad + 4) for the block's weight rows q. With kResident the weights already sit
// in w_shared [rows_pad][ld(k_pad)]; otherwise each k chunk of them is staged there next to the activations.
// Ends with a barrier, after which the partials may be read.

template <typename T, bool kResident, typename WeightRowOf>
__device__ void chunk_product(const RnnGemmGeometry& g, const T* act, std::int64_t act_ld, bool act_vec,
                              std::int64_t m0, std::int64_t active, const T* w, bool w_vec, WeightRowOf w_row_of,
                              T* w_shared, T* a_shared, float* partials) {
  const int warp = threadIdx.x >> 5;
  const int w_ld = rnn_shared_ld(kResident ? g.k_pad : g.k_chunk, sizeof(T));
  const int a_ld = rnn_shared_ld(g.k_chunk, sizeof(T));
  const int n_tiles = g.rows_pad / 16;
  // This warp's tiles: with one split, tiles warp, warp + 8, ...; with several, one tile and one split.
  const int split = g.splits > 1 ? warp / g.tiles : 0;
  int my_tile[kRnnMaxTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kRnnMaxTilesPerWarp; ++i) {
    int tile = -1;
    if (g.splits > 1) tile = (i == 0 && split < g.splits) ? warp % g.tiles : -1;
    else tile = warp + i * kRnnWarps < g.tiles ? warp + i * kRnnWarps : -1;
    my_tile[i] = tile;
  }
  TileAcc<T> acc[kRnnMaxTilesPerWarp];
#pragma unroll
  for (int i = 0; i < kRnnMaxTilesPerWarp; ++i) acc[i].zero();

  auto act_row = [&](int m) -> std::int64_t { return m0 + m < active ? m0 + m : -1; };
  for (int k0 = 0; k0 < g.k_pad; k0 += g.k_chunk) {
    const int cols = g.k_pad - k0 < g.k_chunk ? g.k_pad - k0 : g.k_chunk;
    stage_rows<T, true>(a_shared, a_ld, kRnnMChunk, cols, act, act_ld, k0, g.k, act_vec, act_row);
    if constexpr (!kResident) stage_rows<T, false>(w_shared, w_ld, g.rows_pad, cols, w, g.k, k0, g.k, w_vec, w_row_of);
    __syncthreads();
    const T* w_cols = kResident ? w_shared + k0 : w_shared;
    // k-steps of this split: global step index = split (mod splits).
    const int first_step = ((split - (k0 / 16) % g.splits) + g.splits) % g.splits;
#pragma unroll
    for (int i = 0; i < kRnnMaxTilesPerWarp; ++i) {
      if (my_tile[i] < 0) continue;
      const int mt = my_tile[i] / n_tiles, nt = my_tile[i] % n_tiles;
      for (int kk = first_step * 16; kk < cols; kk += 16 * g.splits)
        acc[i].mma(a_shared + mt * 16 * a_ld + kk, a_ld, w_cols + nt * 16 * w_ld + kk, w_ld);
    }
    __syncthreads();
  }
  const int p_ld = g.rows_pad + 4;
#pragma unroll
  for (int i = 0; i < kRnnMaxTilesPerWarp; ++i) {
    if (my_tile[i] < 0) continue;
    const int mt = my_tile[i] / n_tiles, nt = my_tile[i] % n_tiles;
    acc[i].store(partials + (split * kRnnMChunk + mt * 16) * p_ld + nt * 16, p_ld);
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

// ---------------------------------------------------------------------------------------------------------------
// Gates phase of step t for direction d and the block's units [slice * units, + units).

template <typename T, bool kResident>
__device__ void gates_phase(const KernelParams<T>& p, unsigned char* shared, int d, int slice, std::int64_t t,
                            std::int64_t active) {
  const RnnRecurrenceArgs<T>& a = p.a;
  const RnnGemmGeometry& g = p.gate;
  const int units = p.units;
  const std::int64_t H = a.hidden, S = a.state, G = a.gates;
  const std::int64_t u0 = static_cast<std::int64_t>(slice) * units;
  T* w_shared = reinterpret_cast<T*>(shared + p.shared.gate_weights);
  T* a_shared = reinterpret_cast<T*>(shared + p.shared.activations);
  float* partials = reinterpret_cast<float*>(shared + p.shared.partials);
  const T* h_cur = state_h(a, d, t & 1);
  T* h_next = state_h(a, d, (t + 1) & 1);
  float* c = a.c + static_cast<std::int64_t>(d) * a.batch * H;
  T* r = a.r + static_cast<std::int64_t>(d) * a.batch * H;
  const std::int64_t x_ld = a.dirs * G * H;
  const std::int64_t out_ld = a.dirs * S;
  const T* b_ih = a.b_ih[d];
  const T* b_hh = a.b_hh[d];
  auto w_row = [&](int q) -> std::int64_t {
    const int gate = q / units, u = q - gate * units;
    return q < G * units && u0 + u < H ? gate * H + u0 + u : -1;
  };

  for (std::int64_t m0 = 0; m0 < active; m0 += kRnnMChunk) {
    chunk_product<T, kResident>(g, h_cur, S, p.vec_h, m0, active, a.w_hh[d], p.vec_w_hh, w_row, w_shared, a_shared,
                                partials);
    const int rows_here = active - m0 < kRnnMChunk ? static_cast<int>(active - m0) : kRnnMChunk;
    for (int idx = threadIdx.x; idx < rows_here * units; idx += blockDim.x) {
      const int m = idx / units, u = idx - m * units;
      const std::int64_t unit = u0 + u;
      const std::int64_t j = m0 + m;
      if (unit >= H) continue;
      const std::int64_t row = token_row(a, j, t, d);
      if (row < 0) continue;
      const float* x = a.xproj + row * x_ld + d * G * H + unit;
      float in_part[4] = {0.0f, 0.0f, 0.0f, 0.0f}, rec_part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int gate = 0; gate < 4; ++gate) {
        if (gate >= G) break;
        in_part[gate] = x[gate * H];
        rec_part[gate] = product_at(g, partials, m, gate * units + u);
        if (a.bias) {
          in_part[gate] += to_float(b_ih[gate * H + unit]);
          rec_part[gate] += to_float(b_hh[gate * H + unit]);
        }
      }
      if (a.mode == RnnMode::kLstm) {
        const float in_gate = sigmoid(in_part[0] + rec_part[0]);
        const float forget_gate = sigmoid(in_part[1] + rec_part[1]);
        const float cell_gate = tanhf(in_part[2] + rec_part[2]);
        const float out_gate = sigmoid(in_part[3] + rec_part[3]);
        const float c_new = forget_gate * c[j * H + unit] + in_gate * cell_gate;
        c[j * H + unit] = c_new;
        const T h = from_float<T>(out_gate * tanhf(c_new));
        if (a.proj > 0) {
          r[j * H + unit] = h;
        } else {
          h_next[j * S + unit] = h;
          a.out[row * out_ld + d * S + unit] = h;
        }
      } else {
        const float reset_gate = sigmoid(in_part[0] + rec_part[0]);
        const float update_gate = sigmoid(in_part[1] + rec_part[1]);
        const float candidate = tanhf(in_part[2] + reset_gate * rec_part[2]);
        const float h_prev = to_float(__ldcg(h_cur + j * S + unit));
        const T h = from_float<T>((1.0f - update_gate) * candidate + update_gate * h_prev);
        h_next[j * S + unit] = h;
        a.out[row * out_ld + d * S + unit] = h;
      }
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
  T* w_shared = reinterpret_cast<T*>(shared + (kResident ? p.shared.proj_weights : p.shared.gate_weights));
  T* a_shared = reinterpret_cast<T*>(shared + p.shared.activations);
  float* partials = reinterpret_cast<float*>(shared + p.shared.partials);
  const T* r = a.r + static_cast<std::int64_t>(d) * a.batch * H;
  T* h_next = state_h(a, d, (t + 1) & 1);
  const std::int64_t out_ld = a.dirs * P;
  auto w_row = [&](int q) -> std::int64_t { return q < rows && p0 + q < P ? p0 + q : -1; };

  for (std::int64_t m0 = 0; m0 < active; m0 += kRnnMChunk) {
    chunk_product<T, kResident>(g, r, H, p.vec_r, m0, active, a.w_hr[d], p.vec_w_hr, w_row, w_shared, a_shared,
                                partials);
    const int rows_here = active - m0 < kRnnMChunk ? static_cast<int>(active - m0) : kRnnMChunk;
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
