// GPU benchmarks of the packed LSTM and GRU forward (issue 4): one unidirectional layer, input size = hidden size,
// batches of 16 and 64 sequences with mean length 128 drawn from the shared length distributions (clamped to
// 4 x the mean), hidden 256 / 1024 (full run: also 512, float as well as bfloat16, every distribution); and
// hidden 2048 at batch 16, lognormal, bfloat16, whose weights do not fit on chip: the streamed persistent
// kernel's default (and the shape PyTorch times there, scripts/torch_rnn.py). Those cases have no resident
// persistent grid, so no barrier / exchange floors. kAuto steps at hidden 256 (kAutoPerStepMaxHidden) and runs
// a persistent kernel above it.
//
// Implementations (the names pair up across impl):
//   ragged  rnn_forward on the ragged batch: every step covers only the sequences still running
//   padded  what a user without packing runs: the same layer over the padded batch [batch, max_len, input],
//           i.e. rnn_forward with every length = max_len (same kernels, same path choice)
//   ragged/<case>/algo:per_step|persistent  the ragged run with the path kAuto does not take forced: per-step
//           where kAuto runs a persistent kernel, the resident persistent kernel where it steps (hidden <= 256,
//           kAutoPerStepMaxHidden), to check that choice on the GPU
//   floor/<case>/kind:barrier|exchange  the persistent kernel's step floors over its grid for the case, max_len
//           steps (bench/rnn_step_floor.h): what its us_per_step is measured against
//   ragged/<case>/algo:per_step/launch:ordinary  the per-step path (forced at H >= 1024, where kAuto runs a
//           persistent kernel) with ordinary launches, where the plain runs launch each step as a programmatic
//           dependent of the one before (kernels/grid_dependency.cuh): what that overlap buys
//   ragged/<case>/stages:2  where the weights are resident (H = 1024), the persistent kernel staging h through two
//           buffers, where the plain runs take as many as a pass has k chunks, up to four (plan_resident_layout,
//           kernels/rnn_geometry.h; the counter stages says how many): what the deeper staging buys
//   ragged/<case>/kept:none|spare  where the weights stream (H = 2048), the persistent kernel keeping none of its
//           gate rows' chunks in shared memory, or those its three stage buffers leave room for, where the plain
//           runs keep the most (RnnKeptChunks, kernels/rnn_geometry.h; the counter kept_chunks says how many):
//           what the kept chunks buy, and which policy buys more
//   ragged|padded/<case>/cublas_ws:4MiB  both runs with 4 MiB of ragged's workspace for cuBLAS (the plain ones
//           give it none, the default): what that buys the projection GEMM in time against what it costs in peak
//           memory, a fixed cost that weighs on the peak-memory target in small cases
// Both time the whole call (packing order, input projection, recurrence). Counters: tokens, padded_tokens,
// real_frac = tokens / padded tokens (the issue's target: ragged time <= 1.15 x real_frac x padded time),
// steps (the longest length), us_per_step (time / steps), algo (1 per-step, 2 persistent, 3 persistent streamed),
// kept_chunks (the streamed persistent kernel's chunks kept in shared memory, of k_chunks), stages (the persistent
// kernels' buffers per staged operand), TFLOP/s of the real
// tokens' work and peak_frac (over the bf16 GEMM rate measured in the run; bench/common/compute_peak.h), and
// peak_bytes = input + output + final states + workspace (the weights, the same for both, are left out; their
// bytes are the weights_bytes counter, so the report can also give the ratio with them in).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/compute_peak.h"
#include "bench/common/distributions.h"
#include "bench/common/rnn_lengths.h"
#include "bench/common/device_data.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "bench/common/verify.h"
#include "bench/rnn_step_floor.h"
#include "kernels/dependent_launch.h"
#include "kernels/rnn_launch.h"
#include "ragged/buffer.h"
#include "ragged/reference_rnn.h"
#include "ragged/rnn.h"

