// Owning convenience layer, part 3: a packed sequence as torch.nn.utils.rnn.PackedSequence holds one. The tokens
// of a RaggedTensor time-major (token 0 of every sequence, longest sequence first, then token 1, ...) with the
// packing order of packing.h that maps them back to the caller's order. Throws ragged::Error naming what is
// wrong; from_ragged synchronises the stream once (to read the longest sequence, or, where max_steps is given,
// the check for sequences longer than it).
//
//   auto packed = ragged::PackedSequence<float, std::int64_t>::from_ragged(x);  // x: RaggedTensor<float>
//   packed.data();            // [nnz, inner...] packed rows; step t starts at row step_offsets[t]
//   packed.batch_sizes();     // [max_steps] sequences still running at step t (PackedSequence.batch_sizes)
//   auto y = packed.to_ragged();                 // x again, in the caller's order, with x's offsets
//
// For a caller-owned workspace, graph capture or layout arrays held elsewhere, use packing.h directly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ragged/buffer.h"
#include "ragged/check.h"
#include "ragged/packing.h"
#include "ragged/status.h"
#include "ragged/tensor.h"

namespace ragged {

template <typename T, typename OffsetT = std::int64_t>
class PackedSequence {
 public:
  PackedSequence() = default;
  // Moving leaves `other` empty (batch 0, no buffers), as a moved-from RaggedTensor is.
  PackedSequence(PackedSequence&& other) noexcept { take(other); }
  PackedSequence& operator=(PackedSequence&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }

  // Packs x on its stream. max_steps < 0 means the longest sequence (read back from the device). A larger
  // max_steps gives trailing steps of batch size 0; a smaller one is refused, naming the first sequence longer
  // than it (PackedSequence never drops tokens; packing.h can).
  static PackedSequence from_ragged(const RaggedTensor<T, OffsetT>& x, std::int64_t max_steps = -1) {
    const bool given = max_steps >= 0;
    PackedSequence p;
    p.stream_ = x.stream();
    p.max_steps_ = given ? max_steps : x.max_length();
    p.inner_dims_ = x.inner_dims();
    // x's offsets without values (inner size 0): to_ragged rebuilds x's shape from them without a host copy.
    p.source_ = x.empty_like(std::vector<std::int64_t>{0});
    const std::size_t batch = static_cast<std::size_t>(x.batch());
    p.sorted_indices_ = DeviceBuffer<std::int64_t>(batch, p.stream_);
    p.unsorted_indices_ = DeviceBuffer<std::int64_t>(batch, p.stream_);
    p.sorted_lengths_ = DeviceBuffer<OffsetT>(batch, p.stream_);
    const std::size_t steps = static_cast<std::size_t>(p.max_steps_);  // int64: steps + 1 fits size_t
    p.batch_sizes_ = DeviceBuffer<OffsetT>(steps, p.stream_);
    p.step_offsets_ = DeviceBuffer<OffsetT>(steps + 1, p.stream_);
    p.data_ = DeviceBuffer<T>(detail::element_count(x.nnz(), x.inner(), "nnz * inner"), p.stream_);

    DeviceBuffer<CheckResult> check(given ? 1 : 0, p.stream_);
    Workspace ws(p.stream_);
    const PackedLayout<OffsetT> layout = p.writable_layout();
    run_with_workspace(ws, [&](void* w, std::size_t& bytes) {
      return packing_order(w, bytes, x.offsets().data(), layout, given ? check.data() : nullptr, p.stream_);
    });
    if (given) {
      const CheckResult result = check.to_host()[0];
      if (!result.ok())
        throw Error(Status::kInvalidArgument, "PackedSequence::from_ragged: sequence " +
                                                  std::to_string(result.index()) + " is longer than max_steps = " +
                                                  std::to_string(p.max_steps_));
    }
    run_with_workspace(ws, [&](void* w, std::size_t& bytes) {
      return pack_sequences(w, bytes, x.view(), p.layout(), p.data_.data(), p.stream_);
    });
    return p;
  }

  // x with the tokens back in the caller's order and x's offsets.
  RaggedTensor<T, OffsetT> to_ragged() const { return unpack(data_, inner_dims_, "to_ragged"); }

