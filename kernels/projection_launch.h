// Internal: ragged's own input-projection GEMM for the recurrent layers (kernels/projection_gemm.cu), used by
// src/rnn.cpp when the caller asks for RnnProjection::kBatchInvariant instead of cuBLAS.
//
//   out[m * ld_out + n] = sum_k x[m * k_size + k] * w[n * k_size + k]     m < rows, n < cols, float output
//
// Every output sums its products in an order fixed by k_size alone (k ascending: through one tensor-core
// accumulator, 16 k at a time, for half / bfloat16; one FFMA chain for float), and a row's outputs read only that
// row of x. So a row's results are bit for bit the same whatever the other rows are and however many there are;
// cuBLAS, which picks its kernel (tile shape, split-K) by the row count, promises neither.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace detail {

// The widest k_size the kernels take: they count k in int, up to a tile past k_size (k + 32), so a width near
// INT_MAX would wrap (the k-tile count negative, every output 0). RnnProjection::kCublas takes any int width.
constexpr int kProjectionGemmMaxK = 1 << 30;

// x [rows, k_size] and w [cols, k_size] row-major in T (float, half or bfloat16); out [rows, ld_out] float,
// columns [0, cols) written. Needs rows >= 1, 1 <= k_size <= kProjectionGemmMaxK, 1 <= cols <= ld_out (the caller
// checked them; a k_size past the limit is refused with kSizeOverflow). Any
// alignment works; 16-byte aligned rows (k_size * sizeof(T) % 16 == 0 and aligned bases) load by cp.async.
template <typename T>
Status launch_projection_gemm(const T* x, const T* w, std::int64_t rows, int k_size, int cols, float* out,
                              std::int64_t ld_out, cudaStream_t stream);

}  // namespace detail
}  // namespace ragged
