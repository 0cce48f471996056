// GPU benchmarks of segment reductions and segment softmax (issue 3), float values, int32 offsets, 64 MiB of
// ragged values per case, over the regimes the kernels must hold their bandwidth in: many rows of length 0..4,
// power-law lengths, one huge row with the rest empty, and uniform lengths; D = 1, 64 and 1024. Issue 3 asks for
// 2x CUB on rows of length <= 16: the short rows, uniform in 0..16 (mean 8), run the ops CUB has (sum, max,
// argmax; float, D = 1) so that the upper end of that range is timed too. Ops: sum, max,
// argmax, softmax and softmax backward (RAGGED_BENCH_FULL=1: also log-softmax, sum and max backward). Sum,
// softmax and softmax backward also run on 64 MiB of bfloat16 values (`/dtype:bf16`, ragged only), whose
// kernels differ at wide D (a register tile holds 4 tokens there, so a unit streams 4 tiles).
//
// Implementations (the names pair up across impl):
//   ragged  ragged::segment_reduce / segment_softmax on the ragged tensor
//   cub     cub::DeviceSegmentedReduce::Sum / Max / ArgMax over the same offsets (D = 1 only: CUB has no
//           strided form)
//   padded  what a padded pipeline does: ragged_to_padded with the op's identity as pad value, then the same
//           op over the padded rows (ragged's kernels on rows all max_len long); peak_bytes includes the
//           padded tensor
// Bytes per iteration (the floor, floor_bytes): inputs read once + outputs written once (the softmax family: the
// values read once and written once, without the offsets, as issue 3 defines its floor). copy_frac divides the
// achieved rate by a device-to-device copy's rate measured in this run. Every op's rows (ragged, cub, padded and
// the floors) also report drained_us, their time with the write-back of what they left dirty in L2
// (bench/common/gpu_timer.h): the time the copy_frac targets are judged by (scripts/summarize_targets.py).
//
// device_reduce: the suite's ceiling and a check of the timing itself. 64 MiB of floats in one row, summed by
// ragged (segment_reduce, batch 1) and by cub::DeviceReduce::Sum (CUB's device-wide reduction, the plainest
// read of those bytes at hand), each after both ways of flushing L2 (`/flush:clean`, `/flush:dirty`,
// bench/common/l2_flush.h). cub's clean copy_frac is what a reduction reaches in this run's timing; the dirty
// rows say what the write-back of a dirty L2 added to every benchmark while the flush was a memset. A row of
// 4096 floats (clean) times each pipeline's fixed cost: its launches and steps with next to nothing to read.
// `/code:warm` (both sizes, clean): the same with the kernels' code put back in L2 after the flush, untimed.
// `floor` (4096 floats only, `/kernels:1` and `/kernels:2`): the launches with nothing but a one-block sum in
// them (bench/reduce_chain_floor.h), what the small row costs any pipeline of one or of two launches.
//
// `floor/.../kind:subwarp` (sum and softmax on the tiny rows at D = 64, float and bfloat16): one kernel that gives
// each row a sub-warp of D / V lanes and nothing else (bench/subwarp_row_floor.h): the floor of ragged's sub-warp
// row pass on those rows, without its plan and first-pass launch.
// `floor/.../kind:warp` (sum, max and softmax at D = 1 on the uniform and power-law rows, float and bfloat16 where
// the op runs in it): one kernel that gives each row a warp and nothing else (bench/warp_row_floor.h): the plain
// CSR design ragged's row streams are meant to beat on rows of a few hundred tokens.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_bf16.h>
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
#include "bench/common/verify.h"
#include "bench/reduce_chain_floor.h"
#include "bench/subwarp_row_floor.h"
#include "bench/warp_row_floor.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/reference_segment.h"
#include "ragged/segment_reduce.h"

