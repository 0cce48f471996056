// Owning convenience layer, part 2: RaggedTensor and PaddedTensor with device memory, host copies and the
// conversions. Everything throws ragged::Error with a message naming what is wrong. Unlike the low-level API,
// these calls may synchronise the stream (host copies, reading a device-computed max length, validation).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/offsets.h"
#include "ragged/segment_reduce.h"
#include "ragged/view.h"

namespace ragged {

namespace detail {
// a * b for sizes (both >= 0), or kSizeOverflow naming `what` where the product does not fit int64.
inline std::int64_t checked_product(std::int64_t a, std::int64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a)
    throw Error(Status::kSizeOverflow,
                std::string(what) + " = " + std::to_string(a) + " * " + std::to_string(b) + " overflows int64");
  return a * b;
}

// The product of the inner dimensions (1 for none), each >= 0.
inline std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t p = 1;
  for (std::int64_t d : dims) {
    if (d < 0) throw Error(Status::kInvalidArgument, "inner dimension " + std::to_string(d) + " is negative");
    p = checked_product(p, d, "the product of the inner dimensions");
  }
  return p;
}

// Elements of a [rows, inner] buffer: rows * inner, checked as above.
inline std::size_t element_count(std::int64_t rows, std::int64_t inner, const char* what) {
  return static_cast<std::size_t>(checked_product(rows, inner, what));
}
}  // namespace detail

template <typename T>
struct PaddedTensor {
  DeviceBuffer<T> data;  // [batch, max_len, inner_dims...]
  std::int64_t batch = 0;
  std::int64_t max_len = 0;
  std::vector<std::int64_t> inner_dims;

  std::int64_t inner() const { return detail::product(inner_dims); }
  PaddedView<T> view() { return {data.data(), batch, max_len, inner()}; }
  PaddedView<const T> view() const { return {data.data(), batch, max_len, inner()}; }
};

template <typename T, typename OffsetT = std::int64_t>
class RaggedTensor {
 public:
  RaggedTensor() = default;
  // Moving leaves `other` an empty tensor (batch 0, no buffers, inner 1), not one whose sizes outlive its
  // buffers; moving a tensor into itself changes nothing.
  RaggedTensor(RaggedTensor&& other) noexcept { take(other); }
  RaggedTensor& operator=(RaggedTensor&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }

  // values: nnz * inner elements, row-major; lengths: one per sequence. Validates, then copies to the device.
  static RaggedTensor from_host(const std::vector<T>& values, const std::vector<std::int64_t>& lengths,
                                std::vector<std::int64_t> inner_dims = {}, cudaStream_t stream = nullptr) {
    RaggedTensor t;
    t.inner_dims_ = std::move(inner_dims);
    t.batch_ = static_cast<std::int64_t>(lengths.size());
    std::vector<OffsetT> offsets(lengths.size() + 1);
    throw_if_error(lengths_to_offsets_host(lengths.data(), t.batch_, offsets.data()));
    t.nnz_ = static_cast<std::int64_t>(offsets.back());
    const std::int64_t inner = detail::product(t.inner_dims_);
    if (values.size() != detail::element_count(t.nnz_, inner, "nnz * inner"))
      throw Error(Status::kInvalidArgument, "values holds " + std::to_string(values.size()) +
                                                " elements but the lengths need nnz * inner = " +
                                                std::to_string(t.nnz_) + " * " + std::to_string(inner));
    t.values_ = DeviceBuffer<T>(values, stream);
    t.offsets_ = DeviceBuffer<OffsetT>(offsets, stream);
    t.stream_ = stream;
    return t;
  }

