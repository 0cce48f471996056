// GPU benchmarks of segment reductions and segment softmax (issue 3), float values, int32 offsets, 64 MiB of
// ragged values per case, over the regimes the kernels must hold their bandwidth in: many rows of length 0..4,
// power-law lengths, one huge row with the rest empty, and uniform lengths; D = 1, 64 and 1024.
//
// Implementations (the names pair up across impl):
//   ragged  ragged::segment_reduce / segment_softmax on the ragged tensor
//   cub     cub::DeviceSegmentedReduce::Sum / Max over the same offsets (D = 1 only: CUB has no strided form)
//   padded  what a padded pipeline does: ragged_to_padded with the op's identity as pad value, then the same
//           op over the padded rows (ragged's kernels on rows all max_len long); peak_bytes includes the
//           padded tensor
// Bytes per iteration (the floor): values read + offsets read + outputs written (softmax: values read once and
// written once). copy_frac divides the achieved rate by a device-to-device copy's rate measured in this run.
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/device_data.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/ragged_case.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/segment_reduce.h"

namespace ragged {
namespace bench {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

enum class SegOp { kSum, kMax, kSoftmax };

const char* seg_op_name(SegOp op) {
  switch (op) {
    case SegOp::kSum: return "segment_sum";
    case SegOp::kMax: return "segment_max";
    case SegOp::kSoftmax: return "segment_softmax";
  }
  return "?";
}

struct SegCase {
  RaggedCase shape;
  SegOp op;
};

double values_bytes(const RaggedCase& c) { return static_cast<double>(c.tokens * c.inner) * sizeof(float); }

double floor_bytes(const SegCase& s) {
  const RaggedCase& c = s.shape;
  const double offsets = static_cast<double>(c.offsets.size() * sizeof(std::int32_t));
  if (s.op == SegOp::kSoftmax) return 2.0 * values_bytes(c) + offsets;
  return values_bytes(c) + offsets + static_cast<double>(c.batch * c.inner) * sizeof(float);
}

void set_case_counters(benchmark::State& state, const RaggedCase& c) {
  state.counters["padding_frac"] = c.padding_fraction();
  state.counters["tokens"] = static_cast<double>(c.tokens);
  state.counters["batch"] = static_cast<double>(c.batch);
}

void bench_ragged(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens * c.inner), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    const bool softmax = s.op == SegOp::kSoftmax;
    DeviceBuffer<float> out(static_cast<std::size_t>((softmax ? c.tokens : c.batch) * c.inner), stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    RaggedView<const float, std::int32_t> view{values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    auto launch = [&](void* ws, std::size_t& bytes, cudaStream_t st) {
      if (softmax) return segment_softmax(ws, bytes, view, false, out.data(), st);
      return segment_reduce(ws, bytes, view, s.op == SegOp::kSum ? ReduceOp::kSum : ReduceOp::kMax, out.data(),
                            nullptr, 0.0f, st);
    };
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, launch(nullptr, ws_bytes, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) { return launch(ws.data(), ws_bytes, st); });
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + out.bytes() + ws_bytes));
    set_case_counters(state, c);
  });
}

void bench_cub(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    DeviceBuffer<float> out(static_cast<std::size_t>(c.batch), stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    const int segments = static_cast<int>(c.batch);
    auto launch = [&](void* ws, std::size_t& bytes, cudaStream_t st) {
      const cudaError_t e =
          s.op == SegOp::kSum
              ? cub::DeviceSegmentedReduce::Sum(ws, bytes, values.data(), out.data(), segments, offsets.data(),
                                                offsets.data() + 1, st)
              : cub::DeviceSegmentedReduce::Max(ws, bytes, values.data(), out.data(), segments, offsets.data(),
                                                offsets.data() + 1, st);
      return from_cuda(e, "cub::DeviceSegmentedReduce");
    };
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, launch(nullptr, ws_bytes, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) { return launch(ws.data(), ws_bytes, st); });
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + out.bytes() + ws_bytes));
    set_case_counters(state, c);
  });
}

