// Host offsets: lengths -> offsets and validation, against brute force, with the bad-input messages.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "common/test_util.h"
#include "ragged/offsets.h"

using namespace ragged;

TEMPLATE_TEST_CASE("lengths_to_offsets_host matches a running sum", "[offsets][host]", std::int32_t, std::int64_t) {
  auto rng = test::make_rng(1);
  for (test::Regime regime : test::all_regimes()) {
    const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng);
    INFO("regime " << test::regime_name(regime));
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    std::vector<TestType> offsets(lengths.size() + 1, TestType(-7));
    REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
    std::int64_t sum = 0;
    REQUIRE(offsets[0] == 0);
    for (std::size_t b = 0; b < lengths.size(); ++b) {
      sum += lengths[b];
      REQUIRE(static_cast<std::int64_t>(offsets[b + 1]) == sum);
    }
    REQUIRE_OK(validate_offsets_host(offsets.data(), batch, sum, sum));
  }
}

TEST_CASE("lengths_to_offsets_host rejects negative lengths and int32 overflow", "[offsets][host][errors]") {
  const std::vector<std::int64_t> negative = {3, 1, -2, 4};
  std::vector<std::int32_t> offsets(5);
  REQUIRE(lengths_to_offsets_host(negative.data(), 4, offsets.data()) == Status::kNegativeLength);
  REQUIRE(std::string(last_error_message()).find("lengths[2]") != std::string::npos);

  const std::vector<std::int64_t> big = {std::numeric_limits<std::int32_t>::max() - 5, 3, 3};
  REQUIRE(lengths_to_offsets_host(big.data(), 3, offsets.data()) == Status::kSizeOverflow);
  REQUIRE(std::string(last_error_message()).find("offsets[3]") != std::string::npos);
  std::vector<std::int64_t> offsets64(4);
  REQUIRE_OK(lengths_to_offsets_host(big.data(), 3, offsets64.data()));
  REQUIRE(offsets64[3] == std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1);

  REQUIRE(lengths_to_offsets_host<std::int64_t, std::int32_t>(nullptr, 2, offsets.data()) == Status::kNullPointer);
  REQUIRE(lengths_to_offsets_host(big.data(), -1, offsets.data()) == Status::kInvalidArgument);
}

TEST_CASE("validate_offsets_host names the first bad entry", "[offsets][host][errors]") {
  const std::int64_t not_zero[] = {1, 2, 3};
  REQUIRE(validate_offsets_host(not_zero, 2, 10) == Status::kInvalidOffsets);
  REQUIRE(std::string(last_error_message()).find("offsets[0] = 1") != std::string::npos);

  const std::int32_t decreasing[] = {0, 4, 6, 5, 9};
  REQUIRE(validate_offsets_host(decreasing, 4, 10) == Status::kInvalidOffsets);
  REQUIRE(std::string(last_error_message()).find("offsets[3]") != std::string::npos);

  const std::int32_t too_big[] = {0, 4, 11};
  REQUIRE(validate_offsets_host(too_big, 2, 10) == Status::kInvalidOffsets);
  REQUIRE(std::string(last_error_message()).find("capacity") != std::string::npos);

  const std::int32_t short_nnz[] = {0, 4, 8};
  REQUIRE(validate_offsets_host(short_nnz, 2, 10, 10) == Status::kInvalidOffsets);
  REQUIRE_OK(validate_offsets_host(short_nnz, 2, 10, 8));

  const std::int32_t empty_batch[] = {0};
  REQUIRE_OK(validate_offsets_host(empty_batch, 0, 0, 0));
  REQUIRE(validate_offsets_host<std::int32_t>(nullptr, 0, 0) == Status::kNullPointer);
}
