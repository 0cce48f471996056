// GPU benchmarks of attention forward (issue 5): bfloat16, heads 16, head_dim 128, over padding fractions
// 0 / 25 / 50 / 75%, long sequences (max_len 1k..8k) and short ones (<= 512): which lengths, and whether causal,
// is the matrix RAGGED_BENCH_ATTENTION / RAGGED_BENCH_FULL pick (bench/attention_cases.h).
//
// Implementations (names attention/<impl>/<case>):
//   ragged  ragged::varlen_attention_forward on the ragged tensors [tokens, heads, dim] (no padding anywhere)
//   padded  the same kernel on padded tensors [batch, max_len, heads, dim] with the lengths (a key-padding
//           mask): padded query rows are skipped and padded keys never loaded, but the padded buffers exist
//   cublas  the naive padded baseline as users write it: cuBLAS batched GEMM S = scale * Q K^T over the whole
//           padded batch (bfloat16 scores, [batch * heads, max_len, max_len]), a masked softmax kernel in
//           place, then O = P V with a second batched GEMM
//   ragged/<case>/tile:64|128  the ragged run with the query tile forced (the plain one uses the automatic choice)
// Counters: TFLOP/s on real work only (4 * sum(L^2) * head_dim * heads, halved for causal), whatever the
// implementation computes, and peak_frac (that over a bf16 cuBLAS GEMM's rate measured in the run); peak_bytes = device
// bytes the variant holds (inputs + outputs + scores + workspace); padding_frac, tokens, batch, query_tile (rows per
// block of the fused kernel). bytes_per_second counts Q, K, V read and O written once (real tokens).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/attention_cases.h"
#include "bench/common/compute_peak.h"
#include "bench/common/device_data.h"
#include "bench/common/gpu_timer.h"
#include "bench/common/suite.h"
#include "bench/common/traffic.h"
#include "bench/common/verify.h"
#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/reference_attention.h"

