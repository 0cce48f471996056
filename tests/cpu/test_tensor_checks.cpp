// The owning RaggedTensor's host-side checks, which all come before its first CUDA call (so these run without a
// device): sizes whose element counts overflow int64, negative inner dimensions, values of the wrong size, and
// an arg output for a reduction that has none. Moves are checked on the device in tests/gpu/test_convert.cu.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ragged/tensor.h"

using namespace ragged;

namespace {

// Runs `make`, which must throw ragged::Error with `status`; returns its message.
template <typename Make>
std::string error_of(Make&& make, Status status) {
  try {
    make();
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.status() == status);
    return e.what();
  }
  FAIL("no ragged::Error thrown");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("RaggedTensor::from_host refuses element counts that overflow int64, naming them", "[tensor][errors]") {
  using Tensor = RaggedTensor<float>;
  // nnz * inner = 2^62 * 4 wraps to 0, which an empty values vector would match.
  std::string message =
      error_of([] { Tensor::from_host({}, {std::int64_t{1} << 62}, {4}); }, Status::kSizeOverflow);
  REQUIRE(contains(message, "nnz * inner"));
  // The inner dimensions' product 2^32 * 2^32 wraps to 0.
  message = error_of([] { Tensor::from_host({}, {3}, {std::int64_t{1} << 32, std::int64_t{1} << 32}); },
                     Status::kSizeOverflow);
  REQUIRE(contains(message, "the product of the inner dimensions"));
  message = error_of([] { Tensor::from_host({}, {3}, {2, -2}); }, Status::kInvalidArgument);
  REQUIRE(contains(message, "inner dimension -2 is negative"));
  message = error_of([] { Tensor::from_host(std::vector<float>(5), {2}, {3}); }, Status::kInvalidArgument);
  REQUIRE(contains(message, "values holds 5 elements but the lengths need nnz * inner = 2 * 3"));
  message = error_of([] { Tensor::from_host({}, {2, -1}); }, Status::kNegativeLength);
  REQUIRE(contains(message, "lengths[1] = -1"));
}

TEST_CASE("RaggedTensor::reduce refuses an arg output for sum and mean whatever the batch", "[tensor][errors]") {
  // On an empty batch the arg buffer has 0 elements, a null pointer, which segment_reduce's own check lets
  // through: the same call must still fail as it does on a full batch, before the buffer is replaced.
  const RaggedTensor<float> empty;
  DeviceBuffer<std::int64_t> arg;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
    INFO(reduce_op_name(op));
    const std::string message = error_of([&] { empty.reduce(op, 0.0f, &arg); }, Status::kInvalidArgument);
    REQUIRE(contains(message, "only max and min have one"));
  }
}
