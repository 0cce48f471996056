// Length-bucketing batch planner: validation, bucketing, greedy batch formation under the token budget, and
// the seeded shuffles.
#include "ragged/planner.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

namespace ragged {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

Status check_options(const PlannerOptions& options) {
  if (options.token_budget <= 0)
    return fail(Status::kInvalidArgument,
                "options.token_budget = " + std::to_string(options.token_budget) + " must be positive");
  if (options.max_batch_size < 0)
    return fail(Status::kInvalidArgument,
                "options.max_batch_size = " + std::to_string(options.max_batch_size) + " is negative");
  if (options.mode != BudgetMode::kPadded && options.mode != BudgetMode::kRagged)
    return fail(Status::kInvalidArgument,
                "options.mode = " + std::to_string(static_cast<int>(options.mode)) + " is not a BudgetMode");
  const std::vector<std::int64_t>& bounds = options.bucket_bounds;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (bounds[i] <= 0)
      return fail(Status::kInvalidArgument, "options.bucket_bounds[" + std::to_string(i) +
                                                "] = " + std::to_string(bounds[i]) + " is not positive");
    if (i > 0 && bounds[i] <= bounds[i - 1])
      return fail(Status::kInvalidArgument, "options.bucket_bounds[" + std::to_string(i) + "] = " +
                                                std::to_string(bounds[i]) + " is not above bucket_bounds[" +
                                                std::to_string(i - 1) + "] = " + std::to_string(bounds[i - 1]));
  }
  return Status::kSuccess;
}

// 1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, ...: each bound is round(1.25 * previous) but at least previous + 1,
// until the first bound above `longest`.
std::vector<std::int64_t> geometric_bounds(std::int64_t longest) {
  std::vector<std::int64_t> bounds{1};
  while (bounds.back() <= longest) {
    const std::int64_t previous = bounds.back();
    if (previous > kInt64Max / 5) break;  // round(1.25 * previous) would overflow; the last bucket is open-ended
    const std::int64_t grown = (previous * 5 + 2) / 4;
    bounds.push_back(std::max(previous + 1, grown));
  }
  return bounds;
}

// Uniform in [0, n) from the raw 64-bit output, by rejection: std::uniform_int_distribution and std::shuffle
// are implementation-defined, mt19937_64's output is not, so a plan is the same for a seed on every platform.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
  std::uint64_t draw;
  do {
    draw = rng();
  } while (draw >= limit);
  return draw % n;
}

template <typename T>
void seeded_shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (std::size_t i = items.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(uniform_below(rng, i));
    std::swap(items[i - 1], items[j]);
  }
}

// Adds two non-negative token counts; false on int64 overflow.
bool add_tokens(std::int64_t& total, std::int64_t amount) {
  if (amount > kInt64Max - total) return false;
  total += amount;
  return true;
}

PlannedBatch make_batch(std::vector<std::int64_t> indices, std::int64_t max_len, std::int64_t real_tokens,
                        bool over_budget) {
  PlannedBatch batch;
  batch.indices = std::move(indices);
  batch.max_len = max_len;
  batch.real_tokens = real_tokens;
  batch.over_budget = over_budget;
  return batch;
}

// Fills padded_tokens = size x max_len and the padding fraction; false when the product overflows int64 (the
// padded mode's budget bounds it, the ragged mode's bounds only the real tokens).
bool count_padding(PlannedBatch& batch) {
  const std::int64_t size = static_cast<std::int64_t>(batch.indices.size());
  if (batch.max_len > 0 && size > kInt64Max / batch.max_len) return false;
  batch.padded_tokens = size * batch.max_len;
  batch.padding_fraction =
      batch.padded_tokens == 0
          ? 0.0
          : 1.0 - static_cast<double>(batch.real_tokens) / static_cast<double>(batch.padded_tokens);
  return true;
}

