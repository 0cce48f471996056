// rnn_forward (packed LSTM / GRU) against the CPU reference: LSTM and GRU, 1 to 3 layers, one or two
// directions, proj_size, every dtype, int32 and int64 offsets, every length regime (unsorted lengths,
// zero-length sequences, batch of 1, one long sequence among short ones), both recurrent paths forced, hidden
// sizes that need several blocks, k chunks and batch chunks; batch invariance (within float ulps with the cuBLAS
// projection, bit for bit with RnnProjection::kBatchInvariant, which is also checked against the reference), graph
// capture, truncation by max_steps, every array off 16-byte alignment, a short workspace and malformed offsets
// (the other argument errors: tests/cpu/test_argument_checks.cpp).
//
// Tolerance (FlashAttention's rule): the device error against the exact reference (double) may be at most twice
// the error of a plain same-precision computation (reference kStorage: float accumulation, h rounded to T each
// step), plus a few ulps of T at the tensor's magnitude.
//
// The two [matrix] test cases hold most of the runs; under compute-sanitizer, "~[matrix]" keeps a quick subset.
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/host_ragged.h"
#include "common/test_util.h"
#include "gpu/dependent_launch.h"
#include "gpu/restore_setting.h"
#include "../../kernels/rnn_launch.h"  // the persistent kernel's kept chunks
#include "common/tolerance.h"
#include "ragged/dynamic.h"
#include "ragged/reference.h"
#include "ragged/rnn.h"
#include "ragged/rnn_module.h"
#include "ragged/tensor.h"

using namespace ragged;

namespace {

struct CublasHandle {
  cublasHandle_t handle = nullptr;
  CublasHandle() { REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS); }
  ~CublasHandle() { cublasDestroy(handle); }
};

// For a persistent case whose plan does not fit: only a small device may say so (fewer than 100 SMs or under
// 200 KB of shared memory a block, as the emulated 20-SM and 99 KB runs); on an H100-class one the case must run.
void require_small_device() {
  int device = 0, sms = 0, optin = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  REQUIRE((sms < 100 || optin < 200 * 1024));
}

RnnDesc make_desc(RnnMode mode, std::int64_t input, std::int64_t hidden, std::int64_t proj, std::int64_t layers,
                  bool bidirectional) {
  RnnDesc desc;
  desc.mode = mode;
  desc.input_size = input;
  desc.hidden_size = hidden;
  desc.proj_size = proj;
  desc.num_layers = layers;
  desc.bidirectional = bidirectional;
  return desc;
}

std::string describe(const RnnDesc& d) {
  return std::string(rnn_mode_name(d.mode)) + " in=" + std::to_string(d.input_size) + " H=" +
         std::to_string(d.hidden_size) + " P=" + std::to_string(d.proj_size) + " layers=" +
         std::to_string(d.num_layers) + (d.bidirectional ? " bidirectional" : " unidirectional");
}

// Random values scaled by `scale` (never zero), rounded to T.
template <typename T>
std::vector<T> scaled_values(std::int64_t count, double scale, std::mt19937_64& rng) {
  std::vector<double> raw = test::random_values<double>(static_cast<std::size_t>(count), rng);
  std::vector<T> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = test::from_double<T>(raw[i] * scale);
  return out;
}

// Parameters on the host and on the device; matrices scaled by 1 / sqrt(width) like PyTorch's initialisation.
// shift: each device tensor starts that many elements into its allocation (a GuardedBuffer's guard), so that a shift
// of 1 leaves every weight off 16-byte alignment.
template <typename T>
struct Model {
  RnnDesc desc;
  std::vector<std::vector<T>> host;
  std::vector<test::GuardedBuffer<T>> device;
  std::vector<RnnLayerWeights<T>> host_weights, device_weights;

  Model(const RnnDesc& d, std::mt19937_64& rng, std::int64_t shift = 0) : desc(d) {
    const std::int64_t dirs = rnn_directions(d), G = rnn_gate_count(d.mode), H = d.hidden_size;
    const std::int64_t S = rnn_state_size(d), P = d.mode == RnnMode::kLstm ? d.proj_size : 0;
    for (std::int64_t l = 0; l < d.num_layers; ++l)
      for (std::int64_t dir = 0; dir < dirs; ++dir) {
        const std::int64_t in = rnn_layer_input_size(d, l);
        host.push_back(scaled_values<T>(G * H * in, 1.0 / std::sqrt(static_cast<double>(in)), rng));
        host.push_back(scaled_values<T>(G * H * S, 1.0 / std::sqrt(static_cast<double>(S)), rng));
        host.push_back(scaled_values<T>(G * H, 0.5, rng));
        host.push_back(scaled_values<T>(G * H, 0.5, rng));
        host.push_back(P > 0 ? scaled_values<T>(P * H, 1.0 / std::sqrt(static_cast<double>(H)), rng)
                             : std::vector<T>{});
      }
    for (const auto& tensor : host) device.emplace_back(tensor, static_cast<std::size_t>(shift));
    auto ptr_or_null = [](const T* p, std::size_t n) { return n > 0 ? p : nullptr; };
    for (std::size_t i = 0; i < host.size(); i += 5) {
      host_weights.push_back(RnnLayerWeights<T>{host[i].data(), host[i + 1].data(), host[i + 2].data(),
                                                host[i + 3].data(),
                                                ptr_or_null(host[i + 4].data(), host[i + 4].size())});
      device_weights.push_back(RnnLayerWeights<T>{device[i].data(), device[i + 1].data(), device[i + 2].data(),
                                                  device[i + 3].data(),
                                                  ptr_or_null(device[i + 4].data(), device[i + 4].size())});
    }
  }
};

template <typename T, typename OffsetT>
struct Inputs {
  test::HostRagged<T, OffsetT> x;
  std::vector<T> h0, c0;
  std::int64_t longest = 0;
};

template <typename T, typename OffsetT>
Inputs<T, OffsetT> make_inputs(const RnnDesc& desc, const std::vector<std::int64_t>& lengths, std::mt19937_64& rng) {
  Inputs<T, OffsetT> in;
  in.x = test::random_ragged<T, OffsetT>(lengths, desc.input_size, rng);
  const std::int64_t slots = desc.num_layers * rnn_directions(desc), B = in.x.batch;
  in.h0 = scaled_values<T>(slots * B * rnn_state_size(desc), 0.5, rng);
  in.c0 = scaled_values<T>(slots * B * desc.hidden_size, 0.5, rng);
  for (std::int64_t l : lengths) in.longest = std::max(in.longest, l);
  return in;
}

// Every recurrent path, for the tests that run each one forced.
const std::vector<RnnAlgo> kAllPaths = {RnnAlgo::kPerStep, RnnAlgo::kPersistent, RnnAlgo::kPersistentStreamed};

struct Options {
  RnnAlgo algo = RnnAlgo::kAuto;
  bool initial = true;        // pass h0 / c0 (else zeros)
  std::int64_t max_steps = -1;  // -1: the longest length
  bool dynamic = false;         // through dynamic::rnn_forward (run-time dtype) instead of the typed op
  std::size_t cublas_workspace_bytes = RnnArgs<float, std::int32_t>{}.cublas_workspace_bytes;
  RnnProjection projection = RnnProjection::kCublas;
  std::int64_t shift = 0;  // run_device: every input and output that many elements into its allocation
  bool query_only = false;  // run_device: only ask for the workspace size (Outputs::workspace_bytes)
};

template <typename T>
struct Outputs {
  std::vector<T> output, hn, cn;
  CheckResult check;
  std::size_t workspace_bytes = 0;  // what the query asked for
};

// Buffer: DeviceBuffer<T> or test::GuardedBuffer<T>.
template <typename T, typename OffsetT, typename Buffer>
RnnArgs<T, OffsetT> make_args(const Model<T>& model, const Buffer& x, const DeviceBuffer<OffsetT>& offsets,
                              const Inputs<T, OffsetT>& in, const Buffer& h0, const Buffer& c0, Buffer& out,
                              Buffer& hn, Buffer& cn, const Options& o, cublasHandle_t handle, CheckResult* check) {
  const bool lstm = model.desc.mode == RnnMode::kLstm;
  RnnArgs<T, OffsetT> args;
  args.desc = model.desc;
  args.weights = model.device_weights.data();
  args.input = RaggedView<const T, OffsetT>{x.data(), offsets.data(), in.x.batch, in.x.nnz, in.x.inner};
  args.max_steps = o.max_steps >= 0 ? o.max_steps : in.longest;
  args.h0 = o.initial ? h0.data() : nullptr;
  args.c0 = o.initial && lstm ? c0.data() : nullptr;
  args.output = out.data();
  args.hn = hn.data();
  args.cn = lstm ? cn.data() : nullptr;
  args.cublas = handle;
  args.algo = o.algo;
  args.cublas_workspace_bytes = o.cublas_workspace_bytes;
  args.projection = o.projection;
  args.check = check;
  return args;
}

