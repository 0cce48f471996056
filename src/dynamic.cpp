// Run-time dtype dispatch onto the typed ops: offset type first, then element type; every switch ends in an
// error that names the unsupported type.
#include "ragged/dynamic.h"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ragged/attention.h"
#include "ragged/convert.h"
#include "ragged/offsets.h"
#include "ragged/packing.h"
#include "ragged/rnn.h"
#include "validate.h"

namespace ragged {
namespace dynamic {
namespace {

Status unsupported(const char* op, const char* what, DType dtype) {
  return fail(Status::kUnsupportedDType, std::string(op) + ": no kernel for " + what + " " + dtype_name(dtype));
}

// v rounded to float, to nearest even: static_cast<float> is undefined for a finite v past float's range, which
// rounds to +-FLT_MAX up to half an ulp (2^103) past it and to an infinity beyond.
float round_to_float(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (std::isfinite(v) && std::fabs(v) > kMax) {
    const bool to_infinity = std::fabs(v) >= kMax + std::ldexp(1.0, 103);
    const float magnitude = to_infinity ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::max();
    return std::signbit(v) ? -magnitude : magnitude;
  }
  return static_cast<float>(v);
}

// The pad / fill value in the element type. An integer type takes it truncated toward zero; a value it cannot
// hold (NaN, an infinity, out of range) is refused, where static_cast would be undefined behaviour.
template <typename T>
Status convert_scalar(double v, const char* op, const char* name, DType dtype, T& out) {
  if constexpr (std::is_same<T, half>::value) {
    out = __double2half(v);  // rounded once, as the CPU references round (through float it would be twice)
  } else if constexpr (std::is_same<T, bfloat16>::value) {
    out = __double2bfloat16(v);
  } else if constexpr (std::is_same<T, float>::value) {
    out = round_to_float(v);
  } else if constexpr (std::is_same<T, bool>::value) {
    out = v != 0.0;
  } else if constexpr (std::is_integral<T>::value) {
    const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);  // 2^digits: exact in double
    const double lower = std::is_signed<T>::value ? -upper : 0.0;
    const double truncated = std::trunc(v);
    if (!(truncated >= lower && truncated < upper))  // NaN fails both
      return fail(Status::kInvalidArgument, std::string(op) + ": " + name + " = " + std::to_string(v) +
                                                " does not fit " + dtype_name(dtype));
    out = static_cast<T>(truncated);
  } else {
    out = static_cast<T>(v);
  }
  return Status::kSuccess;
}

// Calls f(IndexT{}) for an int32 / int64 `dtype`; `what` names the argument in the error ("offset type").
template <typename F>
Status with_index_type(DType dtype, const char* op, const char* what, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    default: return unsupported(op, what, dtype);
  }
}

// Calls f(OffsetT{}) for the offset type of `dtype`.
template <typename F>
Status with_offset_type(DType dtype, const char* op, F&& f) {
  return with_index_type(dtype, op, "offset type", f);
}

// Calls f(LengthT{}) for the length type of `dtype`.
template <typename F>
Status with_length_type(DType dtype, const char* op, F&& f) {
  return with_index_type(dtype, op, "length type", f);
}

// Calls f(T{}) for the element types pack / unpack support: every type but bool.
template <typename F>
Status with_packable_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat16: return f(half{});
    case DType::kBFloat16: return f(bfloat16{});
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    case DType::kUInt8: return f(std::uint8_t{});
    default: return unsupported(op, "element type", dtype);
  }
}

// Calls f(T{}) for any element type the conversions support: the packable ones and bool.
template <typename F>
Status with_any_type(DType dtype, const char* op, F&& f) {
  if (dtype == DType::kBool) return f(bool{});
  return with_packable_type(dtype, op, f);
}