// What a padded pipeline does: ragged_to_padded with the op's identity as the pad value (-inf for max and
// softmax, so padding never wins and gets probability 0), then the same op over the padded rows, each max_len
// long, run by ragged's own kernels (the fastest reduction at hand): what separates it from `ragged` is the
// padding alone. peak_bytes includes the padded tensor (and for softmax its padded output).
void bench_padded(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    const bool softmax = s.op == SegOp::kSoftmax;
    if (c.padded_slots() > std::numeric_limits<std::int32_t>::max()) {
      state.SkipWithError("padded rows exceed int32 offsets");
      return;
    }
    std::vector<std::int32_t> row_starts(static_cast<std::size_t>(c.batch) + 1);
    for (std::size_t b = 0; b < row_starts.size(); ++b)
      row_starts[b] = static_cast<std::int32_t>(static_cast<std::int64_t>(b) * c.max_len);
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens * c.inner), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    DeviceBuffer<std::int32_t> padded_offsets(row_starts, stream);
    DeviceBuffer<float> padded(static_cast<std::size_t>(c.padded_slots() * c.inner), stream);
    DeviceBuffer<float> out(static_cast<std::size_t>((softmax ? c.padded_slots() : c.batch) * c.inner), stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    RaggedView<const float, std::int32_t> view{values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    PaddedView<float> padded_view{padded.data(), c.batch, c.max_len, c.inner};
    RaggedView<const float, std::int32_t> padded_rows{padded.data(), padded_offsets.data(), c.batch,
                                                      c.padded_slots(), c.inner};
    const float pad = s.op == SegOp::kSum ? 0.0f : -INFINITY;
    auto convert = [&](void* ws, std::size_t& bytes, cudaStream_t st) {
      return ragged_to_padded(ws, bytes, view, padded_view, pad, Align::kLeft, Truncate::kRight, st);
    };
    auto reduce = [&](void* ws, std::size_t& bytes, cudaStream_t st) {
      if (softmax) return segment_softmax(ws, bytes, padded_rows, false, out.data(), st);
      return segment_reduce(ws, bytes, padded_rows, s.op == SegOp::kSum ? ReduceOp::kSum : ReduceOp::kMax,
                            out.data(), nullptr, 0.0f, st);
    };
    std::size_t convert_bytes = 0, reduce_bytes = 0;
    if (!ok_or_skip(state, convert(nullptr, convert_bytes, stream), "ragged_to_padded workspace query")) return;
    if (!ok_or_skip(state, reduce(nullptr, reduce_bytes, stream), "workspace query")) return;
    const std::size_t ws_bytes = std::max(convert_bytes, reduce_bytes);
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) {
      const Status status = convert(ws.data(), convert_bytes, st);
      if (status != Status::kSuccess) return status;
      return reduce(ws.data(), reduce_bytes, st);
    });
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + padded_offsets.bytes() + padded.bytes() +
                                        out.bytes() + ws_bytes));
    set_case_counters(state, c);
  });
}

std::vector<SegCase> segment_cases() {
  struct Regime {
    LengthDistribution distribution;
    std::int64_t mean;
    const char* tag;
  };
  // tiny: uniform in [0, 4]; the others at a mean of 256 tokens.
  const Regime regimes[] = {{LengthDistribution::kUniform, 2, "tiny"},
                            {LengthDistribution::kPowerLaw, 256, "powerlaw"},
                            {LengthDistribution::kOneHuge, 256, "onehuge"},
                            {LengthDistribution::kUniform, 256, "uniform"}};
  const std::vector<std::int64_t> inners = full_run() ? std::vector<std::int64_t>{1, 3, 64, 256, 1024}
                                                      : std::vector<std::int64_t>{1, 64, 1024};
  std::vector<SegCase> cases;
  for (const SegOp op : {SegOp::kSum, SegOp::kMax, SegOp::kSoftmax})
    for (const Regime& r : regimes)
      for (const std::int64_t inner : inners) {
        RaggedCase shape = make_ragged_case(r.distribution, inner, sizeof(float), 64 * kMiB, r.mean);
        cases.push_back(SegCase{std::move(shape), op});
      }
  return cases;
}

std::string case_name(const SegCase& s, const char* impl) {
  return std::string(seg_op_name(s.op)) + "/" + impl + "/" + s.shape.name();
}

void register_segment_gpu() {
  for (const SegCase& s : segment_cases()) {
    const auto shared = std::make_shared<const SegCase>(s);
    register_gpu_benchmark(case_name(s, "ragged"), [shared](benchmark::State& st) { bench_ragged(st, *shared); });
    if (s.shape.inner == 1 && s.op != SegOp::kSoftmax)
      register_gpu_benchmark(case_name(s, "cub"), [shared](benchmark::State& st) { bench_cub(st, *shared); });
    // The padded layout of the one-huge-row case is batch x the ragged one; skip it where that exceeds 4 GiB.
    if (static_cast<double>(s.shape.padded_slots() * s.shape.inner) * sizeof(float) < 4.0 * 1024 * kMiB)
      register_gpu_benchmark(case_name(s, "padded"), [shared](benchmark::State& st) { bench_padded(st, *shared); });
  }
}

}  // namespace

RAGGED_BENCH_SUITE(segment_gpu, Needs::kGpu, register_segment_gpu);

}  // namespace bench
}  // namespace ragged