// Runs rnn_forward with exactly the queried workspace (after checking that one byte less is refused), every
// output poisoned first.
template <typename T, typename OffsetT>
Outputs<T> run_device(const Model<T>& model, const Inputs<T, OffsetT>& in, const Options& o, cublasHandle_t handle) {
  const RnnDesc& d = model.desc;
  const std::int64_t dirs = rnn_directions(d), S = rnn_state_size(d), B = in.x.batch;
  const std::int64_t slots = d.num_layers * dirs;
  const auto shift = static_cast<std::size_t>(o.shift);
  using Buffer = test::GuardedBuffer<T>;
  Buffer x(in.x.values, shift), h0(in.h0, shift), c0(in.c0, shift);
  DeviceBuffer<OffsetT> offsets(in.x.offsets);
  Buffer out(static_cast<std::size_t>(in.x.nnz * dirs * S), shift);  // poisoned, as are hn and cn
  Buffer hn(static_cast<std::size_t>(slots * B * S), shift);
  Buffer cn(static_cast<std::size_t>(slots * B * d.hidden_size), shift);
  DeviceBuffer<CheckResult> check(1);
  check.fill_bytes(0);  // "failure at 0": a missing reset shows
  const RnnArgs<T, OffsetT> args = make_args(model, x, offsets, in, h0, c0, out, hn, cn, o, handle, check.data());

  // The same arguments described at run time, for Options::dynamic.
  std::vector<RnnLayerWeights<void>> untyped_weights;
  for (const RnnLayerWeights<T>& w : model.device_weights)
    untyped_weights.push_back(RnnLayerWeights<void>{w.w_ih, w.w_hh, w.b_ih, w.b_hh, w.w_hr});
  dynamic::RnnForwardDesc untyped;
  untyped.dtype = dtype_of_v<T>;
  untyped.desc = args.desc;
  untyped.weights = untyped_weights.data();
  untyped.input = dynamic::RaggedDesc{dtype_of_v<T>, dtype_of_v<OffsetT>, args.input.values, args.input.offsets,
                                      args.input.batch, args.input.nnz, args.input.inner};
  untyped.max_steps = args.max_steps;
  untyped.h0 = args.h0;
  untyped.c0 = args.c0;
  untyped.output = args.output;
  untyped.hn = args.hn;
  untyped.cn = args.cn;
  untyped.cublas = args.cublas;
  untyped.projection = args.projection;
  untyped.algo = args.algo;
  untyped.cublas_workspace_bytes = args.cublas_workspace_bytes;
  untyped.check = args.check;
  auto forward = [&](void* workspace, std::size_t& bytes) {
    return o.dynamic ? dynamic::rnn_forward(workspace, bytes, untyped, nullptr)
                     : rnn_forward<T, OffsetT>(workspace, bytes, args, nullptr);
  };

  std::size_t bytes = 0;
  REQUIRE_OK(forward(nullptr, bytes));
  Outputs<T> result;
  result.workspace_bytes = bytes;
  if (o.query_only) return result;
  DeviceBuffer<unsigned char> workspace(bytes + 1);
  test::poison_workspace(workspace);
  if (bytes > 0) {
    std::size_t short_bytes = bytes - 1;
    REQUIRE(forward(workspace.data(), short_bytes) == Status::kWorkspaceTooSmall);
  }
  REQUIRE_OK(forward(workspace.data(), bytes));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  if (shift > 0) REQUIRE((out.guards_intact() && hn.guards_intact() && cn.guards_intact()));
  result.output = out.to_host();
  result.hn = hn.to_host();
  if (d.mode == RnnMode::kLstm) result.cn = cn.to_host();
  result.check = check.to_host()[0];
  return result;
}

template <typename T, typename OffsetT>
Outputs<T> run_reference(const Model<T>& model, const Inputs<T, OffsetT>& in, const Options& o,
                         reference::RnnPrecision precision) {
  const RnnDesc& d = model.desc;
  const std::int64_t dirs = rnn_directions(d), S = rnn_state_size(d), B = in.x.batch;
  const std::int64_t slots = d.num_layers * dirs;
  const bool lstm = d.mode == RnnMode::kLstm;
  Outputs<T> r;
  r.output.assign(static_cast<std::size_t>(in.x.nnz * dirs * S), test::from_double<T>(0.0));
  r.hn.assign(static_cast<std::size_t>(slots * B * S), test::from_double<T>(0.0));
  if (lstm) r.cn.assign(static_cast<std::size_t>(slots * B * d.hidden_size), test::from_double<T>(0.0));
  reference::rnn_forward<T, OffsetT>(d, model.host_weights.data(), in.x.view(), o.initial ? in.h0.data() : nullptr,
                                     o.initial && lstm ? in.c0.data() : nullptr, r.output.data(), r.hn.data(),
                                     lstm ? r.cn.data() : nullptr, precision, o.max_steps);
  return r;
}

// got within 2 x (naive error) + a few ulps of T at the tensor's magnitude of the exact values
// (test::compare_within_naive_budget).
template <typename T>
void require_within_budget(const std::vector<T>& got, const std::vector<T>& exact, const std::vector<T>& naive,
                           const char* what) {
  const std::string failure = test::compare_within_naive_budget(got, exact, naive);
  INFO(what << ": " << failure);
  REQUIRE(failure.empty());
}

// Runs the device op and both references and compares output, hn and cn.
template <typename T, typename OffsetT>
void check_against_reference(const Model<T>& model, const Inputs<T, OffsetT>& in, const Options& o,
                             cublasHandle_t handle) {
  INFO(describe(model.desc) << ", algo " << rnn_algo_name(o.algo) << ", projection "
                            << rnn_projection_name(o.projection) << ", batch " << in.x.batch << ", nnz "
                            << in.x.nnz << ", longest " << in.longest);
  const Outputs<T> got = run_device(model, in, o, handle);
  const Outputs<T> exact = run_reference(model, in, o, reference::RnnPrecision::kExact);
  const Outputs<T> naive = run_reference(model, in, o, reference::RnnPrecision::kStorage);
  REQUIRE(got.check.ok());
  require_within_budget(got.output, exact.output, naive.output, "output");
  require_within_budget(got.hn, exact.hn, naive.hn, "hn");
  if (model.desc.mode == RnnMode::kLstm) require_within_budget(got.cn, exact.cn, naive.cn, "cn");
}

// `count` lengths drawn uniformly from 0..max_length.
std::vector<std::int64_t> uniform_lengths(std::int64_t count, std::int64_t max_length, std::mt19937_64& rng) {
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(count));
  std::uniform_int_distribution<std::int64_t> len(0, max_length);
  for (auto& l : lengths) l = len(rng);
  return lengths;
}

// The persistent kernel's kept-chunk policy and cap (kernels/rnn_launch.h), as they were when a test began.
using RestoreKeptChunks =
    test::RestoreSetting<detail::RnnKeptChunks, detail::rnn_kept_chunks, detail::set_rnn_kept_chunks>;
using RestoreKeptChunkCap = test::RestoreSetting<int, detail::rnn_kept_chunk_cap, detail::set_rnn_kept_chunk_cap>;
// The resident persistent kernel's most stage buffers (kernels/rnn_launch.h), as it was when a test began.
using RestoreResidentStages =
    test::RestoreSetting<int, detail::rnn_resident_stages, detail::set_rnn_resident_stages>;

// The k chunks of a block's gate rows in a layer of `desc` (rnn_geometry.h): the recurrent product's k is the
// state size, whatever the units per block.
int gate_k_chunks(const RnnDesc& desc, std::size_t elem_bytes) {
  const std::int64_t state = desc.proj_size > 0 ? desc.proj_size : desc.hidden_size;
  return detail::rnn_k_chunks(detail::make_rnn_gemm_geometry(16, state, static_cast<int>(elem_bytes)));
}

// A fresh model of `desc` against the reference on `lengths` (int32 offsets, initial states), on path `algo`.
template <typename T>
void check_path(const RnnDesc& desc, const std::vector<std::int64_t>& lengths, RnnAlgo algo, std::mt19937_64& rng,
                cublasHandle_t handle) {
  Model<T> model(desc, rng);
  Options o;
  o.algo = algo;
  check_against_reference(model, make_inputs<T, std::int32_t>(desc, lengths, rng), o, handle);
}

}  // namespace

