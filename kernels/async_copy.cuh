// Global -> shared copies that do not pass through registers (cp.async, sm_80+), and an L2 prefetch.
// Used by the attention kernels (K / V tiles) and the recurrent kernels (activation and weight chunks).
//
// Every copy here is .cg: it is cached in L2 only, never in the (non-coherent) L1, so it also reads data that
// other blocks of a persistent kernel wrote before a grid barrier.
#pragma once

// Compiled for an architecture older than sm_80 (PTX JIT included), these primitives would be empty and the
// kernels using them would silently compute garbage: refuse the build instead.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ragged's attention and recurrent kernels need CUDA architecture 80 or newer (cp.async, ldmatrix, mma.sync)"
#endif

#include <cuda_runtime.h>

namespace ragged {
namespace detail {

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared. valid == false reads nothing and fills the 16 bytes with zeros (src-size 0), so
// rows past a sequence's end hold zeros, never stale values (a stale NaN times a zero weight is still NaN).
// `src` must be a mapped address even then; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N of this thread's committed groups are still in flight. Other threads' copies are
// visible only after a barrier that follows every thread's wait.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Asks L2 to fetch the line holding `p` (no register, no completion to wait for): for data a thread will load
// after a long stretch of other work.
__device__ __forceinline__ void prefetch_l2(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#endif
}

}  // namespace detail
}  // namespace ragged
