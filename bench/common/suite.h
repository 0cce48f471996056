// Benchmark suites register themselves here at static-initialisation time; bench_main.cpp registers the GPU
// suites with Google Benchmark only when a CUDA device exists, so a machine without one still runs the CPU
// suites. A suite file says, at namespace scope:
//   RAGGED_BENCH_SUITE(convert_gpu, ragged::bench::Needs::kGpu, register_convert_gpu);
#pragma once

#include <vector>

namespace ragged {
namespace bench {

enum class Needs { kCpu, kGpu };

struct Suite {
  const char* name;
  Needs needs;
  void (*register_benchmarks)();
};

// Adds a suite; returns true so that it can initialise a namespace-scope constant.
bool add_suite(const char* name, Needs needs, void (*register_benchmarks)());
const std::vector<Suite>& suites();

// RAGGED_BENCH_FULL=1 in the environment asks the suites for their long matrix (every distribution, inner
// size and size class); the default run is kept to about a minute on an H100.
bool full_run();

}  // namespace bench
}  // namespace ragged

#define RAGGED_BENCH_SUITE(name, needs, fn) \
  static const bool ragged_bench_suite_##name = ::ragged::bench::add_suite(#name, needs, fn)