TEMPLATE_TEST_CASE("rnn_forward matches the reference across modes, layers, directions and paths", "[rnn][matrix]",
                   float, half, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(100);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const std::int64_t layers = GENERATE(1, 2, 3);
  const bool bidirectional = GENERATE(false, true);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  // 24 units move as 16-byte vectors; 37 takes the element-wise path and leaves a partial unit slice.
  const std::int64_t hidden = layers == 2 ? 37 : 24;
  const RnnDesc desc = make_desc(mode, 10, hidden, 0, layers, bidirectional);
  Model<T> model(desc, rng);
  const auto inputs = make_inputs<T, std::int32_t>(desc, test::make_lengths(test::Regime::kRandom, rng, 12), rng);
  Options o;
  o.algo = algo;
  check_against_reference(model, inputs, o, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward LSTM with proj_size matches the reference", "[rnn]", float, half, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(200);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const std::int64_t proj = GENERATE(16, 7);  // vector and element-wise paths
  const RnnDesc desc = make_desc(RnnMode::kLstm, 12, 40, proj, 2, true);
  Model<TestType> model(desc, rng);
  const auto inputs = make_inputs<T, std::int64_t>(desc, {5, 0, 9, 2, 9, 1, 0, 4}, rng);
  Options o;
  o.algo = algo;
  check_against_reference(model, inputs, o, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward with every array off 16-byte alignment matches the reference", "[rnn]", float,
                   bfloat16) {
  // Input 16, hidden 24 and proj_size 8 give rows of whole 16-byte vectors, which the kernels move as vectors
  // where the array is 16-byte aligned (rnn_common.cuh's vector flags, the batch-invariant projection's tiles);
  // here every weight, the input, the initial states and every output start one element into their allocations,
  // so each path must take its element-wise copies (a vector access off alignment faults on the GPU and in the
  // emulator), with both projections. The outputs' guards must stay poisoned.
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(250);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const RnnProjection projection = GENERATE(RnnProjection::kCublas, RnnProjection::kBatchInvariant);
  const RnnDesc desc = make_desc(mode, 16, 24, mode == RnnMode::kLstm ? 8 : 0, 2, true);
  Model<T> model(desc, rng, 1);
  Options o;
  o.algo = algo;
  o.projection = projection;
  o.shift = 1;
  check_against_reference(model, make_inputs<T, std::int32_t>(desc, {5, 0, 9, 2, 9, 1, 0, 4}, rng), o, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward across length regimes and offset types", "[rnn][matrix]", float, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(300);
  const test::Regime regime = GENERATE(from_range(test::all_regimes()));
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  INFO("regime " << test::regime_name(regime));
  const RnnDesc desc = make_desc(mode, 8, 32, 0, 2, true);
  Model<T> model(desc, rng);
  const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng, 4);
  Options o;
  SECTION("int32 offsets, automatic path") {
    check_against_reference(model, make_inputs<T, std::int32_t>(desc, lengths, rng), o, cublas.handle);
  }
  SECTION("int64 offsets, per-step path, loose max_steps") {
    o.algo = RnnAlgo::kPerStep;
    auto inputs = make_inputs<T, std::int64_t>(desc, lengths, rng);
    o.max_steps = inputs.longest + 3;  // the extra steps find no active sequence
    check_against_reference(model, inputs, o, cublas.handle);
  }
  SECTION("int64 offsets, persistent path, no initial state") {
    o.algo = RnnAlgo::kPersistent;
    o.initial = false;
    check_against_reference(model, make_inputs<T, std::int64_t>(desc, lengths, rng), o, cublas.handle);
  }
}

TEMPLATE_TEST_CASE("rnn_forward with one long sequence among short ones, and a batch of one", "[rnn]", float, half) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(400);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const std::vector<std::int64_t> lengths = GENERATE(std::vector<std::int64_t>{3, 2, 150, 1, 4, 0, 2},
                                                     std::vector<std::int64_t>{33});
  check_path<T>(make_desc(mode, 16, 48, 0, 1, true), lengths, algo, rng, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward with hidden sizes that need several blocks, k chunks and batch chunks "
                   "(bidirectional)", "[rnn]", float, half) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(500);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  // Every path; the persistent kernel with streamed weights also keeping none of its chunks (by default it keeps
  // all of them on 132 SMs, and one or none with two buffers on 20 or 19, where a block has 27 to 32 units), so
  // that the bidirectional grid and the half rows staged element by element stream every chunk there too.
  const auto [algo, kept] = GENERATE(table<RnnAlgo, detail::RnnKeptChunks>(
      {{RnnAlgo::kPerStep, detail::RnnKeptChunks::kMost},
       {RnnAlgo::kPersistent, detail::RnnKeptChunks::kMost},
       {RnnAlgo::kPersistentStreamed, detail::RnnKeptChunks::kMost},
       {RnnAlgo::kPersistentStreamed, detail::RnnKeptChunks::kNone}}));
  const RestoreKeptChunks restore;
  detail::set_rnn_kept_chunks(kept);
  // Staged in chunks of 512 bytes of a row (256 half or 128 float columns), two or three buffers deep. H = 300: 304
  // padded columns, rows of 600 bytes in half (element-wise staging) and 1200 in float (cp.async); H = 264:
  // 272 columns, 16-byte rows in both, a last chunk of one k-step.
  const std::int64_t hidden = GENERATE(300, 264);
  // Batch chunks of 32 rows are one or two m16 tiles. Random: 70 sequences of 0..6 tokens (three chunks at the
  // first step, the last of 6 rows). Boundaries, in shuffled order: 49, 33, 17, 16 and 1 sequences active at
  // steps 0..4, so chunks of 17 rows (one row in the second tile), 16 (one full tile) and 1.
  const bool boundaries = GENERATE(false, true);
  std::vector<std::int64_t> lengths;
  if (boundaries) {
    const std::int64_t count_of_length[] = {0, 16, 16, 1, 15, 1};  // sequences of 1..5 tokens
    for (std::int64_t l = 1; l <= 5; ++l) lengths.insert(lengths.end(), count_of_length[l], l);
    std::shuffle(lengths.begin(), lengths.end(), rng);
  } else {
    lengths = uniform_lengths(70, 6, rng);
  }
  check_path<T>(make_desc(mode, 20, hidden, 0, 1, true), lengths, algo, rng, cublas.handle);
}

TEST_CASE("rnn_forward with more than 8 hidden units per block (a thread's second held item)", "[rnn]") {
  using T = half;
  CublasHandle cublas;
  auto rng = test::make_rng(550);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  // A block's first batch chunk has 32 x units epilogue items and a thread holds up to two of them from one step
  // to the next (rnn_common.cuh); the other tests' shapes give at most 8 units (256 items), so only the first.
  // Bidirectional H = 600: 1200 units over the SMs, 9 to 12 units per block on GPUs of 100 to 149 SMs, with
  // both paths. 40 sequences of 0..4 tokens: two chunks at the first steps, the second of the items not held.
  check_path<T>(make_desc(mode, 20, 600, 0, 1, true), uniform_lengths(40, 4, rng), algo, rng, cublas.handle);
}

TEST_CASE("rnn_forward with streamed weights streams more k chunks than it has buffers", "[rnn]") {
  using T = float;
  CublasHandle cublas;
  auto rng = test::make_rng(575);
  // The per-step kernels and the persistent kernel with streamed weights stream a block's weight rows through
  // shared memory in chunks of 512 bytes of a row, kRnnStreamedStages buffers deep (kRnnResidentStages where
  // shared memory is short: tests/emu/run.sh runs this as on a 99 KB device too). Float H = 520 is 5 chunks, so
  // every buffer is refilled. LSTM with proj_size 24 streams W_hr (k = H) the same way in the projection phase
  // (the persistent kernel through the gate rows' buffers), and its gates only one chunk (k = 24). The persistent
  // kernel keeps none of its chunks here (RnnKeptChunks::kNone), else it would keep all five on an H100-class
  // device and stream none; the next test keeps some.
  const RestoreKeptChunks restore;
  detail::set_rnn_kept_chunks(detail::RnnKeptChunks::kNone);
  const int shape = GENERATE(0, 1, 2);
  const RnnAlgo algo = GENERATE(RnnAlgo::kPerStep, RnnAlgo::kPersistentStreamed);
  const RnnMode mode = shape == 1 ? RnnMode::kGru : RnnMode::kLstm;
  const RnnDesc desc = make_desc(mode, 20, 520, shape == 2 ? 24 : 0, 1, false);
  RnnAlgo chosen = RnnAlgo::kAuto;
  const Status path = rnn_select_algo<T>(desc, algo, chosen);
  if (algo == RnnAlgo::kPersistentStreamed && path == Status::kUnsupportedShape) {
    // A small device (the emulated 99 KB run on 20 SMs: 26 units and 104 float gate rows a block) holds no such
    // grid; an H100-class one always does.
    require_small_device();
    WARN("the persistent kernel with streamed weights cannot run this shape on this device: not run");
    return;
  }
  REQUIRE_OK(path);
  // 40 sequences of 0..5 tokens: two batch chunks at the first steps.
  check_path<T>(desc, uniform_lengths(40, 5, rng), algo, rng, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward with streamed weights: the chunks the persistent kernel keeps change no bit",
                   "[rnn]", float, bfloat16) {
  // The persistent kernel with streamed weights keeps the first k chunks of its gate rows in the shared memory its
  // stage buffers leave (rnn_geometry.h, RnnKeptChunks) and streams the others; the chunks are added in the same
  // order either way. H = 520: 5 chunks of 128 float columns, 3 of 256 bfloat16 ones (the last of 16). On a
  // 132-SM H100-class device a block has 4 units (16 gate rows), three buffers and room to keep every chunk:
  // kept all, some (the cap: 1, then in float more streamed chunks than buffers; 2) and none, against the
  // reference and bitwise against none. tests/emu/run.sh also runs it on 20 SMs (26 units, 104 LSTM gate rows):
  // two buffers and one chunk kept, the layout H = 2048 takes on an H100 / H200. LSTM with proj_size 24 streams
  // W_hr (k = H) through the same buffers and keeps its gates' one chunk (k = 24).
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(580);
  const RestoreKeptChunks restore;
  const RestoreKeptChunkCap restore_cap;
  const auto shape = GENERATE(table<RnnMode, std::int64_t>({{RnnMode::kLstm, 0}, {RnnMode::kGru, 0},
                                                             {RnnMode::kLstm, 24}}));  // (mode, proj_size)
  const RnnDesc desc = make_desc(std::get<0>(shape), 20, 520, std::get<1>(shape), 1, false);
  INFO(describe(desc));
  const int chunks = gate_k_chunks(desc, sizeof(T));
  Model<T> model(desc, rng);
  const auto in = make_inputs<T, std::int32_t>(desc, uniform_lengths(40, 5, rng), rng);
  Options o;
  o.algo = RnnAlgo::kPersistentStreamed;

  // The plan's kept chunks under a policy and a cap; -1 where the kernel cannot run (a small device).
  const auto kept_by_plan = [&](detail::RnnKeptChunks policy, int cap) {
    detail::set_rnn_kept_chunks(policy);
    detail::set_rnn_kept_chunk_cap(cap);
    RnnAlgo path = RnnAlgo::kAuto;
    detail::RnnPersistentPlan plan;
    const std::int64_t state = desc.proj_size > 0 ? desc.proj_size : desc.hidden_size;
    REQUIRE_OK(detail::plan_rnn_path<T>(desc.mode, desc.hidden_size, state, desc.proj_size, 1,
                                        RnnAlgo::kPersistentStreamed, path, plan));
    return plan.fits ? plan.kept_chunks : -1;
  };
  if (kept_by_plan(detail::RnnKeptChunks::kMost, std::numeric_limits<int>::max()) < 0) {
    require_small_device();  // a planner regression must not pass as "not run" on an H100-class device
    WARN("the persistent kernel with streamed weights cannot run this shape on this device: not run");
    return;
  }
  REQUIRE(kept_by_plan(detail::RnnKeptChunks::kNone, std::numeric_limits<int>::max()) == 0);
  const Outputs<T> none = run_device(model, in, o, cublas.handle);
  check_against_reference(model, in, o, cublas.handle);

  struct Setting {
    detail::RnnKeptChunks policy;
    int cap;
  };
  for (const Setting setting : {Setting{detail::RnnKeptChunks::kMost, std::numeric_limits<int>::max()},
                                Setting{detail::RnnKeptChunks::kSpare, 1}, Setting{detail::RnnKeptChunks::kMost, 2}}) {
    const int kept = kept_by_plan(setting.policy, setting.cap);
    INFO("policy " << static_cast<int>(setting.policy) << ", cap " << setting.cap << ": " << kept << " of "
                   << chunks << " chunks kept");
    // An H100-class device keeps them all uncapped; any device keeps some where it runs the shape at all.
    REQUIRE(kept >= 1);
    REQUIRE(kept <= std::min(setting.cap, chunks));
    const Outputs<T> got = run_device(model, in, o, cublas.handle);
    REQUIRE(got.check.ok());
    REQUIRE_BITWISE_EQUAL(got.output, none.output);
    REQUIRE_BITWISE_EQUAL(got.hn, none.hn);
    REQUIRE_BITWISE_EQUAL(got.cn, none.cn);
  }
}

TEMPLATE_TEST_CASE("rnn_forward with resident weights: the depth h is staged at changes no bit", "[rnn]", float,
                   bfloat16) {
  // The persistent kernel with resident weights stages h through one buffer per k chunk of a pass, up to four
  // (rnn_geometry.h plan_resident_layout), or two; the chunks are multiplied in the same order either way, and the
  // plan keeps the units per block (so the splits) of the two-buffer layout. H = 520: 5 chunks of 128 float columns
  // (four buffers), 3 of 256 bfloat16 ones (three). LSTM with proj_size 24: the gates have one chunk (k = 24) and the
  // projection W_hr's (k = H) sets the depth. Bidirectional, a GRU of H = 300 and an LSTM of H = 292 (3 float chunks,
  // 2 bfloat16): tests/emu/run.sh runs this on 19 and on 65 SMs too, where shared memory decides blocks per SM (two
  // of up to 113 KB) and the plan moves to a count of fewer blocks; on 65 SMs the float LSTM's count of 9 units fits
  // two blocks per SM with two buffers and not with three, so the plan keeps two there rather than take 10 units
  // (another split of the k-steps). 40 sequences of 0..5 tokens: two batch chunks at the first steps, so each pass
  // also begins the second chunk's product during the first one's epilogue. Two, three and four buffers at most,
  // against the reference and bitwise against two.
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(585);
  const RestoreResidentStages restore;
  const auto shape = GENERATE(table<RnnMode, std::int64_t, std::int64_t, bool>(
      {{RnnMode::kLstm, 520, 0, false}, {RnnMode::kGru, 520, 0, false}, {RnnMode::kLstm, 520, 24, false},
       {RnnMode::kGru, 300, 0, true}, {RnnMode::kLstm, 292, 0, true}}));  // (mode, hidden, proj_size, bidirectional)
  const RnnDesc desc = make_desc(std::get<0>(shape), 20, std::get<1>(shape), std::get<2>(shape), 1, std::get<3>(shape));
  INFO(describe(desc));
  const int chunks = detail::rnn_k_chunks(detail::make_rnn_gemm_geometry(16, desc.hidden_size, sizeof(T)));
  Model<T> model(desc, rng);
  const auto in = make_inputs<T, std::int32_t>(desc, uniform_lengths(40, 5, rng), rng);
  Options o;
  o.algo = RnnAlgo::kPersistent;

  // The plan under a cap (fits false where the kernel cannot run: weights too large for a small device).
  const auto plan_with = [&](int cap) {
    detail::set_rnn_resident_stages(cap);
    RnnAlgo path = RnnAlgo::kAuto;
    detail::RnnPersistentPlan plan;
    const std::int64_t state = desc.proj_size > 0 ? desc.proj_size : desc.hidden_size;
    const Status s = detail::plan_rnn_path<T>(desc.mode, desc.hidden_size, state, desc.proj_size,
                                              rnn_directions(desc), RnnAlgo::kPersistent, path, plan);
    if (s != Status::kUnsupportedShape) REQUIRE_OK(s);
    return plan;
  };
  if (!plan_with(detail::kRnnResidentMaxStages).fits) {
    require_small_device();
    WARN("the persistent kernel with resident weights cannot run this shape on this device: not run");
    return;
  }
  const detail::RnnPersistentPlan two_plan = plan_with(2);
  REQUIRE(two_plan.fits);
  REQUIRE(two_plan.stages == 2);
  const Outputs<T> two = run_device(model, in, o, cublas.handle);
  check_against_reference(model, in, o, cublas.handle);
  int device = 0, sms = 0, optin = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  bool deeper = false;
  int last_run_stages = two_plan.stages;
  for (const int cap : {3, detail::kRnnResidentMaxStages}) {
    const detail::RnnPersistentPlan plan = plan_with(cap);
    INFO("at most " << cap << " buffers: " << plan.stages << " for " << chunks << " chunks, " << plan.units
                    << " units a block (" << two_plan.units << " with two), " << sms << " SMs, opt-in " << optin
                    << " bytes");
    REQUIRE(plan.fits);
    REQUIRE(plan.units == two_plan.units);
    REQUIRE(plan.stages >= 2);
    REQUIRE(plan.stages <= std::min(cap, chunks));
    // An H100-class device (227 KB, 132 SMs: 4 or 5 units a block) holds a buffer per chunk beside these weights
    // (at most about 35 KB of them); on fewer SMs a block holds more units, and the weights leave room for fewer.
    if (sms >= 100 && optin >= 200 * 1024) REQUIRE(plan.stages == std::min(cap, chunks));
    deeper = deeper || plan.stages > 2;
    // A cap that plans the depth already run (bfloat16 at H = 300 / 292 has 2 chunks; 3 chunks under a cap of 4)
    // launches the same kernel with the same plan: running it again would compare a setting with itself.
    if (plan.stages == last_run_stages) continue;
    last_run_stages = plan.stages;
    const Outputs<T> got = run_device(model, in, o, cublas.handle);
    REQUIRE(got.check.ok());
    REQUIRE_BITWISE_EQUAL(got.output, two.output);
    REQUIRE_BITWISE_EQUAL(got.hn, two.hn);
    REQUIRE_BITWISE_EQUAL(got.cn, two.cn);
  }
  if (!deeper && chunks > 2)
    WARN("no staging deeper than two buffers fits this shape on this device: one depth compared");
}

TEMPLATE_TEST_CASE("rnn_forward without biases matches the reference", "[rnn]", float, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(450);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  RnnDesc desc = make_desc(mode, 9, 32, 0, 2, true);
  desc.bias = false;
  Model<T> model(desc, rng);
  // Biases are not read: null them so that reading one would fault.
  for (auto& w : model.device_weights) w.b_ih = w.b_hh = nullptr;
  Options o;
  o.algo = algo;
  check_against_reference(model, make_inputs<T, std::int32_t>(desc, {5, 0, 8, 2, 8}, rng), o, cublas.handle);
}

TEMPLATE_TEST_CASE("rnn_forward with a cuBLAS workspace matches the reference and needs that much more", "[rnn]",
                   float, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(470);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  // A projection GEMM of a few hundred rows, so that cuBLAS has a real choice of kernels.
  const RnnDesc desc = make_desc(mode, 96, 64, 0, 2, false);
  Model<T> model(desc, rng);
  const auto inputs = make_inputs<T, std::int32_t>(desc, {70, 0, 33, 128, 1, 90}, rng);
  Options roomy;
  roomy.algo = algo;
  roomy.cublas_workspace_bytes = std::size_t{4} << 20;
  check_against_reference(model, inputs, roomy, cublas.handle);
  Options standard;
  standard.algo = algo;
  REQUIRE(standard.cublas_workspace_bytes == 0);  // the default gives cuBLAS none
  // The sizes need only the queries: two more runs made the case 339 s on the emulator (132 SMs), not 73.
  roomy.query_only = standard.query_only = true;
  const std::size_t with_room = run_device(model, inputs, roomy, cublas.handle).workspace_bytes;
  const std::size_t by_default = run_device(model, inputs, standard, cublas.handle).workspace_bytes;
  REQUIRE(with_room - by_default == roomy.cublas_workspace_bytes);
}

namespace {

// Sequence b of `batch` (its tokens and initial states) as a batch of one.
template <typename T>
Inputs<T, std::int32_t> alone_inputs(const RnnDesc& desc, const Inputs<T, std::int32_t>& batch, std::int64_t b,
                                     std::mt19937_64& rng) {
  const std::int64_t S = rnn_state_size(desc), H = desc.hidden_size, B = batch.x.batch;
  const std::int64_t slots = desc.num_layers * rnn_directions(desc), length = batch.x.length(b);
  Inputs<T, std::int32_t> alone;
  alone.x = test::random_ragged<T, std::int32_t>({length}, desc.input_size, rng);
  std::copy(batch.x.values.begin() + batch.x.begin(b) * desc.input_size,
            batch.x.values.begin() + (batch.x.begin(b) + length) * desc.input_size, alone.x.values.begin());
  for (std::int64_t s = 0; s < slots; ++s) {
    alone.h0.insert(alone.h0.end(), batch.h0.begin() + (s * B + b) * S, batch.h0.begin() + (s * B + b + 1) * S);
    alone.c0.insert(alone.c0.end(), batch.c0.begin() + (s * B + b) * H, batch.c0.begin() + (s * B + b + 1) * H);
  }
  alone.longest = length;
  return alone;
}

// Sequence b's part of a batch's results (its output rows, and its hn / cn of every layer and direction), laid
// out as a run of the sequence alone gives them.
template <typename T>
Outputs<T> sequence_of(const RnnDesc& desc, const Outputs<T>& together, const Inputs<T, std::int32_t>& batch,
                       std::int64_t b) {
  const std::int64_t dirs = rnn_directions(desc), S = rnn_state_size(desc), H = desc.hidden_size;
  const std::int64_t B = batch.x.batch, slots = desc.num_layers * dirs;
  Outputs<T> r;
  r.output.assign(together.output.begin() + batch.x.begin(b) * dirs * S,
                  together.output.begin() + (batch.x.begin(b) + batch.x.length(b)) * dirs * S);
  for (std::int64_t s = 0; s < slots; ++s) {
    r.hn.insert(r.hn.end(), together.hn.begin() + (s * B + b) * S, together.hn.begin() + (s * B + b + 1) * S);
    if (desc.mode == RnnMode::kLstm)
      r.cn.insert(r.cn.end(), together.cn.begin() + (s * B + b) * H, together.cn.begin() + (s * B + b + 1) * H);
  }
  return r;
}

}  // namespace

TEMPLATE_TEST_CASE("rnn_forward sets aside the cuBLAS workspace only for the cuBLAS projection", "[rnn]", float,
                   bfloat16) {
  using T = TestType;
  auto rng = test::make_rng(640);
  const RnnDesc desc = make_desc(RnnMode::kGru, 24, 32, 0, 2, true);
  Model<T> model(desc, rng);
  const auto in = make_inputs<T, std::int32_t>(desc, {9, 0, 4, 12}, rng);
  DeviceBuffer<T> x(in.x.values), h0(in.h0), c0(in.c0), out(static_cast<std::size_t>(in.x.nnz * 2 * 32));
  DeviceBuffer<T> hn(in.h0.size()), cn(1);
  DeviceBuffer<std::int32_t> offsets(in.x.offsets);
  Options o;
  RnnArgs<T, std::int32_t> args =
      make_args(model, x, offsets, in, h0, c0, out, hn, cn, o, nullptr, static_cast<CheckResult*>(nullptr));
  auto bytes_of = [&](RnnProjection projection, std::size_t cublas_bytes) {
    args.projection = projection;
    args.cublas_workspace_bytes = cublas_bytes;
    args.cublas = reinterpret_cast<cublasHandle_t>(&args);  // the query checks it is set, never uses it
    std::size_t bytes = 0;
    REQUIRE_OK((rnn_forward<T, std::int32_t>(nullptr, bytes, args, nullptr)));
    return bytes;
  };
  constexpr std::size_t kRoom = std::size_t{4} << 20;
  const std::size_t cublas_none = bytes_of(RnnProjection::kCublas, 0);
  REQUIRE(bytes_of(RnnProjection::kCublas, kRoom) == cublas_none + kRoom);
  REQUIRE(bytes_of(RnnProjection::kBatchInvariant, 0) == cublas_none);
  REQUIRE(bytes_of(RnnProjection::kBatchInvariant, kRoom) == cublas_none);
  REQUIRE(std::string(rnn_projection_name(RnnProjection::kCublas)) == "cublas");
  REQUIRE(std::string(rnn_projection_name(RnnProjection::kBatchInvariant)) == "invariant");
}

TEST_CASE("rnn_forward: a sequence's results do not depend on the rest of the batch", "[rnn]") {
  CublasHandle cublas;
  auto rng = test::make_rng(600);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const RnnDesc desc = make_desc(mode, 12, 64, 0, 2, true);
  Model<float> model(desc, rng);
  const std::vector<std::int64_t> lengths = {7, 0, 19, 3, 11, 19, 1, 40, 5};
  const auto batch = make_inputs<float, std::int32_t>(desc, lengths, rng);
  Options o;
  o.algo = algo;
  const Outputs<float> together = run_device(model, batch, o, cublas.handle);
  for (std::int64_t b : {std::int64_t{2}, std::int64_t{3}, std::int64_t{7}}) {
    INFO("sequence " << b << " alone, algo " << rnn_algo_name(algo));
    const Outputs<float> solo = run_device(model, alone_inputs(desc, batch, b, rng), o, cublas.handle);
    const Outputs<float> in_batch = sequence_of(desc, together, batch, b);
    // The recurrence is batch-invariant bit for bit; the cuBLAS input projection may pick another kernel for
    // another row count, so allow a few float ulps.
    auto require_close = [](const std::vector<float>& alone, const std::vector<float>& with_others) {
      REQUIRE(alone.size() == with_others.size());
      for (std::size_t i = 0; i < alone.size(); ++i)
        REQUIRE(std::abs(alone[i] - with_others[i]) <= 2e-6 * (1.0 + std::abs(with_others[i])));
    };
    require_close(solo.output, in_batch.output);
    require_close(solo.hn, in_batch.hn);
    require_close(solo.cn, in_batch.cn);
  }
}

TEST_CASE("rnn_forward on the per-step path: dependent launches give the ordinary launches' bits", "[rnn]") {
  // Every step after a layer's first is launched as a programmatic dependent of the one before and reads its
  // input projections before waiting for it (kernels/grid_dependency.cuh); with ordinary launches the same
  // kernels run one after another, so any difference is a read that did not wait.
  CublasHandle cublas;
  auto rng = test::make_rng(641);
  const auto shape = GENERATE(table<RnnMode, std::int64_t>(
      {{RnnMode::kLstm, 0}, {RnnMode::kLstm, 24}, {RnnMode::kGru, 0}}));  // (mode, proj_size)
  const RnnDesc desc = make_desc(std::get<0>(shape), 40, 72, std::get<1>(shape), 2, true);
  INFO(describe(desc));
  Model<bfloat16> model(desc, rng);
  const auto batch = make_inputs<bfloat16, std::int32_t>(desc, {30, 0, 7, 64, 1, 19, 64, 3}, rng);
  Options o;
  o.algo = RnnAlgo::kPerStep;
  const auto [dependent, ordinary] =
      test::dependent_and_ordinary([&] { return run_device(model, batch, o, cublas.handle); });
  REQUIRE_BITWISE_EQUAL(dependent.output, ordinary.output);
  REQUIRE_BITWISE_EQUAL(dependent.hn, ordinary.hn);
  REQUIRE_BITWISE_EQUAL(dependent.cn, ordinary.cn);
}

TEST_CASE("rnn_forward with grids of one and three blocks gives the full grid's bits", "[rnn]") {
  // The layer's bookkeeping kernels (the packing order, the slot table, h0 / c0 into slots, hn / cn out of
  // them) walk their items grid-stride, a full grid in one round here; capped at 1 or 3 blocks (set_grid_cap)
  // each thread takes many: 300 sequences and 280 steps pass one block's 256 threads, and the states (2
  // directions x 300 slots x 40) three blocks'. The recurrent paths' own grids are not capped, and every path
  // runs the same bookkeeping launches: the per-step one here (the persistent one takes minutes to emulate 280
  // steps on 132 SMs). LSTM with proj_size (h narrower than c) and GRU.
  CublasHandle cublas;
  auto rng = test::make_rng(642);
  const auto shape = GENERATE(table<RnnMode, std::int64_t>({{RnnMode::kLstm, 24}, {RnnMode::kGru, 0}}));
  const RnnAlgo algo = RnnAlgo::kPerStep;
  const RnnDesc desc = make_desc(std::get<0>(shape), 12, 40, std::get<1>(shape), 1, true);
  INFO(describe(desc));
  Model<float> model(desc, rng);
  std::vector<std::int64_t> lengths = uniform_lengths(300, 6, rng);
  lengths[137] = 280;
  const auto batch = make_inputs<float, std::int32_t>(desc, lengths, rng);
  Options o;
  o.algo = algo;
  const Outputs<float> full = run_device(model, batch, o, cublas.handle);
  REQUIRE(full.check.ok());
  const test::RestoreGridCap restore;
  for (unsigned cap : {1u, 3u}) {
    INFO("grid of at most " << cap << " blocks");
    detail::set_grid_cap(cap);
    const Outputs<float> capped = run_device(model, batch, o, cublas.handle);
    REQUIRE(capped.check.ok());
    REQUIRE_BITWISE_EQUAL(capped.output, full.output);
    REQUIRE_BITWISE_EQUAL(capped.hn, full.hn);
    REQUIRE_BITWISE_EQUAL(capped.cn, full.cn);
  }
}

TEMPLATE_TEST_CASE("rnn_forward with the batch-invariant projection: a sequence's results are bit for bit those "
                   "it gets alone",
                   "[rnn]", float, half, bfloat16) {
  using T = TestType;
  auto rng = test::make_rng(650);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const RnnDesc desc = make_desc(mode, 12, 64, 0, 2, true);
  Model<T> model(desc, rng);
  // 362 tokens, three 128-row tiles of the projection GEMM: sequences 9 (rows 105-194) and 10 (195-258) straddle
  // tile boundaries in the batch and start a tile at row 0 alone; sequence 2 shares its tile with other rows.
  const std::vector<std::int64_t> lengths = {7, 0, 19, 3, 11, 19, 1, 40, 5, 90, 64, 33, 70};
  const auto batch = make_inputs<T, std::int32_t>(desc, lengths, rng);
  Options o;
  o.algo = algo;
  o.projection = RnnProjection::kBatchInvariant;
  // No cuBLAS handle: this projection does not use one.
  const Outputs<T> together = run_device(model, batch, o, nullptr);
  for (std::int64_t b : {std::int64_t{2}, std::int64_t{9}, std::int64_t{10}}) {
    INFO("sequence " << b << " alone, " << rnn_mode_name(mode) << ", algo " << rnn_algo_name(algo));
    const Outputs<T> solo = run_device(model, alone_inputs(desc, batch, b, rng), o, nullptr);
    const Outputs<T> in_batch = sequence_of(desc, together, batch, b);
    REQUIRE_BITWISE_EQUAL(solo.output, in_batch.output);
    REQUIRE_BITWISE_EQUAL(solo.hn, in_batch.hn);
    REQUIRE_BITWISE_EQUAL(solo.cn, in_batch.cn);
  }
}

TEMPLATE_TEST_CASE("rnn_forward with the batch-invariant projection matches the reference", "[rnn]", float, half,
                   bfloat16) {
  using T = TestType;
  auto rng = test::make_rng(660);
  const RnnMode mode = GENERATE(RnnMode::kLstm, RnnMode::kGru);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  // (input size, hidden size), two bidirectional layers, so the GEMM sees k = input and then 2 x hidden:
  //   10 x 37: rows of 20 / 40 bytes (element-wise staging in every type, also in layer 1: k = 74); the GRU's
  //            reverse direction writes its 111 columns from an address that is not 8-byte aligned;
  //   64 x 40: 16-byte rows (cp.async / float4), an LSTM's 160 gate rows in two column tiles; run through
  //            dynamic::rnn_forward;
  //   200 x 24: a last k tile of 8 (200 = 6 x 32 + 8) in half / bfloat16.
  const std::pair<std::int64_t, std::int64_t> shape =
      GENERATE(std::make_pair(std::int64_t{10}, std::int64_t{37}), std::make_pair(std::int64_t{64}, std::int64_t{40}),
               std::make_pair(std::int64_t{200}, std::int64_t{24}));
  const RnnDesc desc = make_desc(mode, shape.first, shape.second, 0, 2, true);
  Model<T> model(desc, rng);
  // 339 tokens: three row tiles, the last one partial.
  const auto inputs = make_inputs<T, std::int32_t>(desc, {70, 0, 33, 128, 1, 90, 17}, rng);
  Options o;
  o.algo = algo;
  o.projection = RnnProjection::kBatchInvariant;
  o.dynamic = shape.first == 64;
  check_against_reference(model, inputs, o, nullptr);
}

TEST_CASE("rnn_forward: hn / cn may be omitted, and the handle's stream and modes are restored", "[rnn]") {
  CublasHandle cublas;
  auto rng = test::make_rng(700);
  const RnnDesc desc = make_desc(RnnMode::kLstm, 6, 16, 0, 1, false);
  Model<float> model(desc, rng);
  const auto in = make_inputs<float, std::int32_t>(desc, {4, 2, 0, 5}, rng);
  DeviceBuffer<float> x(in.x.values), h0(in.h0), c0(in.c0), out(in.x.nnz * 16), hn(1), cn(1);
  DeviceBuffer<std::int32_t> offsets(in.x.offsets);
  cudaStream_t stream = nullptr, caller_stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreate(&stream));
  REQUIRE_CUDA(cudaStreamCreate(&caller_stream));
  REQUIRE(cublasSetStream(cublas.handle, caller_stream) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetPointerMode(cublas.handle, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetMathMode(cublas.handle, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS);
  Options o;
  RnnArgs<float, std::int32_t> args =
      make_args(model, x, offsets, in, h0, c0, out, hn, cn, o, cublas.handle, static_cast<CheckResult*>(nullptr));
  args.hn = nullptr;
  args.cn = nullptr;
  std::size_t bytes = 0;
  REQUIRE_OK((rnn_forward<float, std::int32_t>(nullptr, bytes, args, stream)));
  DeviceBuffer<unsigned char> workspace(bytes);
  test::poison_workspace(workspace);
  REQUIRE_OK((rnn_forward<float, std::int32_t>(workspace.data(), bytes, args, stream)));
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  cudaStream_t now = nullptr;
  cublasPointerMode_t pointer_mode{};
  cublasMath_t math_mode{};
  REQUIRE(cublasGetStream(cublas.handle, &now) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasGetPointerMode(cublas.handle, &pointer_mode) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasGetMathMode(cublas.handle, &math_mode) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(now == caller_stream);
  REQUIRE(pointer_mode == CUBLAS_POINTER_MODE_DEVICE);
  REQUIRE(math_mode == CUBLAS_TF32_TENSOR_OP_MATH);
  // The TF32 math mode the caller had set did not leak into the projections.
  const auto exact = run_reference(model, in, o, reference::RnnPrecision::kExact);
  const auto naive = run_reference(model, in, o, reference::RnnPrecision::kStorage);
  require_within_budget(out.to_host(), exact.output, naive.output, "output");
  REQUIRE_CUDA(cudaStreamDestroy(stream));
  REQUIRE_CUDA(cudaStreamDestroy(caller_stream));
}

TEST_CASE("rnn_forward: sequences longer than max_steps are recorded and truncated", "[rnn]") {
  CublasHandle cublas;
  auto rng = test::make_rng(800);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const RnnDesc desc = make_desc(RnnMode::kLstm, 5, 16, 0, 1, true);
  Model<float> model(desc, rng);
  const std::vector<std::int64_t> lengths = {3, 9, 4, 12};
  const auto in = make_inputs<float, std::int32_t>(desc, lengths, rng);
  Options o;
  o.algo = algo;
  o.max_steps = 6;
  const Outputs<float> got = run_device(model, in, o, cublas.handle);
  REQUIRE(got.check.status() == Status::kInvalidArgument);
  REQUIRE(got.check.index() == 1);  // the first sequence longer than max_steps
  const auto exact = run_reference(model, in, o, reference::RnnPrecision::kExact);
  const auto naive = run_reference(model, in, o, reference::RnnPrecision::kStorage);
  // Rows past max_steps stay poisoned; the rest matches the truncated reference.
  std::vector<float> kept_got, kept_exact, kept_naive;
  const std::int64_t width = 2 * 16;
  for (std::size_t b = 0; b < lengths.size(); ++b)
    for (std::int64_t t = 0; t < lengths[b]; ++t)
      for (std::int64_t k = 0; k < width; ++k) {
        const std::size_t at = static_cast<std::size_t>((in.x.begin(static_cast<std::int64_t>(b)) + t) * width + k);
        if (t >= o.max_steps) {
          REQUIRE(test::is_poison(got.output[at]));  // not written: a computed NaN would not do
          continue;
        }
        kept_got.push_back(got.output[at]);
        kept_exact.push_back(exact.output[at]);
        kept_naive.push_back(naive.output[at]);
      }
  require_within_budget(kept_got, kept_exact, kept_naive, "output");
  require_within_budget(got.hn, exact.hn, naive.hn, "hn");
}

TEST_CASE("rnn_forward: spare rows past offsets[batch] are zero between layers, not read uninitialised", "[rnn]") {
  // Layer 2's input GEMM projects all nnz rows of layer 1's output, spare rows included: they must be defined
  // (initcheck) and must not disturb the real rows.
  CublasHandle cublas;
  auto rng = test::make_rng(850);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  const RnnDesc desc = make_desc(RnnMode::kGru, 6, 16, 0, 2, true);
  Model<float> model(desc, rng);
  const std::vector<std::int64_t> lengths = {4, 0, 7, 2};
  auto in = make_inputs<float, std::int32_t>(desc, lengths, rng);
  const std::int64_t real_rows = in.x.nnz, spare_rows = 5;
  const std::vector<float> spare = test::random_values<float>(static_cast<std::size_t>(spare_rows * in.x.inner), rng);
  in.x.values.insert(in.x.values.end(), spare.begin(), spare.end());
  in.x.nnz += spare_rows;
  Options o;
  o.algo = algo;
  const Outputs<float> got = run_device(model, in, o, cublas.handle);
  const auto exact = run_reference(model, in, o, reference::RnnPrecision::kExact);
  const auto naive = run_reference(model, in, o, reference::RnnPrecision::kStorage);
  const std::size_t width = 2 * 16, real = static_cast<std::size_t>(real_rows) * width;
  const std::vector<float> real_got(got.output.begin(), got.output.begin() + real);
  require_within_budget(real_got, std::vector<float>(exact.output.begin(), exact.output.begin() + real),
                        std::vector<float>(naive.output.begin(), naive.output.begin() + real), "output");
  require_within_budget(got.hn, exact.hn, naive.hn, "hn");
  for (std::size_t i = real; i < got.output.size(); ++i) {
    INFO("spare output element " << i - real);
    REQUIRE(got.output[i] == 0.0f);
  }
}

TEST_CASE("rnn_forward: with several layers, rows no step writes are zero even when no step runs", "[rnn]") {
  // rnn.h promises zeros in the rows that hold no result when there are several layers; that must hold also
  // with max_steps = 0 (no step at all) and with an empty batch whose values still hold rows.
  CublasHandle cublas;
  auto rng = test::make_rng(851);
  const RnnDesc desc = make_desc(RnnMode::kLstm, 5, 8, 0, 2, false);
  Model<float> model(desc, rng);
  SECTION("max_steps = 0") {
    const auto in = make_inputs<float, std::int64_t>(desc, {3, 0, 2}, rng);
    Options o;
    o.max_steps = 0;
    const Outputs<float> got = run_device(model, in, o, cublas.handle);
    REQUIRE(got.output.size() == 5 * 8);
    for (std::size_t i = 0; i < got.output.size(); ++i) {
      INFO("output element " << i);
      REQUIRE(got.output[i] == 0.0f);
    }
  }
  SECTION("an empty batch over 4 rows of values") {
    auto in = make_inputs<float, std::int32_t>(desc, {}, rng);
    in.x.values = test::random_values<float>(4 * 5, rng);
    in.x.nnz = 4;
    const Outputs<float> got = run_device(model, in, Options{}, cublas.handle);
    REQUIRE(got.output.size() == 4 * 8);
    for (std::size_t i = 0; i < got.output.size(); ++i) {
      INFO("output element " << i);
      REQUIRE(got.output[i] == 0.0f);
    }
  }
}

TEMPLATE_TEST_CASE("the owning Rnn layer gives bitwise the low-level results", "[rnn][module]", float, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(870);
  const bool lstm = GENERATE(true, false);
  const RnnDesc desc = make_desc(lstm ? RnnMode::kLstm : RnnMode::kGru, 5, 24, lstm ? 8 : 0, 2, true);
  Model<T> model(desc, rng);
  const std::vector<std::int64_t> lengths = {6, 0, 11, 3, 1};
  const auto in = make_inputs<T, std::int64_t>(desc, lengths, rng);
  Options o;
  o.projection = GENERATE(RnnProjection::kCublas, RnnProjection::kBatchInvariant);
  const Outputs<T> low = run_device(model, in, o, cublas.handle);

  // PyTorch's flat order from the test model's five slots per layer and direction (biases always, w_hr if P).
  std::vector<std::vector<T>> flat;
  for (std::size_t i = 0; i < model.host.size(); i += 5) {
    for (std::size_t j = 0; j < 4; ++j) flat.push_back(model.host[i + j]);
    if (desc.proj_size > 0) flat.push_back(model.host[i + 4]);
  }
  // The layer on its own non-blocking stream, the tensors on the default one: forward orders the two streams
  // itself (no host sync), so reading the output on x's stream right away sees the finished result.
  const bool own_stream = GENERATE(false, true);
  cudaStream_t layer_stream = nullptr;
  if (own_stream) REQUIRE_CUDA(cudaStreamCreateWithFlags(&layer_stream, cudaStreamNonBlocking));
  {
    const Rnn<T> rnn(desc, flat, layer_stream);
    const auto x = RaggedTensor<T, std::int64_t>::from_host(in.x.values, lengths, {desc.input_size});
    const DeviceBuffer<T> h0(in.h0), c0(in.c0);
    const RnnResult<T, std::int64_t> got = rnn.forward(x, &h0, lstm ? &c0 : nullptr, RnnAlgo::kAuto, o.projection);
    REQUIRE(got.output.inner() == 2 * rnn_state_size(desc));
    REQUIRE(got.output.offsets_to_host() == in.x.offsets);
    REQUIRE_WRITTEN_AND_EQUAL(got.output.values_to_host(), low.output);
    REQUIRE_WRITTEN_AND_EQUAL(got.hn.to_host(), low.hn);
    if (lstm) REQUIRE_WRITTEN_AND_EQUAL(got.cn.to_host(), low.cn);

    const auto wrong = RaggedTensor<T, std::int64_t>::from_host(std::vector<T>(4 * 3, T(1.0f)), {4}, {3});
    REQUIRE_THROWS_WITH(rnn.forward(wrong), Catch::Contains("input_size 5"));
  }
  if (own_stream) {
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE_CUDA(cudaStreamDestroy(layer_stream));
  }
}

TEMPLATE_TEST_CASE("dynamic::rnn_forward (run-time dtype) gives bitwise the typed results", "[rnn][dynamic]", float,
                   half, bfloat16) {
  using T = TestType;
  CublasHandle cublas;
  auto rng = test::make_rng(871);
  const bool lstm = GENERATE(true, false);
  const RnnDesc desc = make_desc(lstm ? RnnMode::kLstm : RnnMode::kGru, 7, 40, lstm ? 16 : 0, 2, true);
  Model<T> model(desc, rng);
  const auto in = make_inputs<T, std::int32_t>(desc, {9, 0, 4, 13, 1, 2}, rng);
  Options typed;
  typed.algo = GENERATE(from_range(kAllPaths));
  Options untyped = typed;
  untyped.dynamic = true;
  const Outputs<T> want = run_device(model, in, typed, cublas.handle);
  const Outputs<T> got = run_device(model, in, untyped, cublas.handle);
  REQUIRE_WRITTEN_AND_EQUAL(got.output, want.output);
  REQUIRE_WRITTEN_AND_EQUAL(got.hn, want.hn);
  if (lstm) REQUIRE_WRITTEN_AND_EQUAL(got.cn, want.cn);
}

TEST_CASE("rnn_forward can be captured in a CUDA graph", "[rnn]") {
  CublasHandle cublas;
  auto rng = test::make_rng(900);
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  // Global is what frameworks capture with by default (it refuses unsafe calls from any thread).
  const cudaStreamCaptureMode capture_mode = GENERATE(cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal);
  INFO("capture mode " << (capture_mode == cudaStreamCaptureModeGlobal ? "global" : "thread-local"));
  const RnnDesc desc = make_desc(RnnMode::kGru, 8, 32, 0, 2, true);
  Model<bfloat16> model(desc, rng);
  const auto in = make_inputs<bfloat16, std::int32_t>(desc, {6, 1, 0, 9, 3}, rng);
  Options o;
  o.algo = algo;
  const Outputs<bfloat16> eager = run_device(model, in, o, cublas.handle);

  DeviceBuffer<bfloat16> x(in.x.values), h0(in.h0), c0(in.c0), out(in.x.nnz * 64), hn(2 * 2 * 5 * 32), cn(1);
  DeviceBuffer<std::int32_t> offsets(in.x.offsets);
  test::poison(out);
  test::poison(hn);
  RnnArgs<bfloat16, std::int32_t> args =
      make_args(model, x, offsets, in, h0, c0, out, hn, cn, o, cublas.handle, static_cast<CheckResult*>(nullptr));
  args.cn = nullptr;
  std::size_t bytes = 0;
  REQUIRE_OK((rnn_forward<bfloat16, std::int32_t>(nullptr, bytes, args, nullptr)));
  DeviceBuffer<unsigned char> workspace(bytes);
  test::poison_workspace(workspace);
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreate(&stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  REQUIRE_CUDA(cudaStreamBeginCapture(stream, capture_mode));
  const Status captured = rnn_forward<bfloat16, std::int32_t>(workspace.data(), bytes, args, stream);
  REQUIRE_CUDA(cudaStreamEndCapture(stream, &graph));
  REQUIRE_OK(captured);
  REQUIRE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  REQUIRE_WRITTEN_AND_EQUAL(out.to_host(), eager.output);
  REQUIRE_WRITTEN_AND_EQUAL(hn.to_host(), eager.hn);
  REQUIRE_CUDA(cudaGraphExecDestroy(exec));
  REQUIRE_CUDA(cudaGraphDestroy(graph));
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}

// The argument errors are checked without a GPU in tests/cpu/test_argument_checks.cpp; these need the query
// (packing_order asks CUB for its temp size) or the device's shared memory.
TEST_CASE("rnn_forward refuses a short workspace and a persistent kernel that cannot fit", "[rnn][errors]") {
  CublasHandle cublas;
  auto rng = test::make_rng(1000);
  const RnnDesc desc = make_desc(RnnMode::kLstm, 6, 16, 0, 2, true);
  Model<float> model(desc, rng);
  const auto in = make_inputs<float, std::int32_t>(desc, {4, 2, 0, 5}, rng);
  DeviceBuffer<float> x(in.x.values), h0(in.h0), c0(in.c0), out(in.x.nnz * 32), hn(in.h0.size()), cn(in.c0.size());
  DeviceBuffer<std::int32_t> offsets(in.x.offsets);
  const RnnArgs<float, std::int32_t> good = make_args(model, x, offsets, in, h0, c0, out, hn, cn, Options{},
                                                      cublas.handle, static_cast<CheckResult*>(nullptr));
  std::size_t bytes = 0;
  REQUIRE_OK((rnn_forward<float, std::int32_t>(nullptr, bytes, good, nullptr)));

  SECTION("too small a workspace") {
    DeviceBuffer<unsigned char> workspace(bytes);
    test::poison_workspace(workspace);
    std::size_t short_bytes = bytes - 1;
    REQUIRE(rnn_forward<float, std::int32_t>(workspace.data(), short_bytes, good, nullptr) ==
            Status::kWorkspaceTooSmall);
  }
  SECTION("a forced persistent kernel whose weights cannot fit on chip") {
    RnnAlgo chosen = RnnAlgo::kAuto;
    RnnDesc big = make_desc(RnnMode::kLstm, 16, 8192, 0, 1, true);
    REQUIRE(rnn_select_algo<float>(big, RnnAlgo::kPersistent, chosen) == Status::kUnsupportedShape);
    // 16384 units over the SMs: more gate rows per block than its warps hold, streamed or not.
    REQUIRE(rnn_select_algo<float>(big, RnnAlgo::kPersistentStreamed, chosen) == Status::kUnsupportedShape);
    REQUIRE_OK(rnn_select_algo<float>(big, RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPerStep);
  }
  SECTION("a forced persistent kernel that cannot fit is refused by the query and by the run, which enqueues "
          "nothing") {
    // Two float layers of hidden 1536: each W_hh is 37.7 MB, past the shared memory of any grid of an H100-class
    // device (a block of 12 units would need 295 KB), so kPersistent cannot run. The run used to find that out
    // only at the first layer's recurrence, after it had cleared the output of a multi-layer stack.
    const RnnDesc wide = make_desc(RnnMode::kLstm, 6, 1536, 0, 2, false);
    RnnAlgo chosen = RnnAlgo::kAuto;
    REQUIRE(rnn_select_algo<float>(wide, RnnAlgo::kPersistent, chosen) == Status::kUnsupportedShape);
    Model<float> wide_model(wide, rng);
    const auto wide_in = make_inputs<float, std::int32_t>(wide, {4, 2, 0, 5}, rng);
    DeviceBuffer<float> wx(wide_in.x.values), wh0(wide_in.h0), wc0(wide_in.c0), wout(wide_in.x.nnz * 1536),
        whn(wide_in.h0.size()), wcn(wide_in.c0.size());
    DeviceBuffer<std::int32_t> woffsets(wide_in.x.offsets);
    Options forced;
    forced.algo = RnnAlgo::kPersistent;
    const RnnArgs<float, std::int32_t> args = make_args(wide_model, wx, woffsets, wide_in, wh0, wc0, wout, whn, wcn,
                                                        forced, cublas.handle, static_cast<CheckResult*>(nullptr));
    std::size_t wide_bytes = 0;
    REQUIRE(rnn_forward<float, std::int32_t>(nullptr, wide_bytes, args, nullptr) == Status::kUnsupportedShape);
    REQUIRE_THAT(std::string(last_error_message()), Catch::Contains("persistent"));
    RnnArgs<float, std::int32_t> empty = args;  // the path depends on the shapes, not the batch
    empty.input.batch = empty.input.nnz = 0;
    empty.max_steps = 0;
    REQUIRE(rnn_forward<float, std::int32_t>(nullptr, wide_bytes, empty, nullptr) == Status::kUnsupportedShape);
    RnnArgs<float, std::int32_t> automatic = args;
    automatic.algo = RnnAlgo::kAuto;
    REQUIRE_OK((rnn_forward<float, std::int32_t>(nullptr, wide_bytes, automatic, nullptr)));
    DeviceBuffer<unsigned char> workspace(wide_bytes);
    test::poison(wout);
    test::poison(whn);
    test::poison(wcn);
    REQUIRE(rnn_forward<float, std::int32_t>(workspace.data(), wide_bytes, args, nullptr) ==
            Status::kUnsupportedShape);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    for (DeviceBuffer<float>* untouched : {&wout, &whn, &wcn}) {
      const std::vector<float> host = untouched->to_host();
      REQUIRE(std::count_if(host.begin(), host.end(), [](float v) { return !test::is_poison(v); }) == 0);
    }
  }
}

TEST_CASE("rnn_select_algo runs small layers step by step, keeps mid-sized recurrent weights on chip, and "
          "streams larger ones through a persistent grid, on a large GPU", "[rnn]") {
  int device = 0, sms = 0, optin = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  RnnAlgo chosen = RnnAlgo::kAuto;
  // Up to kAutoPerStepMaxHidden the per-step path, though the persistent kernel fits (forced, it runs).
  REQUIRE_OK(rnn_select_algo<bfloat16>(make_desc(RnnMode::kLstm, 256, 256, 0, 1, false), RnnAlgo::kAuto, chosen));
  REQUIRE(chosen == RnnAlgo::kPerStep);
  REQUIRE_OK(rnn_select_algo<bfloat16>(make_desc(RnnMode::kLstm, 256, 256, 0, 1, false), RnnAlgo::kPersistent, chosen));
  REQUIRE(chosen == RnnAlgo::kPersistent);
  if (sms >= 100 && optin >= 200 * 1024) {  // H100 class: H = 1024 in bfloat16 fits, both directions too
    // Just past kAutoPerStepMaxHidden: the persistent kernel.
    REQUIRE_OK(rnn_select_algo<bfloat16>(make_desc(RnnMode::kGru, 257, 257, 0, 1, false), RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPersistent);
    REQUIRE_OK(rnn_select_algo<bfloat16>(make_desc(RnnMode::kLstm, 1024, 1024, 0, 1, true), RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPersistent);
    REQUIRE_OK(rnn_select_algo<float>(make_desc(RnnMode::kGru, 1024, 1024, 0, 1, false), RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPersistent);
    // H = 2048 in bfloat16: 16 units per block, whose 64 gate rows (256 KB) no SM holds; streamed, 64 rows of
    // three 512-byte chunks (~170 KB) do, one block per SM.
    REQUIRE_OK(rnn_select_algo<bfloat16>(make_desc(RnnMode::kLstm, 2048, 2048, 0, 1, false), RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPersistentStreamed);
    // H = 8192 in float: at any block count a grid keeps resident, a block's stage buffers (a k chunk of each of
    // its gate rows) pass its share of an SM's shared memory: neither persistent kernel fits, so the per-step path.
    REQUIRE_OK(rnn_select_algo<float>(make_desc(RnnMode::kLstm, 8192, 8192, 0, 1, false), RnnAlgo::kAuto, chosen));
    REQUIRE(chosen == RnnAlgo::kPerStep);
  }
}

TEST_CASE("rnn_forward never leaves its buffers with malformed offsets", "[rnn][malformed]") {
  CublasHandle cublas;
  auto rng = test::make_rng(1100);
  const RnnDesc desc = make_desc(RnnMode::kLstm, 4, 16, 0, 1, true);
  Model<float> model(desc, rng);
  const std::int64_t nnz = 20;
  const std::vector<float> values = scaled_values<float>(nnz * 4, 1.0, rng);
  DeviceBuffer<float> x(values);
  // Outputs with guards on both sides: a write out of bounds is seen on any device, not only under memcheck.
  test::GuardedBuffer<float> out(nnz * 32), hn(2 * 4 * 16), cn(2 * 4 * 16);
  const std::vector<std::vector<std::int32_t>> bad = {
      {0, 30, 10, 15, 20},   // beyond nnz, then decreasing
      {5, 3, -4, 18, 40},    // negative start, negative lengths, past the end
      {0, 20, 20, 20, 100},  // the last sequence past nnz
  };
  const RnnAlgo algo = GENERATE(from_range(kAllPaths));
  for (const auto& host_offsets : bad) {
    DeviceBuffer<std::int32_t> offsets(host_offsets);
    RnnArgs<float, std::int32_t> args;
    args.desc = desc;
    args.weights = model.device_weights.data();
    args.input = RaggedView<const float, std::int32_t>{x.data(), offsets.data(), 4, nnz, 4};
    args.max_steps = 64;
    args.output = out.data();
    args.hn = hn.data();
    args.cn = cn.data();
    args.cublas = cublas.handle;
    args.algo = algo;
    std::size_t bytes = 0;
    REQUIRE_OK((rnn_forward<float, std::int32_t>(nullptr, bytes, args, nullptr)));
    DeviceBuffer<unsigned char> workspace(bytes);
    test::poison_workspace(workspace);
    REQUIRE_OK((rnn_forward<float, std::int32_t>(workspace.data(), bytes, args, nullptr)));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE(out.guards_intact());
    REQUIRE(hn.guards_intact());
    REQUIRE(cn.guards_intact());
  }
}