namespace ragged {
namespace bench {
namespace {

enum class RnnImpl { kRagged, kPadded };
enum class Launches { kDependent, kOrdinary };

struct RnnCase {
  RnnMode mode;
  LengthDistribution distribution;
  std::int64_t batch, hidden, mean;
  bool bf16;
  std::vector<std::int64_t> lengths;
  std::int64_t tokens = 0, max_len = 0;

  std::string name(const char* impl) const {
    return std::string(mode == RnnMode::kLstm ? "rnn_lstm/" : "rnn_gru/") + impl + "/" +
           distribution_name(distribution) + "/dtype:" + (bf16 ? "bf16" : "f32") + "/batch:" + std::to_string(batch) +
           "/hidden:" + std::to_string(hidden) + "/mean:" + std::to_string(mean);
  }
};

RnnCase make_case(RnnMode mode, LengthDistribution distribution, std::int64_t batch, std::int64_t hidden,
                  std::int64_t mean, bool bf16) {
  RnnCase c{mode, distribution, batch, hidden, mean, bf16, {}, 0, 0};
  c.lengths = rnn_case_lengths(distribution, batch, mean);
  for (const std::int64_t l : c.lengths) {
    c.tokens += l;
    c.max_len = std::max(c.max_len, l);
  }
  return c;
}

// RAGGED_BENCH_VERIFY (bench/common/verify.h): the output and the final h against ragged's CPU reference of the
// same layer on the same input (the padded run's own: every sequence max_len long).
template <typename T>
void verify_rnn(benchmark::State& state, const RnnArgs<T, std::int32_t>& args, const std::vector<std::int32_t>& offsets,
                const DeviceBuffer<T>& w_ih, const DeviceBuffer<T>& w_hh, const DeviceBuffer<T>& b_ih,
                const DeviceBuffer<T>& b_hh, const DeviceBuffer<T>& input, const DeviceBuffer<T>& output,
                const DeviceBuffer<T>& hn) {
  const std::vector<T> host_w_ih = w_ih.to_host(), host_w_hh = w_hh.to_host(), host_b_ih = b_ih.to_host(),
                       host_b_hh = b_hh.to_host(), x = input.to_host();
  const RnnLayerWeights<T> weights{host_w_ih.data(), host_w_hh.data(), host_b_ih.data(), host_b_hh.data(), nullptr};
  const RaggedView<const T, std::int32_t> view{x.data(), offsets.data(), args.input.batch, args.input.nnz,
                                               args.input.inner};
  std::vector<T> want(output.size()), want_hn(hn.size()), want_cn(args.cn != nullptr ? hn.size() : 0);
  reference::rnn_forward(args.desc, &weights, view, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                         want.data(), want_hn.data(), args.cn != nullptr ? want_cn.data() : nullptr,
                         reference::RnnPrecision::kExact, args.max_steps);
  check_against_reference(state, as_doubles(output.to_host()), as_doubles(want), verify_tolerance<T>(), "output");
  if (!state.error_occurred())
    check_against_reference(state, as_doubles(hn.to_host()), as_doubles(want_hn), verify_tolerance<T>(), "hn");
}

template <typename T>
void bench_rnn(benchmark::State& state, const RnnCase& c, RnnImpl impl, RnnAlgo requested,
               std::size_t cublas_workspace_bytes, RnnProjection projection, Launches launches,
               detail::RnnKeptChunks kept, int resident_stages) {
  // kOrdinary: ordinary launches for this benchmark; kDependent keeps the process's setting. `kept`,
  // `resident_stages`: the process's settings unless the row names others.
  const detail::DependentLaunchScope launch_setting(launches == Launches::kDependent &&
                                                    detail::dependent_launch_enabled());
  const detail::RnnKeptChunksScope kept_setting(kept);
  const detail::RnnResidentStagesScope stages_setting(resident_stages);
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    CublasHandle cublas;
    RnnDesc desc;
    desc.mode = c.mode;
    desc.input_size = c.hidden;
    desc.hidden_size = c.hidden;
    const std::int64_t H = c.hidden, G = rnn_gate_count(c.mode);
    // PyTorch's initialisation range.
    const float scale = 1.0f / std::sqrt(static_cast<float>(H));
    DeviceBuffer<T> w_ih(static_cast<std::size_t>(G * H * H), stream),
        w_hh(static_cast<std::size_t>(G * H * H), stream);
    DeviceBuffer<T> b_ih(static_cast<std::size_t>(G * H), stream), b_hh(static_cast<std::size_t>(G * H), stream);
    fill_uniform(w_ih, scale, 1u, stream);
    fill_uniform(w_hh, scale, 2u, stream);
    fill_uniform(b_ih, scale, 3u, stream);
    fill_uniform(b_hh, scale, 4u, stream);
    const RnnLayerWeights<T> weights{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), nullptr};

