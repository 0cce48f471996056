// Internal: the values an additive attention mask holds, shared by the device op and the CPU reference so the
// two agree bit for bit.
#pragma once

#include <limits>
#include <type_traits>

#include "ragged/dtype.h"

namespace ragged {
namespace detail {

// 0 where a slot holds a token (the score passes unchanged), -infinity where it is padding (softmax gives 0).
template <typename T>
T additive_mask_value(bool token) {
  const float value = token ? 0.0f : -std::numeric_limits<float>::infinity();
  if constexpr (std::is_same<T, half>::value) return __float2half(value);
  else if constexpr (std::is_same<T, bfloat16>::value) return __float2bfloat16(value);
  else return static_cast<T>(value);
}

}  // namespace detail
}  // namespace ragged
