#include "common/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ragged {
namespace test {
namespace {
cudaError_t g_device_error = cudaSuccess;
int g_device_count = -1;

void probe() {
  if (g_device_count >= 0) return;
  int count = 0;
  g_device_error = cudaGetDeviceCount(&count);
  g_device_count = g_device_error == cudaSuccess ? count : 0;
}
}  // namespace

bool gpu_available() {
  probe();
  return g_device_count > 0;
}

bool gpu_absent() {
  probe();
  // No device, or no driver at all (a machine without a GPU: libcuda missing reads as an insufficient driver).
  // Any other failure (a driver / runtime mismatch, devices busy in exclusive mode, a failed initialisation) is a
  // GPU machine that cannot run the tests: a failure, not a skip.
  return g_device_count == 0 &&
         (g_device_error == cudaSuccess || g_device_error == cudaErrorNoDevice ||
          g_device_error == cudaErrorInsufficientDriver);
}

const char* gpu_unavailable_reason() {
  probe();
  return g_device_error != cudaSuccess ? cudaGetErrorString(g_device_error) : "device count is 0";
}

void poison_workspace(DeviceBuffer<unsigned char>& workspace) {
  const char* unset = std::getenv("RAGGED_TEST_UNSET_WORKSPACE");
  if (unset != nullptr && std::string(unset) == "1") return;
  workspace.fill_bytes(0xff);
}

namespace {
struct TestScale {
  double value = 1.0;
  const char* error = nullptr;
};

TestScale parse_test_scale() {
  TestScale scale;
  const char* text = std::getenv("RAGGED_TEST_SCALE");
  if (text == nullptr || *text == '\0') return scale;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0.0 && value <= 1.0)) {
    scale.error = "RAGGED_TEST_SCALE must be a number in (0, 1]";
    return scale;
  }
  scale.value = value;
  return scale;
}

const TestScale& test_scale_setting() {
  static const TestScale scale = parse_test_scale();
  return scale;
}
}  // namespace

double test_scale() { return test_scale_setting().value; }

const char* test_scale_error() { return test_scale_setting().error; }

std::int64_t scaled(std::int64_t n, std::int64_t at_least) {
  const double scale = test_scale();
  if (scale == 1.0) return n;
  return std::max(static_cast<std::int64_t>(std::llround(static_cast<double>(n) * scale)), at_least);
}

std::mt19937_64 make_rng(std::uint64_t salt) {
  std::seed_seq seq{static_cast<std::uint64_t>(Catch::rngSeed()), salt};
  return std::mt19937_64(seq);
}

const char* regime_name(Regime regime) {
  switch (regime) {
    case Regime::kRandom: return "random";
    case Regime::kEmptyBatch: return "empty batch";
    case Regime::kBatchOfOne: return "batch of 1";
    case Regime::kZeroLengths: return "zero-length rows";
    case Regime::kAllEmpty: return "all rows empty";
    case Regime::kOneHuge: return "one huge row";
    case Regime::kManyTiny: return "many tiny rows";
  }
  return "?";
}

std::vector<Regime> all_regimes() {
  return {Regime::kRandom,   Regime::kEmptyBatch, Regime::kBatchOfOne, Regime::kZeroLengths,
          Regime::kAllEmpty, Regime::kOneHuge,    Regime::kManyTiny};
}

std::vector<std::int64_t> make_lengths(Regime regime, std::mt19937_64& rng, std::int64_t scale) {
  std::uniform_int_distribution<std::int64_t> len(0, scale);
  std::uniform_int_distribution<std::int64_t> count(2, 40);
  std::vector<std::int64_t> lengths;
  switch (regime) {
    case Regime::kRandom:
      lengths.resize(count(rng));
      for (auto& l : lengths) l = len(rng);
      break;
    case Regime::kEmptyBatch:
      break;
    case Regime::kBatchOfOne:
      lengths = {std::max<std::int64_t>(1, len(rng))};
      break;
    case Regime::kZeroLengths: {
      lengths.resize(count(rng));
      std::bernoulli_distribution empty(0.5);
      for (auto& l : lengths) l = empty(rng) ? 0 : len(rng);
      lengths.front() = 0;
      lengths.back() = 0;
      break;
    }
    case Regime::kAllEmpty:
      lengths.assign(count(rng), 0);
      break;
    case Regime::kOneHuge: {
      lengths.assign(count(rng) * 4, 0);
      std::uniform_int_distribution<std::size_t> where(0, lengths.size() - 1);
      lengths[where(rng)] = 64 * scale + len(rng);
      break;
    }
    case Regime::kManyTiny: {
      lengths.resize(500 + count(rng) * 20);
      std::uniform_int_distribution<std::int64_t> tiny(0, 4);
      for (auto& l : lengths) l = tiny(rng);
      break;
    }
  }
  return lengths;
}

}  // namespace test
}  // namespace ragged