// Calls f(T{}) for the floating-point types of the segment ops; `what` names the argument in the error.
template <typename F>
Status with_float_type(DType dtype, const char* op, const char* what, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat16: return f(half{});
    case DType::kBFloat16: return f(bfloat16{});
    default: return unsupported(op, what, dtype);
  }
}

// Calls f(T{}, OffsetT{}) for a description with a floating-point `dtype` and an `offset_dtype` (the segment ops,
// attention): both dispatches in one.
template <typename Desc, typename F>
Status with_float_and_offset_types(const Desc& d, const char* op, F&& f) {
  return with_offset_type(d.offset_dtype, op, [&](auto offset_tag) {
    return with_float_type(d.dtype, op, "element type", [&](auto value_tag) { return f(value_tag, offset_tag); });
  });
}

template <typename T, typename OffsetT>
RaggedView<const T, OffsetT> view_of(const RaggedDesc& d) {
  return {static_cast<const T*>(d.values), static_cast<const OffsetT*>(d.offsets), d.batch, d.nnz, d.inner};
}

// A HeadsView from run-time strides; a stride of 0 means the dense layout [rows, heads, head_dim].
template <typename T>
HeadsView<T> heads_view(T* data, std::int64_t token_stride, std::int64_t head_stride, int heads, int head_dim) {
  return HeadsView<T>{data, token_stride != 0 ? token_stride : std::int64_t{heads} * head_dim,
                      head_stride != 0 ? head_stride : std::int64_t{head_dim}};
}

template <typename OffsetT>
PackedLayout<OffsetT> packed_layout_of(const PackedLayoutDesc& d) {
  PackedLayout<OffsetT> layout;
  layout.batch = d.batch;
  layout.max_steps = d.max_steps;
  layout.sorted_indices = d.sorted_indices;
  layout.unsorted_indices = d.unsorted_indices;
  layout.sorted_lengths = static_cast<OffsetT*>(d.sorted_lengths);
  layout.batch_sizes = static_cast<OffsetT*>(d.batch_sizes);
  layout.step_offsets = static_cast<OffsetT*>(d.step_offsets);
  return layout;
}

template <typename OffsetT>
SequenceLayout<OffsetT> layout_of(const SequenceDesc& s) {
  SequenceLayout<OffsetT> layout;
  layout.offsets = static_cast<const OffsetT*>(s.offsets);
  layout.lengths = static_cast<const OffsetT*>(s.lengths);
  layout.max_len = s.max_len;
  layout.rows = s.rows;
  return layout;
}

}  // namespace

Status lengths_to_offsets(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype, const void* d_lengths,
                          std::int64_t batch, DType offset_dtype, void* d_offsets, CheckResult* d_check,
                          cudaStream_t stream) {
  const char* op = "lengths_to_offsets";
  return with_length_type(length_dtype, op, [&](auto length_tag) {
    using LengthT = decltype(length_tag);
    return with_offset_type(offset_dtype, op, [&](auto offset_tag) {
      using OffsetT = decltype(offset_tag);
      return ragged::lengths_to_offsets(d_workspace, workspace_bytes, static_cast<const LengthT*>(d_lengths), batch,
                                        static_cast<OffsetT*>(d_offsets), d_check, stream);
    });
  });
}

Status offsets_to_lengths(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                          std::int64_t batch, DType length_dtype, void* d_lengths, cudaStream_t stream) {
  const char* op = "offsets_to_lengths";
  return with_offset_type(offset_dtype, op, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_length_type(length_dtype, op, [&](auto length_tag) {
      using LengthT = decltype(length_tag);
      return ragged::offsets_to_lengths(d_workspace, workspace_bytes, static_cast<const OffsetT*>(d_offsets), batch,
                                        static_cast<LengthT*>(d_lengths), stream);
    });
  });
}

Status max_length(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                  std::int64_t batch, std::int64_t* d_max_length, cudaStream_t stream) {
  return with_offset_type(offset_dtype, "max_length", [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return ragged::max_length(d_workspace, workspace_bytes, static_cast<const OffsetT*>(d_offsets), batch,
                              d_max_length, stream);
  });
}

