#include "bench/common/verify.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ragged {
namespace bench {

bool verify_results() {
  static const bool verify = [] {
    const char* value = std::getenv("RAGGED_BENCH_VERIFY");
    return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
  }();
  return verify;
}

void check_against_reference(benchmark::State& state, const std::vector<double>& got, const std::vector<double>& want,
                             double tolerance, const std::string& what) {
  if (got.size() != want.size()) {
    state.SkipWithError((what + ": " + std::to_string(got.size()) + " results against " +
                         std::to_string(want.size()) + " reference values").c_str());
    return;
  }
  double scale = 0.0;
  for (const double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  if (scale == 0.0) scale = 1.0;
  double worst = 0.0;
  std::size_t compared = 0, worst_at = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) continue;
    ++compared;
    // Equal values (infinities included) are exact; otherwise a NaN or an infinity on either side is an error.
    const double error = got[i] == want[i] ? 0.0 : std::fabs(got[i] - want[i]) / scale;
    if (!(error <= worst)) {
      worst = std::isnan(error) ? INFINITY : error;
      worst_at = i;
    }
  }
  // A benchmark may check several outputs (argmax: values, then indices): the counter keeps the largest error.
  const auto earlier = state.counters.find("verify_error");
  const double reported = earlier == state.counters.end() ? worst : std::max(worst, earlier->second.value);
  state.counters["verify_error"] = reported;
  if (compared == 0 && !want.empty()) {
    state.SkipWithError((what + ": nothing to compare").c_str());
  } else if (!(worst <= tolerance)) {
    state.SkipWithError((what + ": differs from the CPU reference at position " + std::to_string(worst_at) + " (" +
                         std::to_string(got[worst_at]) + " against " + std::to_string(want[worst_at]) +
                         ", relative error " + std::to_string(worst) + " > " + std::to_string(tolerance) + ")")
                            .c_str());
  }
}

}  // namespace bench
}  // namespace ragged
