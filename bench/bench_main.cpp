// The ragged benchmark program. Registers the CPU suites always and the GPU suites only when a CUDA device
// exists (saying so plainly when none does), records the device and its copy bandwidth in the JSON context,
// and runs with a short default --benchmark_min_time so the default suite stays quick.
//
//   ragged_bench                                   default suite
//   RAGGED_BENCH_FULL=1 ragged_bench               every distribution x inner size x size class
//   RAGGED_LENGTHS_FILE=lengths.txt ragged_bench   adds cases drawn from a file of lengths (one per line)
//   ragged_bench --benchmark_filter=_cpu           the CPU suites only
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "ragged/buffer.h"

namespace {

// Adds the device's name, L2 size, SM count and measured copy bandwidth to the benchmark context.
void describe_device() {
  int device = 0;
  cudaDeviceProp props{};
  ragged::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  ragged::cuda_check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  const double copy = ragged::bench::copy_bytes_per_second();
  std::printf("GPU: %s, sm_%d%d, %d SMs, L2 %d MiB, device-to-device copy %.0f GB/s (read + write)\n", props.name,
              props.major, props.minor, props.multiProcessorCount, props.l2CacheSize >> 20, copy * 1e-9);
  benchmark::AddCustomContext("gpu", props.name);
  benchmark::AddCustomContext("gpu_compute_capability", std::to_string(props.major) + "." + std::to_string(props.minor));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(props.l2CacheSize));
  benchmark::AddCustomContext("copy_bytes_per_second", std::to_string(copy));
}

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A short minimum time per benchmark unless the caller chose one; each GPU iteration also flushes L2.
  std::vector<char*> args(argv, argv + argc);
  std::string min_time = "--benchmark_min_time=0.05";
  if (!has_flag(argc, argv, "--benchmark_min_time")) args.insert(args.begin() + 1, &min_time[0]);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;

  try {
    std::string reason;
    const bool gpu = ragged::bench::cuda_device_available(&reason);
    if (gpu) {
      describe_device();
    } else {
      std::printf("No CUDA device found: GPU benchmarks skipped (%s)\n", reason.c_str());
      benchmark::AddCustomContext("gpu", "none");
    }
    std::fflush(stdout);
    for (const ragged::bench::Suite& suite : ragged::bench::suites())
      if (suite.needs == ragged::bench::Needs::kCpu || gpu) suite.register_benchmarks();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ragged_bench: %s\n", error.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
