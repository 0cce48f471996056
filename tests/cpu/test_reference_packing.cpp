// Host packing reference against a brute force that builds the packed sequence step by step, the way
// PyTorch's pack_padded_sequence describes it: for each step, append every still-active sequence in sorted order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "ragged/reference.h"

using namespace ragged;

namespace {

// The packed sequence as a list of (sequence, token) entries plus the arrays derived from it.
struct BrutePacking {
  std::vector<std::int64_t> order;            // sorted position -> sequence
  std::vector<std::int64_t> position_of;      // sequence -> sorted position
  std::vector<std::int64_t> packed_lengths;   // in sorted order
  std::vector<std::int64_t> batch_sizes;
  std::vector<std::int64_t> step_offsets;
  std::vector<std::pair<std::int64_t, std::int64_t>> entries;  // packed row -> (sequence, token)
};

BrutePacking brute_packing(const std::vector<std::int64_t>& lengths, std::int64_t max_steps) {
  BrutePacking out;
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int64_t> kept(lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b) kept[b] = std::min(std::max<std::int64_t>(lengths[b], 0), max_steps);
  // Selection sort: repeatedly take the longest unpicked sequence, the lowest index among equals (stability).
  std::vector<bool> picked(lengths.size(), false);
  for (std::int64_t round = 0; round < batch; ++round) {
    std::int64_t best = -1;
    for (std::int64_t b = 0; b < batch; ++b)
      if (!picked[b] && (best < 0 || kept[b] > kept[best])) best = b;
    picked[best] = true;
    out.order.push_back(best);
  }
  out.position_of.assign(lengths.size(), -1);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t j = 0; j < batch; ++j)
      if (out.order[j] == b) out.position_of[b] = j;
  for (std::int64_t b : out.order) out.packed_lengths.push_back(kept[b]);
  for (std::int64_t t = 0; t < max_steps; ++t) {
    out.step_offsets.push_back(static_cast<std::int64_t>(out.entries.size()));
    for (std::int64_t b : out.order)
      if (kept[b] > t) out.entries.emplace_back(b, t);
    out.batch_sizes.push_back(static_cast<std::int64_t>(out.entries.size()) - out.step_offsets.back());
  }
  out.step_offsets.push_back(static_cast<std::int64_t>(out.entries.size()));
  return out;
}

template <typename OffsetT>
std::vector<OffsetT> offsets_of(const std::vector<std::int64_t>& lengths) {
  std::vector<OffsetT> offsets(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) offsets[b + 1] = static_cast<OffsetT>(offsets[b] + lengths[b]);
  return offsets;
}

template <typename A, typename B>
void require_same(const std::vector<A>& got, const std::vector<B>& want, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    REQUIRE(static_cast<std::int64_t>(got[i]) == static_cast<std::int64_t>(want[i]));
  }
}

// Every regime, plus many equal lengths (ties test the stability of the sort).
std::vector<std::vector<std::int64_t>> all_length_sets(std::mt19937_64& rng) {
  std::vector<std::vector<std::int64_t>> sets;
  for (test::Regime regime : test::all_regimes()) sets.push_back(test::make_lengths(regime, rng));
  std::uniform_int_distribution<int> pick(0, 2);
  std::vector<std::int64_t> ties(300);
  for (auto& l : ties) l = std::vector<std::int64_t>{0, 3, 7}[pick(rng)];
  sets.push_back(ties);
  sets.push_back(std::vector<std::int64_t>(50, 5));
  return sets;
}

// max_steps values: the longest (the usual case), larger (trailing zero batch sizes), smaller (truncation), 0.
std::vector<std::int64_t> max_steps_cases(const std::vector<std::int64_t>& lengths) {
  const std::int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::int64_t> cases = {longest, longest + 5, longest / 2, 0};
  std::sort(cases.begin(), cases.end());
  cases.erase(std::unique(cases.begin(), cases.end()), cases.end());
  return cases;
}

template <typename T_, typename O_>
struct Case {
  using T = T_;
  using OffsetT = O_;
};

}  // namespace

TEMPLATE_TEST_CASE("reference packing_order matches the step-by-step brute force", "[packing][reference]",
                   std::int32_t, std::int64_t) {
  auto rng = test::make_rng(101);
  for (const auto& lengths : all_length_sets(rng)) {
    const std::vector<TestType> offsets = offsets_of<TestType>(lengths);
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    for (std::int64_t max_steps : max_steps_cases(lengths)) {
      INFO("batch " << batch << ", max_steps " << max_steps);
      const auto layout = reference::packing_order(offsets.data(), batch, max_steps);
      const BrutePacking brute = brute_packing(lengths, max_steps);
      require_same(layout.sorted_indices, brute.order, "sorted_indices");
      require_same(layout.unsorted_indices, brute.position_of, "unsorted_indices");
      require_same(layout.sorted_lengths, brute.packed_lengths, "sorted_lengths");
      require_same(layout.batch_sizes, brute.batch_sizes, "batch_sizes");
      require_same(layout.step_offsets, brute.step_offsets, "step_offsets");
    }
  }
}