namespace ragged {
namespace bench {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

enum class SegOp {
  kSum,
  kMax,
  kArgMax,  // max with the index of the maximum
  kSoftmax,
  kLogSoftmax,
  kSumBackward,
  kMaxBackward,
  kSoftmaxBackward
};

const char* seg_op_name(SegOp op) {
  switch (op) {
    case SegOp::kSum: return "segment_sum";
    case SegOp::kMax: return "segment_max";
    case SegOp::kArgMax: return "segment_argmax";
    case SegOp::kSoftmax: return "segment_softmax";
    case SegOp::kLogSoftmax: return "segment_log_softmax";
    case SegOp::kSumBackward: return "segment_sum_backward";
    case SegOp::kMaxBackward: return "segment_max_backward";
    case SegOp::kSoftmaxBackward: return "segment_softmax_backward";
  }
  return "?";
}

bool is_softmax(SegOp op) { return op == SegOp::kSoftmax || op == SegOp::kLogSoftmax; }
bool is_backward(SegOp op) {
  return op == SegOp::kSumBackward || op == SegOp::kMaxBackward || op == SegOp::kSoftmaxBackward;
}
bool has_arg(SegOp op) { return op == SegOp::kArgMax || op == SegOp::kMaxBackward; }
// Every segment op's rows also report drained_us (gpu_timer.h, time_on_gpu): the softmax family and the backward
// passes write their input's size, and a reduction's output at D = 1 on tiny rows is a quarter of its bytes
// (one value per row of ~2 tokens plus its offset), all of which can still sit dirty in L2 at the stop event.
WriteBack write_back_timing(SegOp) { return WriteBack::kDrained; }

struct SegCase {
  std::shared_ptr<const RaggedCase> shape_ptr;  // shared by the ops of one regime, inner size and dtype
  SegOp op;
  bool bf16 = false;  // bfloat16 values (and outputs) instead of float
  const RaggedCase& shape() const { return *shape_ptr; }
  std::size_t elem_size() const { return bf16 ? 2 : sizeof(float); }
};

double values_bytes(const SegCase& s) {
  return static_cast<double>(s.shape().tokens * s.shape().inner) * static_cast<double>(s.elem_size());
}

// The least an op must move: its inputs read once and its outputs written once.
double floor_bytes(const SegCase& s) {
  const RaggedCase& c = s.shape();
  const double values = values_bytes(s);
  const double offsets = static_cast<double>(c.offsets.size() * sizeof(std::int32_t));
  const double per_row = static_cast<double>(c.batch * c.inner);
  const double elem = static_cast<double>(s.elem_size());
  switch (s.op) {
    case SegOp::kSum:
    case SegOp::kMax: return values + offsets + per_row * elem;
    case SegOp::kArgMax: return values + offsets + per_row * (elem + sizeof(std::int64_t));
    // Issue 3's softmax floor: one read and one write of the values, the offsets not counted (at a mean length
    // of 2 and D = 1 they would be a third of the bytes in bfloat16, and copy_frac would credit reading them).
    case SegOp::kSoftmax:
    case SegOp::kLogSoftmax: return 2.0 * values;
    case SegOp::kSumBackward: return values + offsets + per_row * elem;  // read dy, write dx
    case SegOp::kMaxBackward: return values + offsets + per_row * (elem + sizeof(std::int64_t));
    case SegOp::kSoftmaxBackward: return 3.0 * values;  // read y and dy, write dx; the offsets not counted, as above
  }
  return 0.0;
}

void set_case_counters(benchmark::State& state, const RaggedCase& c) {
  state.counters["padding_frac"] = c.padding_fraction();
  state.counters["tokens"] = static_cast<double>(c.tokens);
  state.counters["batch"] = static_cast<double>(c.batch);
}

// RAGGED_BENCH_VERIFY (bench/common/verify.h): the ragged op's output (or the sub-warp floor's: `who`) against
// ragged's CPU reference on the same inputs (a backward op's y or arg as the forward op produced them on the
// device).
template <typename T>
void verify_ragged(benchmark::State& state, const SegCase& s, const DeviceBuffer<T>& values,
                   const DeviceBuffer<T>& y, const DeviceBuffer<T>& grad, const DeviceBuffer<std::int64_t>& arg,
                   const DeviceBuffer<T>& out, const char* who = "ragged") {
  const RaggedCase& c = s.shape();
  const std::vector<T> x = values.to_host(), host_y = y.to_host(), dy = grad.to_host();
  const std::vector<std::int64_t> host_arg = arg.to_host();
  const RaggedView<const T, std::int32_t> view{x.data(), c.offsets.data(), c.batch, c.tokens, c.inner};
  std::vector<T> want(out.size());
  std::vector<std::int64_t> want_arg(s.op == SegOp::kArgMax ? host_arg.size() : 0);
  switch (s.op) {
    case SegOp::kSum: reference::segment_reduce(view, ReduceOp::kSum, want.data(), nullptr, 0.0f); break;
    case SegOp::kMax: reference::segment_reduce(view, ReduceOp::kMax, want.data(), nullptr, 0.0f); break;
    case SegOp::kArgMax: reference::segment_reduce(view, ReduceOp::kMax, want.data(), want_arg.data(), 0.0f); break;
    case SegOp::kSoftmax:
    case SegOp::kLogSoftmax: reference::segment_softmax(view, s.op == SegOp::kLogSoftmax, want.data()); break;
    case SegOp::kSumBackward:
      reference::segment_reduce_backward(view, ReduceOp::kSum, dy.data(), nullptr, want.data());
      break;
    case SegOp::kMaxBackward:
      reference::segment_reduce_backward(view, ReduceOp::kMax, dy.data(), host_arg.data(), want.data());
      break;
    case SegOp::kSoftmaxBackward:
      reference::segment_softmax_backward(view, false, host_y.data(), dy.data(), want.data());
      break;
  }
  check_against_reference(state, as_doubles(out.to_host()), as_doubles(want), verify_tolerance<T>(), who);
  if (s.op == SegOp::kArgMax && !state.error_occurred())
    check_against_reference(state, as_doubles(host_arg), as_doubles(want_arg), 0.0, "ragged argmax indices");
}

// The inputs of a backward op come from its forward op, run once before timing: y = softmax(x) for softmax,
// the arg of the maximum for max; the output gradient is random. T: float or __nv_bfloat16.
template <typename T>
void bench_ragged_typed(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape();
    cudaStream_t stream = GpuTimer::instance().stream();
    const auto elements = static_cast<std::size_t>(c.tokens * c.inner);
    const auto row_elements = static_cast<std::size_t>(c.batch * c.inner);
    DeviceBuffer<T> values(elements, stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    const bool per_token_out = is_softmax(s.op) || is_backward(s.op);
    DeviceBuffer<T> out(per_token_out ? elements : row_elements, stream);
    DeviceBuffer<std::int64_t> arg(has_arg(s.op) ? row_elements : 0, stream);
    DeviceBuffer<T> grad(s.op == SegOp::kSoftmaxBackward ? elements : is_backward(s.op) ? row_elements : 0, stream);
    DeviceBuffer<T> y(s.op == SegOp::kSoftmaxBackward ? elements : 0, stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    fill_uniform(grad, 1.0f, 777u, stream);
    RaggedView<const T, std::int32_t> view{values.data(), offsets.data(), c.batch, c.tokens, c.inner};
    Workspace setup(stream);
    if (s.op == SegOp::kSoftmaxBackward)
      run_with_workspace(setup, [&](void* ws, std::size_t& bytes) {
        return segment_softmax(ws, bytes, view, false, y.data(), stream);
      });
    if (s.op == SegOp::kMaxBackward) {
      DeviceBuffer<T> max_out(row_elements, stream);
      run_with_workspace(setup, [&](void* ws, std::size_t& bytes) {
        return segment_reduce(ws, bytes, view, ReduceOp::kMax, max_out.data(), arg.data(), 0.0f, stream);
      });
    }
    auto launch = [&](void* ws, std::size_t& bytes, cudaStream_t st) -> Status {
      switch (s.op) {
        case SegOp::kSum: return segment_reduce(ws, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, st);
        case SegOp::kMax: return segment_reduce(ws, bytes, view, ReduceOp::kMax, out.data(), nullptr, 0.0f, st);
        case SegOp::kArgMax:
          return segment_reduce(ws, bytes, view, ReduceOp::kMax, out.data(), arg.data(), 0.0f, st);
        case SegOp::kSoftmax:
        case SegOp::kLogSoftmax:
          return segment_softmax(ws, bytes, view, s.op == SegOp::kLogSoftmax, out.data(), st);
        case SegOp::kSumBackward:
          return segment_reduce_backward(ws, bytes, view, ReduceOp::kSum, grad.data(), nullptr, out.data(), st);
        case SegOp::kMaxBackward:
          return segment_reduce_backward(ws, bytes, view, ReduceOp::kMax, grad.data(), arg.data(), out.data(), st);
        case SegOp::kSoftmaxBackward:
          return segment_softmax_backward(ws, bytes, view, false, y.data(), grad.data(), out.data(), st);
      }
      return Status::kInvalidArgument;
    };
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, launch(nullptr, ws_bytes, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) { return launch(ws.data(), ws_bytes, st); }, write_back_timing(s.op));
    // peak_bytes: what the timed op needs (a backward op reads no x; its inputs are y or arg, and dy).
    const std::size_t x_bytes = is_backward(s.op) ? 0 : values.bytes();
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(x_bytes + offsets.bytes() + out.bytes() + arg.bytes() + grad.bytes() +
                                        y.bytes() + ws_bytes));
    set_case_counters(state, c);
    if (verify_results() && !state.error_occurred()) verify_ragged(state, s, values, y, grad, arg, out);
  });
}

