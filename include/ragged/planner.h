// Length-bucketing batch planner (host only). Given the lengths of a data set, forms batches under a token
// budget, grouping sequences of similar length so that a padded consumer wastes little, and reports for every
// batch the padding fraction it would have if padded.
#pragma once

#include <cstdint>
#include <vector>

#include "ragged/status.h"

namespace ragged {

enum class BudgetMode : int {
  kPadded = 0,  // batch_size * max_len <= budget (the consumer pads each batch to its longest sequence)
  kRagged = 1,  // sum of lengths <= budget (the consumer stays ragged)
};

struct PlannerOptions {
  std::int64_t token_budget = 4096;
  BudgetMode mode = BudgetMode::kPadded;
  std::int64_t max_batch_size = 0;  // 0: no limit on sequences per batch
  // Upper bounds (exclusive) of the length buckets, strictly ascending and positive: bounds {b0, ..., bk} make
  // the buckets [0, b0), [b0, b1), ..., [bk, infinity), so a sequence goes to the first bucket whose bound exceeds
  // its length, or to the open-ended last one. Empty: geometric buckets from the lengths: bounds 1, 2, 3, 4, 5,
  // 6, 8, 10, 13, 16, 20, ..., each round(1.25 * previous) but at least previous + 1, up to the first bound above
  // the longest length. A bucket's longest length is then under 1.25x its shortest, so a padded batch wastes
  // under 20%, and empty sequences get a bucket of their own (their batches hold no tokens, so in padded mode
  // only max_batch_size limits them). The bounds stop at 2278543582757393239 (the next would pass INT64_MAX / 5):
  // longer lengths share one open-ended bucket, without that promise.
  std::vector<std::int64_t> bucket_bounds;
  // false: each bucket is sorted by length (ties by index) before batching, so batches are tight, and batches
  // come bucket by bucket, shortest first (a sequence over the budget, a batch of its own, after the other
  // batches of its bucket). true: each bucket is shuffled before batching, then the order of all
  // batches is shuffled; std::mt19937_64 seeded with `seed` drives both, drawn without the implementation-defined
  // std distributions, so a seed gives the same plan everywhere.
  bool shuffle = false;
  std::uint64_t seed = 0;
};

struct PlannedBatch {
  std::vector<std::int64_t> indices;  // into the input lengths
  std::int64_t max_len = 0;
  std::int64_t real_tokens = 0;
  std::int64_t padded_tokens = 0;     // indices.size() * max_len
  double padding_fraction = 0.0;      // 1 - real / padded (0 for an all-empty batch)
  bool over_budget = false;           // a single sequence larger than the budget, alone in its batch
};

struct BatchPlan {
  std::vector<PlannedBatch> batches;
  std::int64_t real_tokens = 0;
  std::int64_t padded_tokens = 0;
  double padding_fraction = 0.0;  // over the whole plan
};

// Every sequence appears in exactly one batch. Batches are formed greedily inside each bucket: a sequence joins
// the open batch while the budget (per `mode`) and max_batch_size allow, else a new batch begins. A sequence
// longer than the budget forms a batch of its own with over_budget set. Fails on a negative length (naming its
// index), a negative count, a null pointer, a non-positive budget, a negative max_batch_size, or unsorted /
// non-positive bucket bounds (naming the bound), or a token count past int64 (kSizeOverflow: in
// ragged mode a batch's padded tokens, size x max_len, are not bounded by the budget); *plan is left unchanged
// on failure.
Status plan_batches(const std::int64_t* lengths, std::int64_t count, const PlannerOptions& options, BatchPlan* plan);

// Throwing convenience form.
BatchPlan plan_batches(const std::vector<std::int64_t>& lengths, const PlannerOptions& options);

}  // namespace ragged
