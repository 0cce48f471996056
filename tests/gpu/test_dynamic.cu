// The run-time typed entry points give bitwise the same results as the typed ops they dispatch to.
#include <catch2/catch.hpp>

#include "common/test_util.h"
#include "ragged/convert.h"
#include "ragged/dynamic.h"
#include "ragged/offsets.h"
#include "ragged/segment_reduce.h"

using namespace ragged;
using test::run_two_phase;

TEST_CASE("dynamic dispatch matches the typed ops", "[dynamic][gpu]") {
  auto rng = test::make_rng(71);
  const std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kZeroLengths, rng, 50);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<std::int32_t> offsets(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
  const std::int64_t nnz = offsets.back(), inner = 5, max_len = 30;
  const std::vector<half> values = test::random_values<half>(static_cast<std::size_t>(nnz * inner), rng);
  DeviceBuffer<half> d_values(values);
  DeviceBuffer<std::int32_t> d_offsets(offsets);

  dynamic::RaggedDesc desc{DType::kFloat16, DType::kInt32, d_values.data(), d_offsets.data(), batch, nnz, inner};
  RaggedView<const half, std::int32_t> view{d_values.data(), d_offsets.data(), batch, nnz, inner};

  DeviceBuffer<half> padded_dynamic(static_cast<std::size_t>(batch * max_len * inner));
  DeviceBuffer<half> padded_typed(padded_dynamic.size());
  test::poison(padded_dynamic);
  test::poison(padded_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::ragged_to_padded(p, bytes, desc, padded_dynamic.data(), max_len, -2.5, Align::kRight,
                                     Truncate::kLeft, nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return ragged_to_padded(p, bytes, view, PaddedView<half>{padded_typed.data(), batch, max_len, inner},
                            __float2half(-2.5f), Align::kRight, Truncate::kLeft, nullptr);
  }));
  REQUIRE_BITWISE_EQUAL(padded_dynamic.to_host(), padded_typed.to_host());

  DeviceBuffer<half> max_dynamic(static_cast<std::size_t>(batch * inner)), max_typed(max_dynamic.size());
  DeviceBuffer<std::int64_t> arg_dynamic(max_dynamic.size()), arg_typed(max_dynamic.size());
  test::poison(max_dynamic);
  test::poison(max_typed);
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return dynamic::segment_reduce(p, bytes, desc, ReduceOp::kMax, max_dynamic.data(), arg_dynamic.data(), 7.0f,
                                   nullptr);
  }));
  REQUIRE_OK(run_two_phase([&](void* p, std::size_t& bytes) {
    return segment_reduce(p, bytes, view, ReduceOp::kMax, max_typed.data(), arg_typed.data(), 7.0f, nullptr);
  }));
  REQUIRE_BITWISE_EQUAL(max_dynamic.to_host(), max_typed.to_host());
  REQUIRE(arg_dynamic.to_host() == arg_typed.to_host());
}
