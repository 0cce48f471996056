// The compute ceiling of this device, measured in the run (as copy_bytes_per_second is for memory): the FLOP
// rate of a large bfloat16 matrix product through cuBLAS (8192 x 8192 x 8192, fp32 accumulation, random data),
// the denominator of peak_frac for the tensor-core benchmarks (attention, packed RNN).
//   TFLOP/s     FLOPs of the real work per iteration / iteration time (padding never counts)
//   peak_frac   that rate over the measured bf16 GEMM rate: 1.0 = as fast as cuBLAS's best case
#pragma once

#include <benchmark/benchmark.h>

namespace ragged {
namespace bench {

// FLOP/s of the reference bf16 GEMM (median of 10 timed products after 2 warm-ups), measured on the first call.
// Throws ragged::Error when a CUDA or cuBLAS call fails.
double bf16_gemm_flops_per_second();
// The size n of that n x n x n product: 8192, less in a run shrunk by RAGGED_BENCH_SCALE.
int bf16_gemm_size();

// Sets TFLOP/s and peak_frac after the timed loop.
void set_gpu_flops(benchmark::State& state, double flops_per_iteration);

}  // namespace bench
}  // namespace ragged
