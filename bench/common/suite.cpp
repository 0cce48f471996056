#include "bench/common/suite.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ragged {
namespace bench {
namespace {
// A function-local static: suites register from other translation units' static initialisers.
std::vector<Suite>& registry() {
  static std::vector<Suite> list;
  return list;
}
}  // namespace

bool add_suite(const char* name, Needs needs, void (*register_benchmarks)()) {
  registry().push_back(Suite{name, needs, register_benchmarks});
  return true;
}

const std::vector<Suite>& suites() { return registry(); }

bool full_run() {
  const char* value = std::getenv("RAGGED_BENCH_FULL");
  return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

double size_scale() {
  static const double scale = [] {
    const char* value = std::getenv("RAGGED_BENCH_SCALE");
    if (value == nullptr || *value == '\0') return 1.0;
    char* end = nullptr;
    const double s = std::strtod(value, &end);
    if (end == value || *end != '\0' || !(s > 0.0 && s <= 1.0))
      throw std::invalid_argument(std::string("RAGGED_BENCH_SCALE='") + value + "' is not a number in (0, 1]");
    return s;
  }();
  return scale;
}

std::size_t scaled_bytes(std::size_t bytes) {
  return std::max<std::size_t>(4096, static_cast<std::size_t>(static_cast<double>(bytes) * size_scale()));
}

std::int64_t scaled_length(std::int64_t length, std::int64_t least) {
  return std::max<std::int64_t>(least, std::llround(static_cast<double>(length) * std::sqrt(size_scale())));
}

}  // namespace bench
}  // namespace ragged
