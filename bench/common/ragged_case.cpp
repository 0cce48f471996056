#include "bench/common/ragged_case.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ragged {
namespace bench {

std::string RaggedCase::name() const {
  return std::string(distribution_name(distribution)) + "/inner:" + std::to_string(inner) +
         "/batch:" + std::to_string(batch) + "/mean:" + std::to_string(mean);
}

RaggedCase make_ragged_case(LengthDistribution distribution, std::int64_t inner, std::size_t elem_size,
                            std::size_t value_bytes, std::int64_t mean,
                            const std::vector<std::int64_t>& file_lengths) {
  if (inner <= 0 || elem_size == 0 || mean <= 0) throw std::invalid_argument("make_ragged_case: bad shape");
  const std::int64_t target_tokens =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(value_bytes / (elem_size * static_cast<std::size_t>(inner))));
  RaggedCase c;
  c.distribution = distribution;
  c.inner = inner;
  LengthSpec spec;
  spec.distribution = distribution;
  spec.seed = 0x5eed0000u + static_cast<std::uint64_t>(distribution) * 131 + static_cast<std::uint64_t>(inner);
  if (distribution == LengthDistribution::kOneHuge) {
    spec.batch = 16;
    spec.mean = static_cast<double>(target_tokens) / 16.0;
    spec.max_len = target_tokens;
    c.mean = target_tokens / 16;
  } else if (distribution == LengthDistribution::kFile) {
    double sum = 0.0;
    for (const std::int64_t l : file_lengths) sum += static_cast<double>(l);
    const double file_mean = std::max(1.0, sum / static_cast<double>(std::max<std::size_t>(1, file_lengths.size())));
    spec.batch = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(target_tokens) / file_mean));
    spec.mean = 0.0;  // keep the file's own scale
    spec.max_len = std::numeric_limits<std::int32_t>::max();
    spec.file_lengths = file_lengths;
    c.mean = std::llround(file_mean);
  } else {
    spec.batch = std::max<std::int64_t>(1, target_tokens / mean);
    spec.mean = static_cast<double>(mean);
    spec.max_len = 16 * mean;
    c.mean = mean;
  }
  c.batch = spec.batch;
  c.lengths = make_lengths(spec);
  c.offsets.assign(c.lengths.size() + 1, 0);
  std::int64_t sum = 0;
  for (std::size_t b = 0; b < c.lengths.size(); ++b) {
    sum += c.lengths[b];
    if (sum > std::numeric_limits<std::int32_t>::max())
      throw std::invalid_argument("make_ragged_case: more tokens than int32 offsets hold");
    c.offsets[b + 1] = static_cast<std::int32_t>(sum);
    c.max_len = std::max(c.max_len, c.lengths[b]);
  }
  c.tokens = sum;
  return c;
}

}  // namespace bench
}  // namespace ragged
