// CPU reference of the attention forward pass: plain loops in double precision, one query at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ragged/reference.h"

#include "host_convert.h"

namespace ragged {
namespace reference {
namespace {

using detail::to_double;
template <typename T>
T round_from_double(double v) { return detail::round_to<T>(v); }

struct Span {
  std::int64_t start, length;
};

// Sequence b's rows, clamped into [0, rows) as the kernels clamp them.
template <typename OffsetT>
Span span_of(const SequenceLayout<OffsetT>& s, std::int64_t b) {
  if (s.offsets == nullptr) {
    std::int64_t length = static_cast<std::int64_t>(s.lengths[b]);
    length = length < 0 ? 0 : (length > s.max_len ? s.max_len : length);
    return Span{b * s.max_len, length};
  }
  std::int64_t begin = 0, end = 0;
  clamped_row_range(s.offsets, b, s.rows, begin, end);
  return Span{begin, end - begin};
}

template <typename T>
const T* row_of(const HeadsView<const T>& t, std::int64_t row, std::int64_t head) {
  return t.data + row * t.token_stride + head * t.head_stride;
}

// Calls emit(row, head, out[head_dim], lse) for every query row of every sequence.
template <typename T, typename OffsetT, typename Emit>
void for_each_query(const AttentionArgs<T, OffsetT>& a, Emit&& emit) {
  const std::int64_t dim = a.head_dim;
  const int group = a.heads_q / a.heads_kv;
  std::vector<double> scores, acc(static_cast<std::size_t>(dim));
  for (std::int64_t b = 0; b < a.batch; ++b) {
    const Span qs = span_of(a.q_seq, b), ks = span_of(a.k_seq, b);
    for (int h = 0; h < a.heads_q; ++h) {
      const int hk = h / group;
      for (std::int64_t i = 0; i < qs.length; ++i) {
        // Keys [0, visible) are seen by query i.
        std::int64_t visible = ks.length;
        if (a.causal) visible = std::min(ks.length, std::max<std::int64_t>(0, i + ks.length - qs.length + 1));
        const T* q = row_of(a.q, qs.start + i, h);
        scores.assign(static_cast<std::size_t>(visible), 0.0);
        double max = -std::numeric_limits<double>::infinity();
        bool any_nan = false;
        for (std::int64_t j = 0; j < visible; ++j) {
          const T* k = row_of(a.k, ks.start + j, hk);
          double dot = 0.0;
          for (std::int64_t d = 0; d < dim; ++d) dot += to_double(q[d]) * to_double(k[d]);
          scores[j] = static_cast<double>(a.scale) * dot;
          if (std::isnan(scores[j])) any_nan = true;
          else max = std::max(max, scores[j]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        // No visible key, or only scores of -inf: an empty sum (exp(-inf - -inf) would be NaN), O = 0 and
        // LSE = -inf. A NaN score makes sum, O and LSE NaN below.
        if (visible == 0 || (max == -std::numeric_limits<double>::infinity() && !any_nan)) {
          emit(qs.start + i, h, acc.data(), -std::numeric_limits<double>::infinity());
          continue;
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < visible; ++j) {
          const double e = std::exp(scores[j] - max);
          sum += e;
          const T* v = row_of(a.v, ks.start + j, hk);
          for (std::int64_t d = 0; d < dim; ++d) acc[d] += e * to_double(v[d]);
        }
        for (std::int64_t d = 0; d < dim; ++d) acc[d] /= sum;
        emit(qs.start + i, h, acc.data(), max + std::log(sum));
      }
    }
  }
}

}  // namespace

template <typename T, typename OffsetT>
void attention_forward(const AttentionArgs<T, OffsetT>& a) {
  for_each_query(a, [&](std::int64_t row, int h, const double* out, double lse) {
    T* o = a.o.data + row * a.o.token_stride + h * a.o.head_stride;
    for (int d = 0; d < a.head_dim; ++d) o[d] = round_from_double<T>(out[d]);
    if (a.lse != nullptr) a.lse[row * a.heads_q + h] = static_cast<float>(lse);
  });
}

template <typename T, typename OffsetT>
void attention_forward_exact(const AttentionArgs<T, OffsetT>& a, double* out, double* lse) {
  for_each_query(a, [&](std::int64_t row, int h, const double* values, double row_lse) {
    if (out != nullptr)
      for (int d = 0; d < a.head_dim; ++d) out[(row * a.heads_q + h) * a.head_dim + d] = values[d];
    if (lse != nullptr) lse[row * a.heads_q + h] = row_lse;
  });
}

#define RAGGED_INSTANTIATE_REFERENCE_ATTENTION(T, O)                          \
  template void attention_forward<T, O>(const AttentionArgs<T, O>&);          \
  template void attention_forward_exact<T, O>(const AttentionArgs<T, O>&, double*, double*);

RAGGED_INSTANTIATE_REFERENCE_ATTENTION(float, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_ATTENTION(float, std::int64_t)
RAGGED_INSTANTIATE_REFERENCE_ATTENTION(half, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_ATTENTION(half, std::int64_t)
RAGGED_INSTANTIATE_REFERENCE_ATTENTION(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_REFERENCE_ATTENTION(bfloat16, std::int64_t)

}  // namespace reference
}  // namespace ragged