void bench_ragged(benchmark::State& state, const SegCase& s) {
  if (s.bf16) bench_ragged_typed<__nv_bfloat16>(state, s);
  else bench_ragged_typed<float>(state, s);
}

// A floor kernel's run of a case (bench/subwarp_row_floor.h, bench/warp_row_floor.h), timed and counted as the
// ragged case is (the same floor_bytes, so copy_frac compares) and verified as ragged's output (`who`).
// launch(values, offsets, out, stream) runs the floor.
template <typename T, typename Launch>
void bench_floor_typed(benchmark::State& state, const SegCase& s, const char* who, Launch launch) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape();
    cudaStream_t stream = GpuTimer::instance().stream();
    const auto elements = static_cast<std::size_t>(c.tokens * c.inner);
    const bool softmax = s.op == SegOp::kSoftmax;
    DeviceBuffer<T> values(elements, stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    DeviceBuffer<T> out(softmax ? elements : static_cast<std::size_t>(c.batch * c.inner), stream);
    const DeviceBuffer<T> none(0, stream);
    const DeviceBuffer<std::int64_t> no_arg(0, stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    time_on_gpu(
        state, [&](cudaStream_t st) { return launch(values.data(), offsets.data(), out.data(), st); },
        write_back_timing(s.op));
    set_gpu_traffic(state, floor_bytes(s), static_cast<double>(values.bytes() + offsets.bytes() + out.bytes()));
    set_case_counters(state, c);
    if (verify_results() && !state.error_occurred()) verify_ragged(state, s, values, none, none, no_arg, out, who);
  });
}