TEST_CASE("reference packing_order: a small example spelled out", "[packing][reference]") {
  // Lengths 2, 4, 0, 4, 1: sorted 4 (seq 1), 4 (seq 3), 2 (seq 0), 1 (seq 4), 0 (seq 2).
  const std::int32_t offsets[] = {0, 2, 6, 6, 10, 11};
  const auto layout = reference::packing_order(offsets, 5, 6);
  REQUIRE(layout.sorted_indices == std::vector<std::int64_t>{1, 3, 0, 4, 2});
  REQUIRE(layout.unsorted_indices == std::vector<std::int64_t>{2, 0, 4, 1, 3});
  REQUIRE(layout.sorted_lengths == std::vector<std::int32_t>{4, 4, 2, 1, 0});
  REQUIRE(layout.batch_sizes == std::vector<std::int32_t>{4, 3, 2, 2, 0, 0});
  REQUIRE(layout.step_offsets == std::vector<std::int32_t>{0, 4, 7, 9, 11, 11, 11});
  // max_steps below the longest: sequences 1 and 3 keep 2 tokens and tie with sequence 0, in original order.
  const auto truncated = reference::packing_order(offsets, 5, 2);
  REQUIRE(truncated.sorted_indices == std::vector<std::int64_t>{0, 1, 3, 4, 2});
  REQUIRE(truncated.sorted_lengths == std::vector<std::int32_t>{2, 2, 2, 1, 0});
  REQUIRE(truncated.batch_sizes == std::vector<std::int32_t>{4, 3});
  REQUIRE(truncated.step_offsets == std::vector<std::int32_t>{0, 4, 7});
}

TEMPLATE_TEST_CASE("reference pack / unpack match the brute force and round-trip", "[packing][reference]",
                   (Case<float, std::int32_t>), (Case<half, std::int64_t>), (Case<bfloat16, std::int32_t>),
                   (Case<std::int32_t, std::int64_t>), (Case<std::int64_t, std::int32_t>),
                   (Case<std::uint8_t, std::int64_t>)) {
  using T = typename TestType::T;
  using OffsetT = typename TestType::OffsetT;
  auto rng = test::make_rng(102);
  for (const auto& lengths : all_length_sets(rng)) {
    const std::vector<OffsetT> offsets = offsets_of<OffsetT>(lengths);
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::int64_t nnz = static_cast<std::int64_t>(offsets.back());
    for (std::int64_t inner : {1, 3}) {
      for (std::int64_t max_steps : max_steps_cases(lengths)) {
        INFO("batch " << batch << ", nnz " << nnz << ", inner " << inner << ", max_steps " << max_steps);
        const std::vector<T> src = test::random_values<T>(static_cast<std::size_t>(nnz * inner), rng);
        const auto layout = reference::packing_order(offsets.data(), batch, max_steps);
        const BrutePacking brute = brute_packing(lengths, max_steps);
        const T marker = test::from_double<T>(77);

        // Pack: packed row k is the entry (sequence, token) appended k-th; rows past the total untouched.
        std::vector<T> packed(static_cast<std::size_t>(nnz * inner), marker);
        reference::pack_sequences(RaggedView<const T, OffsetT>{src.data(), offsets.data(), batch, nnz, inner}, layout,
                                  packed.data());
        std::vector<T> want(packed.size(), marker);
        for (std::size_t k = 0; k < brute.entries.size(); ++k) {
          const std::int64_t row = static_cast<std::int64_t>(offsets[brute.entries[k].first]) + brute.entries[k].second;
          for (std::int64_t e = 0; e < inner; ++e) want[k * inner + e] = src[row * inner + e];
        }
        REQUIRE_BITWISE_EQUAL(packed, want);

        // Unpack, computed per output row: find where (sequence, token) was appended.
        std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> appended_at;
        for (std::size_t k = 0; k < brute.entries.size(); ++k)
          appended_at[brute.entries[k]] = static_cast<std::int64_t>(k);
        std::vector<T> unpacked(packed.size(), marker);
        reference::unpack_sequences(packed.data(), layout,
                                    RaggedView<T, OffsetT>{unpacked.data(), offsets.data(), batch, nnz, inner});
        std::vector<T> want_unpacked(packed.size(), marker);
        for (std::int64_t b = 0; b < batch; ++b)
          for (std::int64_t t = 0; t < lengths[b]; ++t) {
            const auto found = appended_at.find({b, t});
            if (found == appended_at.end()) continue;  // truncated: past max_steps
            const std::int64_t row = static_cast<std::int64_t>(offsets[b]) + t;
            for (std::int64_t e = 0; e < inner; ++e)
              want_unpacked[row * inner + e] = packed[found->second * inner + e];
          }
        REQUIRE_BITWISE_EQUAL(unpacked, want_unpacked);
        // With nothing truncated, unpack(pack(x)) == x.
        if (brute.entries.size() == static_cast<std::size_t>(nnz)) REQUIRE_BITWISE_EQUAL(unpacked, src);
      }
    }
  }
}
