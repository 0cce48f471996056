// CPU references of segment_reduce / segment_softmax and their backward passes, against brute forces written
// per output element (an explicitly gathered column, std::accumulate / std::max_element, the O(L^2) softmax
// formula 1 / sum_j exp(x_j - x_i), the explicit Jacobian), and the backward passes against central finite
// differences of the forward references.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>

#include "common/host_ragged.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "ragged/reference.h"

using namespace ragged;

namespace {

using test::BF16_I32;
using test::BF16_I64;
using test::F16_I32;
using test::F16_I64;
using test::F32_I32;
using test::F32_I64;

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};
// A local name for each op (the library's reduce_op_name lives with the device code).
const char* op_label(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMean: return "mean";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

constexpr std::int64_t kExtraRows = 2;  // spare capacity after the last sequence: must never be written

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
T poison_value() {
  return test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
}

template <typename T, typename OffsetT>
std::vector<double> gather_column(const test::HostRagged<T, OffsetT>& r, std::int64_t b, std::int64_t d) {
  std::vector<double> column;
  for (std::int64_t row = r.begin(b); row < r.begin(b) + r.length(b); ++row)
    column.push_back(test::to_double(r.at(row, d)));
  return column;
}

// got is the correct rounding to T of `exact` (up to a hair of double noise).
template <typename T>
bool rounds_from(T got, double exact) {
  return test::within(test::to_double(got), exact, 0.5 * test::ulp_of<T>(exact) * (1 + 1e-9) + 1e-300);
}

// Checks segment_reduce's outputs element by element; returns a description of the first mismatch or "".
template <typename T, typename OffsetT>
std::string check_reduce(const test::HostRagged<T, OffsetT>& r, ReduceOp op, float empty_value,
                         const std::vector<T>& out, const std::vector<std::int64_t>& arg) {
  const bool extreme = op == ReduceOp::kMax || op == ReduceOp::kMin;
  for (std::int64_t b = 0; b < r.batch; ++b) {
    for (std::int64_t d = 0; d < r.inner; ++d) {
      const std::vector<double> column = gather_column(r, b, d);
      const T got = out[b * r.inner + d];
      const std::int64_t got_arg = arg[b * r.inner + d];
      std::ostringstream where;
      where << op_label(op) << " b=" << b << " d=" << d << " length=" << column.size() << ": got "
            << test::to_double(got) << " arg " << got_arg;
      if (column.empty()) {
        if (!same_bits(got, test::round_to<T>(empty_value)) || (extreme && got_arg != -1))
          return where.str() + ", expected empty_value and arg -1";
        continue;
      }
      if (extreme) {
        auto nan = std::find_if(column.begin(), column.end(), [](double v) { return std::isnan(v); });
        auto pick = nan != column.end() ? nan
                    : op == ReduceOp::kMax ? std::max_element(column.begin(), column.end())
                                           : std::min_element(column.begin(), column.end());
        const std::int64_t index = pick - column.begin();
        if (got_arg != index || !same_bits(got, r.at(r.begin(b) + index, d)))
          return where.str() + ", expected arg " + std::to_string(index);
        continue;
      }
      if (got_arg != -77) return where.str() + ": arg written for " + op_label(op);
      double exact = std::accumulate(column.begin(), column.end(), 0.0);
      if (op == ReduceOp::kMean) exact /= static_cast<double>(column.size());
      if (!rounds_from(got, exact)) return where.str() + ", expected " + std::to_string(exact);
    }
  }
  return "";
}

template <typename T, typename OffsetT>
void run_and_check_reduce(const test::HostRagged<T, OffsetT>& r, float empty_value) {
  for (ReduceOp op : kAllOps) {
    std::vector<T> out(r.batch * r.inner, poison_value<T>());
    std::vector<std::int64_t> arg(out.size(), -77);
    reference::segment_reduce(r.view(), op, out.data(), arg.data(), empty_value);
    const std::string failure = check_reduce(r, op, empty_value, out, arg);
    INFO(failure);
    REQUIRE(failure.empty());
    // Without an arg output the values are the same.
    std::vector<T> out_no_arg(out.size(), poison_value<T>());
    reference::segment_reduce(r.view(), op, out_no_arg.data(), nullptr, empty_value);
    REQUIRE(test::first_bitwise_mismatch(out, out_no_arg) == -1);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("reference segment_reduce matches a per-element brute force", "[segment][reference]", F32_I32,
                   F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(301);
  const float empty_values[] = {0.0f, -1.5f, 0.1f, -std::numeric_limits<float>::infinity()};
  int round = 0;
  for (test::Regime regime : test::all_regimes()) {
    for (std::int64_t inner : {1, 3, 64}) {
      INFO("regime " << test::regime_name(regime) << ", inner " << inner);
      const auto lengths = test::make_lengths(regime, rng, inner == 64 ? 8 : 40);
      const auto r = test::random_ragged<T, OffsetT>(lengths, inner, rng, kExtraRows);
      run_and_check_reduce(r, empty_values[round++ % 4]);
    }
  }
}

TEMPLATE_TEST_CASE("reference segment_reduce: NaN, ties and signed zeros", "[segment][reference]", F32_I32, F16_I64,
                   BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  const double nan = std::numeric_limits<double>::quiet_NaN();

  // Hand-written columns (inner = 1), one sequence each, and what max / min must give.
  struct Column {
    std::vector<double> values;
    std::int64_t max_arg, min_arg;
  };
  const std::vector<Column> columns = {
      {{1, nan, 3, nan}, 1, 1},     // first NaN wins for both
      {{nan}, 0, 0},                //
      {{2, 5, 5, 1, 1}, 1, 3},      // first of tied extremes
      {{0.0, -0.0}, 0, 0},          // +0 and -0 are equal: the first wins
      {{-0.0, 0.0, -1}, 0, 2},      //
      {{-3, -3, -3}, 0, 0},         //
      {{4, 2, nan}, 2, 2},          // a NaN after the extreme still wins
  };
  for (const Column& c : columns) {
    test::HostRagged<T, OffsetT> r;
    r.offsets = {0, static_cast<OffsetT>(c.values.size())};
    r.batch = 1;
    r.nnz = static_cast<std::int64_t>(c.values.size());
    for (double v : c.values) r.values.push_back(test::round_to<T>(v));
    for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
      T out = poison_value<T>();
      std::int64_t arg = -77;
      reference::segment_reduce(r.view(), op, &out, &arg, 0.0f);
      const std::int64_t expected = op == ReduceOp::kMax ? c.max_arg : c.min_arg;
      INFO(op_label(op) << " of column starting " << c.values[0]);
      REQUIRE(arg == expected);
      REQUIRE(same_bits(out, r.values[expected]));  // the element itself, sign of zero included
    }
    const bool has_nan = std::any_of(c.values.begin(), c.values.end(), [](double v) { return std::isnan(v); });
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      T out = poison_value<T>();
      reference::segment_reduce(r.view(), op, &out, nullptr, 0.0f);
      REQUIRE(std::isnan(test::to_double(out)) == has_nan);
    }
  }

  // Random tie-heavy data with NaNs and both zeros, against the brute force.
  auto rng = test::make_rng(302);
  std::discrete_distribution<int> pick({6, 6, 5, 5, 6, 6, 1});
  const double choices[] = {-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, nan};
  for (test::Regime regime : test::all_regimes()) {
    for (std::int64_t inner : {1, 3, 64}) {
      INFO("regime " << test::regime_name(regime) << ", inner " << inner);
      auto r = test::random_ragged<T, OffsetT>(test::make_lengths(regime, rng, inner == 64 ? 8 : 40), inner, rng);
      for (T& v : r.values) v = test::round_to<T>(choices[pick(rng)]);
      run_and_check_reduce(r, -1.5f);
    }
  }
}

TEMPLATE_TEST_CASE("reference segment_reduce_backward matches a per-element brute force", "[segment][reference]",
                   F32_I32, F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(303);
  for (test::Regime regime : test::all_regimes()) {
    for (std::int64_t inner : {1, 3, 64}) {
      INFO("regime " << test::regime_name(regime) << ", inner " << inner);
      const auto r = test::random_ragged<T, OffsetT>(test::make_lengths(regime, rng, inner == 64 ? 8 : 40), inner,
                                                     rng, kExtraRows);
      const std::vector<T> grad_out = test::random_values<T>(r.batch * inner, rng);
      const std::int64_t used_rows = static_cast<std::int64_t>(r.offsets.back());
      for (ReduceOp op : kAllOps) {
        INFO("op " << op_label(op));
        std::vector<T> out(r.batch * inner);
        std::vector<std::int64_t> arg(out.size(), -77);
        reference::segment_reduce(r.view(), op, out.data(), arg.data(), 0.0f);
        std::vector<T> grad_in(r.values.size(), poison_value<T>());
        reference::segment_reduce_backward(r.view(), op, grad_out.data(), arg.data(), grad_in.data());
        // Per input element: find its sequence by binary search over the offsets.
        std::string failure;
        for (std::int64_t row = 0; row < r.nnz && failure.empty(); ++row) {
          const std::int64_t b = std::upper_bound(r.offsets.begin(), r.offsets.end(), static_cast<OffsetT>(row)) -
                                 r.offsets.begin() - 1;
          for (std::int64_t d = 0; d < inner && failure.empty(); ++d) {
            const T got = grad_in[row * inner + d];
            bool ok = false;
            if (row >= used_rows) {
              ok = same_bits(got, poison_value<T>());  // spare capacity: not written
            } else {
              const T g = grad_out[b * inner + d];
              const std::int64_t position = row - r.begin(b);
              switch (op) {
                case ReduceOp::kSum: ok = same_bits(got, g); break;
                case ReduceOp::kMean: ok = rounds_from(got, test::to_double(g) / r.length(b)); break;
                default: ok = position == arg[b * inner + d] ? same_bits(got, g) : test::to_double(got) == 0.0;
              }
            }
            if (!ok) failure = "row " + std::to_string(row) + " d " + std::to_string(d);
          }
        }
        INFO(failure);
        REQUIRE(failure.empty());
      }
    }
  }
}

TEMPLATE_TEST_CASE("reference segment_softmax matches the pairwise formula", "[segment][reference]", F32_I32,
                   F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(304);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (test::Regime regime : test::all_regimes()) {
    for (std::int64_t inner : {1, 3, 64}) {
      for (bool special : {false, true}) {
        INFO("regime " << test::regime_name(regime) << ", inner " << inner << ", NaN / -inf inputs " << special);
        auto r = test::random_ragged<T, OffsetT>(test::make_lengths(regime, rng, inner == 64 ? 5 : 40), inner, rng,
                                                 kExtraRows);
        if (special) {  // a few NaNs and masked (-inf) entries
          std::uniform_int_distribution<int> percent(0, 99);
          for (T& v : r.values) {
            const int p = percent(rng);
            if (p < 2) v = test::round_to<T>(nan);
            else if (p < 12) v = test::round_to<T>(-inf);
          }
        }
        for (bool log : {false, true}) {
          std::vector<T> out(r.values.size(), poison_value<T>());
          reference::segment_softmax(r.view(), log, out.data());
          std::string failure;
          for (std::int64_t b = 0; b < r.batch && failure.empty(); ++b) {
            for (std::int64_t d = 0; d < inner && failure.empty(); ++d) {
              const std::vector<double> x = gather_column(r, b, d);
              const bool has_nan = std::any_of(x.begin(), x.end(), [](double v) { return std::isnan(v); });
              const bool all_masked = std::all_of(x.begin(), x.end(), [&](double v) { return v == -inf; });
              for (std::size_t i = 0; i < x.size(); ++i) {
                // y_i = 1 / sum_j exp(x_j - x_i): no maximum subtracted, no division of two sums.
                double denominator = 0.0;
                for (double xj : x) denominator += xj == x[i] ? 1.0 : std::exp(xj - x[i]);
                double expected = log ? -std::log(denominator) : 1.0 / denominator;
                if (has_nan || all_masked) expected = nan;  // NaN poisons the column; all -inf has no maximum
                const T got = out[(r.begin(b) + static_cast<std::int64_t>(i)) * inner + d];
                const double slack = 1e-12 * (1.0 + std::abs(expected));
                if (!test::within(test::to_double(got), expected,
                                  0.5 * test::ulp_of<T>(expected) * (1 + 1e-9) + slack))
                  failure = "b " + std::to_string(b) + " d " + std::to_string(d) + " i " + std::to_string(i) +
                            ": got " + std::to_string(test::to_double(got)) + ", expected " +
                            std::to_string(expected);
              }
            }
          }
          for (std::int64_t row = static_cast<std::int64_t>(r.offsets.back()); row < r.nnz; ++row)
            for (std::int64_t d = 0; d < inner; ++d)
              if (!same_bits(out[row * inner + d], poison_value<T>())) failure = "spare row written";
          INFO((log ? "log-softmax " : "softmax ") << failure);
          REQUIRE(failure.empty());
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("reference segment_softmax_backward matches the explicit Jacobian", "[segment][reference]",
                   F32_I32, F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(305);
  for (test::Regime regime : test::all_regimes()) {
    for (std::int64_t inner : {1, 3, 64}) {
      const auto r = test::random_ragged<T, OffsetT>(test::make_lengths(regime, rng, inner == 64 ? 5 : 40), inner,
                                                     rng, kExtraRows);
      const std::vector<T> grad_out = test::random_values<T>(r.values.size(), rng);
      for (bool log : {false, true}) {
        INFO("regime " << test::regime_name(regime) << ", inner " << inner << ", log " << log);
        std::vector<T> y(r.values.size(), poison_value<T>());
        reference::segment_softmax(r.view(), log, y.data());
        std::vector<T> grad_in(r.values.size(), poison_value<T>());
        reference::segment_softmax_backward(r.view(), log, y.data(), grad_out.data(), grad_in.data());
        std::string failure;
        for (std::int64_t b = 0; b < r.batch && failure.empty(); ++b) {
          const std::int64_t length = r.length(b);
          for (std::int64_t d = 0; d < inner; ++d) {
            auto y_at = [&](std::int64_t i) { return test::to_double(y[(r.begin(b) + i) * inner + d]); };
            auto dy_at = [&](std::int64_t i) { return test::to_double(grad_out[(r.begin(b) + i) * inner + d]); };
            for (std::int64_t j = 0; j < length; ++j) {
              // dx_j = sum_i dy_i * dout_i / dx_j, with the Jacobian written out entry by entry.
              double expected = 0.0, magnitude = 0.0;
              for (std::int64_t i = 0; i < length; ++i) {
                const double kronecker = i == j ? 1.0 : 0.0;
                const double jacobian =
                    log ? kronecker - std::exp(y_at(j)) : y_at(i) * kronecker - y_at(i) * y_at(j);
                expected += dy_at(i) * jacobian;
                magnitude += std::abs(dy_at(i) * jacobian);
              }
              const double got = test::to_double(grad_in[(r.begin(b) + j) * inner + d]);
              if (!test::within(got, expected, 0.5 * test::ulp_of<T>(expected) * (1 + 1e-9) + 1e-12 * magnitude))
                failure = "b " + std::to_string(b) + " d " + std::to_string(d) + " j " + std::to_string(j) +
                          ": got " + std::to_string(got) + ", expected " + std::to_string(expected);
            }
          }
        }
        for (std::int64_t row = static_cast<std::int64_t>(r.offsets.back()); row < r.nnz; ++row)
          for (std::int64_t d = 0; d < inner; ++d)
            if (!same_bits(grad_in[row * inner + d], poison_value<T>())) failure = "spare row written";
        INFO(failure);
        REQUIRE(failure.empty());
      }
    }
  }
}

namespace {

// Small float inputs for the finite-difference checks: lengths with an empty sequence, inner = 3.
// Values distinct and at least 0.1 apart within a column, so a step of 1e-2 never changes an argmax.
template <typename OffsetT>
test::HostRagged<float, OffsetT> small_distinct_input(std::mt19937_64& rng) {
  const std::vector<std::int64_t> lengths = {3, 0, 5, 1, 4};
  test::HostRagged<float, OffsetT> r;
  r.offsets = test::offsets_from_lengths<OffsetT>(lengths);
  r.batch = static_cast<std::int64_t>(lengths.size());
  r.nnz = static_cast<std::int64_t>(r.offsets.back());
  r.inner = 3;
  std::vector<float> levels(r.nnz * r.inner);
  for (std::size_t i = 0; i < levels.size(); ++i) levels[i] = -2.0f + 0.1f * static_cast<float>(i);
  std::shuffle(levels.begin(), levels.end(), rng);
  r.values = levels;
  return r;
}

// d loss / d x[i] by central differences, with loss(values) evaluated in double.
template <typename OffsetT, typename Loss>
std::vector<double> finite_differences(const test::HostRagged<float, OffsetT>& r, Loss loss, float step) {
  std::vector<double> grad(r.values.size());
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    test::HostRagged<float, OffsetT> plus = r, minus = r;
    plus.values[i] += step;
    minus.values[i] -= step;
    const double actual_step = static_cast<double>(plus.values[i]) - static_cast<double>(minus.values[i]);
    grad[i] = (loss(plus) - loss(minus)) / actual_step;
  }
  return grad;
}

}  // namespace

TEMPLATE_TEST_CASE("reference backward passes agree with finite differences of the forward references",
                   "[segment][reference]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(306);
  const auto r = small_distinct_input<OffsetT>(rng);
  const std::vector<float> weights_out = test::random_values<float>(r.batch * r.inner, rng);
  const std::vector<float> weights_rows = test::random_values<float>(r.values.size(), rng);

  for (ReduceOp op : kAllOps) {
    INFO("op " << op_label(op));
    // loss = sum over (b, d) of w[b, d] * out[b, d]; its gradient w.r.t. out is w.
    auto loss = [&](const test::HostRagged<float, OffsetT>& x) {
      std::vector<float> out(x.batch * x.inner);
      reference::segment_reduce(x.view(), op, out.data(), nullptr, 0.0f);
      double sum = 0.0;
      for (std::size_t k = 0; k < out.size(); ++k) sum += static_cast<double>(weights_out[k]) * out[k];
      return sum;
    };
    std::vector<float> out(r.batch * r.inner);
    std::vector<std::int64_t> arg(out.size());
    reference::segment_reduce(r.view(), op, out.data(), arg.data(), 0.0f);
    std::vector<float> grad(r.values.size());
    reference::segment_reduce_backward(r.view(), op, weights_out.data(), arg.data(), grad.data());
    const std::vector<double> numeric = finite_differences(r, loss, 1e-2f);
    for (std::size_t i = 0; i < grad.size(); ++i) {
      INFO("element " << i << ": analytic " << grad[i] << ", numeric " << numeric[i]);
      REQUIRE(std::abs(grad[i] - numeric[i]) <= 1e-3 * (1.0 + std::abs(numeric[i])));
    }
  }

  for (bool log : {false, true}) {
    INFO((log ? "log-softmax" : "softmax"));
    // loss = sum over all elements of w * y.
    auto loss = [&](const test::HostRagged<float, OffsetT>& x) {
      std::vector<float> y(x.values.size());
      reference::segment_softmax(x.view(), log, y.data());
      double sum = 0.0;
      for (std::size_t k = 0; k < y.size(); ++k) sum += static_cast<double>(weights_rows[k]) * y[k];
      return sum;
    };
    std::vector<float> y(r.values.size());
    reference::segment_softmax(r.view(), log, y.data());
    std::vector<float> grad(r.values.size());
    reference::segment_softmax_backward(r.view(), log, y.data(), weights_rows.data(), grad.data());
    const std::vector<double> numeric = finite_differences(r, loss, 1e-2f);
    for (std::size_t i = 0; i < grad.size(); ++i) {
      INFO("element " << i << ": analytic " << grad[i] << ", numeric " << numeric[i]);
      REQUIRE(std::abs(grad[i] - numeric[i]) <= 1e-3 * (1.0 + std::abs(numeric[i])));
    }
  }
}
