// Emulator replacement for kernels/mma_sync.cuh (tests/emu/build.sh copies it over the original): ldmatrix and
// mma.sync m16n8k16 as whole-warp computations with the fragment layouts of the PTX ISA, so a kernel that
// puts an element in the wrong lane or register gets a wrong answer here as on the GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>

namespace ragged {
namespace detail {
namespace emu_mma {

inline float lo(unsigned r, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(r & 0xffffu)) : __half2float(__ushort_as_half(r & 0xffffu));
}
inline float hi(unsigned r, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(r >> 16)) : __half2float(__ushort_as_half(r >> 16));
}

struct LdmatrixIo {
  unsigned address;
  unsigned* r;
};

// Lanes 8m .. 8m + 7 give the row addresses of matrix m; lane l gets row l / 4, elements 2 (l % 4) and
// 2 (l % 4) + 1 of each matrix (transposed: column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
template <bool kTrans>
void ldmatrix(void* const* io) {
  // The PTX ISA requires each row's address 16-byte aligned (the GPU faults: misaligned address).
  for (int l = 0; l < 32; ++l) {
    const unsigned address = static_cast<LdmatrixIo*>(io[l])->address;
    if (address % 16 != 0)
      ::emu::kernel_error(("ldmatrix row address (lane " + std::to_string(l) + ", shared offset " +
                           std::to_string(address) + ") not 16-byte aligned").c_str());
  }
  unsigned out[32][4];
  for (int l = 0; l < 32; ++l) {
    for (int m = 0; m < 4; ++m) {
      auto element = [&](int row, int col) {
        const unsigned address = static_cast<LdmatrixIo*>(io[8 * m + row])->address;
        std::uint16_t e;
        std::memcpy(&e, static_cast<unsigned char*>(::emu::shared_pointer(address + 2 * col, 2)), 2);
        return static_cast<unsigned>(e);
      };
      const int g = l / 4, t = l % 4;
      out[l][m] =
          kTrans ? element(2 * t, g) | element(2 * t + 1, g) << 16 : element(g, 2 * t) | element(g, 2 * t + 1) << 16;
    }
  }
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < 4; ++m) static_cast<LdmatrixIo*>(io[l])->r[m] = out[l][m];
}

struct MmaIo {
  float* d;
  const unsigned* a;
  unsigned b0, b1;
};

// D (16 x 8, f32) += A (16 x 16, row) * B (16 x 8, col), fragments as in the PTX ISA for m16n8k16: lane
// l = 4 g + t holds A rows g and g + 8, columns 2t, 2t + 1 (+ 8); B rows 2t, 2t + 1 (+ 8) of column g; D rows
// g and g + 8, columns 2t and 2t + 1. Products are exact in float; the sum runs in k order in float.
template <bool kBf16>
void mma(void* const* io) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const MmaIo& x = *static_cast<MmaIo*>(io[l]);
    const int g = l / 4, t = l % 4;
    A[g][2 * t] = lo(x.a[0], kBf16);
    A[g][2 * t + 1] = hi(x.a[0], kBf16);
    A[g + 8][2 * t] = lo(x.a[1], kBf16);
    A[g + 8][2 * t + 1] = hi(x.a[1], kBf16);
    A[g][2 * t + 8] = lo(x.a[2], kBf16);
    A[g][2 * t + 9] = hi(x.a[2], kBf16);
    A[g + 8][2 * t + 8] = lo(x.a[3], kBf16);
    A[g + 8][2 * t + 9] = hi(x.a[3], kBf16);
    B[2 * t][g] = lo(x.b0, kBf16);
    B[2 * t + 1][g] = hi(x.b0, kBf16);
    B[2 * t + 8][g] = lo(x.b1, kBf16);
    B[2 * t + 9][g] = hi(x.b1, kBf16);
    C[g][2 * t] = x.d[0];
    C[g][2 * t + 1] = x.d[1];
    C[g + 8][2 * t] = x.d[2];
    C[g + 8][2 * t + 1] = x.d[3];
  }
  for (int l = 0; l < 32; ++l) {
    MmaIo& x = *static_cast<MmaIo*>(io[l]);
    const int g = l / 4, t = l % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; ++i) {
      float acc = C[rows[i]][cols[i]];
      for (int k = 0; k < 16; ++k) acc += A[rows[i]][k] * B[k][cols[i]];
      x.d[i] = acc;
    }
  }
}

}  // namespace emu_mma

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
  emu_mma::LdmatrixIo io{address, r};
  ::emu::warp_compute(&emu_mma::ldmatrix<false>, &io);
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
  emu_mma::LdmatrixIo io{address, r};
  ::emu::warp_compute(&emu_mma::ldmatrix<true>, &io);
}

template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value, "mma_16816: half or bfloat16");
  emu_mma::MmaIo io{d, a, b0, b1};
  ::emu::warp_compute(&emu_mma::mma<std::is_same<T, __nv_bfloat16>::value>, &io);
}

}  // namespace detail
}  // namespace ragged
