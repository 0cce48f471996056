// Length-bucketing batch planner: coverage, budgets, padding arithmetic, bucketing, ordering, shuffling and
// the bad-argument errors, each checked against facts recomputed here from the lengths.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "common/test_util.h"
#include "ragged/planner.h"

using namespace ragged;

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// The bucket of `length` under explicit bounds, by a linear walk (the planner uses a binary search).
std::size_t bucket_of(std::int64_t length, const std::vector<std::int64_t>& bounds) {
  std::size_t bucket = 0;
  while (bucket < bounds.size() && length >= bounds[bucket]) ++bucket;
  return bucket;
}

// Checks everything a plan promises about `lengths`, recomputing each figure from the lengths.
void check_plan(const std::vector<std::int64_t>& lengths, const PlannerOptions& options, const BatchPlan& plan) {
  std::vector<int> seen(lengths.size(), 0);
  std::int64_t real_total = 0;
  std::int64_t padded_total = 0;
  for (std::size_t b = 0; b < plan.batches.size(); ++b) {
    const PlannedBatch& batch = plan.batches[b];
    INFO("batch " << b << " of " << plan.batches.size());
    REQUIRE(!batch.indices.empty());
    std::int64_t longest = 0;
    std::int64_t sum = 0;
    for (const std::int64_t index : batch.indices) {
      REQUIRE(index >= 0);
      REQUIRE(index < static_cast<std::int64_t>(lengths.size()));
      ++seen[static_cast<std::size_t>(index)];
      longest = std::max(longest, lengths[static_cast<std::size_t>(index)]);
      sum += lengths[static_cast<std::size_t>(index)];
    }
    const std::int64_t size = static_cast<std::int64_t>(batch.indices.size());
    REQUIRE(batch.max_len == longest);
    REQUIRE(batch.real_tokens == sum);
    REQUIRE(batch.padded_tokens == size * longest);
    // Padding fraction as wasted / padded, a different formula from 1 - real / padded.
    const double expected = longest == 0 ? 0.0 : static_cast<double>(size * longest - sum) / (size * longest);
    REQUIRE(batch.padding_fraction == Approx(expected).margin(1e-12));

    const bool lone_giant = size == 1 && longest > options.token_budget;
    REQUIRE(batch.over_budget == lone_giant);
    if (!batch.over_budget) {
      if (options.mode == BudgetMode::kPadded)
        REQUIRE(size * longest <= options.token_budget);
      else
        REQUIRE(sum <= options.token_budget);
    }
    if (options.max_batch_size > 0) REQUIRE(size <= options.max_batch_size);
    if (!options.bucket_bounds.empty()) {
      const std::size_t bucket = bucket_of(lengths[static_cast<std::size_t>(batch.indices[0])], options.bucket_bounds);
      for (const std::int64_t index : batch.indices)
        REQUIRE(bucket_of(lengths[static_cast<std::size_t>(index)], options.bucket_bounds) == bucket);
    }
    real_total += sum;
    padded_total += size * longest;
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO("sequence " << i);
    REQUIRE(seen[i] == 1);
  }
  REQUIRE(plan.real_tokens == real_total);
  REQUIRE(plan.padded_tokens == padded_total);
  const double overall = padded_total == 0 ? 0.0 : static_cast<double>(padded_total - real_total) / padded_total;
  REQUIRE(plan.padding_fraction == Approx(overall).margin(1e-12));
}

std::vector<std::int64_t> all_indices(const BatchPlan& plan) {
  std::vector<std::int64_t> out;
  for (const PlannedBatch& batch : plan.batches) out.insert(out.end(), batch.indices.begin(), batch.indices.end());
  return out;
}

std::vector<std::int64_t> lognormal_lengths(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> dist(5.0, 1.0);  // median ~150, long tail
  std::vector<std::int64_t> lengths(count);
  for (auto& l : lengths) l = std::min<std::int64_t>(4096, static_cast<std::int64_t>(dist(rng)) + 1);
  return lengths;
}

