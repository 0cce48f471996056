// device_reduce's launch floor (bench/reduce_chain_floor.h). Not a suite: bench_segment.cu times it.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "bench/reduce_chain_floor.h"
#include "kernels/grid_dependency.cuh"

namespace ragged {
namespace bench {
namespace {

constexpr int kFloorThreads = 256;
constexpr int kFloorLoads = 4;  // float4 loads per thread in flight: 4096 floats in one round trip

// The chain's first kernel, ragged's row pass with nothing in it.
__global__ void floor_length_kernel(const std::int32_t* offsets, std::int64_t* length) {
  if (threadIdx.x == 0) *length = static_cast<std::int64_t>(offsets[1]) - offsets[0];
}

// One block sums the row. With `length` (the chain's second kernel) it waits for the kernel before it and reads
// the row's length from there; without, from the offsets.
__global__ void __launch_bounds__(kFloorThreads)
    floor_sum_kernel(const float* values, const std::int32_t* offsets, const std::int64_t* length, float* out) {
  detail::wait_for_prior_grid();
  const std::int64_t begin = offsets[0];
  const std::int64_t count = length != nullptr ? *length : static_cast<std::int64_t>(offsets[1]) - begin;
  const float* row = values + begin;
  // Whole float4s when the row starts on 16 bytes (the benchmark's does), then the rest one by one.
  const std::int64_t quads = reinterpret_cast<std::uintptr_t>(row) % 16 == 0 ? count / 4 : 0;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  float sum = 0.0f;
  for (std::int64_t q0 = threadIdx.x; q0 < quads; q0 += kFloorThreads * kFloorLoads) {
    float4 x[kFloorLoads];
#pragma unroll
    for (int k = 0; k < kFloorLoads; ++k) {
      const std::int64_t q = q0 + static_cast<std::int64_t>(k) * kFloorThreads;
      x[k] = q < quads ? row4[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < kFloorLoads; ++k) sum += (x[k].x + x[k].y) + (x[k].z + x[k].w);
  }
  for (std::int64_t i = quads * 4 + threadIdx.x; i < count; i += kFloorThreads) sum += row[i];
  for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  __shared__ float warp_sums[kFloorThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kFloorThreads / 32; ++w) total += warp_sums[w];
    *out = total;
  }
}

}  // namespace

Status launch_reduce_chain_floor(const float* values, const std::int32_t* offsets, std::int64_t* length_scratch,
                                 float* out, int kernels, cudaStream_t stream) {
  if (kernels == 1)
    return detail::launch_after_prior(false, "floor_sum_kernel", &floor_sum_kernel, dim3(1), dim3(kFloorThreads), 0,
                                      stream, values, offsets, static_cast<const std::int64_t*>(nullptr), out);
  if (kernels != 2)
    return fail(Status::kInvalidArgument,
                "launch_reduce_chain_floor: kernels must be 1 or 2, got " + std::to_string(kernels));
  Status status = detail::launch_after_prior(false, "floor_length_kernel", &floor_length_kernel, dim3(1),
                                             dim3(kFloorThreads), 0, stream, offsets, length_scratch);
  if (status != Status::kSuccess) return status;
  bool dependent = false;
  status = detail::dependent_launch_available(&floor_sum_kernel, dependent);
  if (status != Status::kSuccess) return status;
  return detail::launch_after_prior(dependent, "floor_sum_kernel", &floor_sum_kernel, dim3(1), dim3(kFloorThreads),
                                    0, stream, values, offsets, static_cast<const std::int64_t*>(length_scratch),
                                    out);
}

}  // namespace bench
}  // namespace ragged
