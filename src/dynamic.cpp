// Run-time dtype dispatch onto the typed ops: offset type first, then element type; every switch ends in an
// error that names the unsupported type.
#include "ragged/dynamic.h"

#include <string>

#include "ragged/convert.h"
#include "ragged/offsets.h"

namespace ragged {
namespace dynamic {
namespace {

Status unsupported(const char* op, const char* what, DType dtype) {
  return fail(Status::kUnsupportedDType, std::string(op) + ": no kernel for " + what + " " + dtype_name(dtype));
}

template <typename T>
T convert_scalar(double v) {
  if constexpr (std::is_same<T, half>::value) return __float2half(static_cast<float>(v));
  else if constexpr (std::is_same<T, bfloat16>::value) return __float2bfloat16(static_cast<float>(v));
  else if constexpr (std::is_same<T, bool>::value) return v != 0.0;
  else return static_cast<T>(v);
}

// Calls f(OffsetT{}) for the offset type of `dtype`.
template <typename F>
Status with_offset_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    default: return unsupported(op, "offset type", dtype);
  }
}

// Calls f(T{}) for any element type the conversions support.
template <typename F>
Status with_any_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat16: return f(half{});
    case DType::kBFloat16: return f(bfloat16{});
    case DType::kInt32: return f(std::int32_t{});
    case DType::kInt64: return f(std::int64_t{});
    case DType::kUInt8: return f(std::uint8_t{});
    case DType::kBool: return f(bool{});
  }
  return unsupported(op, "element type", dtype);
}

// Calls f(T{}) for the floating-point types of the segment ops.
template <typename F>
Status with_float_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat16: return f(half{});
    case DType::kBFloat16: return f(bfloat16{});
    default: return unsupported(op, "element type", dtype);
  }
}

template <typename T, typename OffsetT>
RaggedView<const T, OffsetT> view_of(const RaggedDesc& d) {
  return {static_cast<const T*>(d.values), static_cast<const OffsetT*>(d.offsets), d.batch, d.nnz, d.inner};
}

}  // namespace

Status lengths_to_offsets(void* d_workspace, std::size_t& workspace_bytes, DType length_dtype, const void* d_lengths,
                          std::int64_t batch, DType offset_dtype, void* d_offsets, CheckResult* d_check,
                          cudaStream_t stream) {
  const char* op = "lengths_to_offsets";
  return with_offset_type(length_dtype, op, [&](auto length_tag) {
    using LengthT = decltype(length_tag);
    return with_offset_type(offset_dtype, op, [&](auto offset_tag) {
      using OffsetT = decltype(offset_tag);
      return ragged::lengths_to_offsets(d_workspace, workspace_bytes, static_cast<const LengthT*>(d_lengths), batch,
                                        static_cast<OffsetT*>(d_offsets), d_check, stream);
    });
  });
}

Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, void* d_padded,
                        std::int64_t max_len, double pad_value, Align align, Truncate trunc, cudaStream_t stream) {
  const char* op = "ragged_to_padded";
  return with_offset_type(src.offset_dtype, op, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_any_type(src.dtype, op, [&](auto value_tag) {
      using T = decltype(value_tag);
      PaddedView<T> dst{static_cast<T*>(d_padded), src.batch, max_len, src.inner};
      return ragged::ragged_to_padded(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), dst,
                                      convert_scalar<T>(pad_value), align, trunc, stream);
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
      return ragged::padded_to_ragged(d_workspace, workspace_bytes, src, out, convert_scalar<T>(fill), align, trunc,
                                      stream);
    });
  });
}

Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, ReduceOp op,
                      void* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream) {
  const char* name = "segment_reduce";
  return with_offset_type(src.offset_dtype, name, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_float_type(src.dtype, name, [&](auto value_tag) {
      using T = decltype(value_tag);
      return ragged::segment_reduce(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), op, static_cast<T*>(d_out),
                                    d_arg, empty_value, stream);
    });
  });
}

Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, const RaggedDesc& src, bool log, void* d_out,
                       cudaStream_t stream) {
  const char* name = "segment_softmax";
  return with_offset_type(src.offset_dtype, name, [&](auto offset_tag) {
    using OffsetT = decltype(offset_tag);
    return with_float_type(src.dtype, name, [&](auto value_tag) {
      using T = decltype(value_tag);
      return ragged::segment_softmax(d_workspace, workspace_bytes, view_of<T, OffsetT>(src), log,
                                     static_cast<T*>(d_out), stream);
    });
  });
}

}  // namespace dynamic
}  // namespace ragged
