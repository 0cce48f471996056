// The CUDA kernel emulator's device side, force-included (g++ -include) into every translation unit it builds.
// Kernels compile as host C++: every GPU thread becomes a fiber, blocks run one after another (a cooperative
// grid's all at once), and the warp-synchronous primitives (__shfl*_sync, __ballot_sync, __syncwarp,
// __syncthreads) are rendezvous points that check their masks. It executes the kernels' code on a machine
// without a GPU; it says nothing about speed, and it does not model the memory model (no reordering, no torn
// reads): races between blocks go unseen.
// docs/emulator.md says what it checks and how to run it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __restrict__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __restrict__ __restrict
#define __align__(n) alignas(n)

namespace emu {

// The fiber running now: its thread index and its block's geometry.
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  int linear;  // thread index within the block
  int slot;    // which of the blocks running together (a cooperative grid runs all at once)
  // cp.async copies issued and not yet waited for, and where each committed group ends in that list.
  struct PendingCopy {
    void* dst;
    unsigned char bytes[16];
  };
  std::vector<PendingCopy> pending;
  std::vector<std::size_t> group_ends;
};
extern ThreadState* g_current;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;

// Collectives: every lane of `mask` must arrive with the same mask and kind; the last arrival computes each
// lane's result. Lanes outside the mask, exited lanes and mismatched masks are reported as errors.
enum class WarpOp { kShfl, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll, kSyncWarp, kCompute };
std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int arg, int width);
// A whole-warp instruction (mma.sync, ldmatrix): every lane of the warp arrives with a pointer to its operands
// and results, and once all 32 are there, fn(io) runs with io[lane] = that lane's pointer.
using WarpComputeFn = void (*)(void* const* io);
void warp_compute(WarpComputeFn fn, void* io);
// Shared-memory addresses (__cvta_generic_to_shared) are offsets into the block's dynamic shared memory.
std::size_t shared_offset(const void* p);
void* shared_pointer(unsigned offset, std::size_t bytes);
// Stops the program with `what`, naming the running kernel, block and thread: for what the GPU would fault on
// (the replaced headers' checks, e.g. a misaligned cp.async).
[[noreturn]] void kernel_error(const char* what);
void block_barrier();
void grid_barrier();  // cooperative_groups::this_grid().sync()
// Programmatic dependent launch (kernels/grid_dependency.cuh, replaced by tests/emu/device/grid_dependency.cuh).
// A kernel launched through launch_after_prior has its writes to device memory recorded (launch_body's
// `record`); where the next launch follows it (after_prior), each block runs until its threads reach
// wait_for_prior_grid() with the bytes that kernel changed unreadable and all other device memory read-only, so
// that code before the wait that reads what the kernel before it wrote, or writes at all, faults and is
// reported (on the GPU it may run before that kernel's writes). allow_dependent_grid() changes nothing here.
void allow_dependent_grid();
void wait_for_prior_grid();
void* dynamic_shared();
// The running block's storage of a static `__shared__` variable (build.sh rewrites each declaration into a
// reference to it; `tag` is a static of the declaring function, so one per variable and instantiation): filled
// with garbage at the block's first use, as a GPU block finds its shared memory, and the block's own, so that
// the blocks of a cooperative grid, or of a normal one run at once (EMU_BLOCKS=waves), each have theirs. It ends
// at a guard page (16-byte aligned start), so an index past the array faults where the GPU would read or write
// the next variable.
void* static_shared(const void* tag, std::size_t bytes);

template <typename T>
std::uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace emu

