// ragged_rnn_driver: runs rnn_forward on tensors read from raw binary files, so that a script (or any language)
// can check ragged against another implementation without bindings. scripts/torch_rnn.py drives it.
//
//   ragged_rnn_driver DIR
//
// DIR/config.txt, one "key value" per line:
//   mode lstm|gru   dtype float32|float16|bfloat16   input_size N   hidden_size N   proj_size N (0)
//   num_layers N (1)   bidirectional 0|1   bias 0|1 (1)
//   algo auto|per_step|persistent|persistent_streamed|reference (auto)
//   projection cublas|invariant (cublas: RnnProjection::kCublas; invariant: kBatchInvariant)
//   repeats N (0: run once; N > 0: also time N runs after a warm-up and report the median)
// algo reference runs ragged's CPU reference (reference_rnn.h, exact: double accumulation) instead of the GPU
// op and touches no GPU, so a script can hold the reference, the oracle of the GPU tests, against PyTorch on a
// machine without one (scripts/torch_rnn.py --device cpu).
// DIR/lengths.bin   int64 [batch], the sequence lengths in the caller's order (zeros allowed)
// DIR/input.bin     dtype [sum(lengths), input_size], the sequences one after the other
// DIR/h0.bin, DIR/c0.bin   optional initial states [num_layers * dirs, batch, state / hidden]
// DIR/<name>.bin    every parameter under PyTorch's name: weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0,
//                   weight_hr_l0 (proj_size > 0), with the suffix _reverse for the reverse direction
// Writes DIR/output.bin [sum(lengths), dirs * state], DIR/hn.bin, DIR/cn.bin (LSTM) in dtype, and prints one
// JSON line: {"ok": true, "algo": "...", "median_ms": ..., "runs": N, "workspace_bytes": ...}. Any failure prints
// {"ok": false, "error": "..."} and exits with 1.
//
//   ragged_rnn_driver --lengths DISTRIBUTION BATCH MEAN
//
// prints the lengths of the RNN benchmark case with that distribution (uniform, lognormal, ...), batch and mean
// length, one line, space-separated (bench/common/rnn_lengths.h), and touches no GPU: scripts/torch_rnn.py
// times PyTorch on them, so its cases are bench_rnn.cu's.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/common/raw_files.h"
#include "bench/common/rnn_lengths.h"
#include "ragged/buffer.h"
#include "ragged/reference_rnn.h"
#include "ragged/rnn.h"

