// Internal: untyped vectors of 1..16 bytes, so that copy kernels move bytes with the widest access the data's
// alignment allows instead of one typed element at a time.
#pragma once

#include <cuda_runtime.h>  // uint2, uint4

#include <cstdint>
#include <cstring>
#include <string>
#include <initializer_list>
#include <type_traits>

#include "ragged/status.h"

namespace ragged {
namespace detail {

template <int kBytes> struct ByteVector;
template <> struct ByteVector<16> { using type = uint4; };
template <> struct ByteVector<8> { using type = uint2; };
template <> struct ByteVector<4> { using type = std::uint32_t; };
template <> struct ByteVector<2> { using type = std::uint16_t; };
template <> struct ByteVector<1> { using type = std::uint8_t; };

template <int kBytes>
using byte_vector_t = typename ByteVector<kBytes>::type;

// The widest of 16, 8, 4, 2, 1 bytes that divides `row_bytes` and every address in `addresses`, and is a
// multiple of `elem_bytes` (so that a vector holds whole elements and a value can be replicated into it).
// Returns 0 when even elem_bytes does not fit (an address not aligned to its own element type).
inline int widest_vector_bytes(std::int64_t row_bytes, std::int64_t elem_bytes,
                               std::initializer_list<const void*> addresses) {
  for (int width = 16; width >= elem_bytes && width >= 1; width /= 2) {
    bool fits = row_bytes % width == 0;
    for (const void* address : addresses)
      fits = fits && reinterpret_cast<std::uintptr_t>(address) % static_cast<std::uintptr_t>(width) == 0;
    if (fits) return width;
  }
  return 0;
}

// `elem_bytes` bytes of `element` repeated to fill a vector of kBytes (kBytes is a multiple of elem_bytes).
template <int kBytes>
byte_vector_t<kBytes> replicate(const void* element, std::int64_t elem_bytes) {
  unsigned char bytes[kBytes];
  for (int i = 0; i < kBytes; ++i) bytes[i] = static_cast<const unsigned char*>(element)[i % elem_bytes];
  byte_vector_t<kBytes> vector;
  std::memcpy(&vector, bytes, kBytes);
  return vector;
}

// Calls launch(std::integral_constant<int, width>{}) for a width chosen at run time by widest_vector_bytes,
// so that each width gets its own kernel; width 0 (a misaligned pointer) fails.
template <typename Launch>
Status with_vector_width(int width, Launch&& launch) {
  switch (width) {
    case 16: return launch(std::integral_constant<int, 16>{});
    case 8: return launch(std::integral_constant<int, 8>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 1: return launch(std::integral_constant<int, 1>{});
    default:
      return fail(Status::kInvalidArgument, "a pointer is not aligned to its element size (vector width " +
                                                std::to_string(width) + ")");
  }
}

}  // namespace detail
}  // namespace ragged