// Greedy batching of one bucket, in the given order: a sequence joins the open batch while the budget and
// max_batch_size allow, else the open batch is closed and a new one begins. A sequence over the budget on its
// own becomes a flagged batch of one and leaves the open batch as it is; those batches come after the bucket's
// others, so that in sorted order (where they are the bucket's longest) the batches stay shortest first.
void batch_bucket(const std::int64_t* lengths, const std::vector<std::int64_t>& order, const PlannerOptions& options,
                  std::vector<PlannedBatch>& out) {
  const std::int64_t budget = options.token_budget;
  std::vector<std::int64_t> open;
  std::int64_t open_max = 0;
  std::int64_t open_sum = 0;  // <= budget in ragged mode; <= count * max <= budget in padded mode
  std::vector<PlannedBatch> over_budget;
  auto close_open = [&]() {
    if (open.empty()) return;
    out.push_back(make_batch(std::move(open), open_max, open_sum, false));
    open.clear();
    open_max = 0;
    open_sum = 0;
  };
  for (const std::int64_t index : order) {
    const std::int64_t length = lengths[index];
    if (length > budget) {
      over_budget.push_back(make_batch({index}, length, length, true));
      continue;
    }
    const std::int64_t count = static_cast<std::int64_t>(open.size()) + 1;
    const std::int64_t new_max = std::max(open_max, length);
    // Both tests are written so that nothing overflows: length <= budget and open_sum <= budget.
    const bool fits_budget = options.mode == BudgetMode::kPadded ? (new_max == 0 || count <= budget / new_max)
                                                                  : length <= budget - open_sum;
    const bool fits_size = options.max_batch_size == 0 || count <= options.max_batch_size;
    if (!open.empty() && !(fits_budget && fits_size)) close_open();
    open.push_back(index);
    open_max = std::max(open_max, length);
    open_sum += length;
  }
  close_open();
  for (PlannedBatch& batch : over_budget) out.push_back(std::move(batch));
}

}  // namespace

Status plan_batches(const std::int64_t* lengths, std::int64_t count, const PlannerOptions& options, BatchPlan* plan) {
  if (count < 0)
    return fail(Status::kInvalidArgument, "count = " + std::to_string(count) + " is negative");
  if (lengths == nullptr && count > 0)
    return fail(Status::kNullPointer, "lengths is null but must hold " + std::to_string(count) + " elements");
  if (plan == nullptr) return fail(Status::kNullPointer, "plan is null");
  const Status options_status = check_options(options);
  if (options_status != Status::kSuccess) return options_status;

  std::int64_t longest = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (lengths[i] < 0)
      return fail(Status::kNegativeLength,
                  "lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) + " is negative");
    longest = std::max(longest, lengths[i]);
  }

  // Bucket b holds lengths in [bounds[b-1], bounds[b]); the last bucket, after the last bound, is open-ended.
  const std::vector<std::int64_t> bounds =
      options.bucket_bounds.empty() ? geometric_bounds(longest) : options.bucket_bounds;
  std::vector<std::vector<std::int64_t>> buckets(bounds.size() + 1);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t bucket =
        static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), lengths[i]) - bounds.begin());
    buckets[bucket].push_back(i);  // indices ascending inside each bucket
  }

  std::mt19937_64 rng(options.seed);
  BatchPlan result;
  for (std::vector<std::int64_t>& bucket : buckets) {
    if (options.shuffle) {
      seeded_shuffle(bucket, rng);
    } else {
      // Shortest first, ties by index: neighbours in a batch have the closest lengths.
      std::stable_sort(bucket.begin(), bucket.end(),
                       [lengths](std::int64_t a, std::int64_t b) { return lengths[a] < lengths[b]; });
    }
    batch_bucket(lengths, bucket, options, result.batches);
  }
  if (options.shuffle) seeded_shuffle(result.batches, rng);

  for (std::size_t b = 0; b < result.batches.size(); ++b) {
    PlannedBatch& batch = result.batches[b];
    if (!count_padding(batch))
      return fail(Status::kSizeOverflow, "batch " + std::to_string(b) + ": " + std::to_string(batch.indices.size()) +
                                             " sequences x max_len " + std::to_string(batch.max_len) +
                                             " padded tokens exceed int64");
    if (!add_tokens(result.real_tokens, batch.real_tokens) || !add_tokens(result.padded_tokens, batch.padded_tokens))
      return fail(Status::kSizeOverflow, "the plan's total tokens exceed int64");
  }
  result.padding_fraction =
      result.padded_tokens == 0
          ? 0.0
          : 1.0 - static_cast<double>(result.real_tokens) / static_cast<double>(result.padded_tokens);
  *plan = std::move(result);
  return Status::kSuccess;
}

BatchPlan plan_batches(const std::vector<std::int64_t>& lengths, const PlannerOptions& options) {
  BatchPlan plan;
  throw_if_error(plan_batches(lengths.data(), static_cast<std::int64_t>(lengths.size()), options, &plan));
  return plan;
}

}  // namespace ragged
