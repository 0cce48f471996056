// Packing kernels: the packing order (sort keys, CUB stable radix sort, inverse permutation, batch sizes, CUB
// scan for the step offsets) and one gather kernel that moves rows between a ragged tensor and its packed,
// time-major layout in either direction.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/util_type.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>

#include <cstdint>
#include <limits>
#include <string>

#include "byte_vector.h"
#include "check.cuh"
#include "launch.cuh"
#include "packing_launch.h"
#include "ragged/view.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;
// Vectors one thread copies per work item: a few independent loads in flight per thread, and the binary
// search that locates the row is paid once per item rather than once per vector.
constexpr int kVecsPerThread = 4;

template <typename OffsetT>
__global__ void packing_keys_kernel(const OffsetT* __restrict__ offsets, std::int64_t batch,
                                    std::int64_t max_steps, OffsetT* __restrict__ keys,
                                    std::int64_t* __restrict__ values, CheckResult* check) {
  // Keys are capped at max_steps: this bounds the sorted bit range by a host-known value, and a sequence
  // longer than max_steps (an error) then sorts as if truncated, which keeps the layout consistent.
  const std::int64_t key_cap =
      max_steps < std::numeric_limits<OffsetT>::max() ? max_steps : std::numeric_limits<OffsetT>::max();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < batch; b += stride) {
    std::int64_t length = sequence_length(offsets, b);
    if (length < 0) length = 0;
    if (length > max_steps) record_failure(check, Status::kInvalidArgument, b);
    keys[b] = static_cast<OffsetT>(length < key_cap ? length : key_cap);
    values[b] = b;
  }
}

template <typename OffsetT>
__global__ void finish_order_kernel(const OffsetT* __restrict__ sorted_keys,
                                    const std::int64_t* __restrict__ sorted_values, PackedLayout<OffsetT> layout) {
  // The sort leaves its result in whichever buffer the pass count dictates; copy it out only when needed.
  const bool copy_out = sorted_values != layout.sorted_indices;
  const std::int64_t batch = layout.batch;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < batch; j += stride) {
    const std::int64_t sequence = sorted_values[j];
    if (copy_out) {
      layout.sorted_indices[j] = sequence;
      layout.sorted_lengths[j] = sorted_keys[j];
    }
    // The values are a permutation of [0, batch) by construction; the guard only documents the bound.
    if (sequence >= 0 && sequence < batch) layout.unsorted_indices[sequence] = j;
  }
}

template <typename OffsetT>
__global__ void batch_sizes_kernel(PackedLayout<OffsetT> layout) {
  // One thread per step: the lengths are sorted descending, so the sequences active at step t are a prefix
  // and its length is found by binary search (max_steps * log2(batch) cached loads, no atomics).
  const OffsetT* __restrict__ sorted_lengths = layout.sorted_lengths;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < layout.max_steps;
       t += stride) {
    std::int64_t lo = 0, hi = layout.batch;  // first j with sorted_lengths[j] <= t
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<std::int64_t>(sorted_lengths[mid]) > t) lo = mid + 1;
      else hi = mid;
    }
    layout.batch_sizes[t] = static_cast<OffsetT>(lo);
  }
}

// Scan input: batch_sizes[t] for t < max_steps and a trailing 0, so that the exclusive scan over max_steps + 1
// items ends with the total and never reads past batch_sizes.
template <typename OffsetT>
struct StepSize {
  const OffsetT* batch_sizes;
  std::int64_t max_steps;
  __host__ __device__ std::int64_t operator()(std::int64_t t) const {
    return t < max_steps ? static_cast<std::int64_t>(batch_sizes[t]) : 0;
  }
};

// Scan output: int64 prefix sums saturated to OffsetT. Only malformed offsets can reach the bound; saturating
// keeps step_offsets non-decreasing, which the gather's binary search relies on.
template <typename OffsetT>
struct SaturateTo {
  __host__ __device__ OffsetT operator()(std::int64_t value) const {
    constexpr std::int64_t kMax = std::numeric_limits<OffsetT>::max();
    return static_cast<OffsetT>(value < kMax ? value : kMax);
  }
};

// Everything the gather reads, passed by value.
template <typename OffsetT>
struct MoveParams {
  const void* from;
  void* to;
  std::int64_t row_vecs;        // vectors per row
  std::int64_t chunks_per_row;  // work items per row, kVecsPerThread vectors each
  const OffsetT* offsets;       // [batch + 1] of the ragged tensor
  std::int64_t batch;
  std::int64_t rows;  // ragged nnz, also the packed buffer's capacity
  const std::int64_t* sorted_indices;
  const OffsetT* step_offsets;  // [max_steps + 1]
  std::int64_t max_steps;       // >= 1
};

