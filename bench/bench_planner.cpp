// The batch planner on the host: time to plan a data set, and the padding fraction of its batches with
// length bucketing (`ragged`: automatic geometric buckets, shuffled) vs the random batching a padded pipeline
// does without a planner (`padded`: one bucket, shuffled), under the same padded token budget. Counters:
// padding_frac, batches, over_budget, and (host memory) bytes_per_second over the lengths read and
// peak_bytes = lengths + the plan's indices and batch records.
#include <benchmark/benchmark.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/distributions.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "ragged/planner.h"

namespace ragged {
namespace bench {
namespace {

constexpr std::int64_t kSequences = 100000;
constexpr std::int64_t kMeanLength = 256;
constexpr std::int64_t kTokenBudget = 16384;

struct PlannerCase {
  std::string name;
  std::vector<std::int64_t> lengths;
};

void bench_plan(benchmark::State& state, const PlannerCase& c, bool bucketed) {
  PlannerOptions options;
  options.token_budget = kTokenBudget;
  options.mode = BudgetMode::kPadded;
  options.shuffle = true;
  options.seed = 1;
  if (!bucketed) options.bucket_bounds = {std::numeric_limits<std::int64_t>::max()};  // one bucket
  BatchPlan plan;
  for (auto _ : state) {
    plan = plan_batches(c.lengths, options);
    benchmark::DoNotOptimize(plan.batches.data());
  }
  std::int64_t over_budget = 0;
  for (const PlannedBatch& batch : plan.batches) over_budget += batch.over_budget ? 1 : 0;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(c.lengths.size()));
  const double lengths_bytes = static_cast<double>(c.lengths.size() * sizeof(std::int64_t));
  const double plan_bytes = static_cast<double>(c.lengths.size() * sizeof(std::int64_t) +
                                                plan.batches.size() * sizeof(PlannedBatch));
  set_cpu_traffic(state, lengths_bytes, lengths_bytes + plan_bytes);
  state.counters["padding_frac"] = plan.padding_fraction;
  state.counters["batches"] = static_cast<double>(plan.batches.size());
  state.counters["over_budget"] = static_cast<double>(over_budget);
}

std::vector<PlannerCase> planner_cases() {
  std::vector<PlannerCase> cases;
  const std::string params = "/count:" + std::to_string(kSequences) + "/budget:" + std::to_string(kTokenBudget);
  for (const LengthDistribution distribution :
       {LengthDistribution::kUniform, LengthDistribution::kLognormal, LengthDistribution::kPowerLaw,
        LengthDistribution::kBimodal}) {
    LengthSpec spec;
    spec.distribution = distribution;
    spec.batch = kSequences;
    spec.mean = static_cast<double>(kMeanLength);
    spec.max_len = 16 * kMeanLength;
    spec.seed = 42;
    cases.push_back({std::string(distribution_name(distribution)) + params, make_lengths(spec)});
  }
  const std::string path = lengths_file_from_env();
  if (!path.empty()) {
    LengthSpec spec;
    spec.distribution = LengthDistribution::kFile;
    spec.batch = kSequences;
    spec.max_len = std::numeric_limits<std::int64_t>::max();
    spec.file_lengths = read_lengths_file(path);
    cases.push_back({"file" + params, make_lengths(spec)});
  }
  return cases;
}

void register_planner() {
  for (PlannerCase& c : planner_cases()) {
    const auto shared = std::make_shared<const PlannerCase>(std::move(c));
    for (const bool bucketed : {true, false}) {
      const std::string name = std::string("plan_batches/") + (bucketed ? "ragged/" : "padded/") + shared->name;
      benchmark::RegisterBenchmark(name.c_str(), [shared, bucketed](benchmark::State& state) {
        run_guarded(state, [&] { bench_plan(state, *shared, bucketed); });
      })->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

RAGGED_BENCH_SUITE(planner, Needs::kCpu, register_planner);

}  // namespace bench
}  // namespace ragged
