// The rules of tests/common/tolerance.h: compare_to_reference, by which the segment device tests judge every output,
// and compare_within_naive_budget, the recurrent tests'. What each accepts and refuses, so that a comparison that
// passed everything, or one that fails a kernel on a lucky naive element (the CI failure of 2026-11-29), shows here
// without a GPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "common/tolerance.h"

using namespace ragged;

namespace {

template <typename T>
std::vector<T> rounded(const std::vector<double>& values) {
  std::vector<T> out;
  for (double v : values) out.push_back(test::round_to<T>(v));
  return out;
}

template <typename T>
std::string compare(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>* naive,
                    double float_bound) {
  const std::vector<T> g = rounded<T>(got), r = rounded<T>(ref);
  std::vector<T> n;
  if (naive != nullptr) n = rounded<T>(*naive);
  const std::vector<double> bound(ref.size(), float_bound);
  return test::compare_to_reference(g, r, naive != nullptr ? &n : nullptr, bound, 0,
                                    static_cast<std::int64_t>(ref.size()));
}

}  // namespace

TEST_CASE("rule (1): each element within its float bound plus an ulp of T", "[tolerance]") {
  const std::vector<double> ref = {1.0, -2.0, 0.5};
  CHECK(compare<float>({1.0, -2.0, 0.5}, ref, nullptr, 0.0).empty());
  CHECK(compare<float>({1.0 + 1e-6, -2.0, 0.5}, ref, nullptr, 2e-6).empty());
  const std::string failure = compare<float>({1.0, -2.0 - 1e-5, 0.5}, ref, nullptr, 1e-6);
  CHECK(failure.rfind("element 1:", 0) == 0);
  // One ulp of T is always allowed, none more.
  const double ulp = test::ulp_of<float>(1.0);
  CHECK(compare<float>({1.0 + ulp, -2.0, 0.5}, ref, nullptr, 0.0).empty());
  CHECK_FALSE(compare<float>({1.0 + 2 * ulp, -2.0, 0.5}, ref, nullptr, 0.0).empty());
}

TEST_CASE("rule (1): NaN must meet NaN and an infinity the same infinity", "[tolerance]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK(compare<float>({nan, -inf, 1.0}, {nan, -inf, 1.0}, nullptr, 1.0).empty());
  CHECK_FALSE(compare<float>({1.0, -inf, 1.0}, {nan, -inf, 1.0}, nullptr, 1.0).empty());
  CHECK_FALSE(compare<float>({nan, -inf, 1.0}, {1.0, -inf, 1.0}, nullptr, 1.0).empty());
  CHECK_FALSE(compare<float>({nan, inf, 1.0}, {nan, -inf, 1.0}, nullptr, 1.0).empty());
}

TEST_CASE("rule (2): a bfloat16 output within twice the naive error of the whole output", "[tolerance]") {
  // The CI failure's pattern: one element cancels to near zero and the naive result lands on 0 there by luck,
  // while elsewhere the naive error is bfloat16's. The kernel's float rounding at the cancelling element is far
  // below that error, and the output passes.
  const std::vector<double> ref = {-5.79166226e-09, 0.75, -0.3};
  const std::vector<double> naive = {0.0, 0.75 + test::ulp_of<bfloat16>(0.75), -0.3};
  CHECK(compare<bfloat16>({-2.85217538e-08, 0.75, -0.3}, ref, &naive, 1e-5).empty());

  // Rule (2) still bites where rule (1)'s bound is loose: an error of 4 ulps at 0.75 against a naive result
  // exact everywhere (its allowance: one ulp at max |ref|).
  const std::vector<double> exact_naive = ref;
  const double ulp = test::ulp_of<bfloat16>(0.75);
  CHECK(compare<bfloat16>({-5.79166226e-09, 0.75 + ulp, -0.3}, ref, &exact_naive, 1.0).empty());
  const std::string failure = compare<bfloat16>({-5.79166226e-09, 0.75 + 4 * ulp, -0.3}, ref, &exact_naive, 1.0);
  CHECK(failure.find("exceeds 2 x the naive error") != std::string::npos);
  CHECK(failure.rfind("element 1:", 0) == 0);
  // Against a naive result off by 2 ulps of 0.3 (= one ulp of 0.75) at another element, 2 x 1 + 1 ulps of 0.75
  // are allowed at any element: 3 pass, 4 do not.
  const std::vector<double> off_naive = {-5.79166226e-09, 0.75, -0.3 - 2 * test::ulp_of<bfloat16>(0.3)};
  CHECK(compare<bfloat16>({-5.79166226e-09, 0.75 + 3 * ulp, -0.3}, ref, &off_naive, 1.0).empty());
  CHECK_FALSE(compare<bfloat16>({-5.79166226e-09, 0.75 + 4 * ulp, -0.3}, ref, &off_naive, 1.0).empty());
}