template <typename T>
void bench_subwarp_floor_typed(benchmark::State& state, const SegCase& s) {
  const SubwarpFloorOp op = s.op == SegOp::kSoftmax ? SubwarpFloorOp::kSoftmax : SubwarpFloorOp::kSum;
  bench_floor_typed<T>(state, s, "subwarp floor",
                       [&](const T* values, const std::int32_t* offsets, T* out, cudaStream_t st) {
                         return launch_subwarp_row_floor(op, values, offsets, s.shape().batch, s.shape().inner, out,
                                                         st);
                       });
}

void bench_subwarp_floor(benchmark::State& state, const SegCase& s) {
  if (s.bf16) bench_subwarp_floor_typed<__nv_bfloat16>(state, s);
  else bench_subwarp_floor_typed<float>(state, s);
}

template <typename T>
void bench_warp_floor_typed(benchmark::State& state, const SegCase& s) {
  const WarpFloorOp op = s.op == SegOp::kSoftmax ? WarpFloorOp::kSoftmax
                         : s.op == SegOp::kMax   ? WarpFloorOp::kMax
                                                 : WarpFloorOp::kSum;
  bench_floor_typed<T>(state, s, "warp floor",
                       [&](const T* values, const std::int32_t* offsets, T* out, cudaStream_t st) {
                         return launch_warp_row_floor(op, values, offsets, s.shape().batch, out, st);
                       });
}

void bench_warp_floor(benchmark::State& state, const SegCase& s) {
  if (s.bf16) bench_warp_floor_typed<__nv_bfloat16>(state, s);
  else bench_warp_floor_typed<float>(state, s);
}

// RAGGED_BENCH_VERIFY: CUB's results against ragged's CPU reference, with CUB's own values for empty segments (0
// for Sum, the lowest float for Max, {1, lowest} for ArgMax).
void verify_cub(benchmark::State& state, const SegCase& s, const DeviceBuffer<float>& values,
                const DeviceBuffer<float>& out, const DeviceBuffer<cub::KeyValuePair<int, float>>& pairs) {
  const RaggedCase& c = s.shape();
  const std::vector<float> x = values.to_host();
  const RaggedView<const float, std::int32_t> view{x.data(), c.offsets.data(), c.batch, c.tokens, 1};
  const auto rows = static_cast<std::size_t>(c.batch);
  std::vector<float> want(rows);
  std::vector<std::int64_t> want_arg(rows);
  reference::segment_reduce(view, s.op == SegOp::kSum ? ReduceOp::kSum : ReduceOp::kMax, want.data(),
                            s.op == SegOp::kSum ? nullptr : want_arg.data(), 0.0f);
  std::vector<double> got(rows), got_arg(rows);
  if (s.op == SegOp::kArgMax) {
    const std::vector<cub::KeyValuePair<int, float>> host = pairs.to_host();
    for (std::size_t b = 0; b < rows; ++b) {
      got[b] = host[b].value;
      got_arg[b] = host[b].key;
    }
  } else {
    got = as_doubles(out.to_host());
  }
  std::vector<double> wanted = as_doubles(want), wanted_arg = as_doubles(want_arg);
  for (std::size_t b = 0; b < rows; ++b)
    if (c.lengths[b] == 0) {
      wanted[b] = s.op == SegOp::kSum ? 0.0 : std::numeric_limits<float>::lowest();
      wanted_arg[b] = 1.0;
    }
  check_against_reference(state, got, wanted, verify_tolerance<float>(), "cub");
  if (s.op == SegOp::kArgMax && !state.error_occurred())
    check_against_reference(state, got_arg, wanted_arg, 0.0, "cub argmax indices");
}