// One random batching without buckets, written here independently: shuffle, then fill batches greedily in
// that order under the padded budget. Returns its padding fraction.
double random_batching_padding(const std::vector<std::int64_t>& lengths, std::int64_t budget, std::uint64_t seed) {
  std::vector<std::size_t> order(lengths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  double real = 0, padded = 0;
  std::int64_t count = 0, longest = 0;
  for (const std::size_t i : order) {
    const std::int64_t grown = std::max(longest, lengths[i]);
    if (count > 0 && (count + 1) * grown > budget) {
      padded += static_cast<double>(count * longest);
      count = 0;
      longest = 0;
    }
    ++count;
    longest = std::max(longest, lengths[i]);
    real += static_cast<double>(lengths[i]);
  }
  padded += static_cast<double>(count * longest);
  return 1.0 - real / padded;
}

}  // namespace

TEST_CASE("plan_batches covers every sequence once and respects the budget", "[planner]") {
  auto rng = test::make_rng(11);
  std::uniform_int_distribution<std::int64_t> budget_dist(1, 400);
  std::uniform_int_distribution<std::int64_t> size_dist(0, 6);
  for (int round = 0; round < 20; ++round) {
    for (test::Regime regime : test::all_regimes()) {
      const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng);
      for (const BudgetMode mode : {BudgetMode::kPadded, BudgetMode::kRagged}) {
        for (const bool shuffle : {false, true}) {
          for (const bool explicit_bounds : {false, true}) {
            PlannerOptions options;
            options.token_budget = budget_dist(rng);
            options.mode = mode;
            options.max_batch_size = size_dist(rng);
            options.shuffle = shuffle;
            options.seed = rng();
            if (explicit_bounds) options.bucket_bounds = {1, 7, 20, 33};
            INFO("regime " << test::regime_name(regime) << ", mode " << static_cast<int>(mode) << ", shuffle "
                           << shuffle << ", explicit bounds " << explicit_bounds << ", budget "
                           << options.token_budget << ", max_batch_size " << options.max_batch_size);
            BatchPlan plan;
            REQUIRE_OK(plan_batches(lengths.data(), static_cast<std::int64_t>(lengths.size()), options, &plan));
            check_plan(lengths, options, plan);
          }
        }
      }
    }
  }
}

TEST_CASE("without shuffling, batches follow length order and are filled greedily", "[planner]") {
  auto rng = test::make_rng(12);
  std::uniform_int_distribution<std::int64_t> len(0, 300);
  std::vector<std::int64_t> lengths(2000);
  for (auto& l : lengths) l = len(rng);
  for (const BudgetMode mode : {BudgetMode::kPadded, BudgetMode::kRagged}) {
    PlannerOptions options;
    options.token_budget = 1024;
    options.mode = mode;
    options.max_batch_size = 16;
    options.bucket_bounds = {50, 100, 200};
    const BatchPlan plan = plan_batches(lengths, options);
    check_plan(lengths, options, plan);

    // Buckets ascend and each is sorted, so the concatenated order is sorted by (length, index).
    const std::vector<std::int64_t> order = all_indices(plan);
    for (std::size_t i = 1; i < order.size(); ++i) {
      const auto a = static_cast<std::size_t>(order[i - 1]), b = static_cast<std::size_t>(order[i]);
      REQUIRE((lengths[a] < lengths[b] || (lengths[a] == lengths[b] && a < b)));
    }
    // Greedy: a batch was closed only because the next sequence of its bucket did not fit.
    for (std::size_t b = 0; b + 1 < plan.batches.size(); ++b) {
      const PlannedBatch& batch = plan.batches[b];
      const std::int64_t next = lengths[static_cast<std::size_t>(plan.batches[b + 1].indices.front())];
      const std::int64_t last = lengths[static_cast<std::size_t>(batch.indices.back())];
      if (bucket_of(next, options.bucket_bounds) != bucket_of(last, options.bucket_bounds)) continue;
      const std::int64_t size = static_cast<std::int64_t>(batch.indices.size()) + 1;
      const bool budget_full = mode == BudgetMode::kPadded ? size * std::max(next, batch.max_len) > 1024
                                                           : batch.real_tokens + next > 1024;
      REQUIRE((budget_full || size > 16));
    }
  }
}

