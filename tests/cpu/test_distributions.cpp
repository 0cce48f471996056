// Benchmark length generators (bench/common/distributions.h): a seed reproduces its lengths, another seed
// gives others, means are near the request, lengths stay in [0, max_len], and the lengths-file reader
// accepts what it documents and names the bad line otherwise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>

#include "bench/common/distributions.h"
#include "bench/common/rnn_lengths.h"

using namespace ragged::bench;

namespace {

double mean_of(const std::vector<std::int64_t>& lengths) {
  if (lengths.empty()) return 0.0;
  return static_cast<double>(std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0})) /
         static_cast<double>(lengths.size());
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = "ragged_test_" + name + ".txt";  // ctest runs in the build tree
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("each synthetic distribution reproduces its seed, honours max_len and hits its mean", "[bench][lengths]") {
  for (const LengthDistribution distribution : synthetic_distributions()) {
    INFO("distribution " << distribution_name(distribution));
    LengthSpec spec;
    spec.distribution = distribution;
    spec.batch = 20000;
    spec.mean = 300.0;
    // kOneHuge's one sequence holds batch * mean tokens; any smaller max_len would clamp it.
    spec.max_len = distribution == LengthDistribution::kOneHuge ? spec.batch * 300 : 16 * 300;
    spec.seed = 7;
    const std::vector<std::int64_t> first = make_lengths(spec);
    REQUIRE(first.size() == 20000);
    REQUIRE(make_lengths(spec) == first);
    spec.seed = 8;
    const std::vector<std::int64_t> other = make_lengths(spec);
    REQUIRE(other != first);
    for (const std::int64_t l : first) {
      REQUIRE(l >= 0);
      REQUIRE(l <= spec.max_len);
    }
    // Clamping at 16x the mean trims the long tails by a few percent at most.
    REQUIRE(mean_of(first) == Approx(300.0).epsilon(0.06));
    REQUIRE(mean_of(other) == Approx(300.0).epsilon(0.06));
  }
}

TEST_CASE("the distributions have their shapes", "[bench][lengths]") {
  LengthSpec spec;
  spec.batch = 20000;
  spec.mean = 200.0;
  spec.max_len = 3200;
  spec.seed = 3;

  spec.distribution = LengthDistribution::kOneHuge;
  std::vector<std::int64_t> lengths = make_lengths(spec);
  REQUIRE(std::count(lengths.begin(), lengths.end(), 0) == 19999);
  REQUIRE(*std::max_element(lengths.begin(), lengths.end()) == 3200);  // batch * mean, clamped
  spec.max_len = 20000 * 200;
  lengths = make_lengths(spec);
  REQUIRE(*std::max_element(lengths.begin(), lengths.end()) == 20000 * 200);
  spec.max_len = 3200;

  spec.distribution = LengthDistribution::kBimodal;
  lengths = make_lengths(spec);
  // Modes at 50 (sd 5) and 350 (sd 35): the gap between them is nearly empty, each mode holds about half.
  const auto gap = std::count_if(lengths.begin(), lengths.end(), [](std::int64_t l) { return l > 100 && l < 250; });
  const auto short_mode = std::count_if(lengths.begin(), lengths.end(), [](std::int64_t l) { return l <= 100; });
  REQUIRE(gap < 100);
  REQUIRE(short_mode == Approx(10000).epsilon(0.05));

  spec.distribution = LengthDistribution::kPowerLaw;
  lengths = make_lengths(spec);
  REQUIRE(*std::min_element(lengths.begin(), lengths.end()) >= 100);  // Pareto minimum: mean / 2
  REQUIRE(*std::max_element(lengths.begin(), lengths.end()) > 2000);  // and a long tail

  spec.distribution = LengthDistribution::kUniform;
  lengths = make_lengths(spec);
  REQUIRE(*std::min_element(lengths.begin(), lengths.end()) == 0);
  REQUIRE(*std::max_element(lengths.begin(), lengths.end()) == 400);
}