void bench_cub(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape();
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceBuffer<float> values(static_cast<std::size_t>(c.tokens), stream);
    DeviceBuffer<std::int32_t> offsets(c.offsets, stream);
    const bool argmax = s.op == SegOp::kArgMax;
    DeviceBuffer<float> out(argmax ? 0 : static_cast<std::size_t>(c.batch), stream);
    DeviceBuffer<cub::KeyValuePair<int, float>> pairs(argmax ? static_cast<std::size_t>(c.batch) : 0, stream);
    fill_uniform(values, 1.0f, 12345u, stream);
    const int segments = static_cast<int>(c.batch);
    const std::int32_t* begins = offsets.data();
    const std::int32_t* ends = offsets.data() + 1;
    auto launch = [&](void* ws, std::size_t& bytes, cudaStream_t st) {
      cudaError_t e = cudaSuccess;
      if (s.op == SegOp::kSum)
        e = cub::DeviceSegmentedReduce::Sum(ws, bytes, values.data(), out.data(), segments, begins, ends, st);
      else if (s.op == SegOp::kMax)
        e = cub::DeviceSegmentedReduce::Max(ws, bytes, values.data(), out.data(), segments, begins, ends, st);
      else
        e = cub::DeviceSegmentedReduce::ArgMax(ws, bytes, values.data(), pairs.data(), segments, begins, ends, st);
      return from_cuda(e, "cub::DeviceSegmentedReduce");
    };
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, launch(nullptr, ws_bytes, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) { return launch(ws.data(), ws_bytes, st); }, write_back_timing(s.op));
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + out.bytes() + pairs.bytes() + ws_bytes));
    set_case_counters(state, c);
    if (verify_results() && !state.error_occurred()) verify_cub(state, s, values, out, pairs);
  });
}

// RAGGED_BENCH_VERIFY: the padded pipeline's results against ragged's CPU reference of the ragged op. A
// reduction's empty sequence is a padded row of pad values (sum 0, max -inf); softmax is compared on the real
// tokens' slots of the padded output (the padding slots hold 0, or NaN in an empty sequence's row).
void verify_padded(benchmark::State& state, const SegCase& s, const DeviceBuffer<float>& values,
                   const DeviceBuffer<float>& out) {
  const RaggedCase& c = s.shape();
  const std::vector<float> x = values.to_host();
  const RaggedView<const float, std::int32_t> view{x.data(), c.offsets.data(), c.batch, c.tokens, c.inner};
  const auto inner = static_cast<std::size_t>(c.inner);
  std::vector<double> want(out.size(), std::nan(""));
  if (is_softmax(s.op)) {
    std::vector<float> ragged_want(static_cast<std::size_t>(c.tokens) * inner);
    reference::segment_softmax(view, s.op == SegOp::kLogSoftmax, ragged_want.data());
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t t = 0; t < c.lengths[b]; ++t)
        for (std::size_t d = 0; d < inner; ++d)
          want[static_cast<std::size_t>(b * c.max_len + t) * inner + d] =
              ragged_want[static_cast<std::size_t>(c.offsets[b] + t) * inner + d];
  } else {
    std::vector<float> rows(static_cast<std::size_t>(c.batch) * inner);
    reference::segment_reduce(view, s.op == SegOp::kSum ? ReduceOp::kSum : ReduceOp::kMax, rows.data(), nullptr,
                              s.op == SegOp::kSum || c.max_len == 0 ? 0.0f : -INFINITY);
    want = as_doubles(rows);
  }
  check_against_reference(state, as_doubles(out.to_host()), want, verify_tolerance<float>(), "padded");
}

