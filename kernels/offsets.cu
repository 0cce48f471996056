// Offsets kernels: lengths -> offsets (CUB scan + a saturating finish pass), offsets -> lengths, the maximum
// length (CUB reduce) and device validation.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <limits>

#include "check.cuh"
#include "launch.cuh"
#include "offsets_launch.h"
#include "ragged/view.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;

template <typename LengthT>
struct NonNegativeLength {
  const LengthT* lengths;
  __host__ __device__ std::int64_t operator()(std::int64_t b) const {
    const std::int64_t len = static_cast<std::int64_t>(lengths[b]);
    return len > 0 ? len : 0;
  }
};

// The scan's operator: non-negative sums that stick at INT64_MAX instead of wrapping, so that the scan stays
// non-decreasing whatever the lengths hold (two int64 lengths can already pass INT64_MAX).
struct SaturatingAdd {
  __host__ __device__ std::int64_t operator()(std::int64_t a, std::int64_t b) const {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    return a > kMax - b ? kMax : a + b;
  }
};

template <typename OffsetT>
struct LengthFromOffsets {
  const OffsetT* offsets;
  __host__ __device__ std::int64_t operator()(std::int64_t b) const {
    const std::int64_t len = sequence_length(offsets, b);
    return len > 0 ? len : 0;
  }
};

template <typename LengthT, typename OffsetT>
__global__ void finish_offsets_kernel(const LengthT* __restrict__ lengths, const std::int64_t* __restrict__ scan,
                                      std::int64_t batch, OffsetT* __restrict__ offsets, CheckResult* check) {
  constexpr std::int64_t kMax = std::numeric_limits<OffsetT>::max();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i <= batch; i += stride) {
    if (i == 0) {
      offsets[0] = 0;
      continue;
    }
    const std::int64_t length = static_cast<std::int64_t>(lengths[i - 1]);
    if (length < 0) record_failure(check, Status::kNegativeLength, i - 1);
    // The scan saturates at INT64_MAX, so the exact sum offsets[i - 1] + length is compared, not scan[i - 1].
    // Recorded under the sequence (i - 1), as the negative length is, so that the lowest index is the first
    // failure in the order the host version checks (sequence by sequence).
    const std::int64_t previous = i > 1 ? scan[i - 2] : 0;
    if (length > kMax - previous) record_failure(check, Status::kSizeOverflow, i - 1);
    const std::int64_t value = scan[i - 1];
    offsets[i] = static_cast<OffsetT>(value > kMax ? kMax : value);
  }
}

template <typename OffsetT, typename LengthT>
__global__ void offsets_to_lengths_kernel(const OffsetT* __restrict__ offsets, std::int64_t batch,
                                          LengthT* __restrict__ lengths) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < batch; b += stride) {
    // Saturated to LengthT: int32 lengths of int64 offsets (or of malformed ones) may not hold the difference.
    const std::int64_t length = sequence_length(offsets, b);
    constexpr std::int64_t kMax = std::numeric_limits<LengthT>::max(), kMin = std::numeric_limits<LengthT>::min();
    lengths[b] = static_cast<LengthT>(length > kMax ? kMax : (length < kMin ? kMin : length));
  }
}

template <typename OffsetT>
__global__ void validate_offsets_kernel(const OffsetT* __restrict__ offsets, std::int64_t batch,
                                        std::int64_t capacity, std::int64_t expected_nnz, CheckResult* check) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i <= batch; i += stride) {
    const std::int64_t value = static_cast<std::int64_t>(offsets[i]);
    bool bad = (i == 0 && value != 0);
    if (i > 0) bad = bad || value < static_cast<std::int64_t>(offsets[i - 1]);
    if (i == batch) bad = bad || value > capacity || (expected_nnz >= 0 && value != expected_nnz);
    if (bad) record_failure(check, Status::kInvalidOffsets, i);
  }
}

}  // namespace

Status reset_check(CheckResult* d_check, cudaStream_t stream) {
  if (d_check == nullptr) return Status::kSuccess;
  return from_cuda(cudaMemsetAsync(d_check, 0xff, sizeof(CheckResult), stream), "cudaMemsetAsync(check)");
}

