// The sub-warp row floor (bench/subwarp_row_floor.h). Not a suite: bench_segment.cu times it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "bench/subwarp_row_floor.h"
#include "kernels/element_convert.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/launch.cuh"

namespace ragged {
namespace bench {
namespace {

using detail::from_float;
using detail::to_float;

constexpr int kFloorThreads = 256;
constexpr int kWarpSize = 32;
// Tokens a lane loads at once: a whole row of the tiny regime (0 to 4 tokens), 64 bytes in flight per lane.
constexpr int kHeld = 4;

template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  T v[kElems];
};

// A lane's place: lanes sub * vcols .. sub * vcols + vcols - 1 of a warp share row `first + sub` of each group of
// 32 / vcols rows the warp takes (grid-stride), lane `col` of them vector column col.
struct SubwarpLane {
  int sub;
  int col;
  int rows_per_warp;
  std::int64_t first_row;  // this warp's first group
  std::int64_t row_stride;

  __device__ explicit SubwarpLane(int vcols) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    sub = lane / vcols;
    col = lane % vcols;
    rows_per_warp = kWarpSize / vcols;
    const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
    const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarpSize;
    first_row = warp * rows_per_warp + sub;
    row_stride = warps * rows_per_warp;
  }
};

// Loads tokens t0 .. t0 + kHeld - 1 of this lane's column (those below length); the others stay untouched.
template <typename T>
__device__ __forceinline__ void load_held(const Vec16<T>* column, int vcols, std::int64_t t0, std::int64_t length,
                                          Vec16<T> (&x)[kHeld]) {
#pragma unroll
  for (int k = 0; k < kHeld; ++k)
    if (t0 + k < length) x[k] = column[(t0 + k) * vcols];
}

// Registers (ptxas, sm_90, uncapped, no spills): sum 48 (float) and 77 (bfloat16), softmax 77 and 121 (2 blocks
// of 256 per SM); held to one more block per SM, the bfloat16 kernels spilled 80 and 154 bytes.
template <typename T>
__global__ void __launch_bounds__(kFloorThreads)
    subwarp_sum_floor_kernel(const T* values, const std::int32_t* offsets, std::int64_t batch, int vcols, T* out) {
  constexpr int V = Vec16<T>::kElems;
  const SubwarpLane lane(vcols);
  const std::int64_t D = static_cast<std::int64_t>(vcols) * V;
  for (std::int64_t row = lane.first_row; row < batch; row += lane.row_stride) {
    const std::int64_t begin = offsets[row];
    const std::int64_t length = offsets[row + 1] - begin;
    const Vec16<T>* column = reinterpret_cast<const Vec16<T>*>(values + begin * D) + lane.col;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    for (std::int64_t t0 = 0; t0 < length; t0 += kHeld) {
      Vec16<T> x[kHeld];
      load_held(column, vcols, t0, length, x);
#pragma unroll
      for (int k = 0; k < kHeld; ++k)
        if (t0 + k < length) {
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] += to_float(x[k].v[v]);
        }
    }
    Vec16<T> y;
#pragma unroll
    for (int v = 0; v < V; ++v) y.v[v] = from_float<T>(acc[v]);
    reinterpret_cast<Vec16<T>*>(out + row * D)[lane.col] = y;
  }
}