// What a padded pipeline does: ragged_to_padded with the op's identity as the pad value (-inf for max and
// softmax, so padding never wins and gets probability 0), then the same op over the padded rows, each max_len
// long, run by ragged's own kernels (the fastest reduction at hand): what separates it from `ragged` is the
// padding alone. peak_bytes includes the padded tensor (and for softmax its padded output).
void bench_padded(benchmark::State& state, const SegCase& s) {
  run_guarded(state, [&] {
    const RaggedCase& c = s.shape();
    cudaStream_t stream = GpuTimer::instance().stream();
    const bool softmax = is_softmax(s.op);
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
      if (softmax) return segment_softmax(ws, bytes, padded_rows, s.op == SegOp::kLogSoftmax, out.data(), st);
      return segment_reduce(ws, bytes, padded_rows, s.op == SegOp::kSum ? ReduceOp::kSum : ReduceOp::kMax,
                            out.data(), nullptr, 0.0f, st);
    };
    std::size_t convert_bytes = 0, reduce_bytes = 0;
    if (!ok_or_skip(state, convert(nullptr, convert_bytes, stream), "ragged_to_padded workspace query")) return;
    if (!ok_or_skip(state, reduce(nullptr, reduce_bytes, stream), "workspace query")) return;
    const std::size_t ws_bytes = std::max(convert_bytes, reduce_bytes);
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(
        state,
        [&](cudaStream_t st) {
          const Status status = convert(ws.data(), convert_bytes, st);
          if (status != Status::kSuccess) return status;
          return reduce(ws.data(), reduce_bytes, st);
        },
        write_back_timing(s.op));
    set_gpu_traffic(state, floor_bytes(s),
                    static_cast<double>(values.bytes() + offsets.bytes() + padded_offsets.bytes() + padded.bytes() +
                                        out.bytes() + ws_bytes));
    set_case_counters(state, c);
    if (verify_results() && !state.error_occurred()) verify_padded(state, s, values, out);
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
  // Every op with its own kernel path by default; the full run adds the ones that share a path with those.
  std::vector<SegOp> ops{SegOp::kSum, SegOp::kMax, SegOp::kArgMax, SegOp::kSoftmax, SegOp::kSoftmaxBackward};
  if (full_run()) ops.insert(ops.end(), {SegOp::kLogSoftmax, SegOp::kSumBackward, SegOp::kMaxBackward});
  const std::vector<SegOp> bf16_ops{SegOp::kSum, SegOp::kSoftmax, SegOp::kSoftmaxBackward};
  std::vector<std::shared_ptr<const RaggedCase>> shapes, bf16_shapes;
  for (const Regime& r : regimes)
    for (const std::int64_t inner : inners) {
      shapes.push_back(std::make_shared<const RaggedCase>(
          make_ragged_case(r.distribution, inner, sizeof(float), scaled_bytes(64 * kMiB), r.mean)));
      bf16_shapes.push_back(std::make_shared<const RaggedCase>(
          make_ragged_case(r.distribution, inner, sizeof(__nv_bfloat16), scaled_bytes(64 * kMiB), r.mean)));
    }
  std::vector<SegCase> cases;
  for (const SegOp op : ops)
    for (const auto& shape : shapes) cases.push_back(SegCase{shape, op, false});
  // The short rows (uniform in 0..16): where CUB compares (D = 1, float; has_cub).
  const auto short_rows = std::make_shared<const RaggedCase>(
      make_ragged_case(LengthDistribution::kUniform, 1, sizeof(float), scaled_bytes(64 * kMiB), 8));
  for (const SegOp op : {SegOp::kSum, SegOp::kMax, SegOp::kArgMax}) cases.push_back(SegCase{short_rows, op, false});
  for (const SegOp op : bf16_ops)
    for (const auto& shape : bf16_shapes) cases.push_back(SegCase{shape, op, true});
  return cases;
}

std::string case_name(const SegCase& s, const char* impl) {
  return std::string(seg_op_name(s.op)) + "/" + impl + "/" + s.shape().name() + (s.bf16 ? "/dtype:bf16" : "");
}

// Baselines where they exist: CUB has sum, max and argmax over contiguous segments (D = 1); a padded pipeline
// has the forward ops.
bool has_cub(const SegCase& s) {
  return !s.bf16 && s.shape().inner == 1 && (s.op == SegOp::kSum || s.op == SegOp::kMax || s.op == SegOp::kArgMax);
}
bool has_padded(const SegCase& s) {
  if (s.bf16) return false;
  // The padded layout of the one-huge-row case is batch x the ragged one; skip it where that exceeds 4 GiB.
  const double padded_bytes = static_cast<double>(s.shape().padded_slots() * s.shape().inner) * sizeof(float);
  return (s.op == SegOp::kSum || s.op == SegOp::kMax || is_softmax(s.op)) && padded_bytes < 4.0 * 1024 * kMiB;
}

// The sub-warp row floor: sum and softmax on the tiny rows (uniform lengths of 0 to 4 tokens) where D is past a
// lane-per-row tiny row (D > 32) and its 16-byte vectors divide a warp. Not on longer rows: one sub-warp walks a
// whole row there (a power-law row of 4096 tokens at D = 64 is 1024 dependent groups of loads).
bool has_subwarp_floor(const SegCase& s) {
  const RaggedCase& c = s.shape();
  const bool tiny = c.distribution == LengthDistribution::kUniform && c.mean <= 4;
  return (s.op == SegOp::kSum || s.op == SegOp::kSoftmax) && tiny && c.inner > 32 &&
         subwarp_floor_fits(c.inner, s.elem_size());
}

// The warp row floor: sum, max and softmax at D = 1 on rows of a few hundred tokens (uniform and power-law lengths
// at a mean of 256), where ragged takes them a warp each in its row pass (warp rows, up to 512 tokens) and
// streams the longer ones (segment_reduce.cuh stream_rows). Not on the tiny rows (a warp for 0
// to 4 tokens) or the one huge row (one warp's serial walk of 64 MiB).
bool has_warp_floor(const SegCase& s) {
  const RaggedCase& c = s.shape();
  const bool rows_of_hundreds = (c.distribution == LengthDistribution::kUniform && c.mean > 16) ||
                                c.distribution == LengthDistribution::kPowerLaw;
  return (s.op == SegOp::kSum || s.op == SegOp::kMax || s.op == SegOp::kSoftmax) && c.inner == 1 && rows_of_hundreds;
}

// device_reduce's small case: a row of 16 KiB.
constexpr std::int64_t kDeviceReduceFixedFloats = 4096;

// Who sums a device_reduce row.
enum class Reducer {
  kRagged,          // segment_reduce over a batch of one row
  kCub,             // cub::DeviceReduce::Sum
  kOneKernelFloor,  // bench/reduce_chain_floor.h, kernels:1
  kTwoKernelFloor,  // kernels:2
};

const char* reducer_impl(Reducer r) {
  switch (r) {
    case Reducer::kRagged: return "ragged";
    case Reducer::kCub: return "cub";
    default: return "floor";
  }
}

// One device_reduce problem: `count` floats in one row, its output and its workspace.
struct DeviceReduceProblem {
  DeviceBuffer<float> values;
  std::vector<std::int32_t> row;
  DeviceBuffer<std::int32_t> offsets;
  DeviceBuffer<float> out;
  Reducer reducer;
  std::size_t ws_bytes = 0;
  std::unique_ptr<DeviceBuffer<unsigned char>> ws;

  DeviceReduceProblem(std::int64_t count, Reducer by, unsigned seed, cudaStream_t stream)
      : values(static_cast<std::size_t>(count), stream),
        row{0, static_cast<std::int32_t>(count)},
        offsets(row, stream),
        out(1, stream),
        reducer(by) {
    fill_uniform(values, 1.0f, seed, stream);
  }

  Status launch(void* d_ws, std::size_t& bytes, cudaStream_t stream) {
    const auto count = static_cast<std::int64_t>(values.size());
    switch (reducer) {
      case Reducer::kRagged: {
        const RaggedView<const float, std::int32_t> view{values.data(), offsets.data(), 1, count, 1};
        return segment_reduce(d_ws, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, stream);
      }
      case Reducer::kCub:
        return from_cuda(cub::DeviceReduce::Sum(d_ws, bytes, values.data(), out.data(), count, stream),
                         "cub::DeviceReduce");
      default:
        if (d_ws == nullptr) {
          bytes = sizeof(std::int64_t);  // the length the chain's first kernel hands on
          return Status::kSuccess;
        }
        return launch_reduce_chain_floor(values.data(), offsets.data(), static_cast<std::int64_t*>(d_ws),
                                         out.data(), reducer == Reducer::kOneKernelFloor ? 1 : 2, stream);
    }
  }

  // The workspace query and allocation.
  Status prepare(cudaStream_t stream) {
    const Status status = launch(nullptr, ws_bytes, stream);
    if (status != Status::kSuccess) return status;
    ws = std::make_unique<DeviceBuffer<unsigned char>>(ws_bytes > 0 ? ws_bytes : 1, stream);
    return Status::kSuccess;
  }

  Status run(cudaStream_t stream) { return launch(ws->data(), ws_bytes, stream); }
};

// device_reduce (see the top of the file). `warm_code`: after each flush the same op runs untimed on a second
// problem of the same size (other buffers), so the timed one starts with its kernels' code in L2 and its data
// cold; against the plain row, what the flush's eviction of the code costs.
void bench_device_reduce(benchmark::State& state, std::int64_t count, Reducer by, L2Flush flush, bool warm_code) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    DeviceReduceProblem timed(count, by, 12345u, stream);
    if (!ok_or_skip(state, timed.prepare(stream), "workspace query")) return;
    std::unique_ptr<DeviceReduceProblem> primer;
    if (warm_code) {
      primer = std::make_unique<DeviceReduceProblem>(count, by, 54321u, stream);
      if (!ok_or_skip(state, primer->prepare(stream), "workspace query (primer)")) return;
    }
    auto prime = [&](cudaStream_t st) { return primer ? primer->run(st) : Status::kSuccess; };
    time_on_gpu_primed(state, [&](cudaStream_t st) { return timed.run(st); }, prime, flush);
    const double bytes = static_cast<double>(timed.values.bytes() + timed.offsets.bytes() + timed.out.bytes());
    set_gpu_traffic(state, bytes, bytes + static_cast<double>(timed.ws_bytes));
    if (!verify_results() || state.error_occurred()) return;
    const std::vector<float> x = timed.values.to_host();
    std::vector<float> want(1);
    reference::segment_reduce(RaggedView<const float, std::int32_t>{x.data(), timed.row.data(), 1, count, 1},
                              ReduceOp::kSum, want.data(), nullptr, 0.0f);
    check_against_reference(state, as_doubles(timed.out.to_host()), as_doubles(want), verify_tolerance<float>(),
                            by == Reducer::kCub ? "cub::DeviceReduce::Sum" : reducer_impl(by));
  });
}