// The ragged row that packed row p holds; false when p maps to none (only with malformed layouts or offsets).
template <typename OffsetT>
__device__ __forceinline__ bool ragged_row_of(const MoveParams<OffsetT>& params, std::int64_t packed_row,
                                              std::int64_t& ragged_row) {
  // Step t = the last step that starts at or before p (step_offsets is non-decreasing, [0] = 0). Empty steps
  // share their start with the next one, so the last such step is the one that really contains p.
  const OffsetT* __restrict__ step_offsets = params.step_offsets;
  std::int64_t lo = 0, hi = params.max_steps;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<std::int64_t>(step_offsets[mid]) <= packed_row) lo = mid;
    else hi = mid;
  }
  const std::int64_t step = lo;
  const std::int64_t slot = packed_row - static_cast<std::int64_t>(step_offsets[step]);
  if (slot < 0 || slot >= params.batch) return false;
  const std::int64_t sequence = params.sorted_indices[slot];
  if (sequence < 0 || sequence >= params.batch) return false;
  std::int64_t begin = 0, end = 0;
  clamped_row_range(params.offsets, sequence, params.rows, begin, end);
  if (step >= end - begin) return false;
  ragged_row = begin + step;
  return true;
}

template <typename VecT, typename OffsetT, PackDirection kDirection>
__global__ void __launch_bounds__(kThreads)
    move_packed_rows_kernel(const __grid_constant__ MoveParams<OffsetT> params) {
  // The packed total is device data: clamp it to the buffers' capacity so that no row outside is touched.
  std::int64_t total = static_cast<std::int64_t>(params.step_offsets[params.max_steps]);
  total = total < 0 ? 0 : (total > params.rows ? params.rows : total);
  const std::int64_t items = total * params.chunks_per_row;
  const VecT* __restrict__ from = static_cast<const VecT*>(params.from);
  VecT* __restrict__ to = static_cast<VecT*>(params.to);

  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride) {
    // Rows of at most kVecsPerThread vectors are one item each: skip the 64-bit division.
    const std::int64_t packed_row = params.chunks_per_row == 1 ? i : i / params.chunks_per_row;
    const std::int64_t chunk = i - packed_row * params.chunks_per_row;
    std::int64_t ragged_row = 0;
    if (!ragged_row_of(params, packed_row, ragged_row)) continue;
    const std::int64_t from_row = kDirection == PackDirection::kPack ? ragged_row : packed_row;
    const std::int64_t to_row = kDirection == PackDirection::kPack ? packed_row : ragged_row;
    const std::int64_t first = chunk * kVecsPerThread;
    const std::int64_t count = params.row_vecs - first < kVecsPerThread ? params.row_vecs - first : kVecsPerThread;
    const VecT* src = from + from_row * params.row_vecs + first;
    VecT* dst = to + to_row * params.row_vecs + first;
    // All loads first, then all stores, so the loads are in flight together.
    VecT buffer[kVecsPerThread];
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k)
      if (k < count) buffer[k] = __ldg(src + k);
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k)
      if (k < count) dst[k] = buffer[k];
  }
}

template <int kVecBytes, typename OffsetT, PackDirection kDirection>
Status launch_move(MoveParams<OffsetT> params, std::size_t row_bytes, cudaStream_t stream) {
  using VecT = byte_vector_t<kVecBytes>;
  params.row_vecs = static_cast<std::int64_t>(row_bytes / sizeof(VecT));
  params.chunks_per_row = (params.row_vecs + kVecsPerThread - 1) / kVecsPerThread;
  unsigned blocks = 0;
  const Status s = grid_size(params.rows * params.chunks_per_row, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  move_packed_rows_kernel<VecT, OffsetT, kDirection><<<blocks, kThreads, 0, stream>>>(params);
  return check_launch("move_packed_rows_kernel");
}

template <typename OffsetT, PackDirection kDirection>
Status launch_move_with_vector(MoveParams<OffsetT> params, std::size_t row_bytes, std::size_t elem_bytes,
                               cudaStream_t stream) {
  // The widest vector that divides the row size and both base pointers' alignment.
  const int width = widest_vector_bytes(static_cast<std::int64_t>(row_bytes), static_cast<std::int64_t>(elem_bytes),
                                        {params.from, params.to});
  return with_vector_width(width, [&](auto vec_bytes) {
    return launch_move<decltype(vec_bytes)::value, OffsetT, kDirection>(params, row_bytes, stream);
  });
}

}  // namespace

