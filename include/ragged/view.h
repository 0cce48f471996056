// Non-owning views of ragged and padded tensors, usable on host and device.
//
// A ragged tensor is `values` [nnz, inner...] (row-major, inner dims dense, `inner` = their product) plus
// `offsets` [batch+1] (CSR row pointers / cu_seqlens): sequence b owns rows [offsets[b], offsets[b+1]).
// `nnz` is the number of rows the values buffer holds; every kernel clamps each row to [0, nnz), so
// malformed offsets produce wrong values but never an out-of-bounds access.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ragged/config.h"
#include "ragged/dtype.h"

namespace ragged {

template <typename T, typename OffsetT>
struct RaggedView {
  static_assert(is_offset_type_v<OffsetT>, "offsets must be int32_t or int64_t");
  T* values = nullptr;               // [nnz, inner]
  const OffsetT* offsets = nullptr;  // [batch + 1]
  std::int64_t batch = 0;
  std::int64_t nnz = 0;    // rows held by `values` (its capacity in rows)
  std::int64_t inner = 1;  // product of the inner dims

  RAGGED_HOST_DEVICE std::int64_t row_elems() const { return inner; }

  // A view of mutable values passes where a read-only one is expected (as T* converts to const T*). Template
  // argument deduction does not look at conversions, so each op that reads a view also has an overload for a
  // mutable one (WhenMutable below) that forwards here.
  template <typename U = T, typename = std::enable_if_t<std::is_same<U, T>::value && !std::is_const<U>::value>>
  RAGGED_HOST_DEVICE operator RaggedView<const U, OffsetT>() const {
    return {values, offsets, batch, nnz, inner};
  }
};

// [batch, max_len, inner] dense tensor, as a padded pipeline stores a batch.
template <typename T>
struct PaddedView {
  T* data = nullptr;
  std::int64_t batch = 0;
  std::int64_t max_len = 0;
  std::int64_t inner = 1;

  template <typename U = T, typename = std::enable_if_t<std::is_same<U, T>::value && !std::is_const<U>::value>>
  RAGGED_HOST_DEVICE operator PaddedView<const U>() const {
    return {data, batch, max_len, inner};
  }
};

// T itself, but not deduced: a parameter of this type takes its template arguments from the others and so
// accepts what converts to it (a PackedLayout<OffsetT> where a PackedLayout<const OffsetT> is expected).
template <typename T>
struct TypeIdentity {
  using type = T;
};
template <typename T>
using NonDeduced = typename TypeIdentity<T>::type;

// Enables the ops' overloads for views of mutable values (T not const), which forward to the read-only ones.
template <typename T>
using WhenMutable = std::enable_if_t<!std::is_const<T>::value>;

// Where the real tokens sit inside a padded row of max_len slots.
enum class Align : int {
  kLeft = 0,   // tokens first, padding after (right padding; PyTorch pad_sequence)
  kRight = 1,  // padding first, tokens last (left padding; decoder-style batching)
};

// Which tokens a sequence longer than max_len drops.
enum class Truncate : int {
  kRight = 0,  // keep the first max_len tokens
  kLeft = 1,   // keep the last max_len tokens
};

// Row range [begin, end) of a sequence from its two offsets (offsets[b], offsets[b + 1]), clamped into [0, nnz)
// and made non-decreasing. Shared by every kernel so that bad offsets can never move an access out of bounds.
RAGGED_HOST_DEVICE void clamp_row_range(std::int64_t lo, std::int64_t hi, std::int64_t nnz, std::int64_t& begin,
                                        std::int64_t& end) {
  lo = lo < 0 ? 0 : (lo > nnz ? nnz : lo);
  hi = hi < lo ? lo : (hi > nnz ? nnz : hi);
  begin = lo;
  end = hi;
}

// The same, reading the offsets of sequence b.
template <typename OffsetT>
RAGGED_HOST_DEVICE void clamped_row_range(const OffsetT* offsets, std::int64_t b, std::int64_t nnz,
                                          std::int64_t& begin, std::int64_t& end) {
  clamp_row_range(static_cast<std::int64_t>(offsets[b]), static_cast<std::int64_t>(offsets[b + 1]), nnz, begin, end);
}

// offsets[b + 1] - offsets[b] without overflow: malformed int64 offsets (INT64_MAX then -2) would wrap, so the
// difference saturates at the int64 range instead. Shared by kernels and CPU references.
template <typename OffsetT>
RAGGED_HOST_DEVICE std::int64_t sequence_length(const OffsetT* offsets, std::int64_t b) {
  const std::int64_t lo = static_cast<std::int64_t>(offsets[b]);
  const std::int64_t hi = static_cast<std::int64_t>(offsets[b + 1]);
  if (lo < 0 && hi > INT64_MAX + lo) return INT64_MAX;  // hi - lo > INT64_MAX
  if (lo > 0 && hi < INT64_MIN + lo) return INT64_MIN;  // hi - lo < INT64_MIN
  return hi - lo;
}

// Given a sequence of `length` tokens placed in `max_len` slots: the first kept token (`skip`), how many are
// kept (`kept`) and the slot of the first kept token (`lead`). Shared by CPU references and kernels.
struct SlotMap {
  std::int64_t skip;
  std::int64_t kept;
  std::int64_t lead;
};

RAGGED_HOST_DEVICE SlotMap slot_map(std::int64_t length, std::int64_t max_len, Align align, Truncate trunc) {
  if (length < 0) length = 0;
  const std::int64_t kept = length < max_len ? length : max_len;
  const std::int64_t skip = trunc == Truncate::kLeft ? length - kept : 0;
  const std::int64_t lead = align == Align::kRight ? max_len - kept : 0;
  return SlotMap{skip, kept, lead};
}

}  // namespace ragged