TEST_CASE("automatic buckets keep each batch's longest under 1.25x its shortest", "[planner]") {
  const std::vector<std::int64_t> lengths = lognormal_lengths(5000, 3);
  for (const bool shuffle : {false, true}) {
    PlannerOptions options;
    options.token_budget = 8192;
    options.shuffle = shuffle;
    options.seed = 99;
    const BatchPlan plan = plan_batches(lengths, options);
    check_plan(lengths, options, plan);
    for (const PlannedBatch& batch : plan.batches) {
      std::int64_t shortest = kInt64Max;
      for (const std::int64_t i : batch.indices) shortest = std::min(shortest, lengths[static_cast<std::size_t>(i)]);
      REQUIRE(batch.max_len * 4 < shortest * 5);
      REQUIRE(batch.padding_fraction < 0.2);
    }
  }
}

TEST_CASE("bucketing wastes less padding than one random batching on lognormal lengths", "[planner]") {
  const std::vector<std::int64_t> lengths = lognormal_lengths(20000, 7);
  PlannerOptions options;
  options.token_budget = 16384;
  options.shuffle = true;
  options.seed = 5;
  const BatchPlan bucketed = plan_batches(lengths, options);
  check_plan(lengths, options, bucketed);
  const double random_padding = random_batching_padding(lengths, options.token_budget, 5);
  INFO("bucketed " << bucketed.padding_fraction << " vs random " << random_padding);
  REQUIRE(bucketed.padding_fraction < 0.2);
  REQUIRE(random_padding > 0.5);

  // The planner with one bucket and shuffling is a random batching too; it wastes as much.
  options.bucket_bounds = {kInt64Max};
  const BatchPlan unbucketed = plan_batches(lengths, options);
  check_plan(lengths, options, unbucketed);
  REQUIRE(unbucketed.padding_fraction > 0.5);
}

TEST_CASE("shuffling is reproducible for a seed and differs across seeds", "[planner]") {
  const std::vector<std::int64_t> lengths = lognormal_lengths(3000, 17);
  PlannerOptions options;
  options.token_budget = 4096;
  options.shuffle = true;
  options.seed = 1234;
  const BatchPlan first = plan_batches(lengths, options);
  const BatchPlan again = plan_batches(lengths, options);
  REQUIRE(all_indices(first) == all_indices(again));
  REQUIRE(first.batches.size() == again.batches.size());
  for (std::size_t b = 0; b < first.batches.size(); ++b) REQUIRE(first.batches[b].indices == again.batches[b].indices);

  options.seed = 1235;
  const BatchPlan other = plan_batches(lengths, options);
  check_plan(lengths, options, other);
  REQUIRE(all_indices(first) != all_indices(other));

  // Shuffling changes the order of the batches, not only their contents: the unshuffled plan runs buckets in
  // ascending length; a shuffled one does not.
  std::vector<std::int64_t> first_max;
  for (const PlannedBatch& batch : first.batches) first_max.push_back(batch.max_len);
  REQUIRE(!std::is_sorted(first_max.begin(), first_max.end()));
}