void register_device_reduce() {
  const auto count = static_cast<std::int64_t>(scaled_bytes(64 * kMiB) / sizeof(float));
  auto add = [](std::int64_t floats, Reducer by, L2Flush flush, bool warm_code, const std::string& suffix = "") {
    const std::string name = std::string("device_reduce/") + reducer_impl(by) + "/floats:" +
                             std::to_string(floats) + "/flush:" + l2_flush_name(flush) +
                             (warm_code ? "/code:warm" : "") + suffix;
    register_gpu_benchmark(name,
                           [=](benchmark::State& st) { bench_device_reduce(st, floats, by, flush, warm_code); });
  };
  for (const L2Flush flush : {L2Flush::kClean, L2Flush::kDirty})
    for (const Reducer by : {Reducer::kRagged, Reducer::kCub}) add(count, by, flush, false);
  // 4096 floats: the time of each pipeline with next to nothing to read, its launches and fixed steps (ragged:
  // the row pass, then the unit kernel with its merge). The 64 MiB rows less this, against the bytes, is what
  // the streaming itself reaches.
  for (const Reducer by : {Reducer::kRagged, Reducer::kCub}) add(kDeviceReduceFixedFloats, by, L2Flush::kClean, false);
  // Both sizes again with the code warm (bench_device_reduce): ragged's kernels hold far more code than CUB's
  // (sm_90 cubin, float sum: unit and stream kernels 88-102 KB, row pass 69 KB; design.md, "Code size"), which
  // the flush evicts from L2.
  for (const std::int64_t floats : {count, kDeviceReduceFixedFloats})
    for (const Reducer by : {Reducer::kRagged, Reducer::kCub}) add(floats, by, L2Flush::kClean, true);
  // The small row's floors (bench/reduce_chain_floor.h): one launch that reads and sums it, and ragged's chain of
  // two launches around the same sum. Against ragged's row, what its kernels add to the launches.
  add(kDeviceReduceFixedFloats, Reducer::kOneKernelFloor, L2Flush::kClean, false, "/kernels:1");
  add(kDeviceReduceFixedFloats, Reducer::kTwoKernelFloor, L2Flush::kClean, false, "/kernels:2");
}

void register_segment_gpu() {
  register_device_reduce();
  for (const SegCase& s : segment_cases()) {
    const auto shared = std::make_shared<const SegCase>(s);
    register_gpu_benchmark(case_name(s, "ragged"), [shared](benchmark::State& st) { bench_ragged(st, *shared); });
    if (has_cub(s))
      register_gpu_benchmark(case_name(s, "cub"), [shared](benchmark::State& st) { bench_cub(st, *shared); });
    if (has_padded(s))
      register_gpu_benchmark(case_name(s, "padded"), [shared](benchmark::State& st) { bench_padded(st, *shared); });
    if (has_subwarp_floor(s))
      register_gpu_benchmark(case_name(s, "floor") + "/kind:subwarp",
                             [shared](benchmark::State& st) { bench_subwarp_floor(st, *shared); });
    if (has_warp_floor(s))
      register_gpu_benchmark(case_name(s, "floor") + "/kind:warp",
                             [shared](benchmark::State& st) { bench_warp_floor(st, *shared); });
  }
}

}  // namespace

RAGGED_BENCH_SUITE(segment_gpu, Needs::kGpu, register_segment_gpu);

}  // namespace bench
}  // namespace ragged
