#include "bench/common/rnn_lengths.h"

namespace ragged {
namespace bench {

std::vector<std::int64_t> rnn_case_lengths(LengthDistribution distribution, std::int64_t batch, std::int64_t mean) {
  LengthSpec spec;
  spec.distribution = distribution;
  spec.batch = batch;
  spec.mean = static_cast<double>(mean);
  spec.max_len = distribution == LengthDistribution::kOneHuge ? batch * mean : 4 * mean;
  spec.seed = 0x2a11u + static_cast<std::uint64_t>(distribution) * 977 + static_cast<std::uint64_t>(batch);
  return make_lengths(spec);
}

}  // namespace bench
}  // namespace ragged
