// A ragged tensor held in host vectors, built from a list of lengths, for tests that feed the same data to a
// CPU reference and to a device op.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "ragged/view.h"

namespace ragged {
namespace test {

template <typename OffsetT>
std::vector<OffsetT> offsets_from_lengths(const std::vector<std::int64_t>& lengths) {
  std::vector<OffsetT> offsets(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) offsets[b + 1] = static_cast<OffsetT>(offsets[b] + lengths[b]);
  return offsets;
}

template <typename T, typename OffsetT>
struct HostRagged {
  std::vector<OffsetT> offsets;  // [batch + 1]
  std::vector<T> values;         // [nnz, inner]
  std::int64_t batch = 0;
  std::int64_t nnz = 0;
  std::int64_t inner = 1;

  std::int64_t begin(std::int64_t b) const { return static_cast<std::int64_t>(offsets[b]); }
  std::int64_t length(std::int64_t b) const { return static_cast<std::int64_t>(offsets[b + 1] - offsets[b]); }
  T& at(std::int64_t row, std::int64_t d) { return values[row * inner + d]; }
  const T& at(std::int64_t row, std::int64_t d) const { return values[row * inner + d]; }
  RaggedView<const T, OffsetT> view() const {
    return RaggedView<const T, OffsetT>{values.data(), offsets.data(), batch, nnz, inner};
  }
};

// Random non-zero values (test::random_values) in the layout given by `lengths`, `extra_rows` spare rows of
// capacity after the last sequence.
template <typename T, typename OffsetT>
HostRagged<T, OffsetT> random_ragged(const std::vector<std::int64_t>& lengths, std::int64_t inner,
                                     std::mt19937_64& rng, std::int64_t extra_rows = 0) {
  HostRagged<T, OffsetT> r;
  r.offsets = offsets_from_lengths<OffsetT>(lengths);
  r.batch = static_cast<std::int64_t>(lengths.size());
  r.nnz = static_cast<std::int64_t>(r.offsets.back()) + extra_rows;
  r.inner = inner;
  r.values = random_values<T>(static_cast<std::size_t>(r.nnz * inner), rng);
  return r;
}

}  // namespace test
}  // namespace ragged
