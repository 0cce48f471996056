// The multiply-high dividers the conversion and segment kernels use, against plain division, on the host (the
// device path differs only in __umulhi, which computes the same high word).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "../../kernels/fast_divmod.h"
#include "common/test_util.h"

using ragged::detail::Divmod64;
using ragged::detail::FastDivmodU32;

namespace {
void require_divmod(std::uint32_t divisor, std::uint32_t n) {
  std::int64_t q = -1, r = -1;
  FastDivmodU32(divisor).divmod(n, q, r);
  INFO(n << " / " << divisor);
  REQUIRE(q == n / divisor);
  REQUIRE(r == n % divisor);
}
}  // namespace

TEST_CASE("FastDivmodU32 equals division for every 32-bit dividend", "[divmod]") {
  const std::uint32_t kMax = 0xffffffffu;
  std::vector<std::uint32_t> divisors = {1, 2, 3, 5, 7, 10, 64, 100, 255, 256, 1000, 65535, 65536, 65537,
                                         (1u << 31) - 1, 1u << 31, (1u << 31) + 1, kMax - 1, kMax};
  auto rng = ragged::test::make_rng(103);
  std::uniform_int_distribution<std::uint32_t> any(1, kMax);
  std::uniform_int_distribution<std::uint32_t> small(1, 5000);
  for (int i = 0; i < 200; ++i) divisors.push_back(i % 2 ? any(rng) : small(rng));
  for (std::uint32_t d : divisors) {
    // Dividends at the edges (multiples of d and their neighbours, the top of the range) and random ones.
    for (std::uint32_t n : {0u, 1u, d - 1, d, d + 1, kMax, kMax - 1, kMax - kMax % d, kMax - kMax % d - 1})
      require_divmod(d, n);
    for (int i = 0; i < 2000; ++i) require_divmod(d, any(rng));
  }
}

TEST_CASE("Divmod64 equals division beyond 32 bits", "[divmod]") {
  const std::int64_t big = std::int64_t{1} << 40;
  for (std::int64_t d : {std::int64_t{1}, std::int64_t{3}, std::int64_t{4096}, big + 7}) {
    for (std::int64_t n : {std::int64_t{0}, d - 1, d, big * 3 + 5, (std::int64_t{1} << 62) + 11}) {
      std::int64_t q = -1, r = -1;
      Divmod64(d).divmod(n, q, r);
      REQUIRE(q == n / d);
      REQUIRE(r == n % d);
    }
  }
}

// Divisor (the segment kernels' chunk and tile divisors) and divmod_nonnegative take the 32-bit path where the
// dividend and divisor fit 32 bits and divmod_wide past that: both sides of the switch, and the switch itself.
TEST_CASE("Divisor and divmod_nonnegative equal division on both sides of 2^32", "[divmod]") {
  using ragged::detail::Divisor;
  using ragged::detail::divmod_nonnegative;
  using ragged::detail::QuotRem;
  const std::int64_t two32 = std::int64_t{1} << 32;
  std::vector<std::int64_t> divisors = {1, 2, 3, 10, 32, 2560, 8192, 65537, two32 - 1, two32, two32 + 1,
                                        std::int64_t{1} << 40};
  auto rng = ragged::test::make_rng(107);
  std::uniform_int_distribution<std::int64_t> any(0, std::int64_t{1} << 62);
  std::uniform_int_distribution<std::int64_t> small(1, 100000);
  for (int i = 0; i < 50; ++i) divisors.push_back(small(rng));
  for (const std::int64_t d : divisors) {
    std::vector<std::int64_t> dividends = {0, 1, d - 1, d, d + 1, two32 - 2, two32 - 1, two32, two32 + 1,
                                           3 * d + 2, (std::int64_t{1} << 62) + 11};
    for (int i = 0; i < 200; ++i) dividends.push_back(i % 2 ? any(rng) : any(rng) % (two32 + 5));
    const Divisor divisor(d);
    for (const std::int64_t n : dividends) {
      if (n < 0) continue;
      INFO(n << " / " << d);
      const QuotRem a = divisor.divmod(n), b = divmod_nonnegative(n, d);
      REQUIRE(a.quot == n / d);
      REQUIRE(a.rem == n % d);
      REQUIRE(b.quot == n / d);
      REQUIRE(b.rem == n % d);
      REQUIRE(divisor.div_up(n) == n / d + (n % d != 0 ? 1 : 0));
    }
  }
}

TEST_CASE("with_divider takes the 32-bit divider only where every dividend fits 32 bits", "[divmod]") {
  // The dividends are the indices below `total`: up to 2^32 - 1 of them fit; a test can force the 64-bit path.
  auto is_32bit = [](std::int64_t total, bool allow) {
    return ragged::detail::with_divider(total, 3, allow, [](auto divider) {
      return std::is_same<decltype(divider), FastDivmodU32>::value;
    });
  };
  const std::int64_t two32 = std::int64_t{1} << 32;
  REQUIRE(is_32bit(1, true));
  REQUIRE(is_32bit(two32 - 1, true));
  REQUIRE_FALSE(is_32bit(two32, true));
  REQUIRE_FALSE(is_32bit(std::int64_t{1} << 40, true));
  REQUIRE_FALSE(is_32bit(two32 - 1, false));
  REQUIRE_FALSE(is_32bit(1, false));
}
