#include "bench/common/traffic.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "ragged/buffer.h"

namespace ragged {
namespace bench {
namespace {

double measure_copy_bytes_per_second() {
  // Far beyond any L2, so every copy goes to DRAM (unless RAGGED_BENCH_SCALE shrinks it).
  const std::size_t bytes = scaled_bytes(std::size_t{256} << 20);
  constexpr int kRepeats = 15;
  GpuTimer& timer = GpuTimer::instance();
  cudaStream_t stream = timer.stream();
  DeviceBuffer<unsigned char> src(bytes, stream), dst(bytes, stream);
  src.fill_bytes(0x5a);
  cuda_check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream), "warm-up copy");
  std::vector<double> seconds(kRepeats);
  for (double& s : seconds) {
    cuda_check(timer.record_start(), "cudaEventRecord");
    cuda_check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    cuda_check(timer.record_stop(), "cudaEventRecord");
    cuda_check(timer.elapsed(&s), "cudaEventElapsedTime");
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[kRepeats / 2];
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return 2.0 * static_cast<double>(bytes) / median;
}

}  // namespace

bool ceilings_measured() {
  static const bool measured = [] {
    const char* value = std::getenv("RAGGED_BENCH_NO_CEILINGS");
    return value == nullptr || std::string(value) != "1";
  }();
  return measured;
}

double copy_bytes_per_second() {
  static const double rate = measure_copy_bytes_per_second();
  return rate;
}

void set_gpu_traffic(benchmark::State& state, double bytes_per_iteration, double peak_bytes) {
  set_cpu_traffic(state, bytes_per_iteration, peak_bytes);
  if (!ceilings_measured()) return;
  // kIsIterationInvariantRate multiplies by iterations and divides by the (manual) time: achieved / copy rate.
  state.counters["copy_frac"] =
      benchmark::Counter(bytes_per_iteration / copy_bytes_per_second(), benchmark::Counter::kIsIterationInvariantRate);
}

void set_cpu_traffic(benchmark::State& state, double bytes_per_iteration, double peak_bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration * static_cast<double>(state.iterations())));
  state.counters["peak_bytes"] = benchmark::Counter(peak_bytes, benchmark::Counter::kDefaults,
                                                    benchmark::Counter::kIs1024);
}

void run_guarded(benchmark::State& state, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
  }
}

}  // namespace bench
}  // namespace ragged
