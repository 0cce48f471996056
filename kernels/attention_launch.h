// Internal: the kernel parameters and launchers of the attention forward kernels (kernels/attention_mma.cu for
// half / bfloat16 on tensor cores, kernels/attention_simt.cu for float), called by src/attention.cpp after it
// has validated the arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ragged/status.h"

namespace ragged {
namespace detail {

// One side's sequence layout with the offset type erased (the kernels are not templated on it: the offsets
// are read a handful of times per block, so a run-time branch costs nothing and halves the instantiations).
struct AttentionSeqIndex {
  const void* offsets = nullptr;  // ragged: [batch + 1]
  const void* lengths = nullptr;  // padded (offsets == nullptr): [batch]
  std::int64_t max_len = 0;       // padded only
  std::int64_t rows = 0;          // rows of the buffer; every row range is clamped into [0, rows)
  bool index64 = false;           // offsets / lengths are int64_t (else int32_t)
};

// Trivially copyable, passed by value (__grid_constant__). Pointers are untyped; the kernel casts them to its T.
struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [q rows, heads_q] or null
  std::int64_t q_token_stride = 0, q_head_stride = 0;
  std::int64_t k_token_stride = 0, k_head_stride = 0;
  std::int64_t v_token_stride = 0, v_head_stride = 0;
  std::int64_t o_token_stride = 0, o_head_stride = 0;
  AttentionSeqIndex q_seq, k_seq;
  std::int64_t batch = 0;
  int heads_q = 0;
  int heads_per_kv = 1;  // heads_q / heads_kv
  float scale = 1.0f;
  float scale_log2 = 1.4426950408889634f;  // scale * log2(e): the kernels work in base 2 (exp2)
  bool causal = false;
};

// Whether the tensor-core kernel exists for head_dim with `query_tile` rows per block (64 or 128); the query
// rows per block of the float kernel (0: no kernel for that head_dim).
bool attention_mma_supports(int head_dim, int query_tile);
int attention_simt_query_tile(int head_dim);

// Launch the forward kernel for `head_dim` (and, on tensor cores, `query_tile` rows per block);
// kUnsupportedShape when there is none. The caller has checked the arguments and that batch > 0 and q rows > 0.
// T: __half / __nv_bfloat16 (mma) or float (simt).
template <typename T>
Status launch_attention_mma(const AttentionParams& params, int head_dim, int query_tile, cudaStream_t stream);
Status launch_attention_simt(const AttentionParams& params, int head_dim, cudaStream_t stream);

}  // namespace detail
}  // namespace ragged
