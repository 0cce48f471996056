// Public packing API: argument checks, workspace layout and dispatch to the packing kernels.
#include "ragged/packing.h"

#include <algorithm>
#include <limits>
#include <string>

#include "offsets_launch.h"
#include "packing_launch.h"
#include "validate.h"
#include "workspace_layout.h"

namespace ragged {
namespace {

template <typename OffsetT>
const char* offset_type_name() {
  return sizeof(OffsetT) == 4 ? "int32" : "int64";
}

// Bits that hold every sort key: keys are lengths capped at min(max_steps, OffsetT max), so this is known on the
// host without looking at the data. 0 when every key is 0.
template <typename OffsetT>
int key_bits(std::int64_t max_steps) {
  std::int64_t cap = std::min<std::int64_t>(max_steps, std::numeric_limits<OffsetT>::max());
  int bits = 0;
  for (; cap > 0; cap >>= 1) ++bits;
  return bits;
}

// The checks pack and unpack share: the ragged side (`name`), the packed buffer and the layout arrays they read.
template <typename T, typename OffsetT, typename PackedT>
Status check_move_args(const RaggedView<T, OffsetT>& ragged, const char* name, const PackedT* d_packed,
                       const PackedLayout<const OffsetT>& layout) {
  const std::string view(name);
  RAGGED_RETURN_IF_ERROR(detail::check_batch(ragged.batch, (view + ".batch").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(ragged.nnz, (view + ".nnz").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(ragged.inner, (view + ".inner").c_str()));
  // The row's bytes on their own (the launch's row size): with nnz = 0 the element count does not bound them.
  RAGGED_RETURN_IF_ERROR(detail::check_product(ragged.inner, 1, 1, sizeof(T), (view + ".inner").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_max_steps(layout.max_steps, "layout.max_steps"));
  RAGGED_RETURN_IF_ERROR(detail::check_equal(ragged.batch, layout.batch, (view + ".batch and layout.batch").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_product(ragged.nnz, ragged.inner, 1, sizeof(T), name));
  const std::int64_t elems = ragged.nnz * ragged.inner;
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(ragged.offsets, ragged.batch + 1, (view + ".offsets").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(ragged.values, elems, (view + ".values").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_packed, elems, "packed"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.sorted_indices, layout.batch, "layout.sorted_indices"));
  return detail::check_pointer(layout.step_offsets, layout.max_steps + 1, "layout.step_offsets");
}

}  // namespace

template <typename OffsetT>
Status packing_order(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                     PackedLayout<OffsetT> layout, CheckResult* d_check, cudaStream_t stream) {
  const std::int64_t batch = layout.batch;
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "layout.batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_max_steps(layout.max_steps, "layout.max_steps"));
  if (batch > std::numeric_limits<OffsetT>::max())
    return fail(Status::kSizeOverflow, "layout.batch = " + std::to_string(batch) + " does not fit " +
                                           offset_type_name<OffsetT>() + " batch_sizes");
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_offsets, batch + 1, "offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.sorted_indices, batch, "layout.sorted_indices"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.unsorted_indices, batch, "layout.unsorted_indices"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.sorted_lengths, batch, "layout.sorted_lengths"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.batch_sizes, layout.max_steps, "layout.batch_sizes"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(layout.step_offsets, layout.max_steps + 1, "layout.step_offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_check, 0, "check"));  // optional: null or aligned

  // Workspace: the sort's first key / value buffers (the layout's sorted arrays are the second ones), then one
  // CUB temp region shared by the sort and the scan, which run one after the other on the stream.
  detail::WorkspaceLayout pieces(d_workspace);
  OffsetT* d_keys = pieces.take_array<OffsetT>(batch);
  std::int64_t* d_values = pieces.take_array<std::int64_t>(batch);
  const int end_bit = key_bits<OffsetT>(layout.max_steps);
  // With one sequence, or every key 0, the identity order is already the stable sort.
  const bool sort_needed = batch > 1 && end_bit > 0;
  bool result_in_alt = false;
  std::size_t sort_bytes = 0;
  if (sort_needed)
    RAGGED_RETURN_IF_ERROR(detail::launch_sort_by_length<OffsetT>(nullptr, sort_bytes, d_keys, layout.sorted_lengths,
                                                                  d_values, layout.sorted_indices, batch, end_bit,
                                                                  result_in_alt, stream));
  std::size_t scan_bytes = 0;
  RAGGED_RETURN_IF_ERROR(detail::launch_step_offsets<OffsetT>(nullptr, scan_bytes, layout.batch_sizes,
                                                              layout.max_steps, layout.step_offsets, stream));
  void* d_cub = pieces.take(std::max(sort_bytes, scan_bytes));
  RAGGED_RETURN_IF_ERROR(pieces.finish(workspace_bytes, "packing_order"));
  if (d_workspace == nullptr) return Status::kSuccess;

  RAGGED_RETURN_IF_ERROR(detail::reset_check(d_check, stream));
  RAGGED_RETURN_IF_ERROR(
      detail::launch_packing_keys(d_offsets, batch, layout.max_steps, d_keys, d_values, d_check, stream));
  if (sort_needed)
    RAGGED_RETURN_IF_ERROR(detail::launch_sort_by_length<OffsetT>(d_cub, sort_bytes, d_keys, layout.sorted_lengths,
                                                                  d_values, layout.sorted_indices, batch, end_bit,
                                                                  result_in_alt, stream));
  RAGGED_RETURN_IF_ERROR(detail::launch_finish_order<OffsetT>(result_in_alt ? layout.sorted_lengths : d_keys,
                                                              result_in_alt ? layout.sorted_indices : d_values,
                                                              layout, stream));
  RAGGED_RETURN_IF_ERROR(detail::launch_batch_sizes(layout, stream));
  return detail::launch_step_offsets<OffsetT>(d_cub, scan_bytes, layout.batch_sizes, layout.max_steps,
                                              layout.step_offsets, stream);
}

template <typename T, typename OffsetT>
Status pack_sequences(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                      NonDeduced<PackedLayout<const OffsetT>> layout, T* d_packed, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_move_args(src, "src", d_packed, layout));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(src.inner) * sizeof(T);
  return detail::launch_move_packed_rows(detail::PackDirection::kPack, src.values, d_packed, row_bytes, sizeof(T),
                                         src.offsets, src.nnz, layout, stream);
}

template <typename T, typename OffsetT>
Status unpack_sequences(void* d_workspace, std::size_t& workspace_bytes, const T* d_packed,
                        NonDeduced<PackedLayout<const OffsetT>> layout, RaggedView<T, OffsetT> dst,
                        cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_move_args(dst, "dst", d_packed, layout));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(dst.inner) * sizeof(T);
  return detail::launch_move_packed_rows(detail::PackDirection::kUnpack, d_packed, dst.values, row_bytes, sizeof(T),
                                         dst.offsets, dst.nnz, layout, stream);
}

#define RAGGED_INSTANTIATE_PACKING_ORDER(O)                                                                      \
  template Status packing_order<O>(void*, std::size_t&, const O*, PackedLayout<O>, CheckResult*, cudaStream_t);
#define RAGGED_INSTANTIATE_PACK(T, O)                                                                            \
  template Status pack_sequences<T, O>(void*, std::size_t&, RaggedView<const T, O>, PackedLayout<const O>, T*,  \
                                       cudaStream_t);                                                           \
  template Status unpack_sequences<T, O>(void*, std::size_t&, const T*, PackedLayout<const O>, RaggedView<T, O>,\
                                         cudaStream_t);
#define RAGGED_INSTANTIATE_PACK_TYPES(O) \
  RAGGED_INSTANTIATE_PACK(float, O)      \
  RAGGED_INSTANTIATE_PACK(half, O)       \
  RAGGED_INSTANTIATE_PACK(bfloat16, O)   \
  RAGGED_INSTANTIATE_PACK(std::int32_t, O) \
  RAGGED_INSTANTIATE_PACK(std::int64_t, O) \
  RAGGED_INSTANTIATE_PACK(std::uint8_t, O)

RAGGED_INSTANTIATE_PACKING_ORDER(std::int32_t)
RAGGED_INSTANTIATE_PACKING_ORDER(std::int64_t)
RAGGED_INSTANTIATE_PACK_TYPES(std::int32_t)
RAGGED_INSTANTIATE_PACK_TYPES(std::int64_t)

}  // namespace ragged