  // Other rows in this packed order, such as an RNN's output over data(): [nnz, inner_dims...], unpacked with
  // this layout into a tensor with x's offsets.
  RaggedTensor<T, OffsetT> to_ragged(const DeviceBuffer<T>& rows, std::vector<std::int64_t> inner_dims) const {
    return unpack(rows, std::move(inner_dims), "to_ragged(rows)");
  }

  std::int64_t batch() const { return source_.batch(); }
  std::int64_t nnz() const { return source_.nnz(); }
  std::int64_t max_steps() const { return max_steps_; }
  const std::vector<std::int64_t>& inner_dims() const { return inner_dims_; }
  cudaStream_t stream() const { return stream_; }

  DeviceBuffer<T>& data() { return data_; }
  const DeviceBuffer<T>& data() const { return data_; }
  const DeviceBuffer<std::int64_t>& sorted_indices() const { return sorted_indices_; }
  const DeviceBuffer<std::int64_t>& unsorted_indices() const { return unsorted_indices_; }
  const DeviceBuffer<OffsetT>& sorted_lengths() const { return sorted_lengths_; }
  const DeviceBuffer<OffsetT>& batch_sizes() const { return batch_sizes_; }
  const DeviceBuffer<OffsetT>& step_offsets() const { return step_offsets_; }
  // The offsets of the tensor this was packed from.
  const DeviceBuffer<OffsetT>& offsets() const { return source_.offsets(); }

  // The layout arrays, read-only, for the low-level pack_sequences / unpack_sequences.
  PackedLayout<const OffsetT> layout() const {
    return {batch(),           max_steps_,           sorted_indices_.data(), unsorted_indices_.data(),
            sorted_lengths_.data(), batch_sizes_.data(), step_offsets_.data()};
  }

 private:
  void take(PackedSequence& other) noexcept {
    source_ = std::move(other.source_);
    inner_dims_ = std::move(other.inner_dims_);
    other.inner_dims_.clear();
    max_steps_ = other.max_steps_;
    other.max_steps_ = 0;
    stream_ = other.stream_;
    data_ = std::move(other.data_);
    sorted_indices_ = std::move(other.sorted_indices_);
    unsorted_indices_ = std::move(other.unsorted_indices_);
    sorted_lengths_ = std::move(other.sorted_lengths_);
    batch_sizes_ = std::move(other.batch_sizes_);
    step_offsets_ = std::move(other.step_offsets_);
  }

  PackedLayout<OffsetT> writable_layout() {
    return {batch(),           max_steps_,           sorted_indices_.data(), unsorted_indices_.data(),
            sorted_lengths_.data(), batch_sizes_.data(), step_offsets_.data()};
  }

  RaggedTensor<T, OffsetT> unpack(const DeviceBuffer<T>& rows, std::vector<std::int64_t> inner_dims,
                                  const char* what) const {
    RaggedTensor<T, OffsetT> out = source_.empty_like(std::move(inner_dims));
    const std::size_t count = detail::element_count(nnz(), out.inner(), "nnz * inner");
    if (rows.size() != count)
      throw Error(Status::kInvalidArgument, std::string("PackedSequence::") + what + ": rows holds " +
                                                std::to_string(rows.size()) + " values, nnz * inner = " +
                                                std::to_string(nnz()) + " * " + std::to_string(out.inner()));
    CrossStreamUse rows_use(stream_, rows.stream());  // rows may be written on their own stream
    Workspace ws(stream_);
    run_with_workspace(ws, [&](void* w, std::size_t& bytes) {
      return unpack_sequences(w, bytes, rows.data(), layout(), out.view(), stream_);
    });
    rows_use.done();
    return out;
  }

  RaggedTensor<T, OffsetT> source_;  // the packed tensor's offsets, inner size 0
  std::vector<std::int64_t> inner_dims_;
  std::int64_t max_steps_ = 0;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<T> data_;
  DeviceBuffer<std::int64_t> sorted_indices_;
  DeviceBuffer<std::int64_t> unsorted_indices_;
  DeviceBuffer<OffsetT> sorted_lengths_;
  DeviceBuffer<OffsetT> batch_sizes_;
  DeviceBuffer<OffsetT> step_offsets_;
};

}  // namespace ragged