  // Adopts device buffers; validates the offsets on the host first (one copy back, synchronising).
  static RaggedTensor from_device(DeviceBuffer<T> values, DeviceBuffer<OffsetT> offsets,
                                  std::vector<std::int64_t> inner_dims = {}) {
    RaggedTensor t;
    if (offsets.empty()) throw Error(Status::kInvalidOffsets, "offsets must hold batch + 1 >= 1 entries");
    t.inner_dims_ = std::move(inner_dims);
    const std::int64_t inner = detail::product(t.inner_dims_);
    t.batch_ = static_cast<std::int64_t>(offsets.size()) - 1;
    // With an inner size of 0 the values hold nothing however many rows there are: any nnz fits.
    const std::int64_t capacity = inner > 0 ? static_cast<std::int64_t>(values.size()) / inner
                                            : std::numeric_limits<std::int64_t>::max();
    const std::vector<OffsetT> host = offsets.to_host();
    throw_if_error(validate_offsets_host(host.data(), t.batch_, capacity, -1));
    t.nnz_ = static_cast<std::int64_t>(host.back());
    t.stream_ = values.stream();
    offsets.set_stream(t.stream_);  // every op reads them on the values' stream: they are freed there too
    t.values_ = std::move(values);
    t.offsets_ = std::move(offsets);
    return t;
  }

  std::int64_t batch() const { return batch_; }
  std::int64_t nnz() const { return nnz_; }
  std::int64_t inner() const { return detail::product(inner_dims_); }
  const std::vector<std::int64_t>& inner_dims() const { return inner_dims_; }
  cudaStream_t stream() const { return stream_; }
  DeviceBuffer<T>& values() { return values_; }
  const DeviceBuffer<T>& values() const { return values_; }
  const DeviceBuffer<OffsetT>& offsets() const { return offsets_; }

  RaggedView<T, OffsetT> view() { return {values_.data(), offsets_.data(), batch_, nnz_, inner()}; }
  RaggedView<const T, OffsetT> view() const { return {values_.data(), offsets_.data(), batch_, nnz_, inner()}; }

