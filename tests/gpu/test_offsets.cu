// Device offsets ops against the host versions: lengths -> offsets (with negative-length and int32-overflow
// records), offsets -> lengths, max length, device validation; plus one op captured in a CUDA graph.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gpu/restore_setting.h"
#include "ragged/buffer.h"
#include "ragged/offsets.h"

using namespace ragged;

namespace {

template <typename LengthT, typename OffsetT>
void run_lengths_to_offsets(const std::vector<LengthT>& lengths, std::vector<OffsetT>& offsets, CheckResult& check) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  DeviceBuffer<LengthT> d_lengths(lengths);
  DeviceBuffer<OffsetT> d_offsets(lengths.size() + 1);
  DeviceBuffer<CheckResult> d_check(1);
  test::poison(d_offsets);
  d_check.fill_bytes(0);  // code 0 reads as a failure at index 0: the op must reset it to pass
  std::size_t bytes = 0;
  REQUIRE_OK(lengths_to_offsets(nullptr, bytes, d_lengths.data(), batch, d_offsets.data(), d_check.data(), nullptr));
  DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 1));
  test::poison_workspace(ws);
  REQUIRE_OK(lengths_to_offsets(ws.data(), bytes, d_lengths.data(), batch, d_offsets.data(), d_check.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  offsets = d_offsets.to_host();
  check = d_check.to_host()[0];
}

// validate_offsets on the device (no workspace needed) from a poisoned CheckResult: the result it leaves.
template <typename OffsetT>
CheckResult run_validate_offsets(const std::vector<OffsetT>& offsets, std::int64_t capacity,
                                 std::int64_t expected_nnz) {
  DeviceBuffer<OffsetT> d_offsets(offsets);
  DeviceBuffer<CheckResult> d_check(1);
  test::poison(d_check);
  DeviceBuffer<unsigned char> one_byte(1);
  std::size_t bytes = 0;
  const std::int64_t batch = static_cast<std::int64_t>(offsets.size()) - 1;
  REQUIRE_OK(validate_offsets(one_byte.data(), bytes, d_offsets.data(), batch, capacity, expected_nnz,
                              d_check.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  return d_check.to_host()[0];
}

// offsets_to_lengths on the device (no workspace needed) into a poisoned buffer: the lengths it writes.
template <typename OffsetT, typename LengthT>
std::vector<LengthT> run_offsets_to_lengths(const std::vector<OffsetT>& offsets) {
  const std::int64_t batch = static_cast<std::int64_t>(offsets.size()) - 1;
  DeviceBuffer<OffsetT> d_offsets(offsets);
  DeviceBuffer<LengthT> d_lengths(static_cast<std::size_t>(batch));
  test::poison(d_lengths);
  DeviceBuffer<unsigned char> one_byte(1);
  std::size_t bytes = 0;
  REQUIRE_OK(offsets_to_lengths(one_byte.data(), bytes, d_offsets.data(), batch, d_lengths.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  return d_lengths.to_host();
}

}  // namespace

TEMPLATE_TEST_CASE("lengths_to_offsets on the device equals the host version", "[offsets][gpu]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(11);
  for (test::Regime regime : test::all_regimes()) {
    INFO("regime " << test::regime_name(regime));
    const std::vector<std::int64_t> lengths64 = test::make_lengths(regime, rng, 3000);
    const std::vector<std::int32_t> lengths32(lengths64.begin(), lengths64.end());
    std::vector<OffsetT> expected(lengths64.size() + 1);
    REQUIRE_OK(lengths_to_offsets_host(lengths64.data(), static_cast<std::int64_t>(lengths64.size()), expected.data()));

    std::vector<OffsetT> got;
    CheckResult check;
    run_lengths_to_offsets(lengths64, got, check);
    REQUIRE(check.ok());
    REQUIRE_BITWISE_EQUAL(got, expected);
    run_lengths_to_offsets(lengths32, got, check);
    REQUIRE(check.ok());
    REQUIRE_BITWISE_EQUAL(got, expected);
  }
}

TEST_CASE("lengths_to_offsets records the first negative length and int32 overflow", "[offsets][gpu][errors]") {
  std::vector<std::int64_t> lengths(5000, 3);
  lengths[1234] = -1;
  lengths[4000] = -5;
  std::vector<std::int32_t> offsets;
  CheckResult check;
  run_lengths_to_offsets(lengths, offsets, check);
  REQUIRE(check.status() == Status::kNegativeLength);
  REQUIRE(check.index() == 1234);
  // Negative lengths count as 0, so the offsets stay non-decreasing.
  REQUIRE(std::is_sorted(offsets.begin(), offsets.end()));

  std::vector<std::int64_t> big(4, std::int64_t{1} << 30);  // offsets[2] reaches 2^31: sequence 1 does not fit int32
  run_lengths_to_offsets(big, offsets, check);
  REQUIRE(check.status() == Status::kSizeOverflow);
  REQUIRE(check.index() == 1);
  REQUIRE(offsets[2] == std::numeric_limits<std::int32_t>::max());
  std::vector<std::int64_t> offsets64;
  run_lengths_to_offsets(big, offsets64, check);
  REQUIRE(check.ok());
  REQUIRE(offsets64[4] == std::int64_t{1} << 32);

  // int64 lengths whose sum passes INT64_MAX: the scan saturates instead of wrapping, so the overflow is
  // recorded for int64 offsets too (as the host version refuses them), and both offset types stay sorted.
  constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::int64_t> huge = {5, kMax64 - 2, 7, 1};
  std::vector<std::int64_t> host(huge.size() + 1);
  REQUIRE(lengths_to_offsets_host(huge.data(), 4, host.data()) == Status::kSizeOverflow);
  run_lengths_to_offsets(huge, offsets64, check);
  REQUIRE(check.status() == Status::kSizeOverflow);
  REQUIRE(check.index() == 1);
  REQUIRE(offsets64[2] == kMax64);
  REQUIRE(std::is_sorted(offsets64.begin(), offsets64.end()));
  run_lengths_to_offsets(huge, offsets, check);
  REQUIRE(check.status() == Status::kSizeOverflow);
  REQUIRE(check.index() == 1);

  // The first failure by sequence, as the host version finds it: sequence 1 overflows int32 offsets before
  // sequence 2's negative length.
  const std::vector<std::int64_t> overflow_then_negative = {std::numeric_limits<std::int32_t>::max(), 1, -1};
  std::vector<std::int32_t> host32(4);
  REQUIRE(lengths_to_offsets_host(overflow_then_negative.data(), 3, host32.data()) == Status::kSizeOverflow);
  run_lengths_to_offsets(overflow_then_negative, offsets, check);
  REQUIRE(check.status() == Status::kSizeOverflow);
  REQUIRE(check.index() == 1);
  REQUIRE(std::is_sorted(offsets.begin(), offsets.end()));
}

TEST_CASE("offsets_to_lengths subtracts in 64 bits", "[offsets][gpu][errors]") {
  // Malformed int32 offsets 2^32 - 1 apart: an int64 length holds the difference, which int32 arithmetic wraps.
  const std::vector<std::int32_t> offsets = {std::numeric_limits<std::int32_t>::min(),
                                             std::numeric_limits<std::int32_t>::max()};
  DeviceBuffer<std::int32_t> d_offsets(offsets);
  DeviceBuffer<std::int64_t> d_lengths(1);
  DeviceBuffer<unsigned char> one_byte(1);
  std::size_t bytes = 0;
  REQUIRE_OK(offsets_to_lengths(one_byte.data(), bytes, d_offsets.data(), 1, d_lengths.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  REQUIRE(d_lengths.to_host()[0] == (std::int64_t{1} << 32) - 1);

  // Lengths that int32 cannot hold saturate, and malformed int64 offsets do not wrap.
  const std::vector<std::int64_t> wide = {0, std::int64_t{1} << 40, std::numeric_limits<std::int64_t>::max(), -2};
  DeviceBuffer<std::int64_t> d_wide(wide);
  DeviceBuffer<std::int32_t> d_lengths32(3);
  REQUIRE_OK(offsets_to_lengths(one_byte.data(), bytes, d_wide.data(), 3, d_lengths32.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  const std::vector<std::int32_t> got32 = d_lengths32.to_host();
  REQUIRE(got32[0] == std::numeric_limits<std::int32_t>::max());
  REQUIRE(got32[1] == std::numeric_limits<std::int32_t>::max());
  REQUIRE(got32[2] == std::numeric_limits<std::int32_t>::min());
}

TEST_CASE("an op after a failed allocation does not report that allocation's error", "[offsets][gpu][errors]") {
  // 4 TiB, more than any GPU holds: cudaMallocAsync fails, and the runtime also keeps its error as the thread's
  // last one, which offsets_to_lengths's launch check (cudaGetLastError) would take for its own kernel's.
  try {
    DeviceBuffer<float> huge(std::size_t{1} << 40);
    FAIL("a 4 TiB DeviceBuffer was allocated");
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.status() == Status::kCudaError);
    REQUIRE(std::string(e.what()).find("cudaMallocAsync") != std::string::npos);
  }
  REQUIRE(cudaPeekAtLastError() == cudaSuccess);

  const std::vector<std::int32_t> offsets = {0, 3, 3, 7};
  DeviceBuffer<std::int32_t> d_offsets(offsets);
  DeviceBuffer<std::int32_t> d_lengths(3);
  test::poison(d_lengths);
  DeviceBuffer<unsigned char> one_byte(1);
  std::size_t bytes = 0;
  REQUIRE_OK(offsets_to_lengths(one_byte.data(), bytes, d_offsets.data(), 3, d_lengths.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  REQUIRE(d_lengths.to_host() == std::vector<std::int32_t>{3, 0, 4});
}

TEMPLATE_TEST_CASE("offsets_to_lengths and max_length", "[offsets][gpu]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(12);
  for (test::Regime regime : test::all_regimes()) {
    INFO("regime " << test::regime_name(regime));
    const std::vector<std::int64_t> lengths = test::make_lengths(regime, rng, 500);
    const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
    std::vector<OffsetT> offsets(lengths.size() + 1);
    REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, offsets.data()));
    DeviceBuffer<OffsetT> d_offsets(offsets);
    DeviceBuffer<std::int64_t> d_lengths(lengths.size());
    DeviceBuffer<std::int64_t> d_max(1);
    test::poison(d_lengths);
    test::poison(d_max);
    std::size_t bytes = 0;
    REQUIRE_OK(offsets_to_lengths(nullptr, bytes, d_offsets.data(), batch, d_lengths.data(), nullptr));
    REQUIRE(bytes == 1);
    DeviceBuffer<unsigned char> one_byte(1);
    REQUIRE_OK(offsets_to_lengths(one_byte.data(), bytes, d_offsets.data(), batch, d_lengths.data(), nullptr));
    REQUIRE_OK(max_length(nullptr, bytes, d_offsets.data(), batch, d_max.data(), nullptr));
    DeviceBuffer<unsigned char> ws(std::max<std::size_t>(bytes, 1));
    test::poison_workspace(ws);
    REQUIRE_OK(max_length(ws.data(), bytes, d_offsets.data(), batch, d_max.data(), nullptr));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE(d_lengths.to_host() == lengths);
    const std::int64_t expected_max = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
    REQUIRE(d_max.to_host()[0] == expected_max);
  }
}

TEMPLATE_TEST_CASE("validate_offsets on the device finds the first bad entry", "[offsets][gpu][errors]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  const auto validate = run_validate_offsets<OffsetT>;
  std::vector<OffsetT> good(10001);
  for (std::size_t i = 0; i < good.size(); ++i) good[i] = static_cast<OffsetT>(i * 2);
  REQUIRE(validate(good, 20000, 20000).ok());
  REQUIRE(validate(good, 20000, -1).ok());
  REQUIRE(validate({0}, 0, 0).ok());

  std::vector<OffsetT> bad = good;
  bad[700] = 5;   // decreasing at 700 (and increasing again at 701)
  bad[9000] = 0;  // decreasing again later: the first failure must win
  CheckResult r = validate(bad, 20000, 20000);
  REQUIRE(r.status() == Status::kInvalidOffsets);
  REQUIRE(r.index() == 700);
  REQUIRE(describe(r) == "invalid offsets at offsets[700]");

  bad = good;
  bad[0] = 1;
  REQUIRE(validate(bad, 20000, -1).index() == 0);
  REQUIRE(validate(good, 19999, -1).index() == 10000);  // beyond capacity
  REQUIRE(validate(good, 30000, 19000).index() == 10000);  // nnz mismatch
}

TEMPLATE_TEST_CASE("offsets ops with grids of one and three blocks match the host versions", "[offsets][gpu]",
                   std::int32_t, std::int64_t) {
  // lengths_to_offsets' finish pass, offsets_to_lengths and validate_offsets walk the batch grid-stride, a full
  // grid in one round here; capped at 1 or 3 blocks (set_grid_cap) each thread takes many sequences, and the
  // first failure must still be the lowest index whichever round found it.
  using OffsetT = TestType;
  auto rng = test::make_rng(14);
  const test::RestoreGridCap restore;
  std::uniform_int_distribution<std::int64_t> length(0, 50);
  std::vector<std::int64_t> lengths(5000);
  for (auto& l : lengths) l = length(rng);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  std::vector<OffsetT> expected(lengths.size() + 1);
  REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, expected.data()));
  const std::int64_t nnz = static_cast<std::int64_t>(expected.back());
  for (unsigned cap : {1u, 3u}) {
    INFO("grid of at most " << cap << " blocks");
    detail::set_grid_cap(cap);
    std::vector<OffsetT> got;
    CheckResult check;
    run_lengths_to_offsets(lengths, got, check);
    REQUIRE(check.ok());
    REQUIRE_BITWISE_EQUAL(got, expected);
    std::vector<std::int64_t> negative = lengths;
    negative[4700] = -3;
    negative[3210] = -1;
    run_lengths_to_offsets(negative, got, check);
    REQUIRE(check.status() == Status::kNegativeLength);
    REQUIRE(check.index() == 3210);

    REQUIRE((run_offsets_to_lengths<OffsetT, std::int64_t>(expected)) == lengths);
    REQUIRE(run_validate_offsets(expected, nnz, nnz).ok());
    std::vector<OffsetT> bad = expected;
    bad[4321] = bad[4320] - 1;
    bad[4900] = 0;
    REQUIRE(run_validate_offsets(bad, nnz, -1).index() == 4321);
    REQUIRE(run_validate_offsets(expected, nnz, nnz + 1).index() == batch);
  }
}

// The other argument errors are checked without a GPU in tests/cpu/test_argument_checks.cpp; this one needs the
// query, which asks CUB for its temp size.
TEST_CASE("lengths_to_offsets and max_length refuse a workspace smaller than the query returned",
          "[offsets][gpu][errors]") {
  std::size_t bytes = 0;
  DeviceBuffer<std::int32_t> d_offsets(3);
  DeviceBuffer<std::int32_t> d_lengths(std::vector<std::int32_t>{1, 2});
  REQUIRE_OK(lengths_to_offsets(nullptr, bytes, d_lengths.data(), 2, d_offsets.data(), nullptr, nullptr));
  DeviceBuffer<unsigned char> ws(bytes);
  test::poison_workspace(ws);
  std::size_t too_small = bytes - 1;
  REQUIRE(lengths_to_offsets(ws.data(), too_small, d_lengths.data(), 2, d_offsets.data(), nullptr, nullptr) ==
          Status::kWorkspaceTooSmall);

  const DeviceBuffer<std::int64_t> offsets(std::vector<std::int64_t>{0, 3, 3, 7});
  DeviceBuffer<std::int64_t> d_max(1);
  REQUIRE_OK(max_length(nullptr, bytes, offsets.data(), 3, d_max.data(), nullptr));
  REQUIRE(bytes > 0);
  DeviceBuffer<unsigned char> max_ws(bytes);
  too_small = bytes - 1;
  REQUIRE(max_length(max_ws.data(), too_small, offsets.data(), 3, d_max.data(), nullptr) ==
          Status::kWorkspaceTooSmall);
  REQUIRE_OK(max_length(max_ws.data(), bytes, offsets.data(), 3, d_max.data(), nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  REQUIRE(d_max.to_host()[0] == 4);
}

TEST_CASE("lengths_to_offsets can be captured in a CUDA graph and replayed", "[offsets][gpu][graph]") {
  auto rng = test::make_rng(13);
  std::vector<std::int32_t> lengths(3000);
  std::uniform_int_distribution<int> len(0, 100);
  for (auto& l : lengths) l = len(rng);
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());

  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    DeviceBuffer<std::int32_t> d_lengths(lengths, stream);
    DeviceBuffer<std::int64_t> d_offsets(lengths.size() + 1, stream);
    DeviceBuffer<CheckResult> d_check(1, stream);
    std::size_t bytes = 0;
    REQUIRE_OK(lengths_to_offsets(nullptr, bytes, d_lengths.data(), batch, d_offsets.data(), d_check.data(), stream));
    DeviceBuffer<unsigned char> ws(bytes, stream);
    test::poison_workspace(ws);
    REQUIRE_CUDA(cudaStreamSynchronize(stream));

    cudaGraph_t graph = nullptr;
    REQUIRE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status captured =
        lengths_to_offsets(ws.data(), bytes, d_lengths.data(), batch, d_offsets.data(), d_check.data(), stream);
    REQUIRE_CUDA(cudaStreamEndCapture(stream, &graph));
    REQUIRE_OK(captured);
    cudaGraphExec_t exec = nullptr;
    REQUIRE_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    // Capturing must not have run anything; each replay must recompute from the current lengths.
    for (int round = 0; round < 2; ++round) {
      for (auto& l : lengths) l = len(rng);
      d_lengths.copy_from_host(lengths.data(), lengths.size());
      test::poison(d_offsets);
      d_check.fill_bytes(0);  // reads as a failure at index 0: each replay must reset it
      REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
      std::vector<std::int64_t> expected(lengths.size() + 1);
      REQUIRE_OK(lengths_to_offsets_host(lengths.data(), batch, expected.data()));
      REQUIRE(d_offsets.to_host() == expected);
      REQUIRE(d_check.to_host()[0].ok());
    }
    REQUIRE_CUDA(cudaGraphExecDestroy(exec));
    REQUIRE_CUDA(cudaGraphDestroy(graph));
  }
  REQUIRE_CUDA(cudaStreamDestroy(stream));
}