Status validate_offsets(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                        std::int64_t batch, std::int64_t capacity, std::int64_t expected_nnz, CheckResult* d_check,
                        cudaStream_t stream) {
  return with_offset_type(offset_dtype, "validate_offsets", [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return ragged::validate_offsets(d_workspace, workspace_bytes, static_cast<const OffsetT*>(d_offsets), batch,
                                    capacity, expected_nnz, d_check, stream);
  });
}

Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, void* d_padded,
                        std::int64_t max_len, double pad_value, Align align, Truncate trunc, cudaStream_t stream) {
  const char* op = "ragged_to_padded";
  return with_offset_type(src.offset_dtype, op, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_any_type(src.dtype, op, [&](auto value_tag) {
      using T = decltype(value_tag);
      T pad{};
      RAGGED_RETURN_IF_ERROR(convert_scalar(pad_value, op, "pad_value", src.dtype, pad));
      PaddedView<T> dst{static_cast<T*>(d_padded), src.batch, max_len, src.inner};
      return ragged::ragged_to_padded(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), dst, pad, align, trunc,
                                      stream);
    });
  });
}

Status padded_to_ragged(void* d_workspace, std::size_t& workspace_bytes, const void* d_padded, std::int64_t max_len,
                        const RaggedDesc& dst, void* d_values, double fill, Align align, Truncate trunc,
                        cudaStream_t stream) {
  const char* op = "padded_to_ragged";
  return with_offset_type(dst.offset_dtype, op, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_any_type(dst.dtype, op, [&](auto value_tag) {
      using T = decltype(value_tag);
      PaddedView<const T> src{static_cast<const T*>(d_padded), dst.batch, max_len, dst.inner};
      RaggedView<T, OffsetT> out{static_cast<T*>(d_values), static_cast<const OffsetT*>(dst.offsets), dst.batch,
                                 dst.nnz, dst.inner};
      T fill_value{};
      RAGGED_RETURN_IF_ERROR(convert_scalar(fill, op, "fill", dst.dtype, fill_value));
      return ragged::padded_to_ragged(d_workspace, workspace_bytes, src, out, fill_value, align, trunc, stream);
    });
  });
}

Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, ReduceOp op,
                      void* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream) {
  const char* name = "segment_reduce";
  return with_float_and_offset_types(src, name, [&](auto value_tag, auto offset_tag) {
    using T = decltype(value_tag);
    using OffsetT = decltype(offset_tag);
    return ragged::segment_reduce(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), op, static_cast<T*>(d_out),
                                  d_arg, empty_value, stream);
  });
}

Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, bool log, void* d_out,
                       cudaStream_t stream) {
  const char* name = "segment_softmax";
  return with_float_and_offset_types(src, name, [&](auto value_tag, auto offset_tag) {
    using T = decltype(value_tag);
    using OffsetT = decltype(offset_tag);
    return ragged::segment_softmax(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), log,
                                   static_cast<T*>(d_out), stream);
  });
}

Status segment_reduce_backward(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& shape, ReduceOp op,
                               const void* d_grad_out, const std::int64_t* d_arg, void* d_grad_in,
                               cudaStream_t stream) {
  const char* name = "segment_reduce_backward";
  return with_float_and_offset_types(shape, name, [&](auto value_tag, auto offset_tag) {
    using T = decltype(value_tag);
    using OffsetT = decltype(offset_tag);
    return ragged::segment_reduce_backward(d_workspace, workspace_bytes, view_of<T, OffsetT>(shape), op,
                                           static_cast<const T*>(d_grad_out), d_arg, static_cast<T*>(d_grad_in),
                                           stream);
  });
}

