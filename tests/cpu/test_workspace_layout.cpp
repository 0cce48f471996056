// The internal workspace carving (src/workspace_layout.h), the CUDA-error bridge, the view conversions and
// sequence_length: host logic that every device op leans on.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../../src/workspace_layout.h"
#include "common/test_util.h"
#include "ragged/status.h"
#include "ragged/view.h"

using namespace ragged;
using detail::WorkspaceLayout;

namespace {

bool message_has(const char* text) { return std::string(last_error_message()).find(text) != std::string::npos; }

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

TEST_CASE("WorkspaceLayout: the query size covers the pieces from any base address", "[workspace]") {
  const std::vector<std::size_t> sizes = {24, 1, 0, 1000, 256, 7};
  WorkspaceLayout query(nullptr);
  for (std::size_t bytes : sizes) REQUIRE(query.take(bytes) == nullptr);
  std::size_t needed = 0;
  REQUIRE_OK(query.finish(needed, "op"));
  REQUIRE(needed == query.size());
  REQUIRE(needed > 0);

  // Every misalignment of the caller's base: the pieces are 256-byte aligned, in order, disjoint and inside
  // [base, base + needed).
  std::vector<unsigned char> memory(needed + WorkspaceLayout::kAlignment);
  for (std::size_t shift = 0; shift < WorkspaceLayout::kAlignment; shift += 17) {
    unsigned char* base = memory.data() + shift;
    WorkspaceLayout run(base);
    std::uintptr_t previous_end = address(base);
    for (std::size_t bytes : sizes) {
      const void* piece = run.take(bytes);
      INFO("shift " << shift << ", piece of " << bytes << " bytes");
      REQUIRE(piece != nullptr);
      REQUIRE(address(piece) % WorkspaceLayout::kAlignment == 0);
      REQUIRE(address(piece) >= previous_end);
      previous_end = address(piece) + bytes;
    }
    REQUIRE(previous_end <= address(base) + needed);
    std::size_t given = needed;
    REQUIRE_OK(run.finish(given, "op"));
  }
}

TEST_CASE("WorkspaceLayout: a workspace with no pieces uses no bytes and asks for one", "[workspace]") {
  WorkspaceLayout query(nullptr);
  REQUIRE(query.take(0) == nullptr);
  REQUIRE(query.size() == 0);
  // The query never answers 0 (kNoWorkspaceBytes: a null workspace means "query", so a caller's null for 0 bytes
  // would make the run another query); the run phase needs nothing, so 0 given bytes pass.
  std::size_t needed = 99;
  REQUIRE_OK(query.finish(needed, "op"));
  REQUIRE(needed == 1);
  unsigned char byte = 0;
  WorkspaceLayout run(&byte);
  run.take(0);
  std::size_t given = 0;
  REQUIRE_OK(run.finish(given, "op"));
}

TEST_CASE("WorkspaceLayout: too small a workspace and size overflow are named", "[workspace][errors]") {
  std::vector<unsigned char> memory(4096);
  WorkspaceLayout run(memory.data());
  run.take_array<float>(100);
  std::size_t given = run.size() - 1;
  REQUIRE(run.finish(given, "some_op") == Status::kWorkspaceTooSmall);
  REQUIRE(message_has("some_op needs"));

  for (std::int64_t count : {std::int64_t{-1}, std::numeric_limits<std::int64_t>::max(),
                             std::numeric_limits<std::int64_t>::max() / 4}) {
    INFO("count " << count);
    WorkspaceLayout query(nullptr);
    query.take_array<std::int64_t>(4);
    REQUIRE(query.take_array<double>(count) == nullptr);
    query.take_array<float>(4);  // later pieces do not clear the overflow
    std::size_t needed = 0;
    REQUIRE(query.finish(needed, "some_op") == Status::kSizeOverflow);
    REQUIRE(message_has("some_op"));
  }
  // Two pieces that each fit size_t but not together.
  WorkspaceLayout query(nullptr);
  query.take(std::numeric_limits<std::size_t>::max() / 2);
  query.take(std::numeric_limits<std::size_t>::max() / 2 + 1);
  std::size_t needed = 0;
  REQUIRE(query.finish(needed, "some_op") == Status::kSizeOverflow);
  // A first piece that ends within the last 256 bytes below the limit: the second piece's aligned start passes
  // the limit, which must not wrap the room left into a huge number (the query once answered 767 bytes here).
  for (std::size_t below : {std::size_t{513}, std::size_t{599}, std::size_t{767}}) {
    INFO("first piece SIZE_MAX - " << below);
    WorkspaceLayout tail(nullptr);
    tail.take(std::numeric_limits<std::size_t>::max() - below);
    tail.take(1024);
    REQUIRE(tail.finish(needed, "some_op") == Status::kSizeOverflow);
  }
}

TEST_CASE("from_cuda tells a missing device apart from a failing call", "[status]") {
  REQUIRE(from_cuda(cudaSuccess, "x") == Status::kSuccess);
  REQUIRE(from_cuda(cudaErrorNoDevice, "cudaGetDevice") == Status::kNoDevice);
  REQUIRE(message_has("cudaGetDevice"));
  REQUIRE(from_cuda(cudaErrorInsufficientDriver, "y") == Status::kNoDevice);
  REQUIRE(from_cuda(cudaErrorInvalidValue, "cudaMemcpyAsync") == Status::kCudaError);
  REQUIRE(message_has("cudaMemcpyAsync"));
  REQUIRE(message_has("cudaErrorInvalidValue"));
  REQUIRE(std::string(status_string(Status::kNoDevice)) == "no CUDA device");

  // On a machine without a usable device, the owning layer's errors say so.
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    const Status status = from_cuda(error == cudaSuccess ? cudaErrorNoDevice : error, "cudaGetDeviceCount");
    REQUIRE(status == Status::kNoDevice);
  }
}