TEST_CASE("make_lengths edge cases and bad specs", "[bench][lengths]") {
  LengthSpec spec;
  spec.distribution = LengthDistribution::kLognormal;
  spec.mean = 50.0;
  spec.max_len = 100;
  REQUIRE(make_lengths(spec).empty());  // batch 0
  spec.batch = 10;
  spec.max_len = 0;
  for (const std::int64_t l : make_lengths(spec)) REQUIRE(l == 0);
  spec.max_len = 100;
  spec.mean = 0.0;
  for (const std::int64_t l : make_lengths(spec)) REQUIRE(l == 0);

  spec.batch = -1;
  REQUIRE_THROWS_AS(make_lengths(spec), std::invalid_argument);
  spec.batch = 1;
  spec.max_len = -1;
  REQUIRE_THROWS_AS(make_lengths(spec), std::invalid_argument);
  spec.max_len = 1;
  spec.distribution = LengthDistribution::kFile;  // with no file lengths
  REQUIRE_THROWS_AS(make_lengths(spec), std::invalid_argument);
}

TEST_CASE("lengths files: read, resampled, scaled; bad lines named", "[bench][lengths]") {
  const std::string path = write_temp_file("good", "# lengths\n10\n\n  20 \n30\r\n40\n");
  const std::vector<std::int64_t> pool = read_lengths_file(path);
  REQUIRE(pool == std::vector<std::int64_t>{10, 20, 30, 40});
  std::remove(path.c_str());

  LengthSpec spec;
  spec.distribution = LengthDistribution::kFile;
  spec.file_lengths = pool;
  spec.batch = 5000;
  spec.max_len = 1000;
  spec.seed = 11;
  std::vector<std::int64_t> lengths = make_lengths(spec);  // mean 0: the file's own scale
  REQUIRE(make_lengths(spec) == lengths);
  for (const std::int64_t l : lengths) REQUIRE(std::find(pool.begin(), pool.end(), l) != pool.end());
  REQUIRE(mean_of(lengths) == Approx(25.0).epsilon(0.05));
  spec.mean = 100.0;  // scaled 4x
  lengths = make_lengths(spec);
  for (const std::int64_t l : lengths) REQUIRE(l % 40 == 0);
  REQUIRE(mean_of(lengths) == Approx(100.0).epsilon(0.05));

  const std::string bad = write_temp_file("bad", "10\n20\n-3\n");
  try {
    read_lengths_file(bad);
    FAIL("a negative length was accepted");
  } catch (const std::runtime_error& error) {
    REQUIRE(std::string(error.what()).find(bad + ":3") != std::string::npos);
  }
  std::remove(bad.c_str());
  const std::string junk = write_temp_file("junk", "12abc\n");
  REQUIRE_THROWS_AS(read_lengths_file(junk), std::runtime_error);
  std::remove(junk.c_str());
  REQUIRE_THROWS_AS(read_lengths_file("no/such/ragged_lengths.txt"), std::runtime_error);
}

TEST_CASE("distribution names round-trip, and an unknown one is named", "[bench][lengths]") {
  for (const LengthDistribution d : synthetic_distributions())
    REQUIRE(distribution_from_name(distribution_name(d)) == d);
  REQUIRE(distribution_from_name("file") == LengthDistribution::kFile);
  REQUIRE_THROWS_WITH(distribution_from_name("zipf"), Catch::Contains("'zipf'"));
}

TEST_CASE("an RNN case's lengths are the same on every call and within its clamp", "[bench][lengths]") {
  // scripts/torch_rnn.py times PyTorch on these through ragged_rnn_driver --lengths, bench_rnn.cu ragged on them.
  for (const LengthDistribution d : synthetic_distributions()) {
    for (const std::int64_t batch : {0, 1, 16, 64}) {
      const std::vector<std::int64_t> a = rnn_case_lengths(d, batch, 128), b = rnn_case_lengths(d, batch, 128);
      REQUIRE(a == b);
      REQUIRE(a.size() == static_cast<std::size_t>(batch));
      const std::int64_t clamp = d == LengthDistribution::kOneHuge ? batch * 128 : 4 * 128;
      for (const std::int64_t length : a) REQUIRE((length >= 0 && length <= clamp));
    }
  }
}