namespace ragged {
namespace bench {
namespace {

using Bf16 = __nv_bfloat16;

void set_counters(benchmark::State& state, const AttentionCase& c, double peak_bytes) {
  const double io_bytes = 4.0 * static_cast<double>(c.tokens) * c.heads * c.head_dim * sizeof(Bf16);
  set_gpu_traffic(state, io_bytes, peak_bytes);
  set_gpu_flops(state, c.flops());
  state.counters["padding_frac"] = c.padding_fraction();
  state.counters["tokens"] = static_cast<double>(c.tokens);
  state.counters["batch"] = static_cast<double>(c.batch);
}

std::vector<std::int32_t> offsets_of(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int32_t> offsets(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) offsets[b + 1] = offsets[b] + static_cast<std::int32_t>(lengths[b]);
  return offsets;
}

// The sequence index of a case: offsets (ragged) or lengths (padded [batch, max_len, heads, dim]).
std::vector<std::int32_t> case_index(const AttentionCase& c, bool padded_layout) {
  return padded_layout ? std::vector<std::int32_t>(c.lengths.begin(), c.lengths.end()) : offsets_of(c.lengths);
}

// The attention call of a case on the given tensors (device or host pointers alike), self-attention: K and V
// share Q's sequences, heads and layout; the library picks the query tile.
AttentionArgs<Bf16, std::int32_t> case_args(const AttentionCase& c, bool padded_layout, const Bf16* q, const Bf16* k,
                                            const Bf16* v, Bf16* o, const std::int32_t* index) {
  AttentionArgs<Bf16, std::int32_t> a;
  a.q = dense_heads<const Bf16>(q, c.heads, c.head_dim);
  a.k = dense_heads<const Bf16>(k, c.heads, c.head_dim);
  a.v = dense_heads<const Bf16>(v, c.heads, c.head_dim);
  a.o = dense_heads<Bf16>(o, c.heads, c.head_dim);
  a.q_seq = padded_layout ? SequenceLayout<std::int32_t>::padded(index, c.batch, c.max_len)
                          : SequenceLayout<std::int32_t>::ragged(index, c.tokens);
  a.k_seq = a.q_seq;
  a.batch = c.batch;
  a.heads_q = a.heads_kv = c.heads;
  a.head_dim = c.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.causal = c.causal;
  return a;
}

// RAGGED_BENCH_VERIFY (bench/common/verify.h): O against ragged's CPU reference on the same Q, K and V in the
// same layout, ragged or padded [batch, max_len, heads, dim]; padded rows, which the reference leaves unwritten,
// are skipped.
void verify_attention(benchmark::State& state, const AttentionCase& c, bool padded_layout, const DeviceBuffer<Bf16>& q,
                      const DeviceBuffer<Bf16>& k, const DeviceBuffer<Bf16>& v, const DeviceBuffer<Bf16>& o,
                      const char* what) {
  const std::vector<Bf16> hq = q.to_host(), hk = k.to_host(), hv = v.to_host();
  std::vector<Bf16> want(o.size(), __float2bfloat16(NAN));
  const std::vector<std::int32_t> index = case_index(c, padded_layout);
  reference::attention_forward(case_args(c, padded_layout, hq.data(), hk.data(), hv.data(), want.data(), index.data()));
  check_against_reference(state, as_doubles(o.to_host()), as_doubles(want), verify_tolerance<Bf16>(), what);
}

// ragged (padded_layout = false) or padded (true): the same kernel, two layouts. query_tile 0: the library's
// choice; 64 / 128 force one (the tile:N variants, to tune the automatic choice on the GPU).
void bench_fused(benchmark::State& state, const AttentionCase& c, bool padded_layout, int query_tile = 0) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    const std::int64_t rows = padded_layout ? c.batch * c.max_len : c.tokens;
    const std::size_t elems = static_cast<std::size_t>(rows * c.heads * c.head_dim);
    DeviceBuffer<Bf16> q(elems, stream), k(elems, stream), v(elems, stream), o(elems, stream);
    fill_uniform(q, 1.0f, 1u, stream);
    fill_uniform(k, 1.0f, 2u, stream);
    fill_uniform(v, 1.0f, 3u, stream);
    DeviceBuffer<std::int32_t> index(case_index(c, padded_layout), stream);
    // The log-sum-exp too, as the op's callers need it for the backward pass and PyTorch's flash kernels always
    // write it: both sides store the same outputs.
    DeviceBuffer<float> lse(static_cast<std::size_t>(rows * c.heads), stream);
    AttentionArgs<Bf16, std::int32_t> a =
        case_args(c, padded_layout, q.data(), k.data(), v.data(), o.data(), index.data());
    a.lse = lse.data();
    a.query_tile = query_tile;
    std::size_t ws_bytes = 0;
    if (!ok_or_skip(state, varlen_attention_forward(nullptr, ws_bytes, a, stream), "workspace query")) return;
    DeviceBuffer<unsigned char> ws(ws_bytes > 0 ? ws_bytes : 1, stream);
    time_on_gpu(state, [&](cudaStream_t st) { return varlen_attention_forward(ws.data(), ws_bytes, a, st); });
    set_counters(state, c, static_cast<double>(4 * q.bytes() + lse.bytes() + index.bytes() + ws_bytes));
    state.counters["query_tile"] = attention_query_tile(a);
    if (verify_results() && !state.error_occurred())
      verify_attention(state, c, padded_layout, q, k, v, o, padded_layout ? "padded" : "ragged");
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The naive padded baseline.
// ---------------------------------------------------------------------------------------------------------------

// One warp per score row (b, h, i) of the [batch * heads, L, L] matrix: softmax over the keys j < lengths[b]
// (the key-padding mask), P written in place, 0 on the masked keys (and on rows of empty sequences).
__global__ void masked_softmax_kernel(Bf16* scores, std::int64_t rows, std::int64_t max_len, int heads,
                                      const std::int32_t* lengths) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t row = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32; row < rows;
       row += warps) {
    const std::int64_t b = row / (heads * max_len);
    const std::int64_t keys = min(static_cast<std::int64_t>(lengths[b]), max_len);
    Bf16* s = scores + row * max_len;
    float m = -FLT_MAX;
    for (std::int64_t j = lane; j < keys; j += 32) m = fmaxf(m, __bfloat162float(s[j]));
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.0f;
    for (std::int64_t j = lane; j < keys; j += 32) sum += __expf(__bfloat162float(s[j]) - m);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (std::int64_t j = lane; j < max_len; j += 32)
      s[j] = __float2bfloat16(j < keys ? __expf(__bfloat162float(s[j]) - m) * inv : 0.0f);
  }
}

Status from_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::kSuccess;
  return fail(Status::kCudaError, std::string(what) + " failed with cuBLAS status " + std::to_string(status));
}