TEST_CASE("plan_batches edge cases", "[planner]") {
  PlannerOptions options;

  SECTION("empty input") {
    const BatchPlan plan = plan_batches(std::vector<std::int64_t>{}, options);
    REQUIRE(plan.batches.empty());
    REQUIRE(plan.real_tokens == 0);
    REQUIRE(plan.padded_tokens == 0);
    REQUIRE(plan.padding_fraction == 0.0);
    BatchPlan from_null;
    REQUIRE_OK(plan_batches(nullptr, 0, options, &from_null));
    REQUIRE(from_null.batches.empty());
  }
  SECTION("all zero lengths") {
    const std::vector<std::int64_t> zeros(10, 0);
    BatchPlan plan = plan_batches(zeros, options);
    check_plan(zeros, options, plan);
    REQUIRE(plan.batches.size() == 1);
    REQUIRE(plan.batches[0].padding_fraction == 0.0);
    options.max_batch_size = 3;
    plan = plan_batches(zeros, options);
    check_plan(zeros, options, plan);
    REQUIRE(plan.batches.size() == 4);
    options.mode = BudgetMode::kRagged;
    plan = plan_batches(zeros, options);
    REQUIRE(plan.batches.size() == 4);
  }
  SECTION("budget 1") {
    const std::vector<std::int64_t> lengths = {0, 1, 2, 1, 0, 5};
    options.token_budget = 1;
    const BatchPlan plan = plan_batches(lengths, options);
    check_plan(lengths, options, plan);
    std::map<std::int64_t, int> flagged;  // length -> over-budget batches
    for (const PlannedBatch& batch : plan.batches)
      if (batch.over_budget) ++flagged[batch.max_len];
    REQUIRE(flagged == std::map<std::int64_t, int>{{2, 1}, {5, 1}});
    REQUIRE(plan.batches.size() == 5);  // {0, 0}, {1}, {1}, {2}, {5}
  }
  SECTION("explicit bounds place each length in its bucket") {
    const std::vector<std::int64_t> lengths = {3, 4, 7, 8, 100, 0, 4, 9};
    options.bucket_bounds = {4, 8};  // [0, 4), [4, 8), [8, inf)
    options.token_budget = 1000;
    const BatchPlan plan = plan_batches(lengths, options);
    check_plan(lengths, options, plan);
    REQUIRE(plan.batches.size() == 3);
    REQUIRE(plan.batches[0].indices == std::vector<std::int64_t>{5, 0});
    REQUIRE(plan.batches[1].indices == std::vector<std::int64_t>{1, 6, 2});
    REQUIRE(plan.batches[2].indices == std::vector<std::int64_t>{3, 7, 4});
  }
  SECTION("over-budget sequences come after their bucket's other batches, so batches stay shortest first") {
    auto lengths_of = [](const std::vector<std::int64_t>& lengths, const BatchPlan& plan) {
      std::vector<std::vector<std::int64_t>> out;
      for (const PlannedBatch& batch : plan.batches) {
        out.emplace_back();
        for (const std::int64_t i : batch.indices) out.back().push_back(lengths[static_cast<std::size_t>(i)]);
      }
      return out;
    };
    using Batches = std::vector<std::vector<std::int64_t>>;
    const std::vector<std::int64_t> geometric = {15, 13, 14};  // one automatic bucket, [13, 16)
    options.token_budget = 14;
    BatchPlan plan = plan_batches(geometric, options);
    check_plan(geometric, options, plan);
    REQUIRE(lengths_of(geometric, plan) == Batches{{13}, {14}, {15}});
    REQUIRE(plan.batches[2].over_budget);
    const std::vector<std::int64_t> one_bucket = {150, 10, 120, 20};
    options.bucket_bounds = {kInt64Max};
    options.token_budget = 100;
    for (const BudgetMode mode : {BudgetMode::kPadded, BudgetMode::kRagged}) {
      options.mode = mode;
      plan = plan_batches(one_bucket, options);
      check_plan(one_bucket, options, plan);
      REQUIRE(lengths_of(one_bucket, plan) == Batches{{10, 20}, {120}, {150}});
      REQUIRE((!plan.batches[0].over_budget && plan.batches[1].over_budget && plan.batches[2].over_budget));
    }
  }
  SECTION("a giant sequence in the middle of a shuffled bucket does not split the open batch") {
    std::vector<std::int64_t> lengths(50, 10);
    lengths[25] = 10000;
    options.bucket_bounds = {kInt64Max};
    options.token_budget = 1000;
    options.shuffle = true;
    const BatchPlan plan = plan_batches(lengths, options);
    check_plan(lengths, options, plan);
    REQUIRE(plan.batches.size() == 2);
  }
  SECTION("token totals that overflow int64") {
    const std::vector<std::int64_t> lengths = {kInt64Max, kInt64Max};
    BatchPlan plan;
    REQUIRE(plan_batches(lengths.data(), 2, options, &plan) == Status::kSizeOverflow);
    const std::vector<std::int64_t> one = {kInt64Max};
    REQUIRE_OK(plan_batches(one.data(), 1, options, &plan));
    REQUIRE(plan.batches.size() == 1);
    REQUIRE(plan.batches[0].over_budget);
  }
  SECTION("a ragged-mode batch whose padded size overflows int64") {
    // The ragged budget bounds the real tokens (2^62 + 2) but not size x max_len (3 x 2^62).
    options.token_budget = kInt64Max;
    options.mode = BudgetMode::kRagged;
    options.bucket_bounds = {1};
    const std::vector<std::int64_t> lengths = {1, 1, std::int64_t{1} << 62};
    BatchPlan plan;
    plan.real_tokens = 7;
    REQUIRE(plan_batches(lengths.data(), 3, options, &plan) == Status::kSizeOverflow);
    const std::string message = last_error_message();
    REQUIRE(message.find("3 sequences x max_len 4611686018427387904") != std::string::npos);
    REQUIRE(plan.real_tokens == 7);  // left unchanged
    const std::vector<std::int64_t> fits = {1, 1, std::int64_t{1} << 61};  // 3 x 2^61 fits
    REQUIRE_OK(plan_batches(fits.data(), 3, options, &plan));
    REQUIRE(plan.batches.size() == 1);
    REQUIRE(plan.batches[0].padded_tokens == 3 * (std::int64_t{1} << 61));
  }
}