    // The padded user runs every sequence for max_len steps.
    std::vector<std::int32_t> offsets(c.lengths.size() + 1, 0);
    for (std::size_t b = 0; b < c.lengths.size(); ++b)
      offsets[b + 1] = offsets[b] + static_cast<std::int32_t>(impl == RnnImpl::kRagged ? c.lengths[b] : c.max_len);
    const std::int64_t rows = offsets.back();
    DeviceBuffer<std::int32_t> d_offsets(offsets, stream);
    DeviceBuffer<T> input(static_cast<std::size_t>(rows * H), stream),
        output(static_cast<std::size_t>(rows * H), stream);
    const bool lstm = c.mode == RnnMode::kLstm;
    DeviceBuffer<T> hn(static_cast<std::size_t>(c.batch * H), stream);
    DeviceBuffer<T> cn(static_cast<std::size_t>(lstm ? c.batch * H : 0), stream);
    fill_uniform(input, 1.0f, 5u, stream);

    RnnArgs<T, std::int32_t> args;
    args.desc = desc;
    args.weights = &weights;
    args.input = RaggedView<const T, std::int32_t>{input.data(), d_offsets.data(), c.batch, rows, H};
    args.max_steps = c.max_len;
    args.output = output.data();
    args.hn = hn.data();
    args.cn = lstm ? cn.data() : nullptr;
    args.cublas = cublas.get();
    args.algo = requested;
    args.cublas_workspace_bytes = cublas_workspace_bytes;
    args.projection = projection;
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, rnn_forward(nullptr, ws_bytes, args, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    RnnAlgo algo = RnnAlgo::kAuto;
    if (!ok_or_skip(state, rnn_select_algo<T>(desc, requested, algo), "rnn_select_algo")) return;
    time_on_gpu(state, [&](cudaStream_t st) { return rnn_forward(ws.data(), ws_bytes, args, st); });
    // Floor bytes: the input read once and the output written once (the recurrence is latency-bound).
    set_gpu_traffic(state, static_cast<double>(input.bytes() + output.bytes()),
                    static_cast<double>(input.bytes() + output.bytes() + hn.bytes() + cn.bytes() + d_offsets.bytes() +
                                        ws_bytes));
    state.counters["tokens"] = static_cast<double>(c.tokens);
    state.counters["weights_bytes"] = static_cast<double>(w_ih.bytes() + w_hh.bytes() + b_ih.bytes() + b_hh.bytes());
    state.counters["padded_tokens"] = static_cast<double>(c.batch * c.max_len);
    state.counters["real_frac"] = c.max_len == 0 ? 1.0 : static_cast<double>(c.tokens) / (c.batch * c.max_len);
    state.counters["steps"] = static_cast<double>(c.max_len);
    state.counters["algo"] = static_cast<double>(static_cast<int>(algo));
    if (algo == RnnAlgo::kPersistent || algo == RnnAlgo::kPersistentStreamed) {
      RnnAlgo path = RnnAlgo::kAuto;
      detail::RnnPersistentPlan plan;
      if (!ok_or_skip(state, detail::plan_rnn_path<T>(c.mode, H, H, 0, 1, requested, path, plan), "plan_rnn_path"))
        return;
      state.counters["stages"] = plan.stages;
      state.counters["k_chunks"] = detail::rnn_k_chunks(detail::make_rnn_gemm_geometry(16, H, sizeof(T)));
      if (algo == RnnAlgo::kPersistentStreamed) state.counters["kept_chunks"] = plan.kept_chunks;
    }
    // Real work only (the padded run's extra tokens do not count): input projection and recurrent product,
    // 2 * tokens * gates * H * (input + H).
    set_gpu_flops(state, 2.0 * static_cast<double>(c.tokens) * static_cast<double>(G * H) * static_cast<double>(2 * H));
    // Time per step of the recurrence (iteration time / steps; the projection GEMM is included).
    if (c.max_len > 0)
      state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(c.max_len) * 1e-6,
                                                          benchmark::Counter::kIsIterationInvariantRate |
                                                              benchmark::Counter::kInvert);
    if (verify_results() && !state.error_occurred())
      verify_rnn(state, args, offsets, w_ih, w_hh, b_ih, b_hh, input, output, hn);
  });
}

