// Internal: division by a run-time constant divisor, as kernels need it to turn a flat index into
// (sequence, offset) or (row, column). Host and device; the host computes the divisor's constants once.
//
// FastDivmodU32 replaces the hardware-less 32-bit integer division (dozens of instructions on the GPU) by a
// multiply-high, an add and a shift (Granlund & Montgomery, "Division by invariant integers using
// multiplication", 1994, round-up variant): with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1,
// n / d = (mulhi(n, m) + n) >> l for every 32-bit n. Divmod64 is the plain fallback for counts >= 2^32.
#pragma once

#include <cstdint>

#include "ragged/config.h"

namespace ragged {
namespace detail {

class FastDivmodU32 {
 public:
  // Largest dividend (and divisor) this divider handles.
  static constexpr std::int64_t kMax = 0xffffffffll;

  FastDivmodU32() = default;
  // divisor in [1, 2^32 - 1].
  explicit FastDivmodU32(std::uint32_t divisor) : divisor_(divisor) {
    while ((std::uint64_t{1} << shift_) < divisor) ++shift_;
    const std::uint64_t two32 = std::uint64_t{1} << 32;
    multiplier_ = static_cast<std::uint32_t>(two32 * ((std::uint64_t{1} << shift_) - divisor) / divisor + 1);
  }

  // n in [0, 2^32 - 1]: quotient = n / divisor, remainder = n % divisor.
  RAGGED_HOST_DEVICE void divmod(std::int64_t n, std::int64_t& quotient, std::int64_t& remainder) const {
    const std::uint32_t n32 = static_cast<std::uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const std::uint32_t high = __umulhi(n32, multiplier_);
#else
    const std::uint32_t high = static_cast<std::uint32_t>((std::uint64_t{n32} * multiplier_) >> 32);
#endif
    // The sum needs 33 bits, hence the 64-bit add (still one shift of a register pair on the GPU).
    const std::uint32_t q = static_cast<std::uint32_t>((std::uint64_t{high} + n32) >> shift_);
    quotient = q;
    remainder = static_cast<std::int64_t>(n32 - q * divisor_);
  }

 private:
  std::uint32_t divisor_ = 1;
  std::uint32_t multiplier_ = 1;
  std::uint32_t shift_ = 0;
};

class Divmod64 {
 public:
  Divmod64() = default;
  explicit Divmod64(std::int64_t divisor) : divisor_(divisor) {}

  RAGGED_HOST_DEVICE void divmod(std::int64_t n, std::int64_t& quotient, std::int64_t& remainder) const {
    quotient = n / divisor_;
    remainder = n - quotient * divisor_;
  }

 private:
  std::int64_t divisor_ = 1;
};

// A quotient and remainder.
struct QuotRem {
  std::int64_t quot;
  std::int64_t rem;
};

// n / d for n >= 0 and d >= 1 of any size, out of line on the device: the fallback of the two below, which
// then add only their 32-bit path to each call site (the segment kernels have dozens, counting inlined copies).
#if defined(__CUDA_ARCH__)
__device__ __noinline__ inline QuotRem divmod_wide(std::int64_t n, std::int64_t d) {
#else
inline QuotRem divmod_wide(std::int64_t n, std::int64_t d) {
#endif
  const std::int64_t q = n / d;
  return QuotRem{q, n - q * d};
}

// n / d and n % d for n >= 0 and d >= 1: a 32-bit division where both fit (nvcc's own lowering of a 64-bit
// division checks the same), else divmod_wide.
RAGGED_HOST_DEVICE QuotRem divmod_nonnegative(std::int64_t n, std::int64_t d) {
  if (((n | d) >> 32) == 0) {
    const auto n32 = static_cast<std::uint32_t>(n), d32 = static_cast<std::uint32_t>(d);
    const std::uint32_t q = n32 / d32;
    return QuotRem{q, n32 - q * d32};
  }
  return divmod_wide(n, d);
}

// A divisor d >= 1 known ahead (a kernel's geometry): n / d and n % d for n >= 0 by a multiply where n and d fit
// 32 bits, else by divmod_wide.
class Divisor {
 public:
  Divisor() = default;
  explicit Divisor(std::int64_t d)
      : d_(d), fast_(static_cast<std::uint32_t>(d <= FastDivmodU32::kMax ? d : FastDivmodU32::kMax)) {}

  RAGGED_HOST_DEVICE QuotRem divmod(std::int64_t n) const {
    if (((n | d_) >> 32) == 0) {
      QuotRem r{0, 0};
      fast_.divmod(n, r.quot, r.rem);
      return r;
    }
    return divmod_wide(n, d_);
  }
  // ceil(n / d)
  RAGGED_HOST_DEVICE std::int64_t div_up(std::int64_t n) const {
    const QuotRem r = divmod(n);
    return r.quot + (r.rem != 0 ? 1 : 0);
  }

 private:
  std::int64_t d_ = 1;
  FastDivmodU32 fast_;
};

// Calls launch(divider) with a FastDivmodU32 when every dividend (< total) fits 32 bits, else with a Divmod64;
// allow_32bit_index = false forces the 64-bit path (tests).
template <typename Launch>
auto with_divider(std::int64_t total, std::int64_t divisor, bool allow_32bit_index, Launch&& launch) {
  if (allow_32bit_index && total <= FastDivmodU32::kMax)
    return launch(FastDivmodU32(static_cast<std::uint32_t>(divisor)));
  return launch(Divmod64(divisor));
}

}  // namespace detail
}  // namespace ragged
