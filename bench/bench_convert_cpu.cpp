// CPU side of the ragged-vs-padded comparison, runnable without a GPU:
//   ragged_to_padded_cpu/reference, padded_to_ragged_cpu/reference: the CPU references of the conversions.
//   sequence_sum_cpu/ragged vs sequence_sum_cpu/padded: the same per-sequence reduction over each layout, the
//   padded one visiting every slot with a length mask the way a padded consumer does; their time and
//   peak_bytes show what the padding costs.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "bench/convert_cases.h"
#include "ragged/reference.h"

namespace ragged {
namespace bench {
namespace {

struct HostTensors {
  std::vector<float> ragged_values;  // [tokens, inner]
  std::vector<float> padded;         // [batch, max_len, inner]
};

HostTensors make_tensors(const RaggedCase& c) {
  HostTensors t;
  t.ragged_values.resize(static_cast<std::size_t>(c.tokens * c.inner));
  for (std::size_t i = 0; i < t.ragged_values.size(); ++i) t.ragged_values[i] = 0.25f * static_cast<float>(i % 7);
  t.padded.assign(static_cast<std::size_t>(c.padded_slots() * c.inner), 0.0f);
  return t;
}

double value_bytes(const RaggedCase& c) { return static_cast<double>(c.tokens * c.inner) * sizeof(float); }
double padded_bytes(const RaggedCase& c) { return static_cast<double>(c.padded_slots() * c.inner) * sizeof(float); }

void set_layout_counters(benchmark::State& state, const RaggedCase& c) {
  state.counters["padding_frac"] = c.padding_fraction();
  state.counters["padded_over_ragged"] = c.tokens == 0 ? 0.0 : padded_bytes(c) / value_bytes(c);
}

void bench_reference_conversion(benchmark::State& state, const RaggedCase& c, bool to_padded) {
  HostTensors t = make_tensors(c);
  RaggedView<float, std::int32_t> ragged_view{t.ragged_values.data(), c.offsets.data(), c.batch, c.tokens, c.inner};
  RaggedView<const float, std::int32_t> ragged_const{t.ragged_values.data(), c.offsets.data(), c.batch, c.tokens,
                                                     c.inner};
  PaddedView<float> padded_view{t.padded.data(), c.batch, c.max_len, c.inner};
  PaddedView<const float> padded_const{t.padded.data(), c.batch, c.max_len, c.inner};
  for (auto _ : state) {
    if (to_padded)
      reference::ragged_to_padded(ragged_const, padded_view, 0.0f, Align::kLeft, Truncate::kRight);
    else
      reference::padded_to_ragged(padded_const, ragged_view, 0.0f, Align::kLeft, Truncate::kRight);
    benchmark::DoNotOptimize(t.padded.data());
    benchmark::DoNotOptimize(t.ragged_values.data());
    benchmark::ClobberMemory();
  }
  const double moved = to_padded ? value_bytes(c) + padded_bytes(c) : 2.0 * value_bytes(c);
  set_cpu_traffic(state, moved, value_bytes(c) + padded_bytes(c));
  set_layout_counters(state, c);
}

void bench_sequence_sum(benchmark::State& state, const RaggedCase& c, bool padded_layout) {
  HostTensors t = make_tensors(c);
  if (padded_layout) {
    PaddedView<float> padded_view{t.padded.data(), c.batch, c.max_len, c.inner};
    RaggedView<const float, std::int32_t> src{t.ragged_values.data(), c.offsets.data(), c.batch, c.tokens, c.inner};
    reference::ragged_to_padded(src, padded_view, 0.0f, Align::kLeft, Truncate::kRight);
    t.ragged_values = {};  // a padded pipeline holds only the padded tensor
  } else {
    t.padded = {};
  }
  std::vector<float> sums(static_cast<std::size_t>(c.batch));
  const std::size_t inner = static_cast<std::size_t>(c.inner);
  for (auto _ : state) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      float acc = 0.0f;
      if (padded_layout) {
        const float* row = t.padded.data() + static_cast<std::size_t>(b * c.max_len) * inner;
        const std::int64_t length = c.lengths[static_cast<std::size_t>(b)];
        for (std::int64_t s = 0; s < c.max_len; ++s) {
          const float mask = s < length ? 1.0f : 0.0f;
          for (std::size_t k = 0; k < inner; ++k) acc += mask * row[static_cast<std::size_t>(s) * inner + k];
        }
      } else {
        const float* first = t.ragged_values.data() + static_cast<std::size_t>(c.offsets[b]) * inner;
        const float* last = t.ragged_values.data() + static_cast<std::size_t>(c.offsets[b + 1]) * inner;
        for (const float* p = first; p != last; ++p) acc += *p;
      }
      sums[static_cast<std::size_t>(b)] = acc;
    }
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  const double layout = padded_layout ? padded_bytes(c) : value_bytes(c);
  set_cpu_traffic(state, layout, layout + static_cast<double>(sums.size() * sizeof(float)));
  set_layout_counters(state, c);
}

void register_convert_cpu() {
  for (const RaggedCase& c : cpu_convert_cases()) {
    const auto shared = std::make_shared<const RaggedCase>(c);
    for (const bool to_padded : {true, false}) {
      const std::string name = std::string(to_padded ? "ragged_to_padded_cpu" : "padded_to_ragged_cpu") +
                               "/reference/" + c.name();
      benchmark::RegisterBenchmark(name.c_str(), [shared, to_padded](benchmark::State& state) {
        run_guarded(state, [&] { bench_reference_conversion(state, *shared, to_padded); });
      })->Unit(benchmark::kMicrosecond);
    }
    for (const bool padded_layout : {false, true}) {
      const std::string name =
          std::string("sequence_sum_cpu/") + (padded_layout ? "padded/" : "ragged/") + c.name();
      benchmark::RegisterBenchmark(name.c_str(), [shared, padded_layout](benchmark::State& state) {
        run_guarded(state, [&] { bench_sequence_sum(state, *shared, padded_layout); });
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

RAGGED_BENCH_SUITE(convert_cpu, Needs::kCpu, register_convert_cpu);

}  // namespace bench
}  // namespace ragged