TEST_CASE("sequence_length saturates instead of wrapping on malformed int64 offsets", "[view]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const std::int64_t offsets[] = {0, 5, 3, kMax, -2, kMax, kMin, 0};
  REQUIRE(sequence_length(offsets, 0) == 5);
  REQUIRE(sequence_length(offsets, 1) == -2);
  REQUIRE(sequence_length(offsets, 2) == kMax - 3);
  REQUIRE(sequence_length(offsets, 3) == kMin);  // -2 - INT64_MAX
  REQUIRE(sequence_length(offsets, 4) == kMax);  // INT64_MAX + 2
  REQUIRE(sequence_length(offsets, 5) == kMin);  // INT64_MIN - INT64_MAX
  REQUIRE(sequence_length(offsets, 6) == kMax);  // 0 - INT64_MIN
  const std::int32_t offsets32[] = {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
  REQUIRE(sequence_length(offsets32, 0) == (std::int64_t{1} << 32) - 1);
}

TEST_CASE("views of mutable values convert to read-only views", "[view]") {
  float values[6] = {};
  const std::int32_t offsets[3] = {0, 2, 6};
  const RaggedView<float, std::int32_t> mutable_view{values, offsets, 2, 6, 1};
  const RaggedView<const float, std::int32_t> read_only = mutable_view;
  REQUIRE(read_only.values == values);
  REQUIRE(read_only.offsets == offsets);
  REQUIRE(read_only.batch == 2);
  REQUIRE(read_only.nnz == 6);
  REQUIRE(read_only.inner == 1);
  const PaddedView<float> padded{values, 2, 3, 1};
  const PaddedView<const float> padded_read_only = padded;
  REQUIRE(padded_read_only.data == values);
  REQUIRE(padded_read_only.max_len == 3);
  // Never the other way round.
  static_assert(!std::is_convertible<RaggedView<const float, std::int32_t>, RaggedView<float, std::int32_t>>::value,
                "read-only views must not convert to mutable ones");
  static_assert(!std::is_convertible<PaddedView<const float>, PaddedView<float>>::value,
                "read-only views must not convert to mutable ones");
  static_assert(std::is_trivially_copyable<RaggedView<float, std::int64_t>>::value, "kernel parameters");
}
