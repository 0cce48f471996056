// CPU references of the conversions and masks against a brute force that simulates the placement token by
// token (drop tokens one at a time from the truncated end, then put the rest at the aligned end), independent
// of slot_map().
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "common/test_util.h"
#include "ragged/offsets.h"
#include "ragged/reference.h"

using namespace ragged;

namespace {

// (token index, padded slot) of every token of a `length`-token sequence that fits `max_len` slots.
std::vector<std::pair<std::int64_t, std::int64_t>> brute_placements(std::int64_t length, std::int64_t max_len,
                                                                     Align align, Truncate trunc) {
  std::deque<std::int64_t> tokens;
  for (std::int64_t t = 0; t < length; ++t) tokens.push_back(t);
  while (static_cast<std::int64_t>(tokens.size()) > max_len) {
    if (trunc == Truncate::kRight) tokens.pop_back();
    else tokens.pop_front();
  }
  const std::int64_t first_slot = align == Align::kLeft ? 0 : max_len - static_cast<std::int64_t>(tokens.size());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::size_t i = 0; i < tokens.size(); ++i)
    out.emplace_back(tokens[i], first_slot + static_cast<std::int64_t>(i));
  return out;
}

// Host storage with data() for every element type: std::vector<bool> packs bits and has none.
template <typename T>
class HostArray {
 public:
  HostArray(std::size_t count, T value) : data_(new T[count]), size_(count) { std::fill_n(data_.get(), count, value); }
  explicit HostArray(const std::vector<T>& from) : HostArray(from.size(), T{}) {
    for (std::size_t i = 0; i < size_; ++i) data_[i] = from[i];
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_;
};

// Index of the first element whose bytes differ (0 for different sizes), or -1.
template <typename T>
std::int64_t first_mismatch(const HostArray<T>& a, const HostArray<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

#define REQUIRE_SAME_BITS(a, b)                                \
  do {                                                         \
    const std::int64_t mismatch_ = first_mismatch((a), (b));   \
    INFO("first mismatch at element " << mismatch_);           \
    REQUIRE(mismatch_ == -1);                                  \
  } while (0)

// What an output holds before the reference writes it: unlike the pad (7) and the fill (5) wherever T can be.
// bool has two values, so there the pad and the fill (true) differ from it but not from each other.
template <typename T>
T stale_value() {
  if constexpr (std::is_same<T, bool>::value) return false;
  else return test::from_double<T>(-3);
}

template <typename T>
HostArray<T> brute_to_padded(const HostArray<T>& values, const std::vector<std::int64_t>& lengths,
                             std::int64_t inner, std::int64_t max_len, T pad, Align align, Truncate trunc) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  HostArray<T> out(static_cast<std::size_t>(batch * max_len * inner), pad);
  std::int64_t row = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (const auto& [token, slot] : brute_placements(lengths[b], max_len, align, trunc))
      for (std::int64_t e = 0; e < inner; ++e)
        out[static_cast<std::size_t>((b * max_len + slot) * inner + e)] =
            values[static_cast<std::size_t>((row + token) * inner + e)];
    row += lengths[b];
  }
  return out;
}

template <typename T>
HostArray<T> brute_to_ragged(const HostArray<T>& padded, const std::vector<std::int64_t>& lengths,
                             std::int64_t inner, std::int64_t max_len, T fill, Align align, Truncate trunc) {
  std::int64_t nnz = 0;
  for (std::int64_t l : lengths) nnz += l;
  HostArray<T> out(static_cast<std::size_t>(nnz * inner), fill);
  std::int64_t row = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    for (const auto& [token, slot] : brute_placements(lengths[b], max_len, align, trunc))
      for (std::int64_t e = 0; e < inner; ++e)
        out[static_cast<std::size_t>((row + token) * inner + e)] =
            padded[static_cast<std::size_t>((static_cast<std::int64_t>(b) * max_len + slot) * inner + e)];
    row += lengths[b];
  }
  return out;
}

template <typename OffsetT>
std::vector<OffsetT> offsets_of(const std::vector<std::int64_t>& lengths) {
  std::vector<OffsetT> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), static_cast<std::int64_t>(lengths.size()), offsets.data()));
  return offsets;
}

// max_len values around the longest sequence: 0, truncating, exactly the longest, larger.
std::vector<std::int64_t> max_lens_around(const std::vector<std::int64_t>& lengths) {
  const std::int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::int64_t> out = {0, 1, longest / 2, longest, longest + 3};
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr Align kAligns[] = {Align::kLeft, Align::kRight};
constexpr Truncate kTruncs[] = {Truncate::kRight, Truncate::kLeft};

}  // namespace