void bench_cublas(benchmark::State& state, const AttentionCase& c) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    const std::int64_t L = c.max_len, H = c.heads, D = c.head_dim, B = c.batch;
    const std::size_t elems = static_cast<std::size_t>(B * L * H * D);
    DeviceBuffer<Bf16> q(elems, stream), k(elems, stream), v(elems, stream), o(elems, stream);
    DeviceBuffer<Bf16> scores(static_cast<std::size_t>(B * H * L * L), stream);
    fill_uniform(q, 1.0f, 1u, stream);
    fill_uniform(k, 1.0f, 2u, stream);
    fill_uniform(v, 1.0f, 3u, stream);
    DeviceBuffer<std::int32_t> lengths(std::vector<std::int32_t>(c.lengths.begin(), c.lengths.end()), stream);
    // Per-(b, h) matrix pointers for the batched GEMMs, built once outside the timed loop.
    std::vector<const void*> q_ptr, k_ptr, v_ptr;
    std::vector<void*> s_ptr, o_ptr;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t head0 = b * L * H * D + h * D;
        q_ptr.push_back(q.data() + head0);
        k_ptr.push_back(k.data() + head0);
        v_ptr.push_back(v.data() + head0);
        o_ptr.push_back(o.data() + head0);
        s_ptr.push_back(scores.data() + (b * H + h) * L * L);
      }
    DeviceBuffer<const void*> d_q(q_ptr, stream), d_k(k_ptr, stream), d_v(v_ptr, stream);
    DeviceBuffer<void*> d_s(s_ptr, stream), d_o(o_ptr, stream);
    const std::vector<const void*> s_const(s_ptr.begin(), s_ptr.end());
    DeviceBuffer<const void*> d_s_in(s_const, stream);
    CublasHandle cublas;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D)), one = 1.0f, zero = 0.0f;
    const int batch_count = static_cast<int>(B * H);
    const int l = static_cast<int>(L), d = static_cast<int>(D), ld_qkv = static_cast<int>(H * D);
    time_on_gpu(state, [&](cudaStream_t st) {
      Status status = from_cublas(cublasSetStream(cublas.get(), st), "cublasSetStream");
      if (status != Status::kSuccess) return status;
      // Row-major S [L_q x L_k] = Q K^T is column-major S^T = K Q^T: A = K (stored as col-major K^T, so op T),
      // B = Q (col-major Q^T, op N), m = n = L, k = D.
      status = from_cublas(
          cublasGemmBatchedEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, l, l, d, &scale, d_k.data(), CUDA_R_16BF,
                              ld_qkv, d_q.data(), CUDA_R_16BF, ld_qkv, &zero, d_s.data(), CUDA_R_16BF, l, batch_count,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmBatchedEx(Q K^T)");
      if (status != Status::kSuccess) return status;
      masked_softmax_kernel<<<4096, 256, 0, st>>>(scores.data(), B * H * L, L, static_cast<int>(H), lengths.data());
      status = from_cuda(cudaGetLastError(), "masked_softmax_kernel");
      if (status != Status::kSuccess) return status;
      // Row-major O [L_q x D] = P V is column-major O^T = V^T P^T: A = V (col-major V^T, op N), B = P (col-major
      // P^T, op N), m = D, n = L_q, k = L_k.
      return from_cublas(cublasGemmBatchedEx(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, l, l, &one, d_v.data(),
                                             CUDA_R_16BF, ld_qkv, d_s_in.data(), CUDA_R_16BF, l, &zero, d_o.data(),
                                             CUDA_R_16BF, ld_qkv, batch_count, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT),
                         "cublasGemmBatchedEx(P V)");
    });
    set_counters(state, c, static_cast<double>(4 * q.bytes() + scores.bytes() + lengths.bytes()));
    if (verify_results() && !state.error_occurred()) verify_attention(state, c, true, q, k, v, o, "cublas");
  });
}

void register_attention_gpu() {
  for (const AttentionCase& c : attention_cases(attention_matrix(full_run()), std::sqrt(size_scale()))) {
    const auto shared = std::make_shared<const AttentionCase>(c);
    const std::string tail = "/" + c.name();
    register_gpu_benchmark("attention/ragged" + tail,
                           [shared](benchmark::State& st) { bench_fused(st, *shared, false); });
    register_gpu_benchmark("attention/padded" + tail,
                           [shared](benchmark::State& st) { bench_fused(st, *shared, true); });
    for (int tile : {64, 128})
      register_gpu_benchmark("attention/ragged" + tail + "/tile:" + std::to_string(tile),
                             [shared, tile](benchmark::State& st) { bench_fused(st, *shared, false, tile); });
    // The baseline has no causal variant here (users would add a second mask); its scores take
    // batch * heads * max_len^2 * 2 bytes (8 GiB at max_len 4096).
    if (!c.causal)
      register_gpu_benchmark("attention/cublas" + tail, [shared](benchmark::State& st) { bench_cublas(st, *shared); });
  }
}

}  // namespace

RAGGED_BENCH_SUITE(attention_gpu, Needs::kGpu, register_attention_gpu);

}  // namespace bench
}  // namespace ragged
