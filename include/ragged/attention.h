// Fused scaled-dot-product attention forward over variable-length sequences (issue 5).
//
//   O[i, h, :] = sum_j P[i, j] V[j, g(h), :],   P[i, :] = softmax_j(scale * Q[i, h, :] . K[j, g(h), :])
//   LSE[i, h]  = log(sum_j exp(scale * Q[i, h, :] . K[j, g(h), :]))       (natural log)
//
// for every query i and key j of the same sequence, g(h) = h / (heads_q / heads_kv) (grouped-query and
// multi-query attention when heads_kv < heads_q). The score matrix never goes to device memory: one pass over
// tiles of keys with an online softmax (FlashAttention-2's scheme). Half and bfloat16 run on tensor cores with
// float accumulation (compute capability 8.0+); float runs on the FMA units.
//
// Layouts. Q and O are [rows_q, heads_q, head_dim], K and V [rows_k, heads_kv, head_dim], each with its own
// element strides between tokens and between heads; head_dim is contiguous. Where each sequence's tokens are
// is said by a SequenceLayout, separately for Q and for K/V (query and key lengths may differ):
// - ragged: offsets [batch + 1] (cu_seqlens); sequence b owns rows [offsets[b], offsets[b+1]).
// - padded: lengths [batch] and max_len; sequence b owns rows [b * max_len, b * max_len + min(lengths[b],
//   max_len)) of a [batch, max_len, heads, head_dim] tensor (a key-padding mask, as FlashAttention's BlockInfo
//   does for its non-varlen path). The same kernel body serves both.
// Rows are clamped to [0, rows) as in every ragged kernel, so malformed offsets give wrong values but never an
// out-of-bounds access. Rows outside every sequence (padding slots, spare capacity) are not written.
//
// Semantics, shared with reference::attention_forward (reference_attention.h):
// - causal: query i (0-based within its sequence of L_q queries and L_k keys) sees key j iff
//   j <= i + L_k - L_q (aligned bottom-right, as FlashAttention 2.1+): the last query sees every key.
// - A query that sees no key (L_k = 0, or causal with i < L_q - L_k) gets O = 0 and LSE = -inf; so does one
//   whose visible scores are all -inf. A NaN score (NaN in Q or K, or inf x 0 in the dot product) or a +inf
//   one (exp(inf - inf)) makes that query's O and LSE NaN.
// - Non-finite V: a key tile's V rows are multiplied by P, which is 0 at keys a causal query cannot see in a
//   tile it visits, so an inf or NaN in V there can make that query's O NaN (as in FlashAttention), and which
//   queries it reaches depends on query_tile. The reference reads visible keys only. With finite V, every rule
//   above and the bitwise claims below hold.
// - Zero-length sequences produce nothing and cost (almost) nothing.
// - Scores are formed in float: where |Q . K| or |scale * Q . K| * log2(e) passes FLT_MAX (~3.4e38), that
//   query's O and LSE are NaN, where the reference (double) may stay finite.
// - LSE is float [rows_q, heads_q] (lse[row * heads_q + h], token-major like O); pass null to skip it.
// - Deterministic: a sequence's output depends only on its own data, not on the rest of the batch or on
//   whether the layout is ragged or padded (bitwise).
//
// Requirements: head_dim 64 or 128 (kUnsupportedShape otherwise); heads_kv divides heads_q, heads_q <= 65535;
// scale > 0 and finite; data pointers 16-byte aligned and strides multiples of 16 bytes (16 / sizeof(T)
// elements), as any dense [tokens, heads, head_dim] tensor from cudaMalloc is; O's [token, head] rows must not
// overlap one another (checked: blocks would race on them) nor Q, K, V or LSE (not checked); at most
// INT_MAX query tiles plus batch (the grid) and 32 * INT_MAX key rows. A device of compute capability 8.0 or
// newer, checked when the kernel is enqueued (not by the size query).
//
// Same contract as the other device ops: two-phase workspace (null -> only the size), explicit stream, no
// allocation, no host sync, graph-capturable. No maximum length is needed on the host: the grid is sized from
// rows_q and batch, and each block finds its (sequence, query tile) on the device from the offsets.
// The owning `attention(q, k, v)` over RaggedTensors is in tensor_attention.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ragged/dtype.h"
#include "ragged/status.h"

