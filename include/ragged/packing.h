// Packing order for recurrent layers, as PyTorch's PackedSequence: sequences sorted by length (descending,
// stable), the permutation and its inverse, per-step batch sizes, and pack / unpack between a ragged tensor
// in the caller's order and the time-major packed layout.
//
// Packed layout: step t holds batch_sizes[t] rows, one per sequence still active at t, in sorted order;
// step t starts at packed row step_offsets[t]. Packed row step_offsets[t] + j is token t of sequence
// sorted_indices[j]. The packed rows number step_offsets[max_steps], which is nnz = offsets[batch] for valid
// offsets and max_steps >= the longest sequence.
//
// Lengths are offsets[b+1] - offsets[b], negative ones counted as 0. A sequence longer than max_steps is an
// error (recorded by packing_order's CheckResult) but the layout stays consistent: the sequence is treated as
// truncated to its first max_steps tokens (its sorted_lengths entry is max_steps, the packed total
// step_offsets[max_steps] counts only those tokens) and its later tokens are neither packed nor unpacked.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ragged/check.h"
#include "ragged/config.h"
#include "ragged/dtype.h"
#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {

// Device arrays that describe a packed layout, all caller-allocated. `max_steps` must be at least the longest
// sequence; longer sequences are recorded as kInvalidArgument in the CheckResult of packing_order and their
// tokens past max_steps are not packed.
//
// PackedLayout<OffsetT> has writable arrays: packing_order fills them. PackedLayout<const OffsetT> holds the
// same arrays read-only, which is all that pack / unpack need; a PackedLayout<OffsetT> converts to it (as
// RaggedView<T> does to RaggedView<const T>), so a caller whose layout is read-only needs no const_cast.
template <typename OffsetT>
struct PackedLayout {
  static_assert(is_offset_type_v<std::remove_const_t<OffsetT>>, "offsets must be int32_t or int64_t");
  // std::int64_t, const where OffsetT is.
  using IndexT = std::conditional_t<std::is_const<OffsetT>::value, const std::int64_t, std::int64_t>;

  std::int64_t batch = 0;
  std::int64_t max_steps = 0;
  IndexT* sorted_indices = nullptr;    // [batch]   sorted position j -> original sequence
  IndexT* unsorted_indices = nullptr;  // [batch]   original sequence b -> sorted position
  OffsetT* sorted_lengths = nullptr;   // [batch]   min(length, max_steps) in sorted order (descending)
  OffsetT* batch_sizes = nullptr;      // [max_steps]      sequences with length > t (0 past the longest)
  OffsetT* step_offsets = nullptr;     // [max_steps + 1]  exclusive scan of batch_sizes; [max_steps] = total

  template <typename U = OffsetT,
            typename = std::enable_if_t<std::is_same<U, OffsetT>::value && !std::is_const<U>::value>>
  RAGGED_HOST_DEVICE operator PackedLayout<const U>() const {
    return {batch, max_steps, sorted_indices, unsorted_indices, sorted_lengths, batch_sizes, step_offsets};
  }
};

// Fills every array of `layout` from offsets [layout.batch + 1]. Uses CUB's stable radix sort (descending), so
// equal lengths keep their original order. The sort key is min(length, max_steps) (the length itself when
// valid), which bounds the sorted bits by max_steps without a host sync. layout.batch must fit OffsetT.
// OffsetT: int32_t or int64_t.
// d_check (optional) is overwritten with the first sequence longer than layout.max_steps (kInvalidArgument,
// index = the sequence), or "no failure".
template <typename OffsetT>
Status packing_order(void* d_workspace, std::size_t& workspace_bytes, const OffsetT* d_offsets,
                     PackedLayout<OffsetT> layout, CheckResult* d_check, cudaStream_t stream);

// packed[step_offsets[t] + j, :] = src token t of sequence sorted_indices[j]. `packed` holds src.nnz rows;
// those past step_offsets[max_steps] are not written. Reads layout.sorted_indices and layout.step_offsets
// (as packing_order wrote them for src.offsets). No workspace: the query sets workspace_bytes to 1.
// T: float, half, bfloat16, int32_t, int64_t, uint8_t.
template <typename T, typename OffsetT>
Status pack_sequences(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                      NonDeduced<PackedLayout<const OffsetT>> layout, T* d_packed, cudaStream_t stream);
template <typename T, typename OffsetT, typename = WhenMutable<T>>
Status pack_sequences(void* d_workspace, std::size_t& workspace_bytes, RaggedView<T, OffsetT> src,
                      NonDeduced<PackedLayout<const OffsetT>> layout, T* d_packed, cudaStream_t stream) {
  return pack_sequences<T, OffsetT>(d_workspace, workspace_bytes, RaggedView<const T, OffsetT>(src), layout, d_packed,
                                    stream);
}

// The inverse: dst (caller's order, dst.offsets) from the packed rows; `packed` holds dst.nnz rows. Rows of
// dst that no packed row maps to (tokens past max_steps, rows past offsets[batch]) are not written.
template <typename T, typename OffsetT>
Status unpack_sequences(void* d_workspace, std::size_t& workspace_bytes, const T* d_packed,
                        NonDeduced<PackedLayout<const OffsetT>> layout, RaggedView<T, OffsetT> dst,
                        cudaStream_t stream);

}  // namespace ragged
