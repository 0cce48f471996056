#include "bench/convert_cases.h"

#include "bench/common/suite.h"

namespace ragged {
namespace bench {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::int64_t kMeanLength = 256;

void add_cases(std::vector<RaggedCase>& out, const std::vector<LengthDistribution>& distributions,
               const std::vector<std::int64_t>& inners, std::size_t value_bytes,
               std::size_t elem_size = sizeof(float)) {
  for (const LengthDistribution distribution : distributions)
    for (const std::int64_t inner : inners)
      out.push_back(make_ragged_case(distribution, inner, elem_size, value_bytes, kMeanLength));
}

void add_file_cases(std::vector<RaggedCase>& out, const std::vector<std::int64_t>& inners, std::size_t value_bytes) {
  const std::string path = lengths_file_from_env();
  if (path.empty()) return;
  const std::vector<std::int64_t> file_lengths = read_lengths_file(path);
  for (const std::int64_t inner : inners)
    out.push_back(make_ragged_case(LengthDistribution::kFile, inner, sizeof(float), value_bytes, kMeanLength,
                                   file_lengths));
}

}  // namespace

std::vector<RaggedCase> gpu_convert_cases() {
  std::vector<RaggedCase> cases;
  const std::vector<std::int64_t> all_inners = {1, 8, 64, 256, 1024};
  const std::size_t large = scaled_bytes(64 * kMiB), small = scaled_bytes(kMiB);
  if (full_run()) {
    add_cases(cases, synthetic_distributions(), all_inners, large);
    add_cases(cases, synthetic_distributions(), {1, 8, 64}, small);
    add_file_cases(cases, all_inners, large);
    return cases;
  }
  add_cases(cases, {LengthDistribution::kLognormal}, all_inners, large);
  for (const LengthDistribution distribution : synthetic_distributions())
    if (distribution != LengthDistribution::kLognormal) add_cases(cases, {distribution}, {1, 64, 1024}, large);
  add_cases(cases, {LengthDistribution::kLognormal, LengthDistribution::kUniform}, {1, 64}, small);
  add_file_cases(cases, {1, 64, 1024}, large);
  return cases;
}

std::vector<RaggedCase> gpu_convert_narrow_cases(std::size_t elem_size) {
  std::vector<RaggedCase> cases;
  add_cases(cases, {LengthDistribution::kLognormal, LengthDistribution::kUniform}, {1}, scaled_bytes(64 * kMiB),
            elem_size);
  return cases;
}

std::vector<RaggedCase> cpu_convert_cases() {
  std::vector<RaggedCase> cases;
  const std::vector<std::int64_t> inners =
      full_run() ? std::vector<std::int64_t>{1, 8, 64, 256, 1024} : std::vector<std::int64_t>{1, 64};
  const std::vector<LengthDistribution> distributions =
      full_run() ? synthetic_distributions()
                 : std::vector<LengthDistribution>{LengthDistribution::kUniform, LengthDistribution::kLognormal,
                                                   LengthDistribution::kPowerLaw, LengthDistribution::kOneHuge};
  add_cases(cases, distributions, inners, 4 * kMiB);
  add_file_cases(cases, inners, 4 * kMiB);
  return cases;
}

}  // namespace bench
}  // namespace ragged
