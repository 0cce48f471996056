// Owning convenience layer, attention: varlen_attention_forward (attention.h) over RaggedTensors, allocating
// its output and throwing ragged::Error. Kept out of attention.h so that the low-level header (and dynamic.h,
// reference.h) never pulls in allocation or exceptions: an embedder built with -fno-exceptions includes those.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/status.h"
#include "ragged/tensor.h"

namespace ragged {

// Owning convenience layer: ragged tensors with inner dims {heads, head_dim}. Q and K/V must have the same batch
// (their lengths may differ); K and V must have the same offsets (their batch and nnz are compared, the offsets
// themselves are not: that would need a host sync). Returns O with Q's offsets; `lse`, if given, receives
// [q.nnz(), heads_q] floats. scale <= 0 means 1 / sqrt(head_dim); NaN or infinity is refused. Throws
// ragged::Error.
template <typename T, typename OffsetT>
RaggedTensor<T, OffsetT> attention(const RaggedTensor<T, OffsetT>& q, const RaggedTensor<T, OffsetT>& k,
                                   const RaggedTensor<T, OffsetT>& v, bool causal = false, float scale = 0.0f,
                                   DeviceBuffer<float>* lse = nullptr) {
  auto heads_and_dim = [](const RaggedTensor<T, OffsetT>& t, const char* name) {
    if (t.inner_dims().size() != 2)
      throw Error(Status::kInvalidArgument, std::string("attention: ") + name +
                                                " must have inner dims {heads, head_dim}, got " +
                                                std::to_string(t.inner_dims().size()) + " inner dims");
    for (const std::int64_t dim : t.inner_dims())
      if (dim > std::numeric_limits<int>::max())
        throw Error(Status::kSizeOverflow, std::string("attention: ") + name + " has an inner dim of " +
                                               std::to_string(dim) + ", past int");
    return t.inner_dims();
  };
  const std::vector<std::int64_t> qd = heads_and_dim(q, "q"), kd = heads_and_dim(k, "k"), vd = heads_and_dim(v, "v");
  if (kd != vd || k.nnz() != v.nnz() || k.batch() != v.batch())
    throw Error(Status::kInvalidArgument, "attention: k and v must have the same shape");
  if (q.batch() != k.batch())
    throw Error(Status::kInvalidArgument, "attention: q has " + std::to_string(q.batch()) + " sequences, k has " +
                                              std::to_string(k.batch()));
  if (qd[1] != kd[1])
    throw Error(Status::kInvalidArgument, "attention: head_dim of q (" + std::to_string(qd[1]) +
                                              ") and k (" + std::to_string(kd[1]) + ") differ");
  RaggedTensor<T, OffsetT> out = q.empty_like();
  // The caller's lse buffer is replaced only once the op has run: a refused call leaves it as it was.
  DeviceBuffer<float> lse_out(lse != nullptr ? detail::element_count(q.nnz(), qd[0], "q: nnz * heads") : 0,
                              q.stream());
  AttentionArgs<T, OffsetT> a;
  a.q = dense_heads<const T>(q.values().data(), qd[0], qd[1]);
  a.k = dense_heads<const T>(k.values().data(), kd[0], kd[1]);
  a.v = dense_heads<const T>(v.values().data(), vd[0], vd[1]);
  a.o = dense_heads<T>(out.values().data(), qd[0], qd[1]);
  a.lse = lse != nullptr ? lse_out.data() : nullptr;
  a.q_seq = SequenceLayout<OffsetT>::ragged(q.offsets().data(), q.nnz());
  a.k_seq = SequenceLayout<OffsetT>::ragged(k.offsets().data(), k.nnz());
  a.batch = q.batch();
  a.heads_q = static_cast<int>(qd[0]);
  a.heads_kv = static_cast<int>(kd[0]);
  a.head_dim = static_cast<int>(qd[1]);
  a.scale = scale <= 0.0f ? 1.0f / std::sqrt(static_cast<float>(qd[1])) : scale;  // NaN goes on to be refused
  a.causal = causal;
  // K / V may live on other streams than Q: the kernel (on Q's stream) waits for their pending work, and their
  // streams then wait for the kernel, so that freeing them there waits for its reads. The host does not wait.
  CrossStreamUse k_use(q.stream(), k.stream());
  CrossStreamUse v_use(q.stream(), v.stream());
  Workspace ws(q.stream());
  run_with_workspace(ws,
                     [&](void* p, std::size_t& bytes) { return varlen_attention_forward(p, bytes, a, q.stream()); });
  k_use.done();
  v_use.done();
  if (lse != nullptr) *lse = std::move(lse_out);
  return out;
}

}  // namespace ragged
