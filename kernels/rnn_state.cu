// The recurrent layers' bookkeeping kernels: the slot table built from the packing order, and the per-layer
// state moves between the caller's order (h0 / c0 / hn / cn) and slot order.
#include "launch.cuh"
#include "rnn_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;

template <typename OffsetT>
__global__ void __launch_bounds__(kThreads)
    rnn_slots_kernel(const OffsetT* __restrict__ offsets, std::int64_t rows, PackedLayout<const OffsetT> layout,
                     std::int64_t* __restrict__ slot_begin, std::int64_t* __restrict__ slot_length,
                     std::int64_t* __restrict__ active) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t j = first; j < layout.batch; j += stride) {
    std::int64_t sequence = layout.sorted_indices[j];
    std::int64_t begin = 0, end = 0;
    if (sequence >= 0 && sequence < layout.batch) clamped_row_range(offsets, sequence, rows, begin, end);
    std::int64_t length = end - begin;
    const std::int64_t sorted = static_cast<std::int64_t>(layout.sorted_lengths[j]);
    if (sorted < length) length = sorted < 0 ? 0 : sorted;
    if (length > layout.max_steps) length = layout.max_steps;
    slot_begin[j] = begin;
    slot_length[j] = length;
  }
  for (std::int64_t t = first; t < layout.max_steps; t += stride) {
    const std::int64_t count = static_cast<std::int64_t>(layout.batch_sizes[t]);
    active[t] = count < 0 ? 0 : (count > layout.batch ? layout.batch : count);
  }
}

template <typename T>
__device__ __forceinline__ T zero_of() {
  if constexpr (std::is_same<T, __half>::value) return __float2half_rn(0.0f);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn(0.0f);
  else return T(0);
}

template <typename T>
__device__ __forceinline__ float widen(T v) {
  if constexpr (std::is_same<T, __half>::value) return __half2float(v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __bfloat162float(v);
  else return static_cast<float>(v);
}

template <typename T>
__device__ __forceinline__ T narrow(float v) {
  if constexpr (std::is_same<T, __half>::value) return __float2half_rn(v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn(v);
  else return static_cast<T>(v);
}

__device__ __forceinline__ std::int64_t slot_sequence(const std::int64_t* sorted_indices, std::int64_t j,
                                                      std::int64_t batch) {
  const std::int64_t sequence = sorted_indices[j];
  return sequence >= 0 && sequence < batch ? sequence : -1;
}

// One thread per (direction, slot, element) over max(state, hidden) elements.
template <typename T>
__global__ void __launch_bounds__(kThreads) rnn_init_state_kernel(const RnnStateArgs<T> a) {
  const std::int64_t width = a.state > a.hidden ? a.state : a.hidden;
  const std::int64_t total = a.dirs * a.batch * width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t k = i % width;
    const std::int64_t j = (i / width) % a.batch;
    const std::int64_t d = i / (width * a.batch);
    const std::int64_t sequence = slot_sequence(a.sorted_indices, j, a.batch);
    if (k < a.state) {
      T value = zero_of<T>();
      if (a.h0 != nullptr && sequence >= 0) value = a.h0[(d * a.batch + sequence) * a.state + k];
      a.h[(d * 2 * a.batch + j) * a.state + k] = value;  // parity 0
    }
    if (a.lstm && k < a.hidden) {
      float value = 0.0f;
      if (a.c0 != nullptr && sequence >= 0) value = widen(a.c0[(d * a.batch + sequence) * a.hidden + k]);
      a.c[(d * a.batch + j) * a.hidden + k] = value;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) rnn_final_state_kernel(const RnnStateArgs<T> a) {
  const std::int64_t width = a.state > a.hidden ? a.state : a.hidden;
  const std::int64_t total = a.dirs * a.batch * width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t k = i % width;
    const std::int64_t j = (i / width) % a.batch;
    const std::int64_t d = i / (width * a.batch);
    const std::int64_t sequence = slot_sequence(a.sorted_indices, j, a.batch);
    if (sequence < 0) continue;
    if (a.hn != nullptr && k < a.state) {
      const std::int64_t parity = a.slot_length[j] & 1;
      a.hn[(d * a.batch + sequence) * a.state + k] = a.h[((d * 2 + parity) * a.batch + j) * a.state + k];
    }
    if (a.lstm && a.cn != nullptr && k < a.hidden)
      a.cn[(d * a.batch + sequence) * a.hidden + k] = narrow<T>(a.c[(d * a.batch + j) * a.hidden + k]);
  }
}

template <typename T>
Status launch_state_kernel(bool init, const RnnStateArgs<T>& args, cudaStream_t stream) {
  const std::int64_t width = args.state > args.hidden ? args.state : args.hidden;
  const std::int64_t total = args.dirs * args.batch * width;
  if (total == 0) return Status::kSuccess;
  unsigned blocks = 0;
  const Status s = grid_size(total, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  if (init) {
    rnn_init_state_kernel<T><<<blocks, kThreads, 0, stream>>>(args);
    return check_launch("rnn_init_state_kernel");
  }
  rnn_final_state_kernel<T><<<blocks, kThreads, 0, stream>>>(args);
  return check_launch("rnn_final_state_kernel");
}

}  // namespace

template <typename OffsetT>
Status launch_rnn_slots(const OffsetT* d_offsets, std::int64_t rows, PackedLayout<const OffsetT> layout,
                        std::int64_t* d_slot_begin, std::int64_t* d_slot_length, std::int64_t* d_active,
                        cudaStream_t stream) {
  const std::int64_t work = layout.batch > layout.max_steps ? layout.batch : layout.max_steps;
  if (work == 0) return Status::kSuccess;
  unsigned blocks = 0;
  const Status s = grid_size(work, kThreads, 8, blocks);
  if (s != Status::kSuccess) return s;
  rnn_slots_kernel<OffsetT><<<blocks, kThreads, 0, stream>>>(d_offsets, rows, layout, d_slot_begin, d_slot_length,
                                                             d_active);
  return check_launch("rnn_slots_kernel");
}

template <typename T>
Status launch_rnn_init_state(const RnnStateArgs<T>& args, cudaStream_t stream) {
  return launch_state_kernel(true, args, stream);
}

template <typename T>
Status launch_rnn_final_state(const RnnStateArgs<T>& args, cudaStream_t stream) {
  return launch_state_kernel(false, args, stream);
}

template Status launch_rnn_slots<std::int32_t>(const std::int32_t*, std::int64_t, PackedLayout<const std::int32_t>,
                                               std::int64_t*, std::int64_t*, std::int64_t*, cudaStream_t);
template Status launch_rnn_slots<std::int64_t>(const std::int64_t*, std::int64_t, PackedLayout<const std::int64_t>,
                                               std::int64_t*, std::int64_t*, std::int64_t*, cudaStream_t);

#define RAGGED_INSTANTIATE_RNN_STATE(T)                                                     \
  template Status launch_rnn_init_state<T>(const RnnStateArgs<T>&, cudaStream_t);         \
  template Status launch_rnn_final_state<T>(const RnnStateArgs<T>&, cudaStream_t);

RAGGED_INSTANTIATE_RNN_STATE(float)
RAGGED_INSTANTIATE_RNN_STATE(__half)
RAGGED_INSTANTIATE_RNN_STATE(__nv_bfloat16)

}  // namespace detail
}  // namespace ragged
