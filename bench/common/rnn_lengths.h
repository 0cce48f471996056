// The sequence lengths of an RNN benchmark case. bench_rnn.cu times ragged and padded on them, and
// `ragged_rnn_driver --lengths` prints them for scripts/torch_rnn.py, so that one case name stands for the same
// lengths in the Google Benchmark JSON and in the PyTorch comparison (host only).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/common/distributions.h"

namespace ragged {
namespace bench {

// `batch` lengths of `distribution` with mean `mean`, clamped to 4 * mean (one_huge: batch * mean), seeded from
// the distribution and the batch size.
std::vector<std::int64_t> rnn_case_lengths(LengthDistribution distribution, std::int64_t batch, std::int64_t mean);

}  // namespace bench
}  // namespace ragged