// Beyond what the persistent kernel keeps on chip (about 1024 bfloat16 units on an H100): its weights stream.
constexpr std::int64_t kStreamedHidden = 2048;

std::vector<RnnCase> rnn_cases() {
  const bool full = full_run();
  const std::vector<LengthDistribution> distributions =
      full ? synthetic_distributions()
           : std::vector<LengthDistribution>{LengthDistribution::kUniform, LengthDistribution::kLognormal,
                                             LengthDistribution::kBimodal};
  const std::vector<std::int64_t> hiddens = full ? std::vector<std::int64_t>{256, 512, 1024}
                                                 : std::vector<std::int64_t>{256, 1024};
  const std::int64_t mean = scaled_length(128, 2);
  std::vector<RnnCase> cases;
  for (const RnnMode mode : {RnnMode::kLstm, RnnMode::kGru})
    for (const bool bf16 : full ? std::vector<bool>{true, false} : std::vector<bool>{true})
      for (const LengthDistribution distribution : distributions)
        for (const std::int64_t batch : {16, 64})
          for (const std::int64_t hidden : hiddens)
            cases.push_back(make_case(mode, distribution, batch, hidden, mean, bf16));
  for (const RnnMode mode : {RnnMode::kLstm, RnnMode::kGru})
    cases.push_back(make_case(mode, LengthDistribution::kLognormal, 16, kStreamedHidden, mean, true));
  return cases;
}

