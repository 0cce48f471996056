// RAGGED_BENCH_VERIFY=1: after its timed loop, every GPU benchmark copies its result back and holds it against
// ragged's CPU reference (include/ragged/reference*.h) run on that benchmark's own inputs, so that each
// implementation, the padded, CUB and cuBLAS baselines included, is seen computing what its name says. It is a
// check for gross errors (wrong rows, layouts or arguments, output left unwritten), not the tests' precision:
// the largest |result - reference| over the largest |reference| must stay within a tolerance per storage type.
// The references run on the CPU in double, so this is for shrunk runs (RAGGED_BENCH_SCALE): the kernel
// emulator's benchmark run sets it (tests/emu/run_bench.sh).
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace ragged {
namespace bench {

bool verify_results();

// The relative tolerance for results stored as T: float 1e-3, half / bfloat16 5e-2.
template <typename T>
double verify_tolerance() {
  return std::is_same<T, float>::value ? 1e-3 : 5e-2;
}

// Host values (float, __half or __nv_bfloat16) as doubles.
template <typename T>
std::vector<double> as_doubles(const std::vector<T>& values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<double>(static_cast<float>(values[i]));
  return out;
}

// Compares got with want position by position, skipping the positions where want is NaN (what the reference
// leaves unwritten, filled with NaN first). Sets the counter verify_error = max |got - want| / max |want| (a
// NaN or infinity where want is finite counts as an error; a second check in one benchmark keeps the larger
// value) and ends the benchmark with an error naming `what` and the first bad position when it exceeds
// `tolerance`, when the sizes differ, or when every reference value is NaN (an empty result compares as equal).
void check_against_reference(benchmark::State& state, const std::vector<double>& got, const std::vector<double>& want,
                             double tolerance, const std::string& what);

}  // namespace bench
}  // namespace ragged