// Every element type the conversions support, each with one of the offset types.
TEMPLATE_PRODUCT_TEST_CASE("reference conversions match the brute force", "[convert][reference]", std::pair,
                           ((float, std::int32_t), (half, std::int64_t), (bfloat16, std::int32_t),
                            (std::int32_t, std::int64_t), (std::int64_t, std::int32_t), (std::uint8_t, std::int64_t),
                            (bool, std::int32_t))) {
  using T = typename TestType::first_type;
  using OffsetT = typename TestType::second_type;
  auto rng = test::make_rng(101);
  for (test::Regime regime : test::all_regimes()) {
    const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng, 12);
    const std::vector<OffsetT> offsets = offsets_of<OffsetT>(lengths);
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    const std::int64_t nnz = static_cast<std::int64_t>(offsets.back());
    for (std::int64_t inner : {1, 3}) {
      const HostArray<T> values(test::random_values<T>(static_cast<std::size_t>(nnz * inner), rng));
      const T pad = test::from_double<T>(7);
      for (std::int64_t max_len : max_lens_around(lengths)) {
        for (Align align : kAligns) {
          for (Truncate trunc : kTruncs) {
            INFO("regime " << test::regime_name(regime) << ", inner " << inner << ", max_len " << max_len
                           << ", align " << static_cast<int>(align) << ", trunc " << static_cast<int>(trunc));
            HostArray<T> padded(static_cast<std::size_t>(batch * max_len * inner), stale_value<T>());
            reference::ragged_to_padded<T, OffsetT>({values.data(), offsets.data(), batch, nnz, inner},
                                                    {padded.data(), batch, max_len, inner}, pad, align, trunc);
            REQUIRE_SAME_BITS(padded, brute_to_padded(values, lengths, inner, max_len, pad, align, trunc));

            // Back from a random padded tensor (so that pad slots hold data that must not leak).
            const HostArray<T> random_padded(
                test::random_values<T>(static_cast<std::size_t>(batch * max_len * inner), rng));
            const T fill = test::from_double<T>(5);
            HostArray<T> ragged(static_cast<std::size_t>(nnz * inner), stale_value<T>());
            reference::padded_to_ragged<T, OffsetT>({random_padded.data(), batch, max_len, inner},
                                                    {ragged.data(), offsets.data(), batch, nnz, inner}, fill, align,
                                                    trunc);
            REQUIRE_SAME_BITS(ragged, brute_to_ragged(random_padded, lengths, inner, max_len, fill, align, trunc));

            // Nothing truncated: the round trip gives the values back.
            const std::int64_t longest =
                lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
            if (max_len >= longest) {
              HostArray<T> back(values.size(), stale_value<T>());
              reference::padded_to_ragged<T, OffsetT>({padded.data(), batch, max_len, inner},
                                                      {back.data(), offsets.data(), batch, nnz, inner}, fill, align,
                                                      trunc);
              REQUIRE_SAME_BITS(back, values);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("reference padded_to_ragged leaves rows outside every sequence alone", "[convert][reference]") {
  // offsets end at 5 but the buffer holds 7 rows: rows 5 and 6 keep their contents.
  const std::vector<std::int32_t> offsets = {0, 2, 5};
  const std::vector<float> padded = {1, 2, 3, 4, 5, 6};  // [2, 3, 1]
  std::vector<float> ragged(7, -1.0f);
  reference::padded_to_ragged<float, std::int32_t>({padded.data(), 2, 3, 1}, {ragged.data(), offsets.data(), 2, 7, 1},
                                                   0.0f, Align::kLeft, Truncate::kRight);
  REQUIRE(ragged == std::vector<float>{1, 2, 4, 5, 6, -1, -1});
}

TEMPLATE_TEST_CASE("reference masks match the brute force", "[mask][reference]", std::int32_t, std::int64_t) {
  using LengthT = TestType;
  auto rng = test::make_rng(102);
  std::uniform_int_distribution<std::int64_t> length(-3, 20);
  for (std::int64_t batch : {0, 1, 7}) {
    std::vector<LengthT> lengths(static_cast<std::size_t>(batch));
    for (auto& l : lengths) l = static_cast<LengthT>(length(rng));
    for (std::int64_t max_len : {0, 1, 5, 16, 25}) {
      for (Align align : kAligns) {
        INFO("batch " << batch << ", max_len " << max_len << ", align " << static_cast<int>(align));
        const std::size_t count = static_cast<std::size_t>(batch * max_len);
        // Brute force: a row of max_len flags with n = clamp(length, 0, max_len) set at the aligned end.
        std::vector<std::uint8_t> expected(count, 0);
        for (std::int64_t b = 0; b < batch; ++b) {
          const std::int64_t n = std::min<std::int64_t>(std::max<std::int64_t>(lengths[b], 0), max_len);
          auto row = expected.begin() + b * max_len;
          if (align == Align::kLeft) std::fill(row, row + n, 1);
          else std::fill(row + (max_len - n), row + max_len, 1);
        }
        std::unique_ptr<bool[]> mask(new bool[count + 1]);
        reference::lengths_to_mask(lengths.data(), batch, max_len, align, mask.get());
        for (std::size_t i = 0; i < count; ++i) REQUIRE(mask[i] == (expected[i] == 1));

        std::vector<float> additive(count, 1.0f);
        reference::lengths_to_additive_mask(lengths.data(), batch, max_len, align, additive.data());
        std::vector<half> additive_half(count, test::from_double<half>(1));
        reference::lengths_to_additive_mask(lengths.data(), batch, max_len, align, additive_half.data());
        std::vector<bfloat16> additive_bf16(count, test::from_double<bfloat16>(1));
        reference::lengths_to_additive_mask(lengths.data(), batch, max_len, align, additive_bf16.data());
        const double neg_inf = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < count; ++i) {
          const double want = expected[i] == 1 ? 0.0 : neg_inf;
          REQUIRE(additive[i] == want);
          REQUIRE(test::to_double(additive_half[i]) == want);
          REQUIRE(test::to_double(additive_bf16[i]) == want);
        }
      }
    }
  }
}
