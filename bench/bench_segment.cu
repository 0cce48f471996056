// GPU benchmarks of segment reductions and segment softmax (issue 3), float values, int32 offsets, 64 MiB of
// ragged values per case, over the regimes the kernels must hold their bandwidth in: many rows of length 0..4,
// power-law lengths, one huge row with the rest empty, and uniform lengths; D = 1, 64 and 1024.
//
// Implementations (the names pair up across impl):
//   ragged  ragged::segment_reduce / segment_softmax on the ragged tensor
//   cub     cub::DeviceSegmentedReduce::Sum / Max over the same offsets (D = 1 only: CUB has no strided form)
//   padded  what a padded pipeline does: ragged_to_padded with the op's identity as pad value, then a dense
//           reduction (or softmax) over the padded length axis; peak_bytes includes the padded tensor
// Bytes per iteration (the floor): values read + offsets read + outputs written (softmax: values read once and
// written once). copy_frac divides the achieved rate by a device-to-device copy's rate measured in this run.
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_runtime.h>

#include <cfloat>
#include <memory>
#include <string>

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

// Padded baseline: one block per sequence; threads split into (column, phase) pairs, each phase walks the
// padded length axis with a stride, then the phases of a column are summed through shared memory.
template <bool kMax>
__global__ void dense_reduce_kernel(const float* __restrict__ padded, std::int64_t max_len, std::int64_t inner,
                                    float* __restrict__ out) {
  extern __shared__ float partial[];
  const std::int64_t b = blockIdx.x;
  const int phases = inner >= blockDim.x ? 1 : static_cast<int>(blockDim.x / inner);
  const int phase = static_cast<int>(threadIdx.x / (inner >= blockDim.x ? blockDim.x : inner));
  for (std::int64_t col0 = 0; col0 < inner; col0 += (phases == 1 ? blockDim.x : inner)) {
    const std::int64_t col = col0 + (phases == 1 ? threadIdx.x : threadIdx.x % inner);
    float acc = kMax ? -FLT_MAX : 0.0f;
    if (phase < phases && col < inner)
      for (std::int64_t t = phase; t < max_len; t += phases) {
        const float x = padded[(b * max_len + t) * inner + col];
        acc = kMax ? fmaxf(acc, x) : acc + x;
      }
    partial[threadIdx.x] = acc;
    __syncthreads();
    if (phase == 0 && col < inner) {
      for (int p = 1; p < phases; ++p) {
        const float x = partial[threadIdx.x + p * inner];
        acc = kMax ? fmaxf(acc, x) : acc + x;
      }
      out[b * inner + col] = acc;
    }
    __syncthreads();
  }
}

// Padded softmax baseline along the length axis, in place: per (sequence, column) the classic three passes.
__global__ void dense_softmax_kernel(float* __restrict__ padded, std::int64_t max_len, std::int64_t inner,
                                     std::int64_t batch) {
  const std::int64_t columns = batch * inner;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < columns;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / inner, col = i % inner;
    float* base = padded + b * max_len * inner + col;
    float m = -INFINITY;
    for (std::int64_t t = 0; t < max_len; ++t) m = fmaxf(m, base[t * inner]);
    float s = 0.0f;
    for (std::int64_t t = 0; t < max_len; ++t) s += expf(base[t * inner] - m);
    for (std::int64_t t = 0; t < max_len; ++t) base[t * inner] = expf(base[t * inner] - m) / s;
  }
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

// Random values in [-1, 1): the reductions' speed must not come from easy data.
__global__ void fill_random_kernel(float* data, std::int64_t count, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    data[i] = static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f;
  }
}

void fill_random(DeviceBuffer<float>& buffer, cudaStream_t stream) {
  if (buffer.empty()) return;
  fill_random_kernel<<<1024, 256, 0, stream>>>(buffer.data(), static_cast<std::int64_t>(buffer.size()), 12345u);
  cuda_check(cudaGetLastError(), "fill_random_kernel");
}

void bench_ragged(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens * c.inner), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    const bool softmax = s.op == SegOp::kSoftmax;
    DeviceBuffer<float> out(static_cast<std::size_t>((softmax ? c.tokens : c.batch) * c.inner), stream);
    fill_random(values, stream);
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
    fill_random(values, stream);
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

void bench_padded(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape;
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens * c.inner), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    DeviceBuffer<float> padded(static_cast<std::size_t>(c.padded_slots() * c.inner), stream);
    DeviceBuffer<float> out(static_cast<std::size_t>(c.batch * c.inner), stream);
    fill_random(values, stream);
    RaggedView<const float, std::int32_t> view{values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    PaddedView<float> padded_view{padded.data(), c.batch, c.max_len, c.inner};
    const float pad = s.op == SegOp::kSum ? 0.0f : -INFINITY;
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, ragged_to_padded(nullptr, ws_bytes, view, padded_view, pad, Align::kLeft, Truncate::kRight,
                                            stream),
                    "workspace query"))
      return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    const int threads = 256;
    time_on_gpu(state, [&](cudaStream_t st) {
      Status status = ragged_to_padded(ws.data(), ws_bytes, view, padded_view, pad, Align::kLeft, Truncate::kRight, st);
      if (status != Status::kSuccess || c.batch == 0) return status;
      if (s.op == SegOp::kSoftmax)
        dense_softmax_kernel<<<1024, threads, 0, st>>>(padded.data(), c.max_len, c.inner, c.batch);
      else if (s.op == SegOp::kSum)
        dense_reduce_kernel<false><<<static_cast<unsigned>(c.batch), threads, threads * sizeof(float), st>>>(
            padded.data(), c.max_len, c.inner, out.data());
      else
        dense_reduce_kernel<true><<<static_cast<unsigned>(c.batch), threads, threads * sizeof(float), st>>>(
            padded.data(), c.max_len, c.inner, out.data());
      return from_cuda(cudaGetLastError(), "dense kernel");
    });
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + padded.bytes() +
                                        (s.op == SegOp::kSoftmax ? 0 : out.bytes()) + ws_bytes));
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
    benchmark::RegisterBenchmark(case_name(s, "ragged").c_str(),
                                 [shared](benchmark::State& st) { bench_ragged(st, *shared); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    if (s.shape.inner == 1 && s.op != SegOp::kSoftmax)
      benchmark::RegisterBenchmark(case_name(s, "cub").c_str(),
                                   [shared](benchmark::State& st) { bench_cub(st, *shared); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    // The padded layout of the one-huge-row case is batch x the ragged one; skip it where that exceeds 4 GiB.
    if (static_cast<double>(s.shape.padded_slots() * s.shape.inner) * sizeof(float) < 4.0 * 1024 * kMiB)
      benchmark::RegisterBenchmark(case_name(s, "padded").c_str(),
                                   [shared](benchmark::State& st) { bench_padded(st, *shared); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

RAGGED_BENCH_SUITE(segment_gpu, Needs::kGpu, register_segment_gpu);

}  // namespace bench
}  // namespace ragged
