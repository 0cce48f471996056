#include "bench/common/compute_peak.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/common/device_data.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "ragged/buffer.h"

namespace ragged {
namespace bench {
namespace {

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(Status::kCudaError, std::string(what) + " failed with cuBLAS status " + std::to_string(status));
}

double measure_bf16_gemm_flops_per_second() {
  const int n = bf16_gemm_size();
  constexpr int kWarmups = 2, kRepeats = 10;
  GpuTimer& timer = GpuTimer::instance();
  cudaStream_t stream = timer.stream();
  const std::size_t elements = static_cast<std::size_t>(n) * n;
  DeviceBuffer<__nv_bfloat16> a(elements, stream), b(elements, stream), c(elements, stream);
  fill_uniform(a, 1.0f, 11u, stream);  // random data: zeros run faster and would flatter the ceiling
  fill_uniform(b, 1.0f, 12u, stream);
  CublasHandle handle;
  cublas_check(cublasSetStream(handle.get(), stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&] {
    cublas_check(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16BF, n,
                              b.data(), CUDA_R_16BF, n, &beta, c.data(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (bf16 peak)");
  };
  for (int i = 0; i < kWarmups; ++i) gemm();
  std::vector<double> seconds(kRepeats);
  for (double& s : seconds) {
    cuda_check(timer.record_start(), "cudaEventRecord");
    gemm();
    cuda_check(timer.record_stop(), "cudaEventRecord");
    cuda_check(timer.elapsed(&s), "cudaEventElapsedTime");
  }
  std::sort(seconds.begin(), seconds.end());
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return 2.0 * n * static_cast<double>(n) * n / seconds[kRepeats / 2];
}

}  // namespace

int bf16_gemm_size() {
  // Large enough for cuBLAS to reach its plateau, 3 x 128 MiB of operands; RAGGED_BENCH_SCALE shrinks the
  // work by about its value (n by its cube root, a multiple of 64).
  return std::max(64, static_cast<int>(std::lround(8192.0 * std::cbrt(size_scale()) / 64.0)) * 64);
}

double bf16_gemm_flops_per_second() {
  static const double rate = measure_bf16_gemm_flops_per_second();
  return rate;
}

void set_gpu_flops(benchmark::State& state, double flops_per_iteration) {
  // kIsIterationInvariantRate multiplies by iterations and divides by the (manual) time.
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  if (!ceilings_measured()) return;
  state.counters["peak_frac"] = benchmark::Counter(flops_per_iteration / bf16_gemm_flops_per_second(),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace bench
}  // namespace ragged