Status segment_softmax_backward(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& shape, bool log,
                                const void* d_out, const void* d_grad_out, void* d_grad_in, cudaStream_t stream) {
  const char* name = "segment_softmax_backward";
  return with_float_and_offset_types(shape, name, [&](auto value_tag, auto offset_tag) {
    using T = decltype(value_tag);
    using OffsetT = decltype(offset_tag);
    return ragged::segment_softmax_backward(d_workspace, workspace_bytes, view_of<T, OffsetT>(shape), log,
                                            static_cast<const T*>(d_out), static_cast<const T*>(d_grad_out),
                                            static_cast<T*>(d_grad_in), stream);
  });
}

Status lengths_to_mask(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype, const void* d_lengths,
                       std::int64_t batch, std::int64_t max_len, Align align, bool* d_mask, CheckResult* d_check,
                       cudaStream_t stream) {
  return with_length_type(length_dtype, "lengths_to_mask", [&](auto length_tag) {
    using LengthT = decltype(length_tag);
    return ragged::lengths_to_mask(d_workspace, workspace_bytes, static_cast<const LengthT*>(d_lengths), batch,
                                   max_len, align, d_mask, d_check, stream);
  });
}

Status lengths_to_additive_mask(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype,
                                const void* d_lengths, std::int64_t batch, std::int64_t max_len, Align align,
                                DType mask_dtype, void* d_mask, CheckResult* d_check, cudaStream_t stream) {
  const char* name = "lengths_to_additive_mask";
  return with_length_type(length_dtype, name, [&](auto length_tag) {
    using LengthT = decltype(length_tag);
    return with_float_type(mask_dtype, name, "mask type", [&](auto mask_tag) {
      using T = decltype(mask_tag);
      return ragged::lengths_to_additive_mask(d_workspace, workspace_bytes, static_cast<const LengthT*>(d_lengths),
                                              batch, max_len, align, static_cast<T*>(d_mask), d_check, stream);
    });
  });
}

Status varlen_attention_forward(void* d_workspace, std::size_t& workspace_bytes, const AttentionDesc& d,
                                cudaStream_t stream) {
  const char* name = "varlen_attention_forward";
  return with_float_and_offset_types(d, name, [&](auto value_tag, auto offset_tag) {
    using T = decltype(value_tag);
    using OffsetT = decltype(offset_tag);
    AttentionArgs<T, OffsetT> a;
    a.q = heads_view(static_cast<const T*>(d.q.data), d.q.token_stride, d.q.head_stride, d.heads_q, d.head_dim);
    a.k = heads_view(static_cast<const T*>(d.k.data), d.k.token_stride, d.k.head_stride, d.heads_kv, d.head_dim);
    a.v = heads_view(static_cast<const T*>(d.v.data), d.v.token_stride, d.v.head_stride, d.heads_kv, d.head_dim);
    a.o = heads_view(static_cast<T*>(d.o), d.o_token_stride, d.o_head_stride, d.heads_q, d.head_dim);
    a.lse = d.lse;
    a.q_seq = layout_of<OffsetT>(d.q_seq);
    a.k_seq = layout_of<OffsetT>(d.k_seq);
    a.batch = d.batch;
    a.heads_q = d.heads_q;
    a.heads_kv = d.heads_kv;
    a.head_dim = d.head_dim;
    a.scale = d.scale;
    a.causal = d.causal;
    a.query_tile = d.query_tile;
    return ragged::varlen_attention_forward(d_workspace, workspace_bytes, a, stream);
  });
}

Status packing_order(void* d_workspace, std::size_t& workspace_bytes, DType offset_dtype, const void* d_offsets,
                     const PackedLayoutDesc& layout, CheckResult* d_check, cudaStream_t stream) {
  return with_offset_type(offset_dtype, "packing_order", [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return ragged::packing_order(d_workspace, workspace_bytes, static_cast<const OffsetT*>(d_offsets),
                                 packed_layout_of<OffsetT>(layout), d_check, stream);
  });
}