namespace ragged {

// Where the tokens of each sequence sit in a Q or K/V buffer. Exactly one of offsets / lengths is set
// (for an empty padded batch both may be null).
template <typename OffsetT>
struct SequenceLayout {
  static_assert(is_offset_type_v<OffsetT>, "offsets must be int32_t or int64_t");
  const OffsetT* offsets = nullptr;  // ragged: [batch + 1], device memory
  const OffsetT* lengths = nullptr;  // padded: [batch], device memory (negative counts as 0)
  std::int64_t max_len = 0;          // padded: slots per sequence
  std::int64_t rows = 0;             // token rows the buffer holds (padded: batch * max_len)

  static SequenceLayout ragged(const OffsetT* offsets, std::int64_t rows) {
    SequenceLayout s;
    s.offsets = offsets;
    s.rows = rows;
    return s;
  }
  static SequenceLayout padded(const OffsetT* lengths, std::int64_t batch, std::int64_t max_len) {
    SequenceLayout s;
    s.lengths = lengths;
    s.max_len = max_len;
    // batch * max_len, saturated where it would overflow (and 0 for negative sizes): the checks then name the
    // overflow or the negative size instead of the product meeting undefined behaviour here.
    const std::int64_t most = std::numeric_limits<std::int64_t>::max();
    s.rows = batch < 0 || max_len < 0 ? 0 : (max_len > 0 && batch > most / max_len ? most : batch * max_len);
    return s;
  }
  bool is_padded() const { return offsets == nullptr; }
};

// A [rows, heads, head_dim] tensor: element strides between tokens and between heads; head_dim contiguous.
template <typename T>
struct HeadsView {
  T* data = nullptr;
  std::int64_t token_stride = 0;  // dense: heads * head_dim
  std::int64_t head_stride = 0;   // dense: head_dim

  // A view of mutable values passes where a read-only one is expected (AttentionArgs::q, k, v).
  template <typename U = T, typename = std::enable_if_t<std::is_same<U, T>::value && !std::is_const<U>::value>>
  operator HeadsView<const U>() const {
    return {data, token_stride, head_stride};
  }
};

template <typename T>
HeadsView<T> dense_heads(T* data, std::int64_t heads, std::int64_t head_dim) {
  return HeadsView<T>{data, heads * head_dim, head_dim};
}

template <typename T, typename OffsetT>
struct AttentionArgs {
  HeadsView<const T> q, k, v;  // Q [q_seq.rows, heads_q, head_dim]; K, V [k_seq.rows, heads_kv, head_dim]
  HeadsView<T> o;              // [q_seq.rows, heads_q, head_dim]
  float* lse = nullptr;        // [q_seq.rows, heads_q] or null
  SequenceLayout<OffsetT> q_seq, k_seq;
  std::int64_t batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  float scale = 0.0f;  // > 0; usually 1 / sqrt(head_dim)
  bool causal = false;
  // Query rows per block. 0: chosen from host-known sizes (128 when the sequences average at least 128 query
  // rows, else 64). half / bfloat16 accept 64 or 128: 128 halves the shared-memory traffic per flop on long
  // sequences, 64 wastes less on short ones. float has one kernel and accepts 0 or its tile (32). For tuning and
  // benchmarks: the output is bitwise the same whatever the tile (a row's arithmetic does not depend on it).
  int query_tile = 0;
};

// Query rows per block of the kernel that runs for `args` (args.query_tile when set, else the automatic
// choice); 0 for an unsupported combination. Informational (benchmarks, tuning notes).
template <typename T, typename OffsetT>
int attention_query_tile(const AttentionArgs<T, OffsetT>& args);

// The forward pass. With d_workspace == nullptr: validates and writes workspace_bytes (currently 1: no workspace
// is used, and a query never answers 0; query it anyway). Otherwise enqueues the kernel on `stream`.
template <typename T, typename OffsetT>
Status varlen_attention_forward(void* d_workspace, std::size_t& workspace_bytes, const AttentionArgs<T, OffsetT>& args,
                                cudaStream_t stream);

}  // namespace ragged
