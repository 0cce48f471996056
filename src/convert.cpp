// Public conversion and mask API: argument checks, then dispatch to the byte-level kernels. None of these ops
// needs workspace: the query sets 0 bytes.
#include "ragged/convert.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "convert_launch.h"
#include "mask_values.h"
#include "validate.h"

namespace ragged {
namespace {

Status check_enums(Align align, Truncate trunc) {
  if (align != Align::kLeft && align != Align::kRight)
    return fail(Status::kInvalidArgument, "align = " + std::to_string(static_cast<int>(align)) + " is not an Align");
  if (trunc != Truncate::kLeft && trunc != Truncate::kRight)
    return fail(Status::kInvalidArgument,
                "trunc = " + std::to_string(static_cast<int>(trunc)) + " is not a Truncate");
  return Status::kSuccess;
}

template <typename T, typename OffsetT>
Status check_ragged(const RaggedView<T, OffsetT>& view, const std::string& name) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(view.batch, (name + ".batch").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(view.nnz, (name + ".nnz").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(view.inner, (name + ".inner").c_str()));
  // The row's bytes on their own: with nnz = 0 the product below does not bound inner, and the launch computes
  // inner * sizeof(T).
  RAGGED_RETURN_IF_ERROR(detail::check_product(view.inner, 1, 1, sizeof(T), (name + ".inner").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_product(view.nnz, view.inner, 1, sizeof(T), (name + ".values").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(view.values, view.nnz * view.inner, (name + ".values").c_str()));
  return detail::check_pointer(view.offsets, view.batch + 1, (name + ".offsets").c_str());
}

template <typename T>
Status check_padded(const PaddedView<T>& view, const std::string& name) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(view.batch, (name + ".batch").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(view.max_len, (name + ".max_len").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(view.inner, (name + ".inner").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_product(view.inner, 1, 1, sizeof(T), (name + ".inner").c_str()));  // as above
  RAGGED_RETURN_IF_ERROR(
      detail::check_product(view.batch, view.max_len, view.inner, sizeof(T), (name + ".data").c_str()));
  return detail::check_pointer(view.data, view.batch * view.max_len * view.inner, (name + ".data").c_str());
}

Status check_same_shape(std::int64_t ragged_batch, std::int64_t ragged_inner, std::int64_t padded_batch,
                        std::int64_t padded_inner) {
  RAGGED_RETURN_IF_ERROR(detail::check_equal(padded_batch, ragged_batch, "padded batch and ragged batch"));
  return detail::check_equal(padded_inner, ragged_inner, "padded inner and ragged inner");
}

template <typename LengthT, typename MaskT>
Status check_mask_args(const LengthT* d_lengths, std::int64_t batch, std::int64_t max_len, Align align,
                       const MaskT* d_mask, const CheckResult* d_check) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(max_len, "max_len"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(batch, max_len, 1, sizeof(MaskT), "mask"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(batch, 1, 1, sizeof(LengthT), "lengths"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_lengths, batch, "lengths"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_mask, batch * max_len, "mask"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_check, 0, "check"));  // optional: null or aligned
  return check_enums(align, Truncate::kRight);
}

template <typename T>
std::uint32_t bits_of(T value) {
  static_assert(sizeof(T) <= sizeof(std::uint32_t), "mask elements are at most 4 bytes");
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

}  // namespace

template <typename T, typename OffsetT>
Status ragged_to_padded(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                        PaddedView<T> dst, T pad_value, Align align, Truncate trunc, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_ragged(src, "src"));
  RAGGED_RETURN_IF_ERROR(check_padded(dst, "dst"));
  RAGGED_RETURN_IF_ERROR(check_same_shape(src.batch, src.inner, dst.batch, dst.inner));
  RAGGED_RETURN_IF_ERROR(check_enums(align, trunc));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_ragged_to_padded<OffsetT>(src.values, src.offsets, src.batch, src.nnz, dst.data, dst.max_len,
                                                  src.inner * static_cast<std::int64_t>(sizeof(T)), sizeof(T),
                                                  &pad_value, align, trunc, stream);
}

template <typename T, typename OffsetT>
Status padded_to_ragged(void* d_workspace, std::size_t& workspace_bytes, PaddedView<const T> src,
                        RaggedView<T, OffsetT> dst, T fill, Align align, Truncate trunc, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_padded(src, "src"));
  RAGGED_RETURN_IF_ERROR(check_ragged(dst, "dst"));
  RAGGED_RETURN_IF_ERROR(check_same_shape(dst.batch, dst.inner, src.batch, src.inner));
  RAGGED_RETURN_IF_ERROR(check_enums(align, trunc));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_padded_to_ragged<OffsetT>(src.data, src.max_len, dst.values, dst.offsets, dst.batch, dst.nnz,
                                                  dst.inner * static_cast<std::int64_t>(sizeof(T)), sizeof(T), &fill,
                                                  align, trunc, stream);
}

template <typename LengthT>
Status lengths_to_mask(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths, std::int64_t batch,
                       std::int64_t max_len, Align align, bool* d_mask, CheckResult* d_check,
                       cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_mask_args(d_lengths, batch, max_len, align, d_mask, d_check));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_lengths_to_mask(d_lengths, batch, max_len, align, d_mask, sizeof(bool), bits_of(true),
                                        bits_of(false), d_check, stream);
}

template <typename LengthT, typename T>
Status lengths_to_additive_mask(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths,
                                std::int64_t batch, std::int64_t max_len, Align align, T* d_mask,
                                CheckResult* d_check, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_mask_args(d_lengths, batch, max_len, align, d_mask, d_check));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_lengths_to_mask(d_lengths, batch, max_len, align, d_mask, sizeof(T),
                                        bits_of(detail::additive_mask_value<T>(true)),
                                        bits_of(detail::additive_mask_value<T>(false)), d_check, stream);
}

#define RAGGED_INSTANTIATE_CONVERT(T, O)                                                                         \
  template Status ragged_to_padded<T, O>(void*, std::size_t&, RaggedView<const T, O>, PaddedView<T>, T, Align,  \
                                         Truncate, cudaStream_t);                                                \
  template Status padded_to_ragged<T, O>(void*, std::size_t&, PaddedView<const T>, RaggedView<T, O>, T, Align,  \
                                         Truncate, cudaStream_t);
#define RAGGED_INSTANTIATE_CONVERT_T(T)      \
  RAGGED_INSTANTIATE_CONVERT(T, std::int32_t) \
  RAGGED_INSTANTIATE_CONVERT(T, std::int64_t)

RAGGED_INSTANTIATE_CONVERT_T(float)
RAGGED_INSTANTIATE_CONVERT_T(half)
RAGGED_INSTANTIATE_CONVERT_T(bfloat16)
RAGGED_INSTANTIATE_CONVERT_T(std::int32_t)
RAGGED_INSTANTIATE_CONVERT_T(std::int64_t)
RAGGED_INSTANTIATE_CONVERT_T(std::uint8_t)
RAGGED_INSTANTIATE_CONVERT_T(bool)

#define RAGGED_INSTANTIATE_MASK(L)                                                                               \
  template Status lengths_to_mask<L>(void*, std::size_t&, const L*, std::int64_t, std::int64_t, Align, bool*,    \
                                     CheckResult*, cudaStream_t);                                                \
  template Status lengths_to_additive_mask<L, float>(void*, std::size_t&, const L*, std::int64_t, std::int64_t,  \
                                                     Align, float*, CheckResult*, cudaStream_t);                 \
  template Status lengths_to_additive_mask<L, half>(void*, std::size_t&, const L*, std::int64_t, std::int64_t,   \
                                                    Align, half*, CheckResult*, cudaStream_t);                   \
  template Status lengths_to_additive_mask<L, bfloat16>(void*, std::size_t&, const L*, std::int64_t,             \
                                                        std::int64_t, Align, bfloat16*, CheckResult*,            \
                                                        cudaStream_t);

RAGGED_INSTANTIATE_MASK(std::int32_t)
RAGGED_INSTANTIATE_MASK(std::int64_t)

}  // namespace ragged
