// CPU references of the segment reductions and segment softmax: one column of one sequence at a time, double
// accumulation, one rounding to T at the end.
#include "ragged/reference_segment.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "host_convert.h"

namespace ragged {
namespace reference {
namespace {

using detail::to_double;
using detail::round_to;

// Index within the sequence of the first NaN, or else of the first extreme value; -1 for an empty sequence.
template <typename T>
std::int64_t extreme_index(const T* column, std::int64_t length, std::int64_t stride, bool is_max) {
  std::int64_t best = -1;
  double best_value = 0.0;
  for (std::int64_t i = 0; i < length; ++i) {
    const double v = to_double(column[i * stride]);
    if (std::isnan(v)) return i;
    // Strict comparison: a later equal value (including -0 after +0) never replaces the first.
    if (best < 0 || (is_max ? v > best_value : v < best_value)) {
      best = i;
      best_value = v;
    }
  }
  return best;
}

}  // namespace

template <typename T, typename OffsetT>
void segment_reduce(RaggedView<const T, OffsetT> src, ReduceOp op, T* out, std::int64_t* arg, float empty_value) {
  const std::int64_t inner = src.inner;
  const bool is_extreme = op == ReduceOp::kMax || op == ReduceOp::kMin;
  for (std::int64_t b = 0; b < src.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(src.offsets, b, src.nnz, begin, end);
    const std::int64_t length = end - begin;
    for (std::int64_t d = 0; d < inner; ++d) {
      const T* column = src.values + begin * inner + d;
      T& result = out[b * inner + d];
      if (length == 0) {
        result = round_to<T>(static_cast<double>(empty_value));
        if (is_extreme && arg != nullptr) arg[b * inner + d] = -1;
        continue;
      }
      if (is_extreme) {
        const std::int64_t index = extreme_index(column, length, inner, op == ReduceOp::kMax);
        result = column[index * inner];  // the element itself: keeps the sign of a zero and a NaN's payload
        if (arg != nullptr) arg[b * inner + d] = index;
        continue;
      }
      double sum = 0.0;
      for (std::int64_t i = 0; i < length; ++i) sum += to_double(column[i * inner]);
      result = round_to<T>(op == ReduceOp::kMean ? sum / static_cast<double>(length) : sum);
    }
  }
}

template <typename T, typename OffsetT>
void segment_reduce_backward(RaggedView<const T, OffsetT> shape, ReduceOp op, const T* grad_out,
                             const std::int64_t* arg, T* grad_in) {
  const std::int64_t inner = shape.inner;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(shape.offsets, b, shape.nnz, begin, end);
    const std::int64_t length = end - begin;
    for (std::int64_t d = 0; d < inner; ++d) {
      const T g = grad_out[b * inner + d];
      T* column = grad_in + begin * inner + d;
      for (std::int64_t i = 0; i < length; ++i) {
        T& x = column[i * inner];
        switch (op) {
          case ReduceOp::kSum: x = g; break;
          case ReduceOp::kMean: x = round_to<T>(to_double(g) / static_cast<double>(length)); break;
          case ReduceOp::kMax:
          case ReduceOp::kMin: x = arg[b * inner + d] == i ? g : round_to<T>(0.0); break;
        }
      }
    }
  }
}

template <typename T, typename OffsetT>
void segment_softmax(RaggedView<const T, OffsetT> src, bool log, T* out) {
  const std::int64_t inner = src.inner;
  for (std::int64_t b = 0; b < src.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(src.offsets, b, src.nnz, begin, end);
    const std::int64_t length = end - begin;
    for (std::int64_t d = 0; d < inner; ++d) {
      const T* x = src.values + begin * inner + d;
      T* y = out + begin * inner + d;
      // A NaN makes the maximum NaN, and with it every output of the column.
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t i = 0; i < length; ++i) {
        const double v = to_double(x[i * inner]);
        if (std::isnan(v) || v > m) m = v;
        if (std::isnan(m)) break;
      }
      double sum = 0.0;
      for (std::int64_t i = 0; i < length; ++i) sum += std::exp(to_double(x[i * inner]) - m);
      const double log_sum = std::log(sum);
      for (std::int64_t i = 0; i < length; ++i) {
        const double shifted = to_double(x[i * inner]) - m;
        y[i * inner] = round_to<T>(log ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  }
}

template <typename T, typename OffsetT>
void segment_softmax_backward(RaggedView<const T, OffsetT> shape, bool log, const T* out, const T* grad_out,
                              T* grad_in) {
  const std::int64_t inner = shape.inner;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    std::int64_t begin = 0, end = 0;
    clamped_row_range(shape.offsets, b, shape.nnz, begin, end);
    const std::int64_t length = end - begin;
    for (std::int64_t d = 0; d < inner; ++d) {
      const std::int64_t first = begin * inner + d;
      // softmax: sum(dy * y); log-softmax: sum(dy).
      double dot = 0.0;
      for (std::int64_t i = 0; i < length; ++i) {
        const double dy = to_double(grad_out[first + i * inner]);
        dot += log ? dy : dy * to_double(out[first + i * inner]);
      }
      for (std::int64_t i = 0; i < length; ++i) {
        const double y = to_double(out[first + i * inner]);
        const double dy = to_double(grad_out[first + i * inner]);
        grad_in[first + i * inner] = round_to<T>(log ? dy - std::exp(y) * dot : y * (dy - dot));
      }
    }
  }
}

#define RAGGED_INSTANTIATE_SEGMENT_REFERENCE(T, OffsetT)                                                         \
  template void segment_reduce<T, OffsetT>(RaggedView<const T, OffsetT>, ReduceOp, T*, std::int64_t*, float);    \
  template void segment_reduce_backward<T, OffsetT>(RaggedView<const T, OffsetT>, ReduceOp, const T*,            \
                                                    const std::int64_t*, T*);                                    \
  template void segment_softmax<T, OffsetT>(RaggedView<const T, OffsetT>, bool, T*);                             \
  template void segment_softmax_backward<T, OffsetT>(RaggedView<const T, OffsetT>, bool, const T*, const T*, T*);

RAGGED_INSTANTIATE_SEGMENT_REFERENCE(float, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT_REFERENCE(float, std::int64_t)
RAGGED_INSTANTIATE_SEGMENT_REFERENCE(half, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT_REFERENCE(half, std::int64_t)
RAGGED_INSTANTIATE_SEGMENT_REFERENCE(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT_REFERENCE(bfloat16, std::int64_t)
#undef RAGGED_INSTANTIATE_SEGMENT_REFERENCE

}  // namespace reference
}  // namespace ragged