Status pack_sequences(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src,
                      const PackedLayoutDesc& layout, void* d_packed, cudaStream_t stream) {
  const char* name = "pack_sequences";
  return with_offset_type(src.offset_dtype, name, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_packable_type(src.dtype, name, [&](auto value_tag) {
      using T = decltype(value_tag);
      return ragged::pack_sequences(d_workspace, workspace_bytes, view_of<T, OffsetT>(src),
                                    packed_layout_of<OffsetT>(layout), static_cast<T*>(d_packed), stream);
    });
  });
}

Status unpack_sequences(void* d_workspace, std::size_t& workspace_bytes, const void* d_packed,
                        const PackedLayoutDesc& layout, const RaggedDesc& dst, void* d_values, cudaStream_t stream) {
  const char* name = "unpack_sequences";
  return with_offset_type(dst.offset_dtype, name, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_packable_type(dst.dtype, name, [&](auto value_tag) {
      using T = decltype(value_tag);
      RaggedView<T, OffsetT> out{static_cast<T*>(d_values), static_cast<const OffsetT*>(dst.offsets), dst.batch,
                                 dst.nnz, dst.inner};
      return ragged::unpack_sequences(d_workspace, workspace_bytes, static_cast<const T*>(d_packed),
                                      packed_layout_of<OffsetT>(layout), out, stream);
    });
  });
}

Status rnn_forward(void* d_workspace, std::size_t& workspace_bytes, const RnnForwardDesc& r, cudaStream_t stream) {
  const char* name = "rnn_forward";
  if (r.input.dtype != r.dtype)
    return fail(Status::kUnsupportedDType, std::string(name) + ": the input is " + dtype_name(r.input.dtype) +
                                               " but the layer is " + dtype_name(r.dtype));
  return with_offset_type(r.input.offset_dtype, name, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_float_type(r.dtype, name, "element type", [&](auto value_tag) {
      using T = decltype(value_tag);
      // The typed weight table (host). A stack with num_layers < 1 gets an empty one and the typed op's message.
      constexpr std::int64_t kMaxLayers = 1 << 16;
      if (r.desc.num_layers > kMaxLayers)
        return fail(Status::kUnsupportedShape, std::string(name) + ": num_layers = " +
                                                   std::to_string(r.desc.num_layers) + " exceeds " +
                                                   std::to_string(kMaxLayers));
      std::vector<RnnLayerWeights<T>> weights;
      if (r.weights != nullptr && r.desc.num_layers >= 1) {
        weights.resize(static_cast<std::size_t>(r.desc.num_layers * rnn_directions(r.desc)));
        for (std::size_t i = 0; i < weights.size(); ++i) {
          const RnnLayerWeights<void>& w = r.weights[i];
          weights[i] = RnnLayerWeights<T>{static_cast<const T*>(w.w_ih), static_cast<const T*>(w.w_hh),
                                          static_cast<const T*>(w.b_ih), static_cast<const T*>(w.b_hh),
                                          static_cast<const T*>(w.w_hr)};
        }
      }
      RnnArgs<T, OffsetT> a;
      a.desc = r.desc;
      a.weights = r.weights != nullptr ? weights.data() : nullptr;
      a.input = view_of<T, OffsetT>(r.input);
      a.max_steps = r.max_steps;
      a.h0 = static_cast<const T*>(r.h0);
      a.c0 = static_cast<const T*>(r.c0);
      a.output = static_cast<T*>(r.output);
      a.hn = static_cast<T*>(r.hn);
      a.cn = static_cast<T*>(r.cn);
      a.projection = r.projection;
      a.cublas = r.cublas;
      a.cublas_workspace_bytes = r.cublas_workspace_bytes;
      a.algo = r.algo;
      a.check = r.check;
      return ragged::rnn_forward(d_workspace, workspace_bytes, a, stream);
    });
  });
}

}  // namespace dynamic
}  // namespace ragged
