// The input shapes of the conversion benchmarks, shared by the GPU (bench_convert.cu) and CPU
// (bench_convert_cpu.cpp) suites so that their names line up.
#pragma once

#include <cstddef>
#include <vector>

#include "bench/common/ragged_case.h"

namespace ragged {
namespace bench {

// GPU cases, float values. Large: ragged values of 64 MiB (the padded side is up to 16x that); small: 1 MiB.
// Default: lognormal across inner 1, 8, 64, 256, 1024 and every other distribution at inner 1, 64, 1024, large;
// lognormal and uniform at inner 1 and 64, small. RAGGED_BENCH_FULL=1: every distribution x every inner size,
// large, and every distribution at inner 1, 8, 64, small. RAGGED_LENGTHS_FILE adds the file's lengths.
std::vector<RaggedCase> gpu_convert_cases();

// GPU cases of narrow rows in other element types (`elem_size` bytes a value, 1 or 2: the conversions' token groups
// move 16 or 8 tokens a thread there, where float moves 4): lognormal and uniform lengths at inner 1, 64 MiB of
// ragged values.
std::vector<RaggedCase> gpu_convert_narrow_cases(std::size_t elem_size);

// CPU reference cases: 4 MiB of ragged values, a few distributions at inner 1 and 64 (all inner sizes with
// RAGGED_BENCH_FULL=1).
std::vector<RaggedCase> cpu_convert_cases();

}  // namespace bench
}  // namespace ragged