template <typename OffsetT>
Status launch_packing_keys(const OffsetT* d_offsets, std::int64_t batch, std::int64_t max_steps, OffsetT* d_keys,
                           std::int64_t* d_values, CheckResult* d_check, cudaStream_t stream) {
  if (batch == 0) return Status::kSuccess;
  unsigned blocks = 0;
  const Status s = grid_size(batch, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  packing_keys_kernel<<<blocks, kThreads, 0, stream>>>(d_offsets, batch, max_steps, d_keys, d_values, d_check);
  return check_launch("packing_keys_kernel");
}

template <typename OffsetT>
Status launch_sort_by_length(void* d_cub_temp, std::size_t& cub_temp_bytes, OffsetT* d_keys, OffsetT* d_keys_alt,
                             std::int64_t* d_values, std::int64_t* d_values_alt, std::int64_t batch, int end_bit,
                             bool& result_in_alt, cudaStream_t stream) {
  // Double-buffer mode: the second buffers are the caller's output arrays, so CUB's own temp storage holds
  // no copy of the keys and values.
  cub::DoubleBuffer<OffsetT> keys(d_keys, d_keys_alt);
  cub::DoubleBuffer<std::int64_t> values(d_values, d_values_alt);
  const Status s = from_cuda(cub::DeviceRadixSort::SortPairsDescending(d_cub_temp, cub_temp_bytes, keys, values,
                                                                       batch, 0, end_bit, stream),
                             "cub::DeviceRadixSort::SortPairsDescending(lengths)");
  result_in_alt = keys.selector != 0;
  return s;
}

template <typename OffsetT>
Status launch_finish_order(const OffsetT* d_sorted_keys, const std::int64_t* d_sorted_values,
                           PackedLayout<OffsetT> layout, cudaStream_t stream) {
  if (layout.batch == 0) return Status::kSuccess;
  unsigned blocks = 0;
  const Status s = grid_size(layout.batch, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  finish_order_kernel<<<blocks, kThreads, 0, stream>>>(d_sorted_keys, d_sorted_values, layout);
  return check_launch("finish_order_kernel");
}

template <typename OffsetT>
Status launch_batch_sizes(PackedLayout<OffsetT> layout, cudaStream_t stream) {
  if (layout.max_steps == 0) return Status::kSuccess;
  unsigned blocks = 0;
  const Status s = grid_size(layout.max_steps, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  batch_sizes_kernel<<<blocks, kThreads, 0, stream>>>(layout);
  return check_launch("batch_sizes_kernel");
}

template <typename OffsetT>
Status launch_step_offsets(void* d_cub_temp, std::size_t& cub_temp_bytes, const OffsetT* d_batch_sizes,
                           std::int64_t max_steps, OffsetT* d_step_offsets, cudaStream_t stream) {
  auto input = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                               StepSize<OffsetT>{d_batch_sizes, max_steps});
  auto output = thrust::make_transform_output_iterator(d_step_offsets, SaturateTo<OffsetT>{});
  return from_cuda(cub::DeviceScan::ExclusiveSum(d_cub_temp, cub_temp_bytes, input, output, max_steps + 1, stream),
                   "cub::DeviceScan::ExclusiveSum(batch_sizes)");
}

template <typename OffsetT>
Status launch_move_packed_rows(PackDirection direction, const void* d_from, void* d_to, std::size_t row_bytes,
                               std::size_t elem_bytes, const OffsetT* d_offsets, std::int64_t rows,
                               PackedLayout<const OffsetT> layout, cudaStream_t stream) {
  if (rows == 0 || row_bytes == 0 || layout.batch == 0 || layout.max_steps == 0) return Status::kSuccess;
  MoveParams<OffsetT> params{};
  params.from = d_from;
  params.to = d_to;
  params.offsets = d_offsets;
  params.batch = layout.batch;
  params.rows = rows;
  params.sorted_indices = layout.sorted_indices;
  params.step_offsets = layout.step_offsets;
  params.max_steps = layout.max_steps;
  switch (direction) {
    case PackDirection::kPack:
      return launch_move_with_vector<OffsetT, PackDirection::kPack>(params, row_bytes, elem_bytes, stream);
    case PackDirection::kUnpack:
      return launch_move_with_vector<OffsetT, PackDirection::kUnpack>(params, row_bytes, elem_bytes, stream);
  }
  return fail(Status::kInvalidArgument, "unknown pack direction " + std::to_string(static_cast<int>(direction)));
}

#define RAGGED_INSTANTIATE_PACKING(O)                                                                            \
  template Status launch_packing_keys<O>(const O*, std::int64_t, std::int64_t, O*, std::int64_t*, CheckResult*, \
                                         cudaStream_t);                                                         \
  template Status launch_sort_by_length<O>(void*, std::size_t&, O*, O*, std::int64_t*, std::int64_t*,           \
                                           std::int64_t, int, bool&, cudaStream_t);                             \
  template Status launch_finish_order<O>(const O*, const std::int64_t*, PackedLayout<O>, cudaStream_t);         \
  template Status launch_batch_sizes<O>(PackedLayout<O>, cudaStream_t);                                         \
  template Status launch_step_offsets<O>(void*, std::size_t&, const O*, std::int64_t, O*, cudaStream_t);        \
  template Status launch_move_packed_rows<O>(PackDirection, const void*, void*, std::size_t, std::size_t,     \
                                             const O*, std::int64_t, PackedLayout<const O>, cudaStream_t);

RAGGED_INSTANTIATE_PACKING(std::int32_t)
RAGGED_INSTANTIATE_PACKING(std::int64_t)

}  // namespace detail
}  // namespace ragged