void register_rnn_gpu() {
  const std::size_t default_cublas_ws = RnnArgs<float, std::int32_t>{}.cublas_workspace_bytes;
  constexpr std::size_t kRoomyCublasWs = std::size_t{4} << 20;
  for (const RnnCase& c : rnn_cases()) {
    const auto shared = std::make_shared<const RnnCase>(c);
    const detail::RnnKeptChunks process_kept = detail::rnn_kept_chunks();
    const auto add = [&](const std::string& name, RnnImpl impl, RnnAlgo algo, std::size_t cublas_ws,
                         RnnProjection projection = RnnProjection::kCublas, Launches launches = Launches::kDependent,
                         detail::RnnKeptChunks kept = detail::rnn_kept_chunks(),
                         int stages = detail::rnn_resident_stages()) {
      register_gpu_benchmark(name, [shared, impl, algo, cublas_ws, projection, launches, kept,
                                    stages](benchmark::State& st) {
        if (shared->bf16) bench_rnn<bfloat16>(st, *shared, impl, algo, cublas_ws, projection, launches, kept, stages);
        else bench_rnn<float>(st, *shared, impl, algo, cublas_ws, projection, launches, kept, stages);
      });
    };
    const bool streamed = c.hidden >= kStreamedHidden;
    add(c.name("ragged"), RnnImpl::kRagged, RnnAlgo::kAuto, default_cublas_ws);
    add(c.name("padded"), RnnImpl::kPadded, RnnAlgo::kAuto, default_cublas_ws);
    // The path kAuto does not take, forced, to check its choice against it: the per-step path where kAuto runs a
    // persistent kernel, the resident persistent kernel where kAuto steps (hidden <= kAutoPerStepMaxHidden); at
    // H >= 1024 the per-step path with ordinary launches too (its plain runs launch each step as a programmatic
    // dependent).
    if (c.hidden <= detail::kAutoPerStepMaxHidden)
      add(c.name("ragged") + "/algo:persistent", RnnImpl::kRagged, RnnAlgo::kPersistent, default_cublas_ws);
    else
      add(c.name("ragged") + "/algo:per_step", RnnImpl::kRagged, RnnAlgo::kPerStep, default_cublas_ws);
    if (c.hidden >= 1024)
      add(c.name("ragged") + "/algo:per_step/launch:ordinary", RnnImpl::kRagged, RnnAlgo::kPerStep,
          default_cublas_ws, RnnProjection::kCublas, Launches::kOrdinary);
    // Where the weights stay on chip by default, what streaming them every step would cost instead (all of them:
    // the kept chunks would keep most).
    if (c.hidden == 1024)
      add(c.name("ragged") + "/algo:persistent_streamed", RnnImpl::kRagged, RnnAlgo::kPersistentStreamed,
          default_cublas_ws, RnnProjection::kCublas, Launches::kDependent, detail::RnnKeptChunks::kNone);
    // Where they stay on chip, the resident kernel staging h through two buffers, the depth before 2026-11-30,
    // against the plain run's (as many as a pass has k chunks, up to four, unless RAGGED_RNN_RESIDENT_STAGES
    // says otherwise).
    if (c.hidden == 1024 && detail::rnn_resident_stages() != detail::kRnnResidentStages)
      add(c.name("ragged") + "/stages:2", RnnImpl::kRagged, RnnAlgo::kAuto, default_cublas_ws,
          RnnProjection::kCublas, Launches::kDependent, process_kept, detail::kRnnResidentStages);
    // Where they stream by default: the streamed kernel keeping none of its chunks, and those three buffers leave
    // room for, against the plain run's policy (the most, unless RAGGED_RNN_KEPT_CHUNKS says otherwise).
    if (streamed)
      for (const auto& [suffix, policy] : {std::make_pair("none", detail::RnnKeptChunks::kNone),
                                           std::make_pair("spare", detail::RnnKeptChunks::kSpare)})
        if (policy != process_kept)
          add(c.name("ragged") + "/kept:" + suffix, RnnImpl::kRagged, RnnAlgo::kAuto, default_cublas_ws,
              RnnProjection::kCublas, Launches::kDependent, policy);
    // 4 MiB of cuBLAS workspace, both sides, so the targets can be judged as they would be with that default.
    add(c.name("ragged") + "/cublas_ws:4MiB", RnnImpl::kRagged, RnnAlgo::kAuto, kRoomyCublasWs);
    add(c.name("padded") + "/cublas_ws:4MiB", RnnImpl::kPadded, RnnAlgo::kAuto, kRoomyCublasWs);
    // ragged's own projection GEMM (bit-for-bit batch invariance): what it costs against cuBLAS's.
    add(c.name("ragged") + "/proj:invariant", RnnImpl::kRagged, RnnAlgo::kAuto, default_cublas_ws,
        RnnProjection::kBatchInvariant);
    // What any persistent step over the resident kernel's grid pays (bench/rnn_step_floor.h).
    const RnnStepFloorCase floor_case{c.mode, c.bf16, c.batch, c.hidden, c.max_len};
    if (!streamed)
      register_rnn_step_floor(c.name("floor") + "/kind:barrier", c.name("floor") + "/kind:exchange", floor_case);
    // Where the weights stream (by default or in the /algo:persistent_streamed run): what moving them costs.
    if (c.hidden >= 1024) register_rnn_weights_floor(c.name("floor") + "/kind:weights", floor_case);
  }
}

}  // namespace

RAGGED_BENCH_SUITE(rnn_gpu, Needs::kGpu, register_rnn_gpu);

}  // namespace bench
}  // namespace ragged