TEST_CASE("plan_batches rejects bad arguments and names them", "[planner][errors]") {
  const std::vector<std::int64_t> lengths = {5, 3, -2, 4};
  PlannerOptions options;
  BatchPlan plan;
  plan.real_tokens = 42;  // a failure leaves the plan as it was
  auto message = [] { return std::string(last_error_message()); };

  REQUIRE(plan_batches(lengths.data(), 4, options, &plan) == Status::kNegativeLength);
  REQUIRE(message().find("lengths[2] = -2") != std::string::npos);
  REQUIRE(plan.real_tokens == 42);

  const std::vector<std::int64_t> good = {5, 3, 2, 4};
  REQUIRE(plan_batches(nullptr, 4, options, &plan) == Status::kNullPointer);
  REQUIRE(plan_batches(good.data(), 4, options, nullptr) == Status::kNullPointer);
  REQUIRE(plan_batches(good.data(), -1, options, &plan) == Status::kInvalidArgument);
  REQUIRE(message().find("count = -1") != std::string::npos);

  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{-5}}) {
    PlannerOptions bad = options;
    bad.token_budget = budget;
    REQUIRE(plan_batches(good.data(), 4, bad, &plan) == Status::kInvalidArgument);
    REQUIRE(message().find("token_budget = " + std::to_string(budget)) != std::string::npos);
  }
  {
    PlannerOptions bad = options;
    bad.max_batch_size = -3;
    REQUIRE(plan_batches(good.data(), 4, bad, &plan) == Status::kInvalidArgument);
    REQUIRE(message().find("max_batch_size = -3") != std::string::npos);
  }
  {
    PlannerOptions bad = options;
    bad.mode = static_cast<BudgetMode>(7);
    REQUIRE(plan_batches(good.data(), 4, bad, &plan) == Status::kInvalidArgument);
    REQUIRE(message().find("mode = 7") != std::string::npos);
  }
  const std::vector<std::pair<std::vector<std::int64_t>, std::string>> bad_bounds = {
      {{0}, "bucket_bounds[0] = 0"},
      {{4, -8}, "bucket_bounds[1] = -8"},
      {{4, 4}, "bucket_bounds[1] = 4 is not above bucket_bounds[0] = 4"},
      {{4, 16, 8}, "bucket_bounds[2] = 8"},
  };
  for (const auto& [bounds, expected] : bad_bounds) {
    PlannerOptions bad = options;
    bad.bucket_bounds = bounds;
    INFO("expecting " << expected);
    REQUIRE(plan_batches(good.data(), 4, bad, &plan) == Status::kInvalidArgument);
    REQUIRE(message().find(expected) != std::string::npos);
  }
  REQUIRE(plan.real_tokens == 42);

  REQUIRE_THROWS_AS(plan_batches(lengths, options), Error);
  try {
    plan_batches(lengths, options);
  } catch (const Error& error) {
    REQUIRE(error.status() == Status::kNegativeLength);
    REQUIRE(std::string(error.what()).find("lengths[2]") != std::string::npos);
  }
}
