// How the library's process-wide switches and settings read the environment (kernels/launch.cuh): the A/B rows of
// the GPU benchmarks (`with:RAGGED_SEGMENT_SUBWARP_ROWS=0`, RAGGED_SEGMENT_PREFETCH, RAGGED_RNN_RESIDENT_STAGES)
// rely on them, and a value misread would time the default twice without a word.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "../../kernels/launch.cuh"

using ragged::detail::setting_from_environment;
using ragged::detail::switch_from_environment;

namespace {
constexpr const char* kName = "RAGGED_TEST_ENVIRONMENT_SETTING";

// Sets kName for one scope (nullptr: unset) and unsets it after.
class ScopedVariable {
 public:
  explicit ScopedVariable(const char* value) {
    if (value == nullptr)
      ::unsetenv(kName);
    else
      ::setenv(kName, value, 1);
  }
  ~ScopedVariable() { ::unsetenv(kName); }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;
};

int setting(const char* value) {
  const ScopedVariable variable(value);
  return setting_from_environment(kName, /*fallback=*/7, /*lo=*/0, /*hi=*/8);
}

bool switch_value(const char* value) {
  const ScopedVariable variable(value);
  return switch_from_environment(kName);
}
}  // namespace

TEST_CASE("a switch is on unless the environment sets it to 0", "[environment]") {
  CHECK(switch_value(nullptr));
  CHECK_FALSE(switch_value("0"));
  CHECK(switch_value("1"));
  CHECK(switch_value(""));
  // Only "0" turns it off: "00", "off" and "false" leave the default.
  CHECK(switch_value("00"));
  CHECK(switch_value("off"));
  CHECK(switch_value("false"));
}

TEST_CASE("a setting takes a whole number in its range and otherwise keeps its default", "[environment]") {
  SECTION("unset or empty: the default") {
    CHECK(setting(nullptr) == 7);
    CHECK(setting("") == 7);
  }
  SECTION("in range, both ends included") {
    CHECK(setting("0") == 0);
    CHECK(setting("3") == 3);
    CHECK(setting("8") == 8);
    CHECK(setting("+5") == 5);
  }
  SECTION("out of range: the default, not the nearest end") {
    CHECK(setting("9") == 7);
    CHECK(setting("-1") == 7);
    CHECK(setting("99999999999999999999999") == 7);  // strtol saturates at LONG_MAX
    CHECK(setting("-99999999999999999999999") == 7);
  }
  SECTION("not a whole number: the default") {
    CHECK(setting("abc") == 7);  // strtol reads nothing and returns 0, which is in range
    CHECK(setting("3x") == 7);
    CHECK(setting("2.5") == 7);
    CHECK(setting("4 ") == 7);
    CHECK(setting("0x4") == 7);
  }
}
