// The ragged benchmark program. Registers the CPU suites always and the GPU suites only when a CUDA device
// exists (saying so plainly when none does), records the device, its copy bandwidth and its bf16 GEMM rate (the
// floors' denominators, measured in the run) in the JSON context, and runs with a short default
// --benchmark_min_time so the default suite stays quick.
//
//   ragged_bench                                   default suite
//   RAGGED_BENCH_FULL=1 ragged_bench               every distribution x inner size x size class
//   RAGGED_BENCH_ATTENTION=targets ragged_bench    attention at the shapes issue 5's targets are judged on
//                                                  (bench/attention_cases.h; scripts/gpu-check.sh sets it)
//   RAGGED_LENGTHS_FILE=lengths.txt ragged_bench   adds cases drawn from a file of lengths (one per line)
//   ragged_bench --benchmark_filter=_cpu           the CPU suites only
//   RAGGED_BENCH_SUITES=segment_gpu,planner ragged_bench
//                                                  the named suites only (scripts/gpu-check.sh runs one at a time)
//   ragged_bench --benchmark_list_tests            every benchmark's name, the GPU suites' too, GPU or not
//   RAGGED_BENCH_SCALE=0.001 ragged_bench          every GPU case shrunk (bench/common/suite.h), to check the
//                                                  harness, e.g. on the kernel emulator (tests/emu/run_bench.sh)
//   RAGGED_BENCH_VERIFY=1 ragged_bench             each GPU benchmark's result held against the CPU reference
//                                                  (bench/common/verify.h; for shrunk runs: the references are slow)
//   RAGGED_BENCH_FLUSH=dirty ragged_bench          L2 flushed by a write instead of a read before each iteration
//                                                  (bench/common/l2_flush.h)
//
// Output is flushed after every benchmark, console and --benchmark_out JSON alike, so a run stopped by a time
// limit keeps what it measured (scripts/gpu-check.sh closes such a truncated JSON file).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/common/compute_peak.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "ragged/buffer.h"

namespace {

// Adds the device's name, L2 size, SM count, the way L2 is flushed (bench/common/l2_flush.h), measured copy
// bandwidth and bf16 GEMM rate to the benchmark context.
void describe_device() {
  int device = 0;
  cudaDeviceProp props{};
  ragged::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  ragged::cuda_check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  std::printf("GPU: %s, sm_%d%d, %d SMs, L2 %d MiB", props.name, props.major, props.minor, props.multiProcessorCount,
              props.l2CacheSize >> 20);
  benchmark::AddCustomContext("gpu", props.name);
  benchmark::AddCustomContext("gpu_compute_capability",
                              std::to_string(props.major) + "." + std::to_string(props.minor));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(props.l2CacheSize));
  const ragged::bench::L2Flush flush = ragged::bench::GpuTimer::instance().flush_mode();
  std::printf(", L2 flushed %s before each iteration", ragged::bench::l2_flush_name(flush));
  benchmark::AddCustomContext("l2_flush", ragged::bench::l2_flush_name(flush));
  if (!ragged::bench::ceilings_measured()) {
    std::printf(", ceilings not measured (RAGGED_BENCH_NO_CEILINGS=1: no copy_frac, no peak_frac)\n");
    return;
  }
  const double copy = ragged::bench::copy_bytes_per_second();
  const double gemm = ragged::bench::bf16_gemm_flops_per_second();
  const int n = ragged::bench::bf16_gemm_size();
  std::printf(", device-to-device copy %.0f GB/s (read + write), bf16 GEMM %.0f TFLOP/s (cuBLAS, %d^3)\n",
              copy * 1e-9, gemm * 1e-12, n);
  benchmark::AddCustomContext("copy_bytes_per_second", std::to_string(copy));
  benchmark::AddCustomContext("bf16_gemm_flops_per_second", std::to_string(gemm));
  benchmark::AddCustomContext("bf16_gemm_size", std::to_string(n));
}

// The JSON file reporter, flushed after each benchmark: the stock one writes its file only as its buffer fills.
class FlushingJsonReporter : public benchmark::JSONReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::JSONReporter::ReportRuns(runs);
    GetOutputStream().flush();
  }
};

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

// --benchmark_list_tests (or =true): listing runs nothing, so every suite may register, GPU or not.
bool listing_only(int argc, char** argv) {
  const char* flag = "--benchmark_list_tests";
  const std::size_t n = std::strlen(flag);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return true;
    if (std::strncmp(argv[i], flag, n) == 0 && argv[i][n] == '=')
      return std::strcmp(argv[i] + n + 1, "false") != 0 && std::strcmp(argv[i] + n + 1, "0") != 0;
  }
  return false;
}

// The suites named in RAGGED_BENCH_SUITES (comma-separated), or all of them; an unknown name is an error that
// lists the known ones.
std::vector<const ragged::bench::Suite*> selected_suites() {
  std::vector<const ragged::bench::Suite*> all;
  for (const ragged::bench::Suite& suite : ragged::bench::suites()) all.push_back(&suite);
  const char* env = std::getenv("RAGGED_BENCH_SUITES");
  if (env == nullptr || *env == '\0') return all;
  std::vector<const ragged::bench::Suite*> chosen;
  const std::string list = env;
  for (std::size_t begin = 0; begin <= list.size();) {
    std::size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(begin, end - begin);
    begin = end + 1;
    if (name.empty()) continue;
    const ragged::bench::Suite* found = nullptr;
    for (const ragged::bench::Suite* suite : all)
      if (name == suite->name) found = suite;
    if (found == nullptr) {
      std::string known;
      for (const ragged::bench::Suite* suite : all) known += std::string(known.empty() ? "" : ", ") + suite->name;
      throw std::runtime_error("RAGGED_BENCH_SUITES names an unknown suite '" + name + "' (known: " + known + ")");
    }
    chosen.push_back(found);
  }
  return chosen;
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
    const bool listing = listing_only(argc, argv);
    const std::vector<const ragged::bench::Suite*> chosen = selected_suites();
    if (ragged::bench::size_scale() != 1.0) {
      std::fprintf(stderr, "RAGGED_BENCH_SCALE=%g: every GPU case shrunk, for checking the harness, not for results\n",
                   ragged::bench::size_scale());
      benchmark::AddCustomContext("size_scale", std::to_string(ragged::bench::size_scale()));
    }
    std::string reason;
    const bool gpu = !listing && ragged::bench::cuda_device_available(&reason);
    if (gpu) {
      describe_device();
    } else if (!listing) {
      std::printf("No CUDA device found: GPU benchmarks skipped (%s)\n", reason.c_str());
      benchmark::AddCustomContext("gpu", "none");
    }
    std::fflush(stdout);
    for (const ragged::bench::Suite* suite : chosen)
      if (suite->needs == ragged::bench::Needs::kCpu || gpu || listing) suite->register_benchmarks();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ragged_bench: %s\n", error.what());
    return 1;
  }
  // The console reporter writes to std::cout; unitbuf flushes it after every write.
  std::cout << std::unitbuf;
  const bool json_file = has_flag(argc, argv, "--benchmark_out=") &&
                         (!has_flag(argc, argv, "--benchmark_out_format=") ||
                          has_flag(argc, argv, "--benchmark_out_format=json"));
  if (json_file) {
    FlushingJsonReporter file_reporter;
    benchmark::RunSpecifiedBenchmarks(benchmark::CreateDefaultDisplayReporter(), &file_reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}