  std::vector<T> values_to_host() const { return values_.to_host(); }
  std::vector<OffsetT> offsets_to_host() const { return offsets_.to_host(); }
  std::vector<std::int64_t> lengths_to_host() const {
    const std::vector<OffsetT> o = offsets_to_host();
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch_));
    for (std::size_t b = 0; b < lengths.size(); ++b) lengths[b] = static_cast<std::int64_t>(o[b + 1] - o[b]);
    return lengths;
  }

  // Longest sequence, reduced on the device and read back (synchronises).
  std::int64_t max_length() const {
    Workspace ws(stream_);
    DeviceBuffer<std::int64_t> d_max(1, stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::max_length(p, bytes, offsets_.data(), batch_, d_max.data(), stream_);
    });
    return d_max.to_host()[0];
  }

  // To [batch, max_len, inner...]; max_len < 0 means the longest sequence.
  PaddedTensor<T> to_padded(T pad_value, std::int64_t max_len = -1, Align align = Align::kLeft,
                            Truncate trunc = Truncate::kRight) const {
    PaddedTensor<T> out;
    out.batch = batch_;
    out.max_len = max_len < 0 ? max_length() : max_len;
    out.inner_dims = inner_dims_;
    out.data = DeviceBuffer<T>(
        detail::element_count(detail::checked_product(batch_, out.max_len, "batch * max_len"), inner(),
                              "batch * max_len * inner"),
        stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::ragged_to_padded(p, bytes, view(), out.view(), pad_value, align, trunc, stream_);
    });
    return out;
  }

  // [batch, max_len] key-padding mask of the sequences (lengths_to_mask): true where slot s holds a token, placed
  // as to_padded(pad, max_len, align) places it (a sequence longer than max_len fills its row), false on padding.
  // max_len < 0 means the longest sequence.
  DeviceBuffer<bool> padding_mask(std::int64_t max_len = -1, Align align = Align::kLeft) const {
    return mask_of<bool>(max_len, align);
  }

  // The additive form for attention scores: 0 where slot s holds a token, -infinity on padding. U: float, half or
  // bfloat16.
  template <typename U>
  DeviceBuffer<U> additive_mask(std::int64_t max_len = -1, Align align = Align::kLeft) const {
    return mask_of<U>(max_len, align);
  }

  // A tensor with the same offsets (copied) and fresh, unwritten values.
  RaggedTensor empty_like() const { return make_like(inner_dims_, values_.size()); }

  // The same offsets (copied) with other inner dims: fresh, unwritten values of nnz rows.
  RaggedTensor empty_like(std::vector<std::int64_t> inner_dims) const {
    const std::size_t count = detail::element_count(nnz_, detail::product(inner_dims), "nnz * inner");
    return make_like(std::move(inner_dims), count);
  }

  // [batch, inner...] reduction of every sequence (segment_reduce.h); `arg`, if given, receives the index of the
  // max / min within each sequence.
  DeviceBuffer<T> reduce(ReduceOp op, float empty_value = 0.0f, DeviceBuffer<std::int64_t>* arg = nullptr) const {
    // Refused before `arg` is replaced, whatever the batch: only max and min have arg outputs.
    if (arg != nullptr && op != ReduceOp::kMax && op != ReduceOp::kMin)
      throw Error(Status::kInvalidArgument,
                  std::string("reduce: arg output given for ") + reduce_op_name(op) + "; only max and min have one");
    const std::size_t count = detail::element_count(batch_, inner(), "batch * inner");
    DeviceBuffer<T> out(count, stream_);
    DeviceBuffer<std::int64_t> arg_out(arg != nullptr ? count : 0, stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::segment_reduce(p, bytes, view(), op, out.data(), arg != nullptr ? arg_out.data() : nullptr,
                                    empty_value, stream_);
    });
    if (arg != nullptr) *arg = std::move(arg_out);  // replaced only once the op has run
    return out;
  }

  // Softmax (or log-softmax) of every sequence along its tokens, per inner column.
  RaggedTensor softmax(bool log = false) const {
    RaggedTensor out = empty_like();
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::segment_softmax(p, bytes, view(), log, out.values_.data(), stream_);
    });
    return out;
  }

  // The gradient with respect to this tensor's values of reduce(op), given the gradient of its output
  // [batch, inner...] (segment_reduce_backward): kSum copies it to every token, kMean divides it by the length,
  // kMax / kMin route it to the token `arg` names (from reduce(op, empty_value, &arg)) and write 0 elsewhere.
  // Only the offsets of this tensor are used.
  RaggedTensor reduce_backward(ReduceOp op, const DeviceBuffer<T>& grad_out,
                               const DeviceBuffer<std::int64_t>* arg = nullptr) const {
    const std::size_t count = detail::element_count(batch_, inner(), "batch * inner");
    if (grad_out.size() != count)
      throw Error(Status::kInvalidArgument, "reduce_backward: grad_out holds " + std::to_string(grad_out.size()) +
                                                " values, the reduction has batch * inner = " + std::to_string(count));
    const bool routed = op == ReduceOp::kMax || op == ReduceOp::kMin;
    if (routed && (arg == nullptr || arg->size() != count))
      throw Error(Status::kInvalidArgument, std::string("reduce_backward: ") + reduce_op_name(op) +
                                                " needs the arg indices of the forward reduction (" +
                                                std::to_string(count) + " of them)");
    RaggedTensor grad = empty_like();
    // grad_out and arg may live on other streams: ordered both ways, without a host sync.
    CrossStreamUse grad_out_use(stream_, grad_out.stream());
    CrossStreamUse arg_use(stream_, routed ? arg->stream() : stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::segment_reduce_backward(p, bytes, view(), op, grad_out.data(),
                                             routed ? arg->data() : nullptr, grad.values_.data(), stream_);
    });
    grad_out_use.done();
    arg_use.done();
    return grad;
  }

  // Called on y = x.softmax(log): the gradient with respect to x given dL/dy, a tensor of the same shape (its
  // offsets are taken to be y's; they are not compared, which would need a host sync).
  RaggedTensor softmax_backward(const RaggedTensor& grad_out, bool log = false) const {
    if (grad_out.batch_ != batch_ || grad_out.nnz_ != nnz_ || grad_out.inner() != inner())
      throw Error(Status::kInvalidArgument,
                  "softmax_backward: grad_out is [" + std::to_string(grad_out.nnz_) + " tokens of " +
                      std::to_string(grad_out.batch_) + " sequences, inner " + std::to_string(grad_out.inner()) +
                      "], the softmax output is [" + std::to_string(nnz_) + " of " + std::to_string(batch_) +
                      ", inner " + std::to_string(inner()) + "]");
    RaggedTensor grad = empty_like();
    CrossStreamUse grad_out_use(stream_, grad_out.stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::segment_softmax_backward(p, bytes, view(), log, values_.data(), grad_out.values_.data(),
                                              grad.values_.data(), stream_);
    });
    grad_out_use.done();
    return grad;
  }

  // From a padded tensor and the lengths of its sequences (tokens the padded tensor lacks become `fill`).
  static RaggedTensor from_padded(const PaddedTensor<T>& padded, const std::vector<std::int64_t>& lengths,
                                  T fill = T(), Align align = Align::kLeft, Truncate trunc = Truncate::kRight,
                                  cudaStream_t stream = nullptr) {
    if (static_cast<std::int64_t>(lengths.size()) != padded.batch)
      throw Error(Status::kInvalidArgument, "from_padded: " + std::to_string(lengths.size()) +
                                                " lengths for a padded batch of " + std::to_string(padded.batch));
    RaggedTensor t;
    t.inner_dims_ = padded.inner_dims;
    t.batch_ = padded.batch;
    std::vector<OffsetT> offsets(lengths.size() + 1);
    throw_if_error(lengths_to_offsets_host(lengths.data(), t.batch_, offsets.data()));
    t.nnz_ = static_cast<std::int64_t>(offsets.back());
    t.stream_ = stream;
    t.offsets_ = DeviceBuffer<OffsetT>(offsets, stream);
    t.values_ = DeviceBuffer<T>(detail::element_count(t.nnz_, t.inner(), "nnz * inner"), stream);
    CrossStreamUse padded_use(stream, padded.data.stream());  // it may still be being written on its own stream
    Workspace ws(stream);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return ragged::padded_to_ragged(p, bytes, padded.view(), t.view(), fill, align, trunc, stream);
    });
    padded_use.done();
    return t;
  }

 private:
  template <typename U>
  DeviceBuffer<U> mask_of(std::int64_t max_len, Align align) const {
    if (max_len < 0) max_len = max_length();
    DeviceBuffer<U> mask(detail::element_count(batch_, max_len, "batch * max_len"), stream_);
    // The offsets were validated when the tensor was made: no length is negative, so no check is read back.
    DeviceBuffer<OffsetT> lengths(static_cast<std::size_t>(batch_), stream_);
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      return offsets_to_lengths(p, bytes, offsets_.data(), batch_, lengths.data(), stream_);
    });
    run_with_workspace(ws, [&](void* p, std::size_t& bytes) {
      if constexpr (std::is_same<U, bool>::value)
        return lengths_to_mask(p, bytes, lengths.data(), batch_, max_len, align, mask.data(), nullptr, stream_);
      else
        return lengths_to_additive_mask(p, bytes, lengths.data(), batch_, max_len, align, mask.data(), nullptr,
                                        stream_);
    });
    return mask;
  }

  void take(RaggedTensor& other) noexcept {
    values_ = std::move(other.values_);
    offsets_ = std::move(other.offsets_);
    inner_dims_ = std::move(other.inner_dims_);
    other.inner_dims_.clear();
    batch_ = other.batch_;
    nnz_ = other.nnz_;
    stream_ = other.stream_;
    other.batch_ = 0;
    other.nnz_ = 0;
  }

  RaggedTensor make_like(std::vector<std::int64_t> inner_dims, std::size_t value_count) const {
    RaggedTensor t;
    t.inner_dims_ = std::move(inner_dims);
    t.batch_ = batch_;
    t.nnz_ = nnz_;
    t.stream_ = stream_;
    t.values_ = DeviceBuffer<T>(value_count, stream_);
    t.offsets_ = DeviceBuffer<OffsetT>(offsets_.size(), stream_);
    if (!offsets_.empty())
      cuda_check(cudaMemcpyAsync(t.offsets_.data(), offsets_.data(), offsets_.bytes(), cudaMemcpyDeviceToDevice,
                                 stream_),
                 "cudaMemcpyAsync(offsets)");
    return t;
  }

  DeviceBuffer<T> values_;
  DeviceBuffer<OffsetT> offsets_;
  std::vector<std::int64_t> inner_dims_;
  std::int64_t batch_ = 0;
  std::int64_t nnz_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace ragged
