// Internal: element conversions for the CPU references. Rounding goes straight from double to T (through
// float, half and bfloat16 could round twice).
#pragma once

#include <type_traits>

#include "ragged/dtype.h"

namespace ragged {
namespace reference {
namespace detail {

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same<T, half>::value) return static_cast<double>(__half2float(v));
  else if constexpr (std::is_same<T, bfloat16>::value) return static_cast<double>(__bfloat162float(v));
  else return static_cast<double>(v);
}

template <typename T>
T round_to(double v) {
  if constexpr (std::is_same<T, half>::value) return __double2half(v);
  else if constexpr (std::is_same<T, bfloat16>::value) return __double2bfloat16(v);
  else return static_cast<T>(v);
}

}  // namespace detail
}  // namespace reference
}  // namespace ragged
