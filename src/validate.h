// Internal argument checks shared by the public entry points. Each returns kSuccess or fails with a message
// that names the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ragged/status.h"

namespace ragged {
namespace detail {

// What a query reports for an op that needs no workspace: 1 byte, never 0 (CUB's convention). A caller whose
// allocator returns null for 0 bytes would otherwise pass null to the run call, which then only queries again and
// returns kSuccess having enqueued nothing. The run phase itself needs no bytes.
constexpr std::size_t kNoWorkspaceBytes = 1;

// A pointer must be non-null when it must hold `count` > 0 elements, and a typed one aligned to its type (the
// kernels load whole elements, often several at once).
template <typename T>
Status check_pointer(const T* ptr, std::int64_t count, const char* name) {
  if (ptr == nullptr && count > 0)
    return fail(Status::kNullPointer, std::string(name) + " is null but must hold " + std::to_string(count) +
                                          " elements");
  if constexpr (!std::is_void<T>::value) {
    if (reinterpret_cast<std::uintptr_t>(ptr) % alignof(T) != 0)
      return fail(Status::kInvalidArgument,
                  std::string(name) + " is not aligned to its element size (" + std::to_string(alignof(T)) + " bytes)");
  }
  return Status::kSuccess;
}

inline Status check_non_negative(std::int64_t value, const char* name) {
  if (value < 0)
    return fail(Status::kInvalidArgument, std::string(name) + " = " + std::to_string(value) + " is negative");
  return Status::kSuccess;
}

// The largest batch: its batch + 1 offsets (or any per-sequence array of 8-byte elements, plus one) must count
// in int64 bytes, so that no size computed from it can overflow. max_steps (packing, the RNN) has the same bound:
// its per-step arrays hold max_steps + 1 entries.
constexpr std::int64_t kMaxBatch = std::numeric_limits<std::int64_t>::max() / 16;

// 0 <= count <= kMaxBatch; `arrays` says what would not fit past the bound.
inline Status check_count(std::int64_t count, const char* name, const char* arrays) {
  const Status sign = check_non_negative(count, name);
  if (sign != Status::kSuccess) return sign;
  if (count > kMaxBatch)
    return fail(Status::kSizeOverflow, std::string(name) + " = " + std::to_string(count) + " is too large: its " +
                                           arrays + " do not fit in memory");
  return Status::kSuccess;
}

inline Status check_batch(std::int64_t batch, const char* name) {
  return check_count(batch, name, "batch + 1 offsets");
}

inline Status check_max_steps(std::int64_t max_steps, const char* name) {
  return check_count(max_steps, name, "max_steps + 1 per-step entries");
}

inline Status check_equal(std::int64_t a, std::int64_t b, const char* what) {
  if (a != b)
    return fail(Status::kInvalidArgument,
                std::string(what) + " differ: " + std::to_string(a) + " vs " + std::to_string(b));
  return Status::kSuccess;
}

// a * b * c must fit int64 (element counts of a tensor) and, in bytes, size_t.
inline Status check_product(std::int64_t a, std::int64_t b, std::int64_t c, std::size_t elem_size, const char* name) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(elem_size);
  if ((b != 0 && a > max / b) || (c != 0 && b != 0 && a * b > max / c))
    return fail(Status::kSizeOverflow, std::string(name) + " has too many elements: " + std::to_string(a) + " x " +
                                           std::to_string(b) + " x " + std::to_string(c));
  return Status::kSuccess;
}

// The first non-success status of a list, evaluated in order.
#define RAGGED_RETURN_IF_ERROR(expr)                          \
  do {                                                        \
    const ::ragged::Status ragged_status_ = (expr);           \
    if (ragged_status_ != ::ragged::Status::kSuccess) return ragged_status_; \
  } while (0)

}  // namespace detail
}  // namespace ragged