TEST_CASE("rule (2) skips elements whose naive result is not finite", "[tolerance]") {
  // A naive result that overflowed measures nothing; the element is still held to rule (1).
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ref = {1.0, 2.0}, naive = {inf, 2.0};
  const double ulp = test::ulp_of<half>(1.0);
  CHECK(compare<half>({1.0, 2.0}, ref, &naive, 1.0).empty());
  CHECK_FALSE(compare<half>({1.0 + 4 * ulp, 2.0}, ref, &naive, 0.0).empty());
  CHECK(compare<half>({1.0 + 4 * ulp, 2.0}, ref, &naive, 1.0).empty());
}

TEST_CASE("the recurrent rule: every element within twice the naive error plus some ulps at max |exact|",
          "[tolerance]") {
  // compare_within_naive_budget, test_rnn's and test_large_tensors' rule: naive off by 2 ulps of 0.5 at one
  // element (= one ulp of 1.0, the largest |exact|) allows 2 x 1 + 2 ulps of 1.0 at every element (k = 2 in bfloat16).
  const double ulp = test::ulp_of<bfloat16>(1.0);
  const std::vector<bfloat16> exact = rounded<bfloat16>({1.0, -0.5, 0.25});
  const std::vector<bfloat16> naive = rounded<bfloat16>({1.0, -0.5 - 2 * test::ulp_of<bfloat16>(0.5), 0.25});
  CHECK(test::compare_within_naive_budget(exact, exact, naive).empty());
  CHECK(test::compare_within_naive_budget(rounded<bfloat16>({1.0, -0.5, 0.25 + 4 * ulp}), exact, naive).empty());
  const std::string failure =
      test::compare_within_naive_budget(rounded<bfloat16>({1.0, -0.5, 0.25 + 5 * ulp}), exact, naive);
  CHECK(failure.rfind("element 2 ", 0) == 0);
  // With a naive result equal to the exact one, only the ulps are allowed.
  CHECK(test::compare_within_naive_budget(rounded<bfloat16>({1.0 + 2 * ulp, -0.5, 0.25}), exact, exact).empty());
  CHECK_FALSE(
      test::compare_within_naive_budget(rounded<bfloat16>({1.0 + 4 * ulp, -0.5, 0.25}), exact, exact).empty());
  // In float, 16 ulps.
  const double float_ulp = test::ulp_of<float>(1.0);
  const std::vector<float> exact_float = {1.0f, -0.5f};
  CHECK(test::compare_within_naive_budget(rounded<float>({1.0 + 16 * float_ulp, -0.5}), exact_float, exact_float)
            .empty());
  CHECK_FALSE(test::compare_within_naive_budget(rounded<float>({1.0 + 17 * float_ulp, -0.5}), exact_float, exact_float)
                  .empty());
  // A NaN (the poison of an unwritten element) is never within, and the sizes must agree.
  const std::vector<bfloat16> with_nan = rounded<bfloat16>({std::numeric_limits<double>::quiet_NaN(), -0.5, 0.25});
  CHECK_FALSE(test::compare_within_naive_budget(with_nan, exact, naive).empty());
  CHECK(test::compare_within_naive_budget(rounded<bfloat16>({1.0, -0.5}), exact, naive).rfind("sizes differ", 0) ==
        0);
}
