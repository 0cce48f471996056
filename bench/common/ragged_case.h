// One benchmark input shape: the lengths of a batch drawn from a distribution, sized so that the ragged
// values take about a target number of bytes, with the offsets and padded-layout figures derived from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/common/distributions.h"

namespace ragged {
namespace bench {

struct RaggedCase {
  LengthDistribution distribution = LengthDistribution::kUniform;
  std::int64_t inner = 1;
  std::int64_t batch = 0;
  std::int64_t mean = 0;     // the mean length asked of the generator (kFile: the file's mean)
  std::vector<std::int64_t> lengths;
  std::vector<std::int32_t> offsets;  // batch + 1 (cu_seqlens)
  std::int64_t tokens = 0;   // offsets[batch]
  std::int64_t max_len = 0;  // the longest sequence: the padded layout's second dimension
  std::int64_t padded_slots() const { return batch * max_len; }
  double padding_fraction() const {
    return padded_slots() == 0 ? 0.0 : 1.0 - static_cast<double>(tokens) / static_cast<double>(padded_slots());
  }
  // "<distribution>/inner:<inner>/batch:<batch>/mean:<mean>", the tail of a benchmark name.
  std::string name() const;
};

// Lengths with mean `mean` and batch = value_bytes / (inner * elem_size * mean), so the ragged values take
// about `value_bytes`; lengths are clamped to 16 * mean. kOneHuge uses a batch of 16 instead (its padded
// layout is batch times the ragged one) and puts all the tokens in its one sequence. kFile resamples
// `file_lengths` at their own scale (mean = their mean). The seed is fixed, so a case is the same every run.
RaggedCase make_ragged_case(LengthDistribution distribution, std::int64_t inner, std::size_t elem_size,
                            std::size_t value_bytes, std::int64_t mean,
                            const std::vector<std::int64_t>& file_lengths = {});

}  // namespace bench
}  // namespace ragged
