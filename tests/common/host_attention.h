// Attention inputs held in host vectors (Q, K, V dense [rows, heads, head_dim], ragged or padded sequence
// layout), for tests that feed the same data to the CPU reference and to the device op.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/host_ragged.h"
#include "common/test_util.h"
#include "ragged/attention.h"

namespace ragged {
namespace test {

template <typename T, typename OffsetT>
struct HostAttention {
  std::int64_t batch = 0;
  int heads_q = 1, heads_kv = 1, dim = 64;
  bool causal = false;
  float scale = 1.0f;
  bool padded = false;
  std::int64_t q_max_len = 0, k_max_len = 0;  // padded only
  std::vector<std::int64_t> q_lengths, k_lengths;
  std::vector<OffsetT> q_index, k_index;  // offsets [batch + 1] (ragged) or lengths [batch] (padded)
  std::int64_t q_rows = 0, k_rows = 0;
  std::vector<T> q, k, v;  // dense [q_rows, heads_q, dim] and [k_rows, heads_kv, dim]

  std::int64_t q_row(std::int64_t b, std::int64_t i) const {
    return padded ? b * q_max_len + i : static_cast<std::int64_t>(q_index[b]) + i;
  }
  std::int64_t k_row(std::int64_t b, std::int64_t j) const {
    return padded ? b * k_max_len + j : static_cast<std::int64_t>(k_index[b]) + j;
  }
  std::int64_t o_elems() const { return q_rows * heads_q * dim; }
  std::int64_t lse_elems() const { return q_rows * heads_q; }

