// The names README.md's C++ examples use without declaring them, for tests/readme/extract.cmake: the build
// compiles each example (never links or runs it), so an API change that breaks the README breaks the build.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include <ragged/ragged.h>

namespace readme {
extern std::int32_t* d_lengths;
extern std::int32_t* d_offsets;
extern ragged::CheckResult* d_check;
extern void* d_workspace;
extern float* d_values;
extern float* d_padded;
extern float* d_max;
extern std::int64_t* d_argmax;
extern std::int64_t batch, nnz, max_len;
extern cudaStream_t stream;
extern std::vector<float> values;
extern std::vector<std::int64_t> lengths;
extern std::vector<std::vector<float>> torch_flat_weights;
}  // namespace readme
