// ragged_attention_io: ragged's attention callable from a script through files, for scripts/torch_attention.py
// (PyTorch is on the GPU machine; this avoids Python bindings or a shared-library ABI).
//
//   ragged_attention_io cases [--full]   prints the benchmark cases of bench/attention_cases.h as JSON
//                                        (RAGGED_BENCH_FULL=1 also selects the full matrix, and
//                                        RAGGED_BENCH_ATTENTION=targets the targets' one, as in ragged_bench)
//   ragged_attention_io run DIR          reads DIR/meta.txt and the raw inputs, runs varlen_attention_forward,
//                                        writes DIR/o.bin and DIR/lse.bin; exit code 0 on success
//   ragged_attention_io reference DIR    the same through ragged's CPU reference (reference_attention.h) on
//                                        the host, no GPU touched: the oracle of the GPU tests, for
//                                        scripts/torch_attention.py --device cpu to hold against PyTorch
//
// DIR/meta.txt holds "key value" lines: dtype (bf16, f16 or f32), heads_q, heads_kv, head_dim, batch, causal
// (0 / 1), scale, total_q, total_k. Raw little-endian files, dense and row-major:
//   q.bin [total_q, heads_q, head_dim] of dtype, k.bin / v.bin [total_k, heads_kv, head_dim],
//   q_offsets.bin / k_offsets.bin int32 [batch + 1];
//   o.bin [total_q, heads_q, head_dim] of dtype, lse.bin float32 [total_q, heads_q] (written).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/attention_cases.h"
#include "bench/common/raw_files.h"
#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/reference_attention.h"

namespace {

using ragged::bench::KeyValueFile;
using ragged::bench::read_array;
using ragged::bench::write_bytes;

template <typename T>
void run(const std::string& dir, const KeyValueFile& meta, bool on_host) {
  const int heads_q = std::stoi(meta.required("heads_q")), heads_kv = std::stoi(meta.required("heads_kv")),
            dim = std::stoi(meta.required("head_dim"));
  const std::int64_t batch = std::stoll(meta.required("batch")), total_q = std::stoll(meta.required("total_q")),
                     total_k = std::stoll(meta.required("total_k"));
  const std::size_t q_elems = static_cast<std::size_t>(total_q * heads_q * dim);
  const std::size_t k_elems = static_cast<std::size_t>(total_k * heads_kv * dim);
  const std::vector<T> q = read_array<T>(dir + "/q.bin", q_elems);
  const std::vector<T> k = read_array<T>(dir + "/k.bin", k_elems);
  const std::vector<T> v = read_array<T>(dir + "/v.bin", k_elems);
  const std::vector<std::int32_t> q_off = read_array<std::int32_t>(dir + "/q_offsets.bin", batch + 1);
  const std::vector<std::int32_t> k_off = read_array<std::int32_t>(dir + "/k_offsets.bin", batch + 1);
  std::vector<T> o(q_elems);
  std::vector<float> lse(static_cast<std::size_t>(total_q * heads_q));

  // The arguments with the pointers left to fill: host ones for the reference, device ones for the op.
  ragged::AttentionArgs<T, std::int32_t> a;
  a.batch = batch;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.head_dim = dim;
  a.scale = std::stof(meta.required("scale"));
  a.causal = meta.required("causal") == "1";
  auto point_at = [&](const T* pq, const T* pk, const T* pv, T* po, float* plse, const std::int32_t* pq_off,
                      const std::int32_t* pk_off) {
    a.q = ragged::dense_heads<const T>(pq, heads_q, dim);
    a.k = ragged::dense_heads<const T>(pk, heads_kv, dim);
    a.v = ragged::dense_heads<const T>(pv, heads_kv, dim);
    a.o = ragged::dense_heads<T>(po, heads_q, dim);
    a.lse = plse;
    a.q_seq = ragged::SequenceLayout<std::int32_t>::ragged(pq_off, total_q);
    a.k_seq = ragged::SequenceLayout<std::int32_t>::ragged(pk_off, total_k);
  };
  if (on_host) {
    point_at(q.data(), k.data(), v.data(), o.data(), lse.data(), q_off.data(), k_off.data());
    ragged::reference::attention_forward(a);
  } else {
    const ragged::DeviceBuffer<T> d_q(q), d_k(k), d_v(v);
    const ragged::DeviceBuffer<std::int32_t> d_q_off(q_off), d_k_off(k_off);
    ragged::DeviceBuffer<T> d_o(q_elems);
    ragged::DeviceBuffer<float> d_lse(lse.size());
    point_at(d_q.data(), d_k.data(), d_v.data(), d_o.data(), d_lse.data(), d_q_off.data(), d_k_off.data());
    ragged::Workspace ws;
    ragged::run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::varlen_attention_forward(p, bytes, a, nullptr);
    });
    ragged::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    o = d_o.to_host();
    lse = d_lse.to_host();
  }
  write_bytes(dir + "/o.bin", o.data(), o.size() * sizeof(T));
  write_bytes(dir + "/lse.bin", lse.data(), lse.size() * sizeof(float));
}

void print_cases(bool full) {
  std::ostringstream out;
  out << "{\"cases\": [";
  const auto cases = ragged::bench::attention_cases(ragged::bench::attention_matrix(full));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    out << (i ? ",\n" : "\n") << "  {\"name\": \"" << c.name() << "\", \"max_len\": " << c.max_len
        << ", \"batch\": " << c.batch << ", \"heads\": " << c.heads << ", \"head_dim\": " << c.head_dim
        << ", \"causal\": " << (c.causal ? "true" : "false") << ", \"padding_percent\": " << c.padding_percent
        << ", \"flops\": " << c.flops() << ", \"lengths\": [";
    for (std::size_t b = 0; b < c.lengths.size(); ++b) out << (b ? ", " : "") << c.lengths[b];
    out << "]}";
  }
  out << "\n]}\n";
  std::cout << out.str();
}

int usage() {
  std::cerr << "usage: ragged_attention_io cases [--full] | ragged_attention_io run|reference DIR\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  try {
    const std::string command = argv[1];
    if (command == "cases") {
      const char* env = std::getenv("RAGGED_BENCH_FULL");
      const bool full = (argc > 2 && std::strcmp(argv[2], "--full") == 0) ||
                        (env != nullptr && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0);
      print_cases(full);
      return 0;
    }
    if ((command == "run" || command == "reference") && argc == 3) {
      const bool on_host = command == "reference";
      const std::string dir = argv[2];
      const auto meta = ragged::bench::read_key_values(dir + "/meta.txt");
      const std::string& dtype = meta.required("dtype");
      if (dtype == "bf16") run<__nv_bfloat16>(dir, meta, on_host);
      else if (dtype == "f16") run<__half>(dir, meta, on_host);
      else if (dtype == "f32") run<float>(dir, meta, on_host);
      else throw std::runtime_error("unknown dtype " + dtype + " (bf16, f16 or f32)");
      return 0;
    }
    return usage();
  } catch (const std::exception& error) {
    std::cerr << "ragged_attention_io: " << error.what() << "\n";
    return 1;
  }
}
