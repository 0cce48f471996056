// Seeded length generators and the lengths-file reader.
#include "bench/common/distributions.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

namespace ragged {
namespace bench {
namespace {

std::int64_t clamp_length(double value, std::int64_t max_len) {
  if (!(value > 0.0)) return 0;  // also catches NaN
  if (value >= static_cast<double>(max_len)) return max_len;
  return std::min<std::int64_t>(max_len, std::llround(value));
}

// Draws one length of `distribution` (all but kOneHuge and kFile, which need the whole batch).
double draw(LengthDistribution distribution, double mean, std::mt19937_64& rng) {
  switch (distribution) {
    case LengthDistribution::kUniform:
      return std::uniform_real_distribution<double>(0.0, 2.0 * mean + 1.0)(rng) - 0.5;
    case LengthDistribution::kNormal:
      return std::normal_distribution<double>(mean, mean / 4.0)(rng);
    case LengthDistribution::kLognormal: {
      const double sigma = 1.0;  // mean of a lognormal = exp(mu + sigma^2 / 2)
      return std::lognormal_distribution<double>(std::log(mean) - sigma * sigma / 2.0, sigma)(rng);
    }
    case LengthDistribution::kPowerLaw: {
      const double alpha = 2.0;  // mean = alpha / (alpha - 1) * minimum
      const double minimum = mean * (alpha - 1.0) / alpha;
      const double u = 1.0 - std::generate_canonical<double, 53>(rng);  // (0, 1]
      return minimum / std::pow(u, 1.0 / alpha);
    }
    case LengthDistribution::kBimodal: {
      const bool long_mode = std::bernoulli_distribution(0.5)(rng);
      const double center = long_mode ? 1.75 * mean : 0.25 * mean;
      return std::normal_distribution<double>(center, 0.1 * center)(rng);
    }
    case LengthDistribution::kOneHuge:
    case LengthDistribution::kFile:
      break;
  }
  throw std::logic_error("draw: distribution has no per-sequence draw");
}

}  // namespace

const char* distribution_name(LengthDistribution distribution) {
  switch (distribution) {
    case LengthDistribution::kUniform: return "uniform";
    case LengthDistribution::kNormal: return "normal";
    case LengthDistribution::kLognormal: return "lognormal";
    case LengthDistribution::kPowerLaw: return "power_law";
    case LengthDistribution::kBimodal: return "bimodal";
    case LengthDistribution::kOneHuge: return "one_huge";
    case LengthDistribution::kFile: return "file";
  }
  return "unknown";
}

LengthDistribution distribution_from_name(const std::string& name) {
  for (const LengthDistribution d : synthetic_distributions())
    if (name == distribution_name(d)) return d;
  if (name == distribution_name(LengthDistribution::kFile)) return LengthDistribution::kFile;
  throw std::invalid_argument("unknown length distribution '" + name + "'");
}

std::vector<LengthDistribution> synthetic_distributions() {
  return {LengthDistribution::kUniform,  LengthDistribution::kNormal,  LengthDistribution::kLognormal,
          LengthDistribution::kPowerLaw, LengthDistribution::kBimodal, LengthDistribution::kOneHuge};
}

std::vector<std::int64_t> make_lengths(const LengthSpec& spec) {
  if (spec.batch < 0) throw std::invalid_argument("make_lengths: batch = " + std::to_string(spec.batch) + " < 0");
  if (spec.max_len < 0)
    throw std::invalid_argument("make_lengths: max_len = " + std::to_string(spec.max_len) + " < 0");
  if (!(spec.mean >= 0.0)) throw std::invalid_argument("make_lengths: mean = " + std::to_string(spec.mean) + " < 0");
  std::mt19937_64 rng(spec.seed);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(spec.batch), 0);
  if (spec.batch == 0) return lengths;

  switch (spec.distribution) {
    case LengthDistribution::kOneHuge: {
      const std::size_t where = std::uniform_int_distribution<std::size_t>(0, lengths.size() - 1)(rng);
      lengths[where] = clamp_length(spec.mean * static_cast<double>(spec.batch), spec.max_len);
      return lengths;
    }
    case LengthDistribution::kFile: {
      const std::vector<std::int64_t>& pool = spec.file_lengths;
      if (pool.empty()) throw std::invalid_argument("make_lengths: the lengths file gave no lengths");
      double pool_sum = 0.0;
      for (const std::int64_t l : pool) pool_sum += static_cast<double>(l);
      const double pool_mean = pool_sum / static_cast<double>(pool.size());
      const double scale = spec.mean > 0.0 && pool_mean > 0.0 ? spec.mean / pool_mean : 1.0;
      std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
      for (auto& l : lengths) l = clamp_length(static_cast<double>(pool[pick(rng)]) * scale, spec.max_len);
      return lengths;
    }
    default:
      if (spec.mean == 0.0) return lengths;
      for (auto& l : lengths) l = clamp_length(draw(spec.distribution, spec.mean, rng), spec.max_len);
      return lengths;
  }
}

std::vector<std::int64_t> read_lengths_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read lengths file '" + path + "'");
  std::vector<std::int64_t> lengths;
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    const std::string text = line.substr(first, last - first + 1);
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || errno != 0 || value < 0)
      throw std::runtime_error(path + ":" + std::to_string(number) + ": '" + text +
                               "' is not a non-negative integer length");
    lengths.push_back(static_cast<std::int64_t>(value));
  }
  return lengths;
}

std::string lengths_file_from_env() {
  const char* path = std::getenv("RAGGED_LENGTHS_FILE");
  return path != nullptr ? std::string(path) : std::string();
}

}  // namespace bench
}  // namespace ragged