// Softmax per column. The first kHeld tokens stay in registers; a longer row's others are read again for the
// sum and the write (the tiny regime has none).
template <typename T>
__global__ void __launch_bounds__(kFloorThreads)
    subwarp_softmax_floor_kernel(const T* values, const std::int32_t* offsets, std::int64_t batch, int vcols, T* out) {
  constexpr int V = Vec16<T>::kElems;
  const SubwarpLane lane(vcols);
  const std::int64_t D = static_cast<std::int64_t>(vcols) * V;
  for (std::int64_t row = lane.first_row; row < batch; row += lane.row_stride) {
    const std::int64_t begin = offsets[row];
    const std::int64_t length = offsets[row + 1] - begin;
    if (length <= 0) continue;  // no output
    const Vec16<T>* column = reinterpret_cast<const Vec16<T>*>(values + begin * D) + lane.col;
    Vec16<T>* column_out = reinterpret_cast<Vec16<T>*>(out + begin * D) + lane.col;
    Vec16<T> held[kHeld];
    load_held(column, vcols, 0, length, held);
    // Calls f(k, x) for tokens k >= kHeld of the row, kHeld loads at a time.
    auto for_rest = [&](auto f) {
      for (std::int64_t t0 = kHeld; t0 < length; t0 += kHeld) {
        Vec16<T> x[kHeld];
        load_held(column, vcols, t0, length, x);
#pragma unroll
        for (int k = 0; k < kHeld; ++k)
          if (t0 + k < length) f(t0 + k, x[k]);
      }
    };
    float top[V], sum[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      top[v] = -INFINITY;
      sum[v] = 0.0f;
    }
    auto fold_max = [&](std::int64_t, const Vec16<T>& x) {
#pragma unroll
      for (int v = 0; v < V; ++v) top[v] = fmaxf(top[v], to_float(x.v[v]));
    };
    auto fold_sum = [&](std::int64_t, const Vec16<T>& x) {
#pragma unroll
      for (int v = 0; v < V; ++v) sum[v] += expf(to_float(x.v[v]) - top[v]);
    };
    auto write = [&](std::int64_t t, const Vec16<T>& x) {
      Vec16<T> y;
#pragma unroll
      for (int v = 0; v < V; ++v) y.v[v] = from_float<T>(expf(to_float(x.v[v]) - top[v]) * sum[v]);
      column_out[t * vcols] = y;
    };
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
      if (k < length) fold_max(k, held[k]);
    for_rest(fold_max);
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
      if (k < length) fold_sum(k, held[k]);
    for_rest(fold_sum);
#pragma unroll
    for (int v = 0; v < V; ++v) sum[v] = 1.0f / sum[v];  // from here on the scale
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
      if (k < length) write(k, held[k]);
    for_rest(write);
  }
}

}  // namespace

bool subwarp_floor_fits(std::int64_t inner, std::size_t elem_size) {
  const auto vec = static_cast<std::int64_t>(16 / elem_size);
  return inner > 0 && inner % vec == 0 && kWarpSize % (inner / vec) == 0;
}

template <typename T>
Status launch_subwarp_row_floor(SubwarpFloorOp op, const T* values, const std::int32_t* offsets, std::int64_t batch,
                                std::int64_t inner, T* out, cudaStream_t stream) {
  if (!subwarp_floor_fits(inner, sizeof(T)))
    return fail(Status::kUnsupportedShape, "launch_subwarp_row_floor: D = " + std::to_string(inner) +
                                               " is not a multiple of 16 bytes whose vectors divide a warp");
  if (reinterpret_cast<std::uintptr_t>(values) % 16 != 0 || reinterpret_cast<std::uintptr_t>(out) % 16 != 0)
    return fail(Status::kInvalidArgument, "launch_subwarp_row_floor: values and out must be 16-byte aligned");
  if (batch == 0) return Status::kSuccess;
  const int vcols = static_cast<int>(inner / Vec16<T>::kElems);
  const std::int64_t warps = (batch + kWarpSize / vcols - 1) / (kWarpSize / vcols);
  const bool sum = op == SubwarpFloorOp::kSum;
  void (*kernel)(const T*, const std::int32_t*, std::int64_t, int, T*) =
      sum ? &subwarp_sum_floor_kernel<T> : &subwarp_softmax_floor_kernel<T>;
  unsigned blocks = 0;
  const Status sized = detail::resident_grid_size(kernel, kFloorThreads, warps, kFloorThreads / kWarpSize, blocks);
  if (sized != Status::kSuccess) return sized;
  return detail::launch_after_prior(false, sum ? "subwarp_sum_floor_kernel" : "subwarp_softmax_floor_kernel", kernel,
                                    dim3(blocks), dim3(kFloorThreads), 0, stream, values, offsets, batch, vcols, out);
}

template Status launch_subwarp_row_floor<float>(SubwarpFloorOp, const float*, const std::int32_t*, std::int64_t,
                                                std::int64_t, float*, cudaStream_t);
template Status launch_subwarp_row_floor<__nv_bfloat16>(SubwarpFloorOp, const __nv_bfloat16*, const std::int32_t*,
                                                        std::int64_t, std::int64_t, __nv_bfloat16*, cudaStream_t);

}  // namespace bench
}  // namespace ragged
