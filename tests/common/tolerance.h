// Precision helpers for judging results in T against double references: the spacing of T at a magnitude,
// correct rounding from double, NaN-aware equality, and the segment tests' rule for a whole output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

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

// The segment tests' tolerance rule (after FlashAttention's), checked over got[k] and ref[k] for k in
// [begin, end): a result in T is accepted when
//   (1) every element has |got - ref| <= float_bound + ulp_T(ref)  (the op accumulates in float, then rounds
//       to T once), and
//   (2) for half / bfloat16 (naive_t not null) also, over the whole range, max |got - ref| <= 2 * max |naive -
//       ref| + ulp_T(max |ref|), where `naive` is the same op computed in T with a rounding after every operation.
// ref is the double-precision CPU reference rounded to T; float_bound is a per-element bound on float
// accumulation error that each test derives from the data (e.g. 1e-5 * sum |x| for a sum). Rule (2) takes the
// maxima, as test_attention and test_rnn do, because one element's naive error is one draw: where a result
// cancels to near zero the naive one can land on the reference by luck (seed 1795964898, log-softmax backward
// in bfloat16: naive 0 against the reference's -5.8e-9, the kernel's float result -2.9e-8; docs/emulator.md).
// Returns the first failure as a message, or "".
template <typename T>
std::string compare_to_reference(const std::vector<T>& got, const std::vector<T>& ref, const std::vector<T>* naive_t,
                                 const std::vector<double>& float_bound, std::int64_t begin, std::int64_t end) {
  std::ostringstream message;
  message.precision(9);
  double error = 0.0, naive_error = 0.0, magnitude = 0.0;
  std::int64_t worst = -1;
  for (std::int64_t k = begin; k < end; ++k) {
    const double g = to_double(got[k]), r = to_double(ref[k]);
    const double one_ulp = ulp_of<T>(r);
    if (is_poison(got[k])) {  // a NaN, which a NaN reference would accept
      message << "element " << k << " was not written (poison), reference " << r;
      return message.str();
    }
    if (!within(g, r, float_bound[k] + one_ulp)) {
      message << "element " << k << ": got " << g << ", reference " << r << ", float bound " << float_bound[k]
              << ", ulp " << one_ulp;
      return message.str();
    }
    if (naive_t == nullptr) continue;
    // A naive result that overflowed or went NaN gives rule (2) nothing to measure here; rule (1) still holds.
    const double n = to_double((*naive_t)[k]);
    if (!std::isfinite(n) || !std::isfinite(r)) continue;
    if (std::abs(g - r) > error) error = std::abs(g - r), worst = k;
    naive_error = std::max(naive_error, std::abs(n - r));
    magnitude = std::max(magnitude, std::abs(r));
  }
  const double allowed = 2.0 * naive_error + ulp_of<T>(magnitude);
  if (worst >= 0 && error > allowed) {
    message << "element " << worst << ": got " << to_double(got[worst]) << ", reference " << to_double(ref[worst])
            << ": error " << error << " exceeds 2 x the naive error " << naive_error << " + ulp at max |ref| "
            << magnitude;
    return message.str();
  }
  return "";
}

// test_rnn's rule for a whole output of a recurrence (errors compound over the steps, so no per-element float
// bound is derived): every element within 2 x max |naive - exact| + k x ulp_T(max |exact|), k = 16 for float and 2
// for half / bfloat16, where exact is the double-precision reference rounded to T and naive the same computation in
// T (reference::RnnPrecision::kStorage). Returns the first failure as a message, or "".
template <typename T>
std::string compare_within_naive_budget(const std::vector<T>& got, const std::vector<T>& exact,
                                        const std::vector<T>& naive) {
  const double ulps = std::is_same<T, float>::value ? 16.0 : 2.0;
  std::ostringstream message;
  message.precision(9);
  if (got.size() != exact.size() || naive.size() != exact.size()) {
    message << "sizes differ: got " << got.size() << ", exact " << exact.size() << ", naive " << naive.size();
    return message.str();
  }
  double naive_error = 0.0, magnitude = 0.0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    naive_error = std::max(naive_error, std::abs(to_double(naive[i]) - to_double(exact[i])));
    magnitude = std::max(magnitude, std::abs(to_double(exact[i])));
  }
  const double allowed = 2.0 * naive_error + ulps * ulp_of<T>(magnitude);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_double(got[i]), e = to_double(exact[i]);
    if (!within(g, e, allowed)) {
      message << "element " << i << " = " << g << ", exact " << e << ", allowed error " << allowed
              << " (naive error " << naive_error << ")";
      return message.str();
    }
  }
  return "";
}

}  // namespace test
}  // namespace ragged
