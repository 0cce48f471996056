// Seeded sequence-length generators shared by all benchmarks (host only). Each draws `batch` lengths with
// roughly the requested mean, rounds them to integers and clamps them to [0, max_len]. A seed gives the same
// lengths on every run with the same standard library (std::normal/lognormal distributions are
// implementation-defined, so another library may draw others).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragged {
namespace bench {

enum class LengthDistribution {
  kUniform,    // uniform integers in [0, 2 * mean]
  kNormal,     // normal, standard deviation mean / 4
  kLognormal,  // lognormal with sigma 1 (long right tail), mu chosen so the mean is `mean`
  kPowerLaw,   // Pareto with alpha 2 and minimum mean / 2: Zipf-like, a few very long sequences
  kBimodal,    // half near mean / 4, half near 7 * mean / 4 (short prompts and long documents)
  kOneHuge,    // one sequence (at a random position) holds batch * mean tokens, every other one is empty
  kFile,       // lengths resampled from a text file (see read_lengths_file), scaled to `mean` when mean > 0
};

const char* distribution_name(LengthDistribution distribution);
// The distribution distribution_name gives `name`; throws std::invalid_argument naming it otherwise.
LengthDistribution distribution_from_name(const std::string& name);

// Every distribution except kFile.
std::vector<LengthDistribution> synthetic_distributions();

struct LengthSpec {
  LengthDistribution distribution = LengthDistribution::kUniform;
  std::int64_t batch = 0;
  double mean = 0.0;
  std::int64_t max_len = 0;  // lengths are clamped to [0, max_len]
  std::uint64_t seed = 0;
  std::vector<std::int64_t> file_lengths;  // kFile only: the pool to resample from (read_lengths_file)
};

// Throws std::invalid_argument for a negative batch / max_len / mean, or kFile with an empty pool.
std::vector<std::int64_t> make_lengths(const LengthSpec& spec);

// One non-negative integer length per line; blank lines and lines starting with '#' are skipped.
// Throws std::runtime_error naming the path (unreadable) or the line number (not a non-negative integer).
std::vector<std::int64_t> read_lengths_file(const std::string& path);

// The path in the environment variable RAGGED_LENGTHS_FILE, or "" when unset.
std::string lengths_file_from_env();

}  // namespace bench
}  // namespace ragged