#define threadIdx (::emu::g_current->thread_idx)
#define blockIdx (::emu::g_current->block_idx)
#define blockDim (::emu::g_block_dim)
#define gridDim (::emu::g_grid_dim)
#define warpSize 32

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return emu::from_bits<T>(emu::warp_collective(emu::WarpOp::kShfl, mask, emu::to_bits(v), src, width));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::from_bits<T>(emu::warp_collective(emu::WarpOp::kShflUp, mask, emu::to_bits(v), int(delta), width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return emu::from_bits<T>(emu::warp_collective(emu::WarpOp::kShflDown, mask, emu::to_bits(v), int(delta), width));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return emu::from_bits<T>(emu::warp_collective(emu::WarpOp::kShflXor, mask, emu::to_bits(v), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return static_cast<unsigned>(emu::warp_collective(emu::WarpOp::kBallot, mask, pred != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int pred) {
  return static_cast<int>(emu::warp_collective(emu::WarpOp::kAny, mask, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) {
  return static_cast<int>(emu::warp_collective(emu::WarpOp::kAll, mask, pred != 0, 0, 32));
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_collective(emu::WarpOp::kSyncWarp, mask, 0, 0, 32); }
inline void __syncthreads() { emu::block_barrier(); }
// One fiber runs at a time and every store is visible at once: a fence has nothing to order.
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T>
T __ldg(const T* p) { return *p; }
template <typename T>
T __ldcg(const T* p) { return *p; }
template <typename T>
T __ldcs(const T* p) { return *p; }
template <typename T>
void __stcs(T* p, T v) { *p = v; }
template <typename T>
void __stcg(T* p, T v) { *p = v; }

// Atomics: fibers never run at once, so a plain read-modify-write is atomic.
template <typename T>
T atomicAdd(T* p, T v) { const T old = *p; *p = old + v; return old; }
template <typename T>
T atomicMin(T* p, T v) { const T old = *p; *p = v < old ? v : old; return old; }
template <typename T>
T atomicMax(T* p, T v) { const T old = *p; *p = v > old ? v : old; return old; }
template <typename T>
T atomicExch(T* p, T v) { const T old = *p; *p = v; return old; }
template <typename T>
T atomicCAS(T* p, T compare, T v) { const T old = *p; if (old == compare) *p = v; return old; }

inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<std::uint64_t>(a) * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
// The build contracts a * b + c into an FMA as nvcc does (-ffp-contract=fast -mfma); the _rn intrinsics never
// are, so their result goes through an empty asm that the compiler cannot see into.
inline float __fmul_rn(float a, float b) {
  float r = a * b;
  asm("" : "+x"(r));
  return r;
}
inline float __fadd_rn(float a, float b) {
  float r = a + b;
  asm("" : "+x"(r));
  return r;
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
// ex2.approx.ftz.f32: 2^x, denormal inputs and results flushed to zero (the GPU's is within 2 ulp of this).
namespace emu {
inline float ex2_approx_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}
}  // namespace emu
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __int_as_float(int x) { return emu::from_bits<float>(static_cast<std::uint32_t>(x)); }
inline int __float_as_int(float x) { return static_cast<int>(emu::to_bits(x)); }
inline std::size_t __cvta_generic_to_shared(const void* p) { return emu::shared_offset(p); }
inline void* __cvta_shared_to_generic(std::size_t address) {
  return emu::shared_pointer(static_cast<unsigned>(address), 0);
}

// CUDA's device math is in the global namespace.
using std::isfinite;
using std::isinf;
using std::isnan;

// CUDA's device min / max overloads for mixed integer and floating arguments.
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) > static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}

// cudaFuncSetAttribute on a kernel (the C API takes const void*; nvcc adds this overload).
template <typename... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

namespace emu {
struct LaunchConfig;
}

// cudaLaunchCooperativeKernel on a kernel: args[i] points to parameter i, copied at the launch. Every block of
// the grid runs at once, so that grid.sync() can hold them.
template <typename... P, std::size_t... I>
cudaError_t emu_launch_cooperative(void (*kernel)(P...), dim3 grid, dim3 block, void** args, std::size_t shared,
                                   cudaStream_t stream, std::index_sequence<I...>);
template <typename... P>
cudaError_t cudaLaunchCooperativeKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                                        std::size_t shared = 0, cudaStream_t stream = nullptr) {
  return emu_launch_cooperative(kernel, grid, block, args, shared, stream, std::index_sequence_for<P...>{});
}

namespace emu {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t shared;
  cudaStream_t stream;
  const void* kernel;  // whose cudaFuncSetAttribute limit the launch's shared memory is held to
};
inline LaunchConfig config(dim3 grid, dim3 block, std::size_t shared = 0, cudaStream_t stream = nullptr) {
  return LaunchConfig{grid, block, shared, stream, nullptr};
}
template <typename... P>
LaunchConfig config_of(void (*kernel)(P...), LaunchConfig c) {
  c.kernel = reinterpret_cast<const void*>(kernel);
  return c;
}
// The same for a <<<>>> launch, whose kernel is a name: name_kernel() returns kernel_pointer(name). Where the name
// is a template whose arguments only the launch's arguments deduce, that call does not compile, is_invocable
// says so, and the launch names no kernel.
template <typename... P, typename... X>
const void* kernel_pointer(void (*kernel)(P...), X...) {
  return reinterpret_cast<const void*>(kernel);
}
template <typename F>
LaunchConfig config_named(F name_kernel, LaunchConfig c) {
  if constexpr (std::is_invocable_v<F>) c.kernel = name_kernel();
  return c;
}

// Runs (or, while its stream is captured, records) body() for every thread of the grid. The build rewrites
// kernel<<<grid, block, shared, stream>>>(args) into launch_body("kernel", config_named(kernel's pointer,
// config(grid, block, shared, stream)), a lambda holding std::make_tuple(args) that calls kernel with them):
// the arguments are evaluated and copied at the launch, as CUDA does (a captured graph replays those values),
// and every thread gets its own copy.
// after_prior: launched as a programmatic dependent of the kernel before it; record: its writes are recorded for
// the kernel after it (wait_for_prior_grid above).
void launch_body(const char* name, const LaunchConfig& c, std::function<void()> body, bool cooperative = false,
                 bool after_prior = false, bool record = false);

}  // namespace emu

// Device code guarded by an architecture check (#if __CUDA_ARCH__ >= 800) is the code to emulate: from here on
// every translation unit reads as device code for sm_90. The CUDA headers above were read as host code.
#define __CUDA_ARCH__ 900

template <typename... P, std::size_t... I>
cudaError_t emu_launch_cooperative(void (*kernel)(P...), dim3 grid, dim3 block, void** args, std::size_t shared,
                                   cudaStream_t stream, std::index_sequence<I...>) {
  auto params = std::make_shared<std::tuple<std::decay_t<P>...>>(*static_cast<std::decay_t<P>*>(args[I])...);
  ::emu::launch_body("cooperative kernel", ::emu::config_of(kernel, ::emu::config(grid, block, shared, stream)),
                     [kernel, params] { std::apply(kernel, *params); }, true);
  return cudaPeekAtLastError();
}
