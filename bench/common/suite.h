// Benchmark suites register themselves here at static-initialisation time; bench_main.cpp registers the GPU
// suites with Google Benchmark only when a CUDA device exists, so a machine without one still runs the CPU
// suites. A suite file says, at namespace scope:
//   RAGGED_BENCH_SUITE(convert_gpu, ragged::bench::Needs::kGpu, register_convert_gpu);
#pragma once

#include <cstddef>
#include <cstdint>
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

// RAGGED_BENCH_SCALE=s (0 < s <= 1, default 1) shrinks the GPU suites' cases for checking the harness where
// time is short or slow, as on the kernel emulator (tests/emu/run_bench.sh): the segment and conversion values
// take about s times their bytes, and attention and RNN sequences are sqrt(s) times as long (attention's work,
// quadratic in the length, shrinks by s). Case names carry the sizes, and the JSON context records the scale,
// so a scaled run never passes for a real one. Throws std::invalid_argument for a value outside (0, 1].
double size_scale();
// `bytes` scaled by size_scale(), at least 4 KiB.
std::size_t scaled_bytes(std::size_t bytes);
// `length` scaled by sqrt(size_scale()), at least `least`.
std::int64_t scaled_length(std::int64_t length, std::int64_t least);

}  // namespace bench
}  // namespace ragged

#define RAGGED_BENCH_SUITE(name, needs, fn) \
  static const bool ragged_bench_suite_##name = ::ragged::bench::add_suite(#name, needs, fn)
