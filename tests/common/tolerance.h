// Precision helpers for judging results in T against double references: the spacing of T at a magnitude,
// correct rounding from double, and NaN-aware equality.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/test_util.h"
#include "ragged/dtype.h"

namespace ragged {
namespace test {

// Significand bits (with the implicit one) and smallest normal exponent of each floating point type.
template <typename T> struct FloatFormat;
template <> struct FloatFormat<float> { static constexpr int kDigits = 24, kMinExponent = -126; };
template <> struct FloatFormat<half> { static constexpr int kDigits = 11, kMinExponent = -14; };
template <> struct FloatFormat<bfloat16> { static constexpr int kDigits = 8, kMinExponent = -126; };

// The distance from |x| to the next larger value of T (the subnormal spacing below the normal range).
// 0 for infinities and NaN, so a tolerance built on it demands exact equality there.
template <typename T>
double ulp_of(double x) {
  if (!std::isfinite(x)) return 0.0;
  int exponent = 0;
  std::frexp(std::abs(x), &exponent);  // |x| = f * 2^exponent, f in [0.5, 1)
  int binade = x == 0.0 ? FloatFormat<T>::kMinExponent : exponent - 1;
  if (binade < FloatFormat<T>::kMinExponent) binade = FloatFormat<T>::kMinExponent;
  return std::ldexp(1.0, binade - (FloatFormat<T>::kDigits - 1));
}

// Correct rounding straight from double (from_double goes through float and can round twice).
template <typename T>
T round_to(double v) {
  if constexpr (std::is_same<T, half>::value) return __double2half(v);
  else if constexpr (std::is_same<T, bfloat16>::value) return __double2bfloat16(v);
  else return static_cast<T>(v);
}

// Equal as numbers (+0 == -0), or both NaN.
template <typename T>
bool same_value(T a, T b) {
  const double x = to_double(a), y = to_double(b);
  return (std::isnan(x) && std::isnan(y)) || x == y;
}

// |got - ref| <= allowed, where NaN must meet NaN and an infinity the same infinity.
inline bool within(double got, double ref, double allowed) {
  if (std::isnan(got) || std::isnan(ref)) return std::isnan(got) && std::isnan(ref);
  if (std::isinf(got) || std::isinf(ref)) return got == ref;
  return std::abs(got - ref) <= allowed;
}

}  // namespace test
}  // namespace ragged