namespace {

using namespace ragged;

using bench::KeyValueFile;

std::int64_t get_int(const KeyValueFile& config, const std::string& key, std::int64_t fallback) {
  return std::stoll(config.optional(key, std::to_string(fallback)));
}

bool file_exists(const std::string& path) { return static_cast<bool>(std::ifstream(path)); }

// Element counts are int64 here; the shared reader takes size_t.
template <typename T>
std::vector<T> read_array(const std::string& path, std::int64_t count) {
  return bench::read_array<T>(path, static_cast<std::size_t>(count));
}
using bench::write_array;

void check(Status status, const char* what) {
  if (status != Status::kSuccess)
    throw std::runtime_error(std::string(what) + ": " + status_string(status) + ": " + last_error_message());
}

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

template <typename T>
void write_outputs(const std::string& dir, const std::vector<T>& output, const std::vector<T>& hn,
                   const std::vector<T>& cn, bool lstm) {
  write_array(dir + "/output.bin", output);
  write_array(dir + "/hn.bin", hn);
  if (lstm) write_array(dir + "/cn.bin", cn);
}

RnnAlgo parse_algo(const std::string& name) {
  if (name == "auto") return RnnAlgo::kAuto;
  if (name == "per_step") return RnnAlgo::kPerStep;
  if (name == "persistent") return RnnAlgo::kPersistent;
  if (name == "persistent_streamed") return RnnAlgo::kPersistentStreamed;
  throw std::runtime_error("unknown algo '" + name + "'");
}

RnnProjection parse_projection(const std::string& name) {
  if (name == "cublas") return RnnProjection::kCublas;
  if (name == "invariant") return RnnProjection::kBatchInvariant;
  throw std::runtime_error("unknown projection '" + name + "'");
}

template <typename T>
std::string run(const std::string& dir, const KeyValueFile& config) {
  RnnDesc desc;
  const std::string mode = config.optional("mode", "lstm");
  if (mode != "lstm" && mode != "gru") throw std::runtime_error("unknown mode '" + mode + "'");
  desc.mode = mode == "gru" ? RnnMode::kGru : RnnMode::kLstm;
  desc.input_size = get_int(config, "input_size", 0);
  desc.hidden_size = get_int(config, "hidden_size", 0);
  desc.proj_size = get_int(config, "proj_size", 0);
  desc.num_layers = get_int(config, "num_layers", 1);
  desc.bidirectional = get_int(config, "bidirectional", 0) != 0;
  desc.bias = get_int(config, "bias", 1) != 0;
  const std::string algo_name = config.optional("algo", "auto");
  const bool reference = algo_name == "reference";
  const RnnAlgo algo = reference ? RnnAlgo::kAuto : parse_algo(algo_name);
  const RnnProjection projection = parse_projection(config.optional("projection", "cublas"));
  const std::int64_t repeats = get_int(config, "repeats", 0);
  const std::int64_t dirs = rnn_directions(desc), S = rnn_state_size(desc), H = desc.hidden_size;
  const std::int64_t G = rnn_gate_count(desc.mode), slots = desc.num_layers * dirs;
  const bool lstm = desc.mode == RnnMode::kLstm;

  const std::string lengths_path = dir + "/lengths.bin";
  std::ifstream probe(lengths_path, std::ios::binary | std::ios::ate);
  if (!probe) throw std::runtime_error("cannot read " + lengths_path);
  const std::int64_t batch = static_cast<std::int64_t>(probe.tellg()) / 8;
  const std::vector<std::int64_t> lengths = read_array<std::int64_t>(lengths_path, batch);
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1), 0);
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    offsets[b + 1] = offsets[b] + static_cast<std::int32_t>(lengths[b]);
    longest = std::max(longest, lengths[b]);
  }
  const std::int64_t nnz = offsets.back();

  // Parameters under PyTorch's names, on the host first.
  std::vector<std::vector<T>> host_params;
  host_params.reserve(static_cast<std::size_t>(slots * 5));
  std::vector<RnnLayerWeights<T>> host_weights;
  auto load = [&](const std::string& name, std::int64_t count) -> const T* {
    host_params.push_back(read_array<T>(dir + "/" + name + ".bin", count));
    return host_params.back().data();
  };
  for (std::int64_t l = 0; l < desc.num_layers; ++l)
    for (std::int64_t d = 0; d < dirs; ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const std::int64_t in = rnn_layer_input_size(desc, l);
      RnnLayerWeights<T> w;
      w.w_ih = load("weight_ih" + suffix, G * H * in);
      w.w_hh = load("weight_hh" + suffix, G * H * S);
      if (desc.bias) {
        w.b_ih = load("bias_ih" + suffix, G * H);
        w.b_hh = load("bias_hh" + suffix, G * H);
      }
      if (lstm && desc.proj_size > 0) w.w_hr = load("weight_hr" + suffix, desc.proj_size * H);
      host_weights.push_back(w);
    }
  const std::vector<T> host_input = read_array<T>(dir + "/input.bin", nnz * desc.input_size);
  std::vector<T> host_h0, host_c0;
  if (file_exists(dir + "/h0.bin")) host_h0 = read_array<T>(dir + "/h0.bin", slots * batch * S);
  if (lstm && file_exists(dir + "/c0.bin")) host_c0 = read_array<T>(dir + "/c0.bin", slots * batch * H);
  std::vector<T> host_output(static_cast<std::size_t>(nnz * dirs * S));
  std::vector<T> host_hn(static_cast<std::size_t>(slots * batch * S)),
      host_cn(static_cast<std::size_t>(slots * batch * H));

  if (reference) {
    reference::rnn_forward<T, std::int32_t>(
        desc, host_weights.data(), RaggedView<const T, std::int32_t>{host_input.data(), offsets.data(), batch, nnz,
                                                                     desc.input_size},
        host_h0.empty() ? nullptr : host_h0.data(), host_c0.empty() ? nullptr : host_c0.data(), host_output.data(),
        host_hn.data(), lstm ? host_cn.data() : nullptr, reference::RnnPrecision::kExact);
    write_outputs(dir, host_output, host_hn, host_cn, lstm);
    return "{\"ok\": true, \"algo\": \"reference\", \"median_ms\": 0, \"runs\": 0, \"workspace_bytes\": 0}";
  }

  // The same weights, every pointer moved to its device copy.
  std::vector<DeviceBuffer<T>> params;
  params.reserve(host_params.size());
  std::map<const T*, const T*> device_of = {{nullptr, nullptr}};
  for (const std::vector<T>& p : host_params) {
    params.emplace_back(p);
    device_of[p.data()] = params.back().data();
  }
  std::vector<RnnLayerWeights<T>> weights;
  for (const RnnLayerWeights<T>& w : host_weights)
    weights.push_back({device_of.at(w.w_ih), device_of.at(w.w_hh), device_of.at(w.b_ih), device_of.at(w.b_hh),
                       device_of.at(w.w_hr)});
  DeviceBuffer<T> input(host_input);
  DeviceBuffer<std::int32_t> d_offsets(offsets);
  DeviceBuffer<T> h0, c0;
  if (!host_h0.empty()) h0 = DeviceBuffer<T>(host_h0);
  if (!host_c0.empty()) c0 = DeviceBuffer<T>(host_c0);
  DeviceBuffer<T> output(host_output.size());
  DeviceBuffer<T> hn(host_hn.size()), cn(host_cn.size());

  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  RnnArgs<T, std::int32_t> args;
  args.desc = desc;
  args.weights = weights.data();
  args.input = RaggedView<const T, std::int32_t>{input.data(), d_offsets.data(), batch, nnz, desc.input_size};
  args.max_steps = longest;
  args.h0 = h0.empty() ? nullptr : h0.data();
  args.c0 = c0.empty() ? nullptr : c0.data();
  args.output = output.data();
  args.hn = hn.data();
  args.cn = lstm ? cn.data() : nullptr;
  args.cublas = handle;
  args.algo = algo;
  args.projection = projection;
  std::size_t bytes = 0;
  check(rnn_forward(nullptr, bytes, args, nullptr), "rnn_forward (workspace query)");
  DeviceBuffer<unsigned char> workspace(bytes > 0 ? bytes : 1);
  check(rnn_forward(workspace.data(), bytes, args, nullptr), "rnn_forward");
  check_cuda(cudaDeviceSynchronize(), "rnn_forward (synchronize)");

  double median_ms = 0.0;
  if (repeats > 0) {
    cudaEvent_t start = nullptr, stop = nullptr;
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    std::vector<double> times;
    for (std::int64_t i = 0; i < repeats; ++i) {
      check_cuda(cudaEventRecord(start, nullptr), "cudaEventRecord");
      check(rnn_forward(workspace.data(), bytes, args, nullptr), "rnn_forward (timed)");
      check_cuda(cudaEventRecord(stop, nullptr), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0.0f;
      check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    median_ms = times[times.size() / 2];
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  cublasDestroy(handle);

  write_outputs(dir, output.to_host(), hn.to_host(), cn.to_host(), lstm);
  RnnAlgo chosen = RnnAlgo::kAuto;
  check(rnn_select_algo<T>(desc, algo, chosen), "rnn_select_algo");
  std::ostringstream json;
  json << "{\"ok\": true, \"algo\": \"" << rnn_algo_name(chosen) << "\", \"median_ms\": " << median_ms
       << ", \"runs\": " << repeats << ", \"workspace_bytes\": " << bytes << "}";
  return json.str();
}

std::string escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

// --lengths DISTRIBUTION BATCH MEAN: the benchmark case's lengths on one line.
int print_case_lengths(const std::string& distribution, const std::string& batch, const std::string& mean) {
  try {
    std::size_t batch_end = 0, mean_end = 0;
    const long long b = std::stoll(batch, &batch_end), m = std::stoll(mean, &mean_end);
    if (batch_end != batch.size() || mean_end != mean.size() || b < 0 || m < 0)
      throw std::invalid_argument("BATCH and MEAN must be non-negative integers");
    const std::vector<std::int64_t> lengths =
        ragged::bench::rnn_case_lengths(ragged::bench::distribution_from_name(distribution), b, m);
    std::string line;
    for (const std::int64_t length : lengths) line += (line.empty() ? "" : " ") + std::to_string(length);
    std::printf("%s\n", line.c_str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "--lengths %s %s %s: %s\n", distribution.c_str(), batch.c_str(), mean.c_str(), error.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--lengths") return print_case_lengths(argv[2], argv[3], argv[4]);
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s DIR, or %s --lengths DISTRIBUTION BATCH MEAN (see the comment at the top of "
                 "bench/rnn_driver.cpp)\n",
                 argv[0], argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const auto config = bench::read_key_values(dir + "/config.txt");
    const std::string dtype = config.optional("dtype", "float32");
    std::string result;
    if (dtype == "float32") result = run<float>(dir, config);
    else if (dtype == "float16") result = run<half>(dir, config);
    else if (dtype == "bfloat16") result = run<bfloat16>(dir, config);
    else throw std::runtime_error("unknown dtype '" + dtype + "'");
    std::printf("%s\n", result.c_str());
    return 0;
  } catch (const std::exception& error) {
    std::printf("{\"ok\": false, \"error\": \"%s\"}\n", escape(error.what()).c_str());
    return 1;
  }
}