  // Arguments over the given buffers (host or device), dense strides.
  AttentionArgs<T, OffsetT> args_with(const T* q_ptr, const T* k_ptr, const T* v_ptr, T* o_ptr, float* lse_ptr,
                                      const OffsetT* q_idx, const OffsetT* k_idx) const {
    AttentionArgs<T, OffsetT> a;
    a.q = dense_heads(q_ptr, heads_q, dim);
    a.k = dense_heads(k_ptr, heads_kv, dim);
    a.v = dense_heads(v_ptr, heads_kv, dim);
    a.o = dense_heads(o_ptr, heads_q, dim);
    a.lse = lse_ptr;
    if (padded) {
      a.q_seq = SequenceLayout<OffsetT>::padded(q_idx, batch, q_max_len);
      a.k_seq = SequenceLayout<OffsetT>::padded(k_idx, batch, k_max_len);
    } else {
      a.q_seq = SequenceLayout<OffsetT>::ragged(q_idx, q_rows);
      a.k_seq = SequenceLayout<OffsetT>::ragged(k_idx, k_rows);
    }
    a.batch = batch;
    a.heads_q = heads_q;
    a.heads_kv = heads_kv;
    a.head_dim = dim;
    a.scale = scale;
    a.causal = causal;
    return a;
  }
  // Host arguments reading this struct's vectors.
  AttentionArgs<T, OffsetT> host_args(T* o_ptr, float* lse_ptr) const {
    return args_with(q.data(), k.data(), v.data(), o_ptr, lse_ptr, q_index.data(), k_index.data());
  }
};

// Ragged inputs with random non-zero values (test::random_values); `extra_rows` spare rows after the last
// sequence in Q and in K/V. Q's hold values, which no result may show; K's and V's hold NaN, which reaches a
// result if a kernel reads them where it must zero-fill a tile past a sequence's end (a finite value there
// would be hidden by the mask's zero weight).
template <typename T, typename OffsetT>
HostAttention<T, OffsetT> random_attention(const std::vector<std::int64_t>& q_lengths,
                                           const std::vector<std::int64_t>& k_lengths, int heads_q, int heads_kv,
                                           int dim, bool causal, std::mt19937_64& rng, std::int64_t extra_rows = 0) {
  HostAttention<T, OffsetT> h;
  h.batch = static_cast<std::int64_t>(q_lengths.size());
  h.heads_q = heads_q;
  h.heads_kv = heads_kv;
  h.dim = dim;
  h.causal = causal;
  h.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  h.q_lengths = q_lengths;
  h.k_lengths = k_lengths;
  h.q_index = offsets_from_lengths<OffsetT>(q_lengths);
  h.k_index = offsets_from_lengths<OffsetT>(k_lengths);
  h.q_rows = static_cast<std::int64_t>(h.q_index.back()) + extra_rows;
  h.k_rows = static_cast<std::int64_t>(h.k_index.back()) + extra_rows;
  h.q = random_values<T>(static_cast<std::size_t>(h.q_rows * heads_q * dim), rng);
  h.k = random_values<T>(static_cast<std::size_t>(h.k_rows * heads_kv * dim), rng);
  h.v = random_values<T>(static_cast<std::size_t>(h.k_rows * heads_kv * dim), rng);
  const auto spare = static_cast<std::size_t>(h.k_index.back()) * heads_kv * dim;
  std::fill(h.k.begin() + spare, h.k.end(), from_double<T>(std::numeric_limits<double>::quiet_NaN()));
  std::fill(h.v.begin() + spare, h.v.end(), from_double<T>(std::numeric_limits<double>::quiet_NaN()));
  return h;
}

// The same sequences in padded layouts [batch, max_len, heads, dim] (max_len at least the longest sequence);
// Q's padding slots hold random values and K's and V's NaN (as random_attention's spare rows), which the op
// must ignore.
template <typename T, typename OffsetT>
HostAttention<T, OffsetT> to_padded(const HostAttention<T, OffsetT>& r, std::int64_t q_max_len, std::int64_t k_max_len,
                                    std::mt19937_64& rng) {
  HostAttention<T, OffsetT> p = r;
  p.padded = true;
  p.q_max_len = q_max_len;
  p.k_max_len = k_max_len;
  p.q_rows = r.batch * q_max_len;
  p.k_rows = r.batch * k_max_len;
  p.q_index.assign(r.q_lengths.begin(), r.q_lengths.end());
  p.k_index.assign(r.k_lengths.begin(), r.k_lengths.end());
  p.q = random_values<T>(static_cast<std::size_t>(p.q_rows * r.heads_q * r.dim), rng);
  p.k.assign(static_cast<std::size_t>(p.k_rows * r.heads_kv * r.dim),
             from_double<T>(std::numeric_limits<double>::quiet_NaN()));
  p.v = p.k;
  const std::int64_t qw = r.heads_q * r.dim, kw = r.heads_kv * r.dim;
  for (std::int64_t b = 0; b < r.batch; ++b) {
    for (std::int64_t i = 0; i < r.q_lengths[b]; ++i)
      std::copy_n(&r.q[r.q_row(b, i) * qw], qw, &p.q[p.q_row(b, i) * qw]);
    for (std::int64_t j = 0; j < r.k_lengths[b]; ++j) {
      std::copy_n(&r.k[r.k_row(b, j) * kw], kw, &p.k[p.k_row(b, j) * kw]);
      std::copy_n(&r.v[r.k_row(b, j) * kw], kw, &p.v[p.k_row(b, j) * kw]);
    }
  }
  return p;
}

// Non-finite scores, non-causal, heads 2 / 1, dim 64, lengths q {4, 3, 5} and k {70, 9, 33}; what each query
// must give (attention.h):
// - sequence 0: column 0 of every key is positive, so query 0 (head 0: q[0] = -inf) scores -inf against every
//   key: O = 0, LSE = -inf; query 1 (head 1: q[0] = NaN) and query 2 (head 0: q[0] = +inf) give NaN; query 3
//   and the other heads are finite.
// - sequence 1: key 4 holds a NaN, which every query sees: NaN everywhere.
// - sequence 2: key 7 scores -inf against every query (a zero weight): finite.
template <typename T, typename OffsetT>
HostAttention<T, OffsetT> non_finite_attention(std::mt19937_64& rng) {
  HostAttention<T, OffsetT> h = random_attention<T, OffsetT>({4, 3, 5}, {70, 9, 33}, 2, 1, 64, false, rng);
  const double inf = std::numeric_limits<double>::infinity();
  auto q_at = [&](std::int64_t b, std::int64_t i, int head, int d) -> T& {
    return h.q[static_cast<std::size_t>((h.q_row(b, i) * h.heads_q + head) * h.dim + d)];
  };
  auto k_at = [&](std::int64_t b, std::int64_t j, int d) -> T& {
    return h.k[static_cast<std::size_t>(h.k_row(b, j) * h.dim + d)];
  };
  auto positive = [](T x) { return from_double<T>(std::fabs(to_double(x)) + 0.5); };
  for (std::int64_t j = 0; j < h.k_lengths[0]; ++j) k_at(0, j, 0) = positive(k_at(0, j, 0));
  q_at(0, 0, 0, 0) = from_double<T>(-inf);
  q_at(0, 1, 1, 0) = from_double<T>(std::numeric_limits<double>::quiet_NaN());
  q_at(0, 2, 0, 0) = from_double<T>(inf);
  k_at(1, 4, 5) = from_double<T>(std::numeric_limits<double>::quiet_NaN());
  for (std::int64_t i = 0; i < h.q_lengths[2]; ++i)
    for (int head = 0; head < h.heads_q; ++head) q_at(2, i, head, 0) = positive(q_at(2, i, head, 0));
  k_at(2, 7, 0) = from_double<T>(-inf);
  return h;
}

}  // namespace test
}  // namespace ragged
