// Warp-level tensor-core primitives (sm_80+): ldmatrix and mma.sync m16n8k16 with float accumulators, for
// half and bfloat16. Used by the attention kernel and the recurrent kernels.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), with g = lane / 4 (group)
// and t = lane % 4 (thread in group); each 32-bit register holds two 16-bit elements, the lower column (or k)
// in the lower half:
//   A 16x16 (row-major):  a0 = (g, 2t..2t+1)  a1 = (g+8, 2t..2t+1)  a2 = (g, 2t+8..)  a3 = (g+8, 2t+8..)
//   B 16x8  (k x n):      b0 = (k = 2t..2t+1, n = g)  b1 = (k = 2t+8..2t+9, n = g)
//   C 16x8  (float):      c0, c1 = (g, 2t..2t+1)      c2, c3 = (g+8, 2t..2t+1)
// ldmatrix.x4 loads four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i and register i
// of every lane receives (row g, columns 2t, 2t+1) of matrix i; with .trans it receives (rows 2t, 2t+1,
// column g) instead. Hence a row-major [m][k] tile gives A with a plain ldmatrix, and so does a [n][k] tile
// (a weight matrix, or K in attention) give B; a [k][n] tile (V) needs .trans.
#pragma once

// Compiled for an architecture older than sm_80 (PTX JIT included), these primitives would be empty and the
// kernels using them would silently compute garbage: refuse the build instead.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ragged's attention and recurrent kernels need CUDA architecture 80 or newer (cp.async, ldmatrix, mma.sync)"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ragged {
namespace detail {

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// d += a * b for one m16n8k16 tile.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                         unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

}  // namespace detail
}  // namespace ragged
