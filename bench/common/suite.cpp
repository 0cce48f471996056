#include "bench/common/suite.h"

#include <cstdlib>
#include <cstring>

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

}  // namespace bench
}  // namespace ragged
