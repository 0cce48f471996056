// Public offsets API: argument checks, workspace layout, dispatch to the kernels; and the host versions.
#include "ragged/offsets.h"

#include <limits>
#include <string>

#include "offsets_launch.h"
#include "validate.h"
#include "workspace_layout.h"

namespace ragged {

template <typename LengthT, typename OffsetT>
Status lengths_to_offsets(void* d_workspace, std::size_t& workspace_bytes, const LengthT* d_lengths,
                          std::int64_t batch, OffsetT* d_offsets, CheckResult* d_check, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_lengths, batch, "lengths"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_offsets, batch + 1, "offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_check, 0, "check"));  // optional: null or aligned
  detail::WorkspaceLayout layout(d_workspace);
  std::int64_t* d_scan = layout.take_array<std::int64_t>(batch);
  std::size_t cub_bytes = 0;
  RAGGED_RETURN_IF_ERROR(detail::launch_length_scan<LengthT>(nullptr, cub_bytes, d_lengths, batch, d_scan, stream));
  void* d_cub = layout.take(cub_bytes);
  RAGGED_RETURN_IF_ERROR(layout.finish(workspace_bytes, "lengths_to_offsets"));
  if (d_workspace == nullptr) return Status::kSuccess;
  if (batch > 0)
    RAGGED_RETURN_IF_ERROR(detail::launch_length_scan<LengthT>(d_cub, cub_bytes, d_lengths, batch, d_scan, stream));
  return detail::launch_finish_offsets<LengthT, OffsetT>(d_lengths, d_scan, batch, d_offsets, d_check, stream);
}

template <typename OffsetT, typename LengthT>
Status offsets_to_lengths(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                          std::int64_t batch, LengthT* d_lengths, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_offsets, batch + 1, "offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_lengths, batch, "lengths"));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_offsets_to_lengths<OffsetT, LengthT>(d_offsets, batch, d_lengths, stream);
}

template <typename OffsetT>
Status max_length(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets, std::int64_t batch,
                  std::int64_t* d_max_length, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_offsets, batch + 1, "offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_max_length, 1, "max_length"));
  std::size_t cub_bytes = 0;
  RAGGED_RETURN_IF_ERROR(detail::launch_max_length(nullptr, cub_bytes, d_offsets, batch, d_max_length, stream));
  if (d_workspace == nullptr) {
    workspace_bytes = cub_bytes == 0 ? detail::kNoWorkspaceBytes : cub_bytes;
    return Status::kSuccess;
  }
  if (workspace_bytes < cub_bytes)
    return fail(Status::kWorkspaceTooSmall, "max_length needs " + std::to_string(cub_bytes) +
                                                " workspace bytes, got " + std::to_string(workspace_bytes));
  return detail::launch_max_length(d_workspace, cub_bytes, d_offsets, batch, d_max_length, stream);
}

template <typename OffsetT>
Status validate_offsets(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                        std::int64_t batch, std::int64_t capacity, std::int64_t expected_nnz, CheckResult* d_check,
                        cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(capacity, "capacity"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_offsets, batch + 1, "offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_check, 1, "check"));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;
    return Status::kSuccess;
  }
  return detail::launch_validate_offsets(d_offsets, batch, capacity, expected_nnz, d_check, stream);
}

template <typename LengthT, typename OffsetT>
Status lengths_to_offsets_host(const LengthT* lengths, std::int64_t batch, OffsetT* offsets) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(lengths, batch, "lengths"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(offsets, batch + 1, "offsets"));
  constexpr std::int64_t kMax = std::numeric_limits<OffsetT>::max();
  std::int64_t total = 0;
  offsets[0] = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = static_cast<std::int64_t>(lengths[b]);
    if (len < 0)
      return fail(Status::kNegativeLength,
                  "lengths[" + std::to_string(b) + "] = " + std::to_string(len) + " is negative");
    if (len > kMax - total)
      return fail(Status::kSizeOverflow, "offsets[" + std::to_string(b + 1) + "] = " + std::to_string(total) + " + " +
                                             std::to_string(len) + " does not fit " +
                                             (sizeof(OffsetT) == 4 ? "int32" : "int64") + " offsets");
    total += len;
    offsets[b + 1] = static_cast<OffsetT>(total);
  }
  return Status::kSuccess;
}

template <typename OffsetT>
Status validate_offsets_host(const OffsetT* offsets, std::int64_t batch, std::int64_t capacity,
                             std::int64_t expected_nnz) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(capacity, "capacity"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(offsets, batch + 1, "offsets"));
  auto at = [](std::int64_t i) { return "offsets[" + std::to_string(i) + "]"; };
  if (offsets[0] != 0)
    return fail(Status::kInvalidOffsets, at(0) + " = " + std::to_string(offsets[0]) + ", must be 0");
  for (std::int64_t i = 1; i <= batch; ++i)
    if (offsets[i] < offsets[i - 1])
      return fail(Status::kInvalidOffsets, at(i) + " = " + std::to_string(offsets[i]) + " is below " + at(i - 1) +
                                               " = " + std::to_string(offsets[i - 1]) + " (negative length)");
  const std::int64_t nnz = static_cast<std::int64_t>(offsets[batch]);
  if (nnz > capacity)
    return fail(Status::kInvalidOffsets, at(batch) + " = " + std::to_string(nnz) +
                                             " exceeds the values' capacity of " + std::to_string(capacity) + " rows");
  if (expected_nnz >= 0 && nnz != expected_nnz)
    return fail(Status::kInvalidOffsets,
                at(batch) + " = " + std::to_string(nnz) + " but nnz = " + std::to_string(expected_nnz));
  return Status::kSuccess;
}

#define RAGGED_INSTANTIATE_LO(L, O)                                                                              \
  template Status lengths_to_offsets<L, O>(void*, std::size_t&, const L*, std::int64_t, O*, CheckResult*,        \
                                           cudaStream_t);                                                        \
  template Status offsets_to_lengths<O, L>(void*, std::size_t&, const O*, std::int64_t, L*, cudaStream_t);       \
  template Status lengths_to_offsets_host<L, O>(const L*, std::int64_t, O*);
#define RAGGED_INSTANTIATE_O(O)                                                                                  \
  template Status max_length<O>(void*, std::size_t&, const O*, std::int64_t, std::int64_t*, cudaStream_t);      \
  template Status validate_offsets<O>(void*, std::size_t&, const O*, std::int64_t, std::int64_t, std::int64_t,  \
                                      CheckResult*, cudaStream_t);                                               \
  template Status validate_offsets_host<O>(const O*, std::int64_t, std::int64_t, std::int64_t);

RAGGED_INSTANTIATE_LO(std::int32_t, std::int32_t)
RAGGED_INSTANTIATE_LO(std::int32_t, std::int64_t)
RAGGED_INSTANTIATE_LO(std::int64_t, std::int32_t)
RAGGED_INSTANTIATE_LO(std::int64_t, std::int64_t)
RAGGED_INSTANTIATE_O(std::int32_t)
RAGGED_INSTANTIATE_O(std::int64_t)

}  // namespace ragged