template <typename LengthT>
Status launch_length_scan(void* d_cub_temp, std::size_t& cub_temp_bytes, const LengthT* d_lengths,
                          std::int64_t batch, std::int64_t* d_scan, cudaStream_t stream) {
  auto input = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                               NonNegativeLength<LengthT>{d_lengths});
  return from_cuda(
      cub::DeviceScan::InclusiveScan(d_cub_temp, cub_temp_bytes, input, d_scan, SaturatingAdd{}, batch, stream),
      "cub::DeviceScan::InclusiveScan(lengths)");
}

template <typename LengthT, typename OffsetT>
Status launch_finish_offsets(const LengthT* d_lengths, const std::int64_t* d_scan, std::int64_t batch,
                             OffsetT* d_offsets, CheckResult* d_check, cudaStream_t stream) {
  Status s = reset_check(d_check, stream);
  if (s != Status::kSuccess) return s;
  unsigned blocks = 0;
  s = grid_size(batch + 1, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  finish_offsets_kernel<<<blocks, kThreads, 0, stream>>>(d_lengths, d_scan, batch, d_offsets, d_check);
  return check_launch("finish_offsets_kernel");
}

template <typename OffsetT, typename LengthT>
Status launch_offsets_to_lengths(const OffsetT* d_offsets, std::int64_t batch, LengthT* d_lengths,
                                 cudaStream_t stream) {
  if (batch == 0) return Status::kSuccess;
  unsigned blocks = 0;
  Status s = grid_size(batch, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  offsets_to_lengths_kernel<<<blocks, kThreads, 0, stream>>>(d_offsets, batch, d_lengths);
  return check_launch("offsets_to_lengths_kernel");
}

template <typename OffsetT>
Status launch_max_length(void* d_cub_temp, std::size_t& cub_temp_bytes, const OffsetT* d_offsets,
                         std::int64_t batch, std::int64_t* d_max_length, cudaStream_t stream) {
  auto input = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                               LengthFromOffsets<OffsetT>{d_offsets});
  // Initial value 0: an empty batch has max length 0, and negative lengths already count as 0.
  return from_cuda(cub::DeviceReduce::Reduce(d_cub_temp, cub_temp_bytes, input, d_max_length, batch,
                                             cuda::maximum<std::int64_t>{}, std::int64_t{0}, stream),
                   "cub::DeviceReduce::Reduce(max length)");
}

template <typename OffsetT>
Status launch_validate_offsets(const OffsetT* d_offsets, std::int64_t batch, std::int64_t capacity,
                               std::int64_t expected_nnz, CheckResult* d_check, cudaStream_t stream) {
  Status s = reset_check(d_check, stream);
  if (s != Status::kSuccess) return s;
  unsigned blocks = 0;
  s = grid_size(batch + 1, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  validate_offsets_kernel<<<blocks, kThreads, 0, stream>>>(d_offsets, batch, capacity, expected_nnz, d_check);
  return check_launch("validate_offsets_kernel");
}

#define RAGGED_INSTANTIATE_LENGTH(L)                                                                           \
  template Status launch_length_scan<L>(void*, std::size_t&, const L*, std::int64_t, std::int64_t*, cudaStream_t);
#define RAGGED_INSTANTIATE_LENGTH_OFFSET(L, O)                                                                 \
  template Status launch_finish_offsets<L, O>(const L*, const std::int64_t*, std::int64_t, O*, CheckResult*,   \
                                              cudaStream_t);                                                   \
  template Status launch_offsets_to_lengths<O, L>(const O*, std::int64_t, L*, cudaStream_t);
#define RAGGED_INSTANTIATE_OFFSET(O)                                                                           \
  template Status launch_max_length<O>(void*, std::size_t&, const O*, std::int64_t, std::int64_t*, cudaStream_t); \
  template Status launch_validate_offsets<O>(const O*, std::int64_t, std::int64_t, std::int64_t, CheckResult*,  \
                                             cudaStream_t);

RAGGED_INSTANTIATE_LENGTH(std::int32_t)
RAGGED_INSTANTIATE_LENGTH(std::int64_t)
RAGGED_INSTANTIATE_LENGTH_OFFSET(std::int32_t, std::int32_t)
RAGGED_INSTANTIATE_LENGTH_OFFSET(std::int32_t, std::int64_t)
RAGGED_INSTANTIATE_LENGTH_OFFSET(std::int64_t, std::int32_t)
RAGGED_INSTANTIATE_LENGTH_OFFSET(std::int64_t, std::int64_t)
RAGGED_INSTANTIATE_OFFSET(std::int32_t)
RAGGED_INSTANTIATE_OFFSET(std::int64_t)

}  // namespace detail
}  // namespace ragged
