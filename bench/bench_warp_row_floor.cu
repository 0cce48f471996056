// The warp row floor (bench/warp_row_floor.h). Not a suite: bench_segment.cu times it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "bench/warp_row_floor.h"
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
constexpr int kPassTokens = kWarpSize * kWarpRowHeld;  // tokens a warp loads at once

// This warp's rows: first, first + stride, ... (grid-stride, one warp each).
struct WarpRows {
  int lane;
  std::int64_t first;
  std::int64_t stride;

  __device__ WarpRows() {
    lane = static_cast<int>(threadIdx.x) % kWarpSize;
    first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
    stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarpSize;
  }
};

// This lane's tokens of the pass from token t0: x[k] = token t0 + 32 k + lane where it is below length, `pad`
// past it. Coalesced: each k is one 32-token line of the row.
template <typename T>
__device__ __forceinline__ void load_pass(const T* row, std::int64_t t0, std::int64_t length, int lane, float pad,
                                          float (&x)[kWarpRowHeld]) {
#pragma unroll
  for (int k = 0; k < kWarpRowHeld; ++k) {
    const std::int64_t t = t0 + k * kWarpSize + lane;
    x[k] = t < length ? to_float(row[t]) : pad;
  }
}

// The warp's combination of v by `op`, in every lane (a butterfly).
template <typename Op>
__device__ __forceinline__ float warp_all(float v, Op op) {
#pragma unroll
  for (int s = kWarpSize / 2; s > 0; s >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, s));
  return v;
}

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Sum (kMax false) or max of each row; 0 for an empty row.
template <typename T, bool kMax>
__global__ void __launch_bounds__(kFloorThreads)
    warp_reduce_floor_kernel(const T* values, const std::int32_t* offsets, std::int64_t batch, T* out) {
  using Op = typename std::conditional<kMax, MaxOp, AddOp>::type;
  const float identity = kMax ? -INFINITY : 0.0f;
  const WarpRows w;
  for (std::int64_t row = w.first; row < batch; row += w.stride) {
    const std::int64_t begin = offsets[row];
    const std::int64_t length = offsets[row + 1] - begin;
    float acc = identity;
    for (std::int64_t t0 = 0; t0 < length; t0 += kPassTokens) {
      float x[kWarpRowHeld];
      load_pass(values + begin, t0, length, w.lane, identity, x);
#pragma unroll
      for (int k = 0; k < kWarpRowHeld; ++k) acc = Op{}(acc, x[k]);
    }
    acc = warp_all(acc, Op{});
    if (w.lane == 0) out[row] = from_float<T>(length > 0 ? acc : 0.0f);
  }
}

// Softmax of each row. The first pass's tokens stay in registers (the whole row up to kPassTokens); a longer row's
// others are read again for the sum and the write.
template <typename T>
__global__ void __launch_bounds__(kFloorThreads)
    warp_softmax_floor_kernel(const T* values, const std::int32_t* offsets, std::int64_t batch, T* out) {
  const WarpRows w;
  for (std::int64_t row = w.first; row < batch; row += w.stride) {
    const std::int64_t begin = offsets[row];
    const std::int64_t length = offsets[row + 1] - begin;
    if (length <= 0) continue;  // no output
    const T* x_row = values + begin;
    T* y_row = out + begin;
    float held[kWarpRowHeld];
    load_pass(x_row, 0, length, w.lane, -INFINITY, held);  // -inf pads: no effect on the max, exp gives 0
    // f(t, x) for this lane's tokens t >= kPassTokens (padded past the end), a pass at a time.
    auto for_rest = [&](auto f) {
      for (std::int64_t t0 = kPassTokens; t0 < length; t0 += kPassTokens) {
        float x[kWarpRowHeld];
        load_pass(x_row, t0, length, w.lane, -INFINITY, x);
#pragma unroll
        for (int k = 0; k < kWarpRowHeld; ++k) f(t0 + k * kWarpSize + w.lane, x[k]);
      }
    };
    float top = -INFINITY;
#pragma unroll
    for (int k = 0; k < kWarpRowHeld; ++k) top = fmaxf(top, held[k]);
    for_rest([&](std::int64_t, float x) { top = fmaxf(top, x); });
    top = warp_all(top, MaxOp{});
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarpRowHeld; ++k) sum += expf(held[k] - top);
    for_rest([&](std::int64_t, float x) { sum += expf(x - top); });
    const float scale = 1.0f / warp_all(sum, AddOp{});
    auto write = [&](std::int64_t t, float x) {
      if (t < length) y_row[t] = from_float<T>(expf(x - top) * scale);
    };
#pragma unroll
    for (int k = 0; k < kWarpRowHeld; ++k) write(k * kWarpSize + w.lane, held[k]);
    for_rest(write);
  }
}

const char* floor_kernel_name(WarpFloorOp op) {
  switch (op) {
    case WarpFloorOp::kSum: return "warp_sum_floor_kernel";
    case WarpFloorOp::kMax: return "warp_max_floor_kernel";
    case WarpFloorOp::kSoftmax: return "warp_softmax_floor_kernel";
  }
  return "?";
}

}  // namespace

template <typename T>
Status launch_warp_row_floor(WarpFloorOp op, const T* values, const std::int32_t* offsets, std::int64_t batch, T* out,
                             cudaStream_t stream) {
  if (batch < 0)
    return fail(Status::kInvalidArgument, "launch_warp_row_floor: batch = " + std::to_string(batch) + " < 0");
  if (batch == 0) return Status::kSuccess;
  void (*kernel)(const T*, const std::int32_t*, std::int64_t, T*) =
      op == WarpFloorOp::kSum   ? &warp_reduce_floor_kernel<T, false>
      : op == WarpFloorOp::kMax ? &warp_reduce_floor_kernel<T, true>
                                : &warp_softmax_floor_kernel<T>;
  unsigned blocks = 0;  // a warp per row, at most the blocks that fit on the device at once
  const Status sized = detail::resident_grid_size(kernel, kFloorThreads, batch, kFloorThreads / kWarpSize, blocks);
  if (sized != Status::kSuccess) return sized;
  return detail::launch_after_prior(false, floor_kernel_name(op), kernel, dim3(blocks), dim3(kFloorThreads), 0, stream,
                                    values, offsets, batch, out);
}

template Status launch_warp_row_floor<float>(WarpFloorOp, const float*, const std::int32_t*, std::int64_t, float*,
                                             cudaStream_t);
template Status launch_warp_row_floor<__nv_bfloat16>(WarpFloorOp, const __nv_bfloat16*, const std::int32_t*,
                                                     std::int64_t, __nv_bfloat16*, cudaStream_t);

}  // namespace bench
}  // namespace ragged
