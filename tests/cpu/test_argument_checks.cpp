// The host-side argument checks of every low-level device op, run without a GPU. Each public entry point
// validates its arguments before it touches CUDA, so host arrays stand in for device pointers here: the checks
// look only at null-ness, alignment and sizes and never dereference them.
//
// Only two kinds of call appear: calls that fail their argument checks, and calls that succeed without any CUDA
// call (the zero-workspace queries of the conversions, masks, pack / unpack, offsets_to_lengths,
// validate_offsets and attention). The queries of lengths_to_offsets, max_length, packing_order, the segment
// ops and rnn_forward ask CUB for its temp size, which needs the CUDA runtime, so for those only errors detected
// before that call are tested; their workspace-too-small errors stay in the GPU programs. No kernel runs here.
#include <catch2/catch.hpp>
#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "common/host_attention.h"
#include "common/host_ragged.h"
#include "common/test_util.h"
#include "ragged/attention.h"
#include "ragged/buffer.h"
#include "ragged/convert.h"
#include "ragged/offsets.h"
#include "ragged/packing.h"
#include "ragged/rnn.h"
#include "ragged/segment_reduce.h"

using namespace ragged;

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// The largest batch the ops accept (its batch + 1 offsets of 8 bytes must count in int64 bytes).
constexpr std::int64_t kMaxBatch = kInt64Max / 16;

// `ptr` moved by `bytes`: a stand-in that is not aligned to its element type. Never dereferenced.
template <typename T>
T* shifted(T* ptr, std::ptrdiff_t bytes = 1) {
  using Byte = std::conditional_t<std::is_const<T>::value, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(ptr) + bytes);
}

// Whether the message names `word` (any message at all for an empty word).
bool names(const std::string& message, const char* word) {
  return *word == '\0' ? !message.empty() : message.find(word) != std::string::npos;
}

}  // namespace

// REQUIRE that `expr` returns `expected` and leaves a message naming `word` ("" for any non-empty message). The
// message slot is cleared first, so that a message left by an earlier call cannot pass the check.
#define REQUIRE_FAILS(expr, expected, word)                                                          \
  do {                                                                                               \
    ::ragged::fail(::ragged::Status::kSuccess, "");                                                  \
    const ::ragged::Status status_ = (expr);                                                         \
    const std::string message_(::ragged::last_error_message());                                      \
    INFO(#expr << " -> " << ::ragged::status_string(status_) << ": \"" << message_ << "\"");        \
    REQUIRE(status_ == (expected));                                                                  \
    REQUIRE(names(message_, word));                                                                  \
  } while (0)

// ---------------------------------------------------------------------------------------------------------------
// offsets.h
// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("offsets ops reject bad arguments before any CUDA call", "[offsets][errors]") {
  std::int32_t lengths[2] = {1, 2};
  std::int32_t offsets[3] = {0, 1, 3};
  std::int64_t offsets64[3] = {0, 1, 3};
  std::int64_t max_len = 0;
  CheckResult check;
  std::size_t bytes = 0;

  SECTION("lengths_to_offsets") {
    REQUIRE_FAILS((lengths_to_offsets<std::int32_t, std::int32_t>(nullptr, bytes, nullptr, 2, offsets, nullptr,
                                                                   nullptr)),
                  Status::kNullPointer, "lengths");
    REQUIRE_FAILS((lengths_to_offsets<std::int32_t, std::int32_t>(nullptr, bytes, lengths, 2, nullptr, nullptr,
                                                                   nullptr)),
                  Status::kNullPointer, "offsets");
    // An empty batch still has offsets[0].
    REQUIRE_FAILS((lengths_to_offsets<std::int32_t, std::int64_t>(nullptr, bytes, nullptr, 0, nullptr, nullptr,
                                                                   nullptr)),
                  Status::kNullPointer, "offsets");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, -1, offsets, nullptr, nullptr),
                  Status::kInvalidArgument, "batch");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, kInt64Max, offsets, nullptr, nullptr),
                  Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, kMaxBatch + 1, offsets64, &check, nullptr),
                  Status::kSizeOverflow, "batch");
    // Typed pointers must be aligned to their element.
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, 2, shifted(offsets), nullptr, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, 2, shifted(offsets64, 4), nullptr, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, shifted(lengths, 2), 2, offsets, nullptr, nullptr),
                  Status::kInvalidArgument, "lengths is not aligned");
    REQUIRE_FAILS(lengths_to_offsets(nullptr, bytes, lengths, 2, offsets, shifted(&check, 2), nullptr),
                  Status::kInvalidArgument, "check is not aligned");
  }
  SECTION("offsets_to_lengths") {
    REQUIRE_FAILS((offsets_to_lengths<std::int32_t, std::int32_t>(nullptr, bytes, nullptr, 0, lengths, nullptr)),
                  Status::kNullPointer, "offsets");
    REQUIRE_FAILS((offsets_to_lengths<std::int32_t, std::int32_t>(nullptr, bytes, offsets, 2, nullptr, nullptr)),
                  Status::kNullPointer, "lengths");
    REQUIRE_FAILS(offsets_to_lengths(nullptr, bytes, offsets, -2, lengths, nullptr), Status::kInvalidArgument,
                  "batch");
    REQUIRE_FAILS(offsets_to_lengths(nullptr, bytes, offsets, kInt64Max, lengths, nullptr), Status::kSizeOverflow,
                  "batch");
    REQUIRE_FAILS(offsets_to_lengths(nullptr, bytes, shifted(offsets64, 2), 2, lengths, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    REQUIRE_FAILS(offsets_to_lengths(nullptr, bytes, offsets, 2, shifted(lengths, 3), nullptr),
                  Status::kInvalidArgument, "lengths is not aligned");
    // No workspace: the query answers 1 byte without a CUDA call, also for the largest batch and for an empty one.
    // 1, never 0 (CUB's convention), so that an allocator's null for 0 bytes cannot turn the run into a query.
    bytes = 777;
    REQUIRE_OK(offsets_to_lengths(nullptr, bytes, offsets, 2, lengths, nullptr));
    REQUIRE(bytes == 1);
    bytes = 777;
    REQUIRE_OK(offsets_to_lengths(nullptr, bytes, offsets64, kMaxBatch, lengths, nullptr));
    REQUIRE(bytes == 1);
    REQUIRE_FAILS(offsets_to_lengths(nullptr, bytes, offsets64, kMaxBatch + 1, lengths, nullptr),
                  Status::kSizeOverflow, "batch");
    REQUIRE_OK((offsets_to_lengths<std::int32_t, std::int64_t>(nullptr, bytes, offsets, 0, nullptr, nullptr)));
  }
  SECTION("max_length") {
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, offsets, -3, nullptr, nullptr),
                  Status::kInvalidArgument, "batch");
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, offsets, kInt64Max, &max_len, nullptr),
                  Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, nullptr, 2, &max_len, nullptr), Status::kNullPointer,
                  "offsets");
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, shifted(offsets), 2, &max_len, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, offsets, 2, nullptr, nullptr), Status::kNullPointer,
                  "max_length");
    REQUIRE_FAILS(max_length<std::int32_t>(nullptr, bytes, offsets, 2, shifted(&max_len, 4), nullptr),
                  Status::kInvalidArgument, "max_length is not aligned");
  }
  SECTION("validate_offsets") {
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, offsets, -1, 3, -1, &check, nullptr), Status::kInvalidArgument,
                  "batch");
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, offsets, kInt64Max, 3, -1, &check, nullptr),
                  Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, offsets, 2, -3, -1, &check, nullptr), Status::kInvalidArgument,
                  "capacity");
    REQUIRE_FAILS(validate_offsets<std::int64_t>(nullptr, bytes, nullptr, 0, 3, -1, &check, nullptr),
                  Status::kNullPointer, "offsets");
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, shifted(offsets64, 4), 2, 3, -1, &check, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, offsets, 2, 3, -1, nullptr, nullptr), Status::kNullPointer,
                  "check");
    REQUIRE_FAILS(validate_offsets(nullptr, bytes, offsets, 2, 3, -1, shifted(&check, 2), nullptr),
                  Status::kInvalidArgument, "check is not aligned");
    bytes = 777;
    REQUIRE_OK(validate_offsets(nullptr, bytes, offsets, 2, 3, 3, &check, nullptr));
    REQUIRE(bytes == 1);
  }
  SECTION("the host versions bound the batch too") {
    REQUIRE_FAILS(lengths_to_offsets_host(lengths, kInt64Max, offsets), Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(validate_offsets_host(offsets, kInt64Max, 3), Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(validate_offsets_host(shifted(offsets64, 4), 2, 3), Status::kInvalidArgument,
                  "offsets is not aligned");
    // As the device version: a negative capacity is the argument's fault, not the offsets'.
    REQUIRE_FAILS(validate_offsets_host(offsets, 2, -3), Status::kInvalidArgument, "capacity = -3");
    REQUIRE_FAILS(validate_offsets_host(offsets, 0, -1), Status::kInvalidArgument, "capacity = -1");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// convert.h: ragged_to_padded / padded_to_ragged
// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("conversions reject bad arguments and name them", "[convert][errors]") {
  std::vector<float> values(12), padded(12);
  std::vector<std::int32_t> offsets = {0, 2, 6};
  const RaggedView<const float, std::int32_t> src{values.data(), offsets.data(), 2, 6, 2};
  const PaddedView<float> dst{padded.data(), 2, 3, 2};
  std::size_t bytes = 777;
  auto to_padded = [&](RaggedView<const float, std::int32_t> s, PaddedView<float> d, Align align = Align::kLeft,
                       Truncate trunc = Truncate::kRight) {
    return ragged_to_padded(nullptr, bytes, s, d, 0.0f, align, trunc, nullptr);
  };

  REQUIRE_OK(to_padded(src, dst));
  REQUIRE(bytes == 1);

  // Negative sizes.
  auto s = src;
  s.batch = -1;
  REQUIRE_FAILS(to_padded(s, dst), Status::kInvalidArgument, "src.batch");
  s = src;
  s.nnz = -3;
  REQUIRE_FAILS(to_padded(s, dst), Status::kInvalidArgument, "src.nnz");
  s = src;
  s.inner = -1;
  REQUIRE_FAILS(to_padded(s, dst), Status::kInvalidArgument, "src.inner");
  auto d = dst;
  d.max_len = -1;
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "dst.max_len");
  d = dst;
  d.inner = -2;
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "dst.inner");
  d = dst;
  d.batch = -1;
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "dst.batch");

  // Shapes that disagree.
  d = dst;
  d.batch = 3;
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "batch");
  d = dst;
  d.inner = 3;
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "inner");

  // Null pointers where something must be held; null is fine when nothing is.
  s = src;
  s.values = nullptr;
  REQUIRE_FAILS(to_padded(s, dst), Status::kNullPointer, "src.values");
  s.nnz = 0;
  REQUIRE_OK(to_padded(s, dst));
  s = src;
  s.offsets = nullptr;
  REQUIRE_FAILS(to_padded(s, dst), Status::kNullPointer, "src.offsets");
  d = dst;
  d.data = nullptr;
  REQUIRE_FAILS(to_padded(src, d), Status::kNullPointer, "dst.data");

  // Byte counts beyond int64 / size_t, and batches too large for their offsets.
  const std::int64_t huge = std::int64_t{1} << 40;
  s = src;
  s.batch = huge;
  d = dst;
  d.batch = huge;
  d.max_len = huge;
  REQUIRE_FAILS(to_padded(s, d), Status::kSizeOverflow, "dst.data");
  s = src;
  s.nnz = kInt64Max / 2;
  REQUIRE_FAILS(to_padded(s, dst), Status::kSizeOverflow, "src.values");
  s = src;
  s.batch = kInt64Max;
  REQUIRE_FAILS(to_padded(s, dst), Status::kSizeOverflow, "src.batch");
  d = dst;
  d.batch = kInt64Max;
  REQUIRE_FAILS(to_padded(src, d), Status::kSizeOverflow, "dst.batch");
  s = src;
  s.batch = kMaxBatch + 1;
  REQUIRE_FAILS(to_padded(s, dst), Status::kSizeOverflow, "src.batch");
  // No tokens and no slots, but rows whose bytes (inner * 4) overflow: the launch computes them, so they are
  // checked on their own.
  s = src;
  s.nnz = 0;
  s.inner = kInt64Max / 2;
  d = dst;
  d.max_len = 0;
  d.inner = s.inner;
  REQUIRE_FAILS(to_padded(s, d), Status::kSizeOverflow, "src.inner");

  // Typed pointers not aligned to their element, and enum values out of range.
  s = src;
  s.values = shifted(s.values);
  REQUIRE_FAILS(to_padded(s, dst), Status::kInvalidArgument, "src.values is not aligned");
  s = src;
  s.offsets = shifted(s.offsets, 2);
  REQUIRE_FAILS(to_padded(s, dst), Status::kInvalidArgument, "src.offsets is not aligned");
  d = dst;
  d.data = shifted(d.data, 2);
  REQUIRE_FAILS(to_padded(src, d), Status::kInvalidArgument, "dst.data is not aligned");
  REQUIRE_FAILS(to_padded(src, dst, static_cast<Align>(7)), Status::kInvalidArgument, "align");
  REQUIRE_FAILS(to_padded(src, dst, Align::kLeft, static_cast<Truncate>(-1)), Status::kInvalidArgument, "trunc");

  // padded_to_ragged checks the same things with the roles swapped.
  const PaddedView<const float> psrc{padded.data(), 2, 3, 2};
  const RaggedView<float, std::int32_t> rdst{values.data(), offsets.data(), 2, 6, 2};
  auto to_ragged = [&](PaddedView<const float> p, RaggedView<float, std::int32_t> r) {
    return padded_to_ragged(nullptr, bytes, p, r, 0.0f, Align::kLeft, Truncate::kRight, nullptr);
  };
  bytes = 777;
  REQUIRE_OK(to_ragged(psrc, rdst));
  REQUIRE(bytes == 1);
  auto p = psrc;
  p.batch = 1;
  REQUIRE_FAILS(to_ragged(p, rdst), Status::kInvalidArgument, "batch");
  p = psrc;
  p.data = nullptr;
  REQUIRE_FAILS(to_ragged(p, rdst), Status::kNullPointer, "src.data");
  p.max_len = 0;  // no slots: nothing to read, null is fine
  REQUIRE_OK(to_ragged(p, rdst));
  p = psrc;
  p.batch = kInt64Max;
  REQUIRE_FAILS(to_ragged(p, rdst), Status::kSizeOverflow, "src.batch");
  p = psrc;
  p.data = shifted(p.data, 3);
  REQUIRE_FAILS(to_ragged(p, rdst), Status::kInvalidArgument, "src.data is not aligned");
  auto r = rdst;
  r.values = nullptr;
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kNullPointer, "dst.values");
  r = rdst;
  r.inner = 1;
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kInvalidArgument, "inner");
  r = rdst;
  r.batch = kInt64Max;
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kSizeOverflow, "dst.batch");
  r = rdst;
  r.offsets = shifted(r.offsets, 1);
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kInvalidArgument, "dst.offsets is not aligned");
  r = rdst;
  r.nnz = -1;
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kInvalidArgument, "dst.nnz");
  r = rdst;
  r.inner = -2;
  REQUIRE_FAILS(to_ragged(psrc, r), Status::kInvalidArgument, "dst.inner");
  REQUIRE_FAILS(padded_to_ragged(nullptr, bytes, psrc, rdst, 0.0f, static_cast<Align>(2), Truncate::kRight, nullptr),
                Status::kInvalidArgument, "align");
  REQUIRE_FAILS(padded_to_ragged(nullptr, bytes, psrc, rdst, 0.0f, Align::kRight, static_cast<Truncate>(5), nullptr),
                Status::kInvalidArgument, "trunc");
}

// ---------------------------------------------------------------------------------------------------------------
// convert.h: masks
// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("masks reject bad arguments and name them", "[mask][errors]") {
  std::int32_t lengths[2] = {3, 1};
  std::int64_t lengths64[2] = {3, 1};
  bool mask[8] = {};
  half additive[8];
  float additive_float[8];
  CheckResult check;
  std::size_t bytes = 777;

  REQUIRE_OK(lengths_to_mask(nullptr, bytes, lengths, 2, 4, Align::kLeft, mask, nullptr, nullptr));
  REQUIRE(bytes == 1);
  bytes = 777;
  REQUIRE_OK(lengths_to_mask(nullptr, bytes, lengths64, 2, 4, Align::kRight, mask, &check, nullptr));
  REQUIRE(bytes == 1);
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, -1, 4, Align::kLeft, mask, nullptr, nullptr),
                Status::kInvalidArgument, "batch");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, 2, -4, Align::kLeft, mask, nullptr, nullptr),
                Status::kInvalidArgument, "max_len");
  REQUIRE_FAILS(lengths_to_mask<std::int32_t>(nullptr, bytes, nullptr, 2, 4, Align::kLeft, mask, nullptr, nullptr),
                Status::kNullPointer, "lengths");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, 2, 4, Align::kLeft, nullptr, nullptr, nullptr),
                Status::kNullPointer, "mask");
  // Nothing to write (max_len 0) or to read (batch 0): null is fine.
  REQUIRE_OK(lengths_to_mask(nullptr, bytes, lengths, 2, 0, Align::kLeft, nullptr, nullptr, nullptr));
  REQUIRE_OK(lengths_to_mask<std::int32_t>(nullptr, bytes, nullptr, 0, 4, Align::kLeft, nullptr, nullptr, nullptr));
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, 2, 4, static_cast<Align>(3), mask, nullptr, nullptr),
                Status::kInvalidArgument, "align");
  const std::int64_t huge = std::int64_t{1} << 40;
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, huge, huge, Align::kLeft, mask, nullptr, nullptr),
                Status::kSizeOverflow, "mask");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, kInt64Max, 4, Align::kLeft, mask, &check, nullptr),
                Status::kSizeOverflow, "batch");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths64, kMaxBatch + 1, 0, Align::kLeft, mask, nullptr, nullptr),
                Status::kSizeOverflow, "batch");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, shifted(lengths, 2), 2, 4, Align::kLeft, mask, nullptr, nullptr),
                Status::kInvalidArgument, "lengths is not aligned");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, shifted(lengths64, 4), 2, 4, Align::kLeft, mask, &check, nullptr),
                Status::kInvalidArgument, "lengths is not aligned");
  REQUIRE_FAILS(lengths_to_mask(nullptr, bytes, lengths, 2, 4, Align::kLeft, mask, shifted(&check, 4), nullptr),
                Status::kInvalidArgument, "check is not aligned");

  bytes = 777;
  REQUIRE_OK(lengths_to_additive_mask(nullptr, bytes, lengths, 2, 4, Align::kRight, additive, &check, nullptr));
  REQUIRE(bytes == 1);
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, lengths, 2, 4, Align::kRight, shifted(additive), nullptr,
                                         nullptr),
                Status::kInvalidArgument, "mask is not aligned");
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, lengths, 2, 4, Align::kRight, shifted(additive_float, 2),
                                         nullptr, nullptr),
                Status::kInvalidArgument, "mask is not aligned");
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, lengths, 2, 4, Align::kRight, static_cast<float*>(nullptr),
                                         nullptr, nullptr),
                Status::kNullPointer, "mask");
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, lengths64, kInt64Max, 4, Align::kLeft, additive_float,
                                         &check, nullptr),
                Status::kSizeOverflow, "batch");
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, shifted(lengths64, 4), 2, 4, Align::kLeft, additive,
                                         nullptr, nullptr),
                Status::kInvalidArgument, "lengths is not aligned");
  REQUIRE_FAILS(lengths_to_additive_mask(nullptr, bytes, lengths, 2, 4, static_cast<Align>(-1), additive_float,
                                         nullptr, nullptr),
                Status::kInvalidArgument, "align");
}

// ---------------------------------------------------------------------------------------------------------------
// packing.h
// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("packing bad arguments are refused with a message naming them", "[packing][errors]") {
  std::int32_t offsets_storage[3] = {0, 2, 3};
  std::int64_t indices[2] = {0, 1}, inverse[2] = {0, 1};
  std::int32_t lengths[2] = {2, 1}, sizes[2] = {2, 1}, steps[3] = {0, 2, 3};
  const PackedLayout<std::int32_t> good{2, 2, indices, inverse, lengths, sizes, steps};
  std::size_t bytes = 0;
  // Every call below fails before packing_order asks CUB for its temp size.
  auto order = [&](const std::int32_t* offsets, PackedLayout<std::int32_t> layout) {
    return packing_order<std::int32_t>(nullptr, bytes, offsets, layout, nullptr, nullptr);
  };

  PackedLayout<std::int32_t> layout = good;
  layout.batch = -1;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kInvalidArgument, "layout.batch");
  layout = good;
  layout.max_steps = -3;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kInvalidArgument, "max_steps");
  layout.max_steps = kInt64Max;  // step_offsets would need max_steps + 1 entries
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kSizeOverflow, "max_steps");
  // Bounded as a batch is: past it, the scan and the grid over max_steps + 1 items would overflow.
  for (const std::int64_t steps : {kMaxBatch + 1, kInt64Max - 1}) {
    layout.max_steps = steps;
    REQUIRE_FAILS(order(offsets_storage, layout), Status::kSizeOverflow, "layout.max_steps");
  }
  REQUIRE_FAILS(order(nullptr, good), Status::kNullPointer, "offsets");
  PackedLayout<std::int32_t> empty{0, 0, nullptr, nullptr, nullptr, nullptr, steps};
  REQUIRE_FAILS(order(nullptr, empty), Status::kNullPointer, "offsets");  // offsets always hold batch + 1
  empty.step_offsets = nullptr;
  REQUIRE_FAILS(order(offsets_storage, empty), Status::kNullPointer, "step_offsets");
  layout = good;
  layout.sorted_indices = nullptr;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kNullPointer, "sorted_indices");
  layout = good;
  layout.unsorted_indices = nullptr;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kNullPointer, "unsorted_indices");
  layout = good;
  layout.sorted_lengths = nullptr;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kNullPointer, "sorted_lengths");
  layout = good;
  layout.batch_sizes = nullptr;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kNullPointer, "batch_sizes");
  // A batch whose counts cannot be held by int32 batch_sizes.
  layout = good;
  layout.batch = std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kSizeOverflow, "int32");
  // A batch whose offsets cannot exist, whatever the offset type.
  layout = good;
  layout.batch = kInt64Max;
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kSizeOverflow, "layout.batch");
  std::int64_t offsets64[3] = {0, 2, 3};
  std::int64_t lengths64[2] = {2, 1}, sizes64[2] = {2, 1}, steps64[3] = {0, 2, 3};
  PackedLayout<std::int64_t> layout64{kInt64Max, 2, indices, inverse, lengths64, sizes64, steps64};
  REQUIRE_FAILS(packing_order<std::int64_t>(nullptr, bytes, offsets64, layout64, nullptr, nullptr),
                Status::kSizeOverflow, "layout.batch");
  // Layout arrays and offsets not aligned to their elements.
  REQUIRE_FAILS(order(shifted(offsets_storage, 2), good), Status::kInvalidArgument, "offsets is not aligned");
  layout64.batch = 2;
  REQUIRE_FAILS(packing_order<std::int64_t>(nullptr, bytes, shifted(offsets64, 4), layout64, nullptr, nullptr),
                Status::kInvalidArgument, "offsets is not aligned");
  layout = good;
  layout.sorted_indices = shifted(layout.sorted_indices, 4);
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kInvalidArgument, "sorted_indices is not aligned");
  layout = good;
  layout.step_offsets = shifted(layout.step_offsets, 1);
  REQUIRE_FAILS(order(offsets_storage, layout), Status::kInvalidArgument, "step_offsets is not aligned");

  // pack / unpack: no workspace, so their queries succeed without a CUDA call.
  float values[3] = {1, 2, 3}, packed[3] = {};
  const RaggedView<const float, std::int32_t> src{values, offsets_storage, 2, 3, 1};
  auto pack = [&](RaggedView<const float, std::int32_t> view, PackedLayout<std::int32_t> l, float* out) {
    return pack_sequences<float, std::int32_t>(nullptr, bytes, view, l, out, nullptr);
  };
  bytes = 777;
  REQUIRE_OK(pack(src, good, packed));
  REQUIRE(bytes == 1);
  REQUIRE_FAILS(pack(src, good, nullptr), Status::kNullPointer, "packed");
  auto bad = src;
  bad.values = nullptr;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kNullPointer, "src.values");
  bad = src;
  bad.batch = 3;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kInvalidArgument, "src.batch");
  bad = src;
  bad.nnz = -1;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kInvalidArgument, "src.nnz");
  bad = src;
  bad.inner = -2;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kInvalidArgument, "src.inner");
  bad = src;
  bad.nnz = kInt64Max / 2;
  bad.inner = 4;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kSizeOverflow, "src");
  // No tokens, but rows whose bytes (inner * 4) overflow: the row size is checked on its own.
  bad = src;
  bad.nnz = 0;
  bad.inner = kInt64Max / 2;
  REQUIRE_FAILS(pack(bad, good, packed), Status::kSizeOverflow, "src.inner");
  bad = src;
  bad.batch = kInt64Max;
  layout = good;
  layout.batch = kInt64Max;
  REQUIRE_FAILS(pack(bad, layout, packed), Status::kSizeOverflow, "src.batch");
  bad = src;
  bad.offsets = shifted(bad.offsets, 2);
  REQUIRE_FAILS(pack(bad, good, packed), Status::kInvalidArgument, "src.offsets is not aligned");
  bad = src;
  bad.values = shifted(bad.values, 1);
  REQUIRE_FAILS(pack(bad, good, packed), Status::kInvalidArgument, "src.values is not aligned");
  layout = good;
  layout.max_steps = -1;
  REQUIRE_FAILS(pack(src, layout, packed), Status::kInvalidArgument, "max_steps");
  layout.max_steps = kMaxBatch + 1;
  REQUIRE_FAILS(pack(src, layout, packed), Status::kSizeOverflow, "layout.max_steps");
  layout = good;
  layout.step_offsets = nullptr;
  REQUIRE_FAILS(pack(src, layout, packed), Status::kNullPointer, "layout.step_offsets");
  layout = good;
  layout.sorted_indices = nullptr;
  REQUIRE_FAILS(pack(src, layout, packed), Status::kNullPointer, "layout.sorted_indices");
  layout = good;
  layout.sorted_indices = shifted(layout.sorted_indices, 2);
  REQUIRE_FAILS(pack(src, layout, packed), Status::kInvalidArgument, "layout.sorted_indices is not aligned");
  REQUIRE_FAILS(pack(src, good, shifted(packed, 2)), Status::kInvalidArgument, "packed is not aligned");

  float out[3] = {};
  const RaggedView<float, std::int32_t> dst{out, offsets_storage, 2, 3, 1};
  bytes = 777;
  REQUIRE_OK((unpack_sequences<float, std::int32_t>(nullptr, bytes, packed, good, dst, nullptr)));
  REQUIRE(bytes == 1);
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, nullptr, good, dst, nullptr)),
                Status::kNullPointer, "packed");
  auto bad_dst = dst;
  bad_dst.batch = 1;
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, packed, good, bad_dst, nullptr)),
                Status::kInvalidArgument, "dst.batch");
  bad_dst = dst;
  bad_dst.offsets = nullptr;
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, packed, good, bad_dst, nullptr)),
                Status::kNullPointer, "dst.offsets");
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, shifted(packed, 1), good, dst, nullptr)),
                Status::kInvalidArgument, "packed is not aligned");
  bad_dst = dst;
  bad_dst.offsets = shifted(bad_dst.offsets, 3);
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, packed, good, bad_dst, nullptr)),
                Status::kInvalidArgument, "dst.offsets is not aligned");
  bad_dst = dst;
  bad_dst.batch = kInt64Max;
  layout = good;
  layout.batch = kInt64Max;
  REQUIRE_FAILS((unpack_sequences<float, std::int32_t>(nullptr, bytes, packed, layout, bad_dst, nullptr)),
                Status::kSizeOverflow, "dst.batch");
}

// ---------------------------------------------------------------------------------------------------------------
// segment_reduce.h
// ---------------------------------------------------------------------------------------------------------------

// Every call below fails before the op asks CUB for the temp size of its plan.
TEMPLATE_TEST_CASE("segment_reduce reports bad arguments", "[segment][errors]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(405);
  const auto host = test::random_ragged<float, OffsetT>({3, 0, 4}, 2, rng);
  const RaggedView<const float, OffsetT> good = host.view();
  std::vector<float> out(6), grad_out(6), grad_in(14);
  std::vector<std::int64_t> arg(6);
  std::size_t bytes = 0;

  SECTION("an arg output for sum or mean, an unknown op") {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      REQUIRE_FAILS(segment_reduce(nullptr, bytes, good, op, out.data(), arg.data(), 0.0f, nullptr),
                    Status::kInvalidArgument, "arg");
    }
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, good, static_cast<ReduceOp>(9), out.data(), nullptr, 0.0f, nullptr),
                  Status::kInvalidArgument, "ReduceOp");
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, good, op, grad_out.data(), arg.data(), grad_in.data(),
                                            nullptr),
                    Status::kInvalidArgument, "arg given for");
    }
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, good, static_cast<ReduceOp>(-1), grad_out.data(), nullptr,
                                          grad_in.data(), nullptr),
                  Status::kInvalidArgument, "ReduceOp");
  }
  SECTION("null pointers with a non-zero size") {
    auto view = good;
    view.values = nullptr;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kNullPointer, "values");
    view = good;
    view.offsets = nullptr;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kNullPointer, "offsets");
    REQUIRE_FAILS((segment_reduce<float, OffsetT>(nullptr, bytes, good, ReduceOp::kMax, nullptr, arg.data(), 0.0f,
                                                  nullptr)),
                  Status::kNullPointer, "out");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, good, ReduceOp::kMax, grad_out.data(), nullptr,
                                          grad_in.data(), nullptr),
                  Status::kNullPointer, "arg");
    REQUIRE_FAILS((segment_reduce_backward<float, OffsetT>(nullptr, bytes, good, ReduceOp::kSum, nullptr, nullptr,
                                                           grad_in.data(), nullptr)),
                  Status::kNullPointer, "grad_out");
    REQUIRE_FAILS((segment_reduce_backward<float, OffsetT>(nullptr, bytes, good, ReduceOp::kSum, grad_out.data(),
                                                           nullptr, nullptr, nullptr)),
                  Status::kNullPointer, "grad_in");
  }
  SECTION("negative sizes") {
    auto view = good;
    view.batch = -1;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kInvalidArgument, "batch");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, view, ReduceOp::kSum, grad_out.data(), nullptr,
                                          grad_in.data(), nullptr),
                  Status::kInvalidArgument, "batch");
    view = good;
    view.nnz = -2;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kInvalidArgument, "nnz");
    view = good;
    for (std::int64_t inner : {-3, 0}) {  // the ops need at least one column
      view.inner = inner;
      REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                    Status::kUnsupportedShape, "inner");
      REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, view, ReduceOp::kMean, grad_out.data(), nullptr,
                                            grad_in.data(), nullptr),
                    Status::kUnsupportedShape, "inner");
    }
  }
  SECTION("sizes too large") {
    auto view = good;
    view.batch = kInt64Max;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, view, ReduceOp::kMax, grad_out.data(), arg.data(),
                                          grad_in.data(), nullptr),
                  Status::kSizeOverflow, "batch");
    view = good;
    view.nnz = kInt64Max / 2;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kSizeOverflow, "values");
    // A batch and an inner size that each fit, and values of one token, but a [batch, inner] output past int64.
    view = good;
    view.batch = std::int64_t{1} << 27;
    view.inner = std::int64_t{1} << 36;
    view.nnz = 1;
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kSizeOverflow, "output");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, view, ReduceOp::kMean, grad_out.data(), nullptr,
                                          grad_in.data(), nullptr),
                  Status::kSizeOverflow, "output");
  }
  SECTION("pointers not aligned to their elements") {
    auto view = good;
    view.offsets = shifted(view.offsets, 2);
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr),
                  Status::kInvalidArgument, "offsets is not aligned");
    view = good;
    view.values = shifted(view.values, 1);
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, view, ReduceOp::kMin, out.data(), nullptr, 0.0f, nullptr),
                  Status::kInvalidArgument, "values is not aligned");
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, good, ReduceOp::kSum, shifted(out.data(), 2), nullptr, 0.0f,
                                 nullptr),
                  Status::kInvalidArgument, "out is not aligned");
    REQUIRE_FAILS(segment_reduce(nullptr, bytes, good, ReduceOp::kMax, out.data(), shifted(arg.data(), 4), 0.0f,
                                 nullptr),
                  Status::kInvalidArgument, "arg is not aligned");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, good, ReduceOp::kMax, grad_out.data(),
                                          shifted(arg.data(), 4), grad_in.data(), nullptr),
                  Status::kInvalidArgument, "arg is not aligned");
    REQUIRE_FAILS(segment_reduce_backward(nullptr, bytes, good, ReduceOp::kSum, grad_out.data(), nullptr,
                                          shifted(grad_in.data(), 2), nullptr),
                  Status::kInvalidArgument, "grad_in is not aligned");
  }
}

TEMPLATE_TEST_CASE("segment_softmax reports bad arguments", "[segment][errors]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(504);
  const auto host = test::random_ragged<float, OffsetT>({3, 0, 4}, 2, rng);
  const RaggedView<const float, OffsetT> good = host.view();
  std::vector<float> out(14), grad_out(14), grad_in(14);
  std::size_t bytes = 0;

  SECTION("null pointers with a non-zero size") {
    auto view = good;
    view.values = nullptr;
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kNullPointer, "values");
    view = good;
    view.offsets = nullptr;
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kNullPointer,
                  "offsets");
    REQUIRE_FAILS((segment_softmax<float, OffsetT>(nullptr, bytes, good, true, nullptr, nullptr)),
                  Status::kNullPointer, "out");
    REQUIRE_FAILS((segment_softmax_backward<float, OffsetT>(nullptr, bytes, good, false, nullptr, grad_out.data(),
                                                            grad_in.data(), nullptr)),
                  Status::kNullPointer, "out");
    REQUIRE_FAILS((segment_softmax_backward<float, OffsetT>(nullptr, bytes, good, false, out.data(), nullptr,
                                                            grad_in.data(), nullptr)),
                  Status::kNullPointer, "grad_out");
    REQUIRE_FAILS((segment_softmax_backward<float, OffsetT>(nullptr, bytes, good, true, out.data(), grad_out.data(),
                                                            nullptr, nullptr)),
                  Status::kNullPointer, "grad_in");
  }
  SECTION("negative sizes") {
    auto view = good;
    view.batch = -4;
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kInvalidArgument,
                  "batch");
    REQUIRE_FAILS(segment_softmax_backward(nullptr, bytes, view, false, out.data(), grad_out.data(), grad_in.data(),
                                           nullptr),
                  Status::kInvalidArgument, "batch");
    view = good;
    view.nnz = -1;
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kInvalidArgument, "nnz");
    view = good;
    for (std::int64_t inner : {-1, 0}) {
      view.inner = inner;
      REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, true, out.data(), nullptr), Status::kUnsupportedShape,
                    "inner");
      REQUIRE_FAILS(segment_softmax_backward(nullptr, bytes, view, true, out.data(), grad_out.data(),
                                             grad_in.data(), nullptr),
                    Status::kUnsupportedShape, "inner");
    }
  }
  SECTION("sizes too large and pointers not aligned to their elements") {
    auto view = good;
    view.batch = kInt64Max;
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kSizeOverflow, "batch");
    REQUIRE_FAILS(segment_softmax_backward(nullptr, bytes, view, false, out.data(), grad_out.data(), grad_in.data(),
                                           nullptr),
                  Status::kSizeOverflow, "batch");
    view = good;
    view.offsets = shifted(view.offsets, 1);
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, view, false, out.data(), nullptr), Status::kInvalidArgument,
                  "offsets is not aligned");
    REQUIRE_FAILS(segment_softmax(nullptr, bytes, good, false, shifted(out.data(), 2), nullptr),
                  Status::kInvalidArgument, "out is not aligned");
    REQUIRE_FAILS(segment_softmax_backward(nullptr, bytes, good, true, out.data(), shifted(grad_out.data(), 3),
                                           grad_in.data(), nullptr),
                  Status::kInvalidArgument, "grad_out is not aligned");
  }
  SECTION("no [batch, inner] size is checked: softmax's outputs are [nnz, inner]") {
    // batch x inner x 8 bytes overflows int64 (a reduction's output would), nnz x inner does not: the call gets
    // past the size checks to the next argument, the null output.
    auto view = good;
    view.batch = std::int64_t{1} << 27;
    view.nnz = 1;
    view.inner = std::int64_t{1} << 36;
    REQUIRE_FAILS((segment_softmax<float, OffsetT>(nullptr, bytes, view, false, nullptr, nullptr)),
                  Status::kNullPointer, "out is null");
    REQUIRE_FAILS((segment_softmax_backward<float, OffsetT>(nullptr, bytes, view, false, nullptr, grad_out.data(),
                                                            grad_in.data(), nullptr)),
                  Status::kNullPointer, "out is null");
  }
}

// With no values every row is empty (rows are clamped to [0, nnz)), so no row has partials: the workspace is the
// plan's, whatever the inner size. It used to hold one chunk of inner floats (4 TiB here) per partial array.
TEMPLATE_TEST_CASE("segment ops without values ask for no partials", "[segment][workspace]", std::int32_t,
                   std::int64_t) {
  using OffsetT = TestType;
  const std::vector<OffsetT> offsets(4, 0);
  RaggedView<const float, OffsetT> view{nullptr, offsets.data(), 3, 0, std::int64_t{1} << 40};
  float out = 0.0f;
  std::int64_t arg = 0;
  const std::size_t plan_scale = 1 << 20;
  std::size_t bytes = 0;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    REQUIRE_OK(segment_reduce(nullptr, bytes, view, op, &out, op == ReduceOp::kMax ? &arg : nullptr, 0.0f, nullptr));
    CHECK(bytes < plan_scale);
    REQUIRE_OK(segment_reduce_backward(nullptr, bytes, view, op, &out, op == ReduceOp::kMax ? &arg : nullptr, &out,
                                       nullptr));
    CHECK(bytes < plan_scale);
  }
  for (bool log : {false, true}) {
    REQUIRE_OK(segment_softmax(nullptr, bytes, view, log, &out, nullptr));
    CHECK(bytes < plan_scale);
    REQUIRE_OK(segment_softmax_backward(nullptr, bytes, view, log, &out, &out, &out, nullptr));
    CHECK(bytes < plan_scale);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// attention.h: every check runs before the first CUDA call, in the query phase and in the run phase alike.
// ---------------------------------------------------------------------------------------------------------------

// operator new's alignment is what makes the host vectors below stand in for 16-byte aligned device buffers.
static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16, "host vectors must be 16-byte aligned like cudaMalloc");

TEST_CASE("attention rejects bad arguments", "[attention][errors]") {
  auto rng = test::make_rng(608);
  const auto h = test::random_attention<half, std::int32_t>({10, 20}, {15, 5}, 4, 2, 64, false, rng);
  std::vector<half> o(static_cast<std::size_t>(h.o_elems()));
  std::vector<float> lse(static_cast<std::size_t>(h.lse_elems()));
  const AttentionArgs<half, std::int32_t> good = h.host_args(o.data(), lse.data());
  std::size_t bytes = 777;
  REQUIRE_OK(varlen_attention_forward(nullptr, bytes, good, nullptr));
  REQUIRE(bytes == 1);
  // The same sequences in a padded layout pass too.
  const auto p = test::to_padded(h, 20, 16, rng);
  std::vector<half> po(static_cast<std::size_t>(p.o_elems()));
  bytes = 777;
  REQUIRE_OK(varlen_attention_forward(nullptr, bytes, p.host_args(po.data(), nullptr), nullptr));
  REQUIRE(bytes == 1);

  struct Bad {
    const char* what;
    Status expected;
    const char* word;  // the message names it
    std::function<void(AttentionArgs<half, std::int32_t>&)> change;
  };
  const Bad cases[] = {
      {"heads_kv does not divide heads_q", Status::kInvalidArgument, "heads_kv", [](auto& a) { a.heads_kv = 3; }},
      {"heads_q = 0", Status::kInvalidArgument, "heads_q", [](auto& a) { a.heads_q = 0; }},
      {"head_dim 96", Status::kUnsupportedShape, "head_dim", [](auto& a) { a.head_dim = 96; }},
      {"head_dim 256", Status::kUnsupportedShape, "head_dim", [](auto& a) { a.head_dim = 256; }},
      {"query_tile 96", Status::kInvalidArgument, "query_tile", [](auto& a) { a.query_tile = 96; }},
      {"query_tile 32 (the float kernel's)", Status::kInvalidArgument, "query_tile",
       [](auto& a) { a.query_tile = 32; }},
      {"scale 0", Status::kInvalidArgument, "scale", [](auto& a) { a.scale = 0.0f; }},
      {"scale < 0", Status::kInvalidArgument, "scale", [](auto& a) { a.scale = -0.125f; }},
      {"scale NaN", Status::kInvalidArgument, "scale",
       [](auto& a) { a.scale = std::numeric_limits<float>::quiet_NaN(); }},
      {"scale infinite", Status::kInvalidArgument, "scale",
       [](auto& a) { a.scale = std::numeric_limits<float>::infinity(); }},
      {"negative batch", Status::kInvalidArgument, "batch", [](auto& a) { a.batch = -1; }},
      {"batch = INT64_MAX", Status::kSizeOverflow, "batch", [](auto& a) { a.batch = kInt64Max; }},
      {"batch one past the largest", Status::kSizeOverflow, "batch", [](auto& a) { a.batch = kMaxBatch + 1; }},
      {"null q", Status::kNullPointer, "q is null", [](auto& a) { a.q.data = nullptr; }},
      {"null k", Status::kNullPointer, "k is null", [](auto& a) { a.k.data = nullptr; }},
      {"null v", Status::kNullPointer, "v is null", [](auto& a) { a.v.data = nullptr; }},
      {"null o", Status::kNullPointer, "o is null", [](auto& a) { a.o.data = nullptr; }},
      {"null q offsets and lengths", Status::kNullPointer, "q_seq", [](auto& a) { a.q_seq.offsets = nullptr; }},
      {"offsets and lengths", Status::kInvalidArgument, "k_seq", [](auto& a) { a.k_seq.lengths = a.k_seq.offsets; }},
      {"padded rows != batch * max_len", Status::kInvalidArgument, "rows",
       [](auto& a) {
         a.q_seq = SequenceLayout<std::int32_t>::padded(a.q_seq.offsets, a.batch, 20);
         a.q_seq.rows = 41;
       }},
      {"padded batch * max_len overflows", Status::kSizeOverflow, "max_len",
       [](auto& a) {
         a.q_seq = SequenceLayout<std::int32_t>::padded(a.q_seq.offsets, a.batch, 20);
         a.q_seq.max_len = kInt64Max / 2 + 1;
       }},
      {"negative padded max_len", Status::kInvalidArgument, "max_len",
       [](auto& a) {
         a.k_seq = SequenceLayout<std::int32_t>::padded(a.k_seq.offsets, a.batch, 0);
         a.k_seq.max_len = -1;
       }},
      {"negative rows", Status::kInvalidArgument, "k_seq.rows", [](auto& a) { a.k_seq.rows = -1; }},
      {"q offsets not aligned", Status::kInvalidArgument, "q_seq.offsets is not aligned",
       [](auto& a) { a.q_seq.offsets = shifted(a.q_seq.offsets, 2); }},
      {"k offsets not aligned", Status::kInvalidArgument, "k_seq.offsets is not aligned",
       [](auto& a) { a.k_seq.offsets = shifted(a.k_seq.offsets, 1); }},
      {"padded lengths not aligned", Status::kInvalidArgument, "q_seq.lengths is not aligned",
       [](auto& a) { a.q_seq = SequenceLayout<std::int32_t>::padded(shifted(a.q_seq.offsets, 2), a.batch, 20); }},
      {"lse not aligned", Status::kInvalidArgument, "lse is not aligned", [](auto& a) { a.lse = shifted(a.lse, 2); }},
      {"rows * heads * head_dim overflows", Status::kSizeOverflow, "q has too many elements",
       [](auto& a) { a.q_seq.rows = kInt64Max / 64; }},
      {"k rows * heads * head_dim overflows", Status::kSizeOverflow, "k has too many elements",
       [](auto& a) { a.k_seq.rows = kInt64Max / 64; }},
      {"the last head's offset overflows", Status::kSizeOverflow, "q: heads * head_stride overflows",
       [](auto& a) { a.q.head_stride = std::int64_t{1} << 61; }},
      {"the last token's offset overflows", Status::kSizeOverflow, "k: rows * token_stride overflows",
       [](auto& a) { a.k.token_stride = std::int64_t{1} << 60; }},
      {"token stride not a multiple of 8 halves", Status::kInvalidArgument, "k: token_stride",
       [](auto& a) { a.k.token_stride = 132; }},
      {"negative head stride", Status::kInvalidArgument, "v: strides", [](auto& a) { a.v.head_stride = -64; }},
      {"misaligned o", Status::kInvalidArgument, "o must be 16-byte aligned", [](auto& a) { a.o.data = a.o.data + 1; }},
      {"misaligned q", Status::kInvalidArgument, "q must be 16-byte aligned", [](auto& a) { a.q.data = a.q.data + 4; }},
      {"query-tile slots past the grid (rows / tile + batch)", Status::kSizeOverflow, "query-tile slots",
       [](auto& a) { a.batch = std::int64_t{1} << 31; }},
      {"heads_q > 65535", Status::kUnsupportedShape, "65535",
       [](auto& a) {
         a.heads_q = 70000;
         a.heads_kv = 70000;
       }},
      {"padded batch * max_len overflows in SequenceLayout::padded", Status::kSizeOverflow, "max_len",
       [](auto& a) { a.q_seq = SequenceLayout<std::int32_t>::padded(a.q_seq.offsets, a.batch, kInt64Max / 2 + 1); }},
      {"o's heads overlap (head_stride < head_dim)", Status::kInvalidArgument, "overlap",
       [](auto& a) { a.o.head_stride = 32; }},
      {"o's tokens overlap (token_stride 0)", Status::kInvalidArgument, "o: token_stride is 0",
       [](auto& a) { a.o.token_stride = 0; }},
      {"q's token_stride left at HeadsView's 0", Status::kInvalidArgument, "q: token_stride is 0",
       [](auto& a) { a.q.token_stride = 0; }},
      {"v's head_stride left at HeadsView's 0", Status::kInvalidArgument, "v: head_stride is 0",
       [](auto& a) { a.v.head_stride = 0; }},
      {"o's token 1 is token 0's head 2", Status::kInvalidArgument, "overlap",
       [](auto& a) { a.o.token_stride = 128; }},
      {"o's head 1 of token 0 is head 0 of token 29", Status::kInvalidArgument, "overlap",
       [](auto& a) {
         a.o.token_stride = 64;
         a.o.head_stride = 29 * 64;
       }},
      {"more key rows than int key tiles (overlapping K / V rows)", Status::kSizeOverflow, "k_seq.rows",
       [](auto& a) {
         a.k.token_stride = 8;
         a.v.token_stride = 8;
         a.k_seq.rows = std::int64_t{32} * std::numeric_limits<int>::max() + 1;
       }},
  };
  for (const Bad& c : cases) {
    INFO(c.what);
    AttentionArgs<half, std::int32_t> a = good;
    c.change(a);
    std::size_t query_bytes = 0;
    REQUIRE_FAILS(varlen_attention_forward(nullptr, query_bytes, a, nullptr), c.expected, c.word);
    unsigned char workspace[1];  // the run phase checks the same before it touches the device
    REQUIRE_FAILS(varlen_attention_forward(workspace, bytes, a, nullptr), c.expected, c.word);
  }
  // O layouts whose rows do not overlap pass: head-major, gaps between tokens or heads, interleaved heads.
  std::vector<half> wide(static_cast<std::size_t>(h.o_elems()) * 4);
  const std::int64_t rows = good.q_seq.rows;
  const std::int64_t layouts[][2] = {{64, rows * 64}, {512, 64}, {256 * 3, 128}, {64 * 4 + 64, 128 + 64}};
  for (const auto& strides : layouts) {
    INFO("o token_stride " << strides[0] << ", head_stride " << strides[1]);
    AttentionArgs<half, std::int32_t> a = good;
    a.o = HeadsView<half>{wide.data(), strides[0], strides[1]};
    REQUIRE_OK(varlen_attention_forward(nullptr, bytes, a, nullptr));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// rnn.h: rnn_forward's query asks packing_order for its CUB temp size, so only failing calls appear here.
// ---------------------------------------------------------------------------------------------------------------

namespace {

// A two-layer bidirectional LSTM (input 6, hidden 16) over lengths {4, 2, 0, 5}, every buffer on the host.
struct HostRnn {
  RnnDesc desc;
  std::vector<std::vector<float>> params;
  std::vector<RnnLayerWeights<float>> weights;
  std::vector<std::int32_t> offsets = {0, 4, 6, 6, 11};
  std::vector<float> x, out, h0, c0, hn, cn;
  int cublas_stand_in = 0;  // its address stands in for a handle: only null-ness is checked

  HostRnn() {
    desc.mode = RnnMode::kLstm;
    desc.input_size = 6;
    desc.hidden_size = 16;
    desc.num_layers = 2;
    desc.bidirectional = true;
    const std::int64_t dirs = 2, gate_rows = 4 * 16, nnz = 11, batch = 4;
    params.reserve(static_cast<std::size_t>(desc.num_layers * dirs * 4));
    for (std::int64_t layer = 0; layer < desc.num_layers; ++layer)
      for (std::int64_t dir = 0; dir < dirs; ++dir) {
        const std::int64_t in = rnn_layer_input_size(desc, layer);
        RnnLayerWeights<float> w;
        w.w_ih = add(gate_rows * in);
        w.w_hh = add(gate_rows * 16);
        w.b_ih = add(gate_rows);
        w.b_hh = add(gate_rows);
        weights.push_back(w);
      }
    x.resize(static_cast<std::size_t>(nnz * 6));
    out.resize(static_cast<std::size_t>(nnz * dirs * 16));
    const std::size_t states = static_cast<std::size_t>(desc.num_layers * dirs * batch * 16);
    h0.resize(states);
    c0.resize(states);
    hn.resize(states);
    cn.resize(states);
  }

  RnnArgs<float, std::int32_t> args() {
    RnnArgs<float, std::int32_t> a;
    a.desc = desc;
    a.weights = weights.data();
    a.input = RaggedView<const float, std::int32_t>{x.data(), offsets.data(), 4, 11, 6};
    a.max_steps = 5;
    a.h0 = h0.data();
    a.c0 = c0.data();
    a.output = out.data();
    a.hn = hn.data();
    a.cn = cn.data();
    a.cublas = reinterpret_cast<cublasHandle_t>(&cublas_stand_in);
    return a;
  }

 private:
  const float* add(std::int64_t count) {
    params.emplace_back(static_cast<std::size_t>(count));
    return params.back().data();
  }
};

}  // namespace

TEST_CASE("rnn_forward rejects bad arguments", "[rnn][errors]") {
  HostRnn model;
  const RnnArgs<float, std::int32_t> good = model.args();
  auto query = [](const RnnArgs<float, std::int32_t>& a) {
    std::size_t b = 0;
    return rnn_forward<float, std::int32_t>(nullptr, b, a, nullptr);
  };
  std::vector<RnnLayerWeights<float>> weights = model.weights;

  SECTION("null weights array") {
    auto a = good;
    a.weights = nullptr;
    REQUIRE_FAILS(query(a), Status::kNullPointer, "weights");
  }
  SECTION("null w_hh of the reverse direction of layer 1") {
    weights[3].w_hh = nullptr;
    auto a = good;
    a.weights = weights.data();
    REQUIRE_FAILS(query(a), Status::kNullPointer, "weights[3].w_hh");
  }
  SECTION("null bias with bias = true; bias = false does not read it") {
    weights[0].b_ih = nullptr;
    auto a = good;
    a.weights = weights.data();
    REQUIRE_FAILS(query(a), Status::kNullPointer, "weights[0].b_ih");
    a.desc.bias = false;
    a.input.batch = -1;  // the next check: the biases passed
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.batch");
  }
  SECTION("weights not aligned to their elements") {
    weights[1].w_ih = shifted(weights[1].w_ih, 2);
    auto a = good;
    a.weights = weights.data();
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "weights[1].w_ih is not aligned");
  }
  SECTION("proj_size for a GRU, or not below hidden_size") {
    auto a = good;
    a.desc.mode = RnnMode::kGru;
    a.desc.proj_size = 4;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "proj_size");
    a = good;
    a.desc.proj_size = 16;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "proj_size");
    a = good;
    a.desc.proj_size = -1;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "proj_size");
  }
  SECTION("non-positive sizes and an unknown mode") {
    auto a = good;
    a.desc.hidden_size = 0;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "hidden_size");
    a = good;
    a.desc.input_size = 0;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input_size");
    a = good;
    a.desc.num_layers = 0;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "num_layers");
    a = good;
    a.desc.mode = static_cast<RnnMode>(5);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "mode");
    a = good;
    a.max_steps = -1;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "max_steps");
    a = good;
    a.input.batch = -2;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.batch");
    a = good;
    a.input.nnz = -2;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.nnz");
  }
  SECTION("sizes too large") {
    auto a = good;
    a.input.batch = kInt64Max;
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input.batch");
    a = good;
    a.input.batch = kMaxBatch + 1;
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input.batch");
    a = good;
    a.input.batch = std::int64_t{1} << 31;  // int32 offsets count the active sequences per step in int32
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input.batch = 2147483648 does not fit the int32 offset type");
    a = good;
    for (const std::int64_t steps : {kInt64Max, kInt64Max - 1, kMaxBatch + 1}) {
      a.max_steps = steps;
      REQUIRE_FAILS(query(a), Status::kSizeOverflow, "max_steps");
    }
    a = good;
    a.desc.input_size = std::int64_t{1} << 31;  // cuBLAS sizes are int
    a.input.inner = a.desc.input_size;
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input_size");
    // ragged's own projection GEMM counts k in int: a width near INT_MAX would wrap its k-tile count. cuBLAS's
    // path takes it (the query then goes on to CUB's size query, which fails without a device: not checked here).
    a = good;
    a.desc.input_size = (std::int64_t{1} << 30) + 1;
    a.input.inner = a.desc.input_size;
    a.projection = RnnProjection::kBatchInvariant;
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "layer 0 (1073741825, desc.input_size) exceeds 2^30");
    a.projection = RnnProjection::kCublas;
    REQUIRE(query(a) != Status::kSizeOverflow);
    a.desc.input_size = std::int64_t{1} << 30;
    a.input.inner = a.desc.input_size;
    a.projection = RnnProjection::kBatchInvariant;
    REQUIRE(query(a) != Status::kSizeOverflow);
    a = good;
    a.input.nnz = kInt64Max / 8;
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input");
    a = good;
    a.input.nnz = std::int64_t{1} << 56;  // 6 inputs a token fit; 2 x 64 float gate projections (2^65 bytes) do not
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "input projections");
    a = good;
    a.desc.bidirectional = true;
    a.desc.hidden_size = std::int64_t{1} << 62;  // gate rows * directions would overflow int64
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "hidden_size");
    RnnAlgo chosen = RnnAlgo::kAuto;
    REQUIRE_FAILS(rnn_select_algo<float>(a.desc, RnnAlgo::kPerStep, chosen), Status::kSizeOverflow, "hidden_size");
    a = good;
    a.desc.bidirectional = true;
    a.desc.num_layers = kInt64Max;  // layers * directions would overflow; checked before any weight is read
    REQUIRE_FAILS(query(a), Status::kSizeOverflow, "num_layers");
  }
  SECTION("input width differs from input_size") {
    auto a = good;
    a.input.inner = 5;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.inner");
  }
  SECTION("c0 or cn for a GRU") {
    auto a = good;
    a.desc.mode = RnnMode::kGru;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "c0");
    a.c0 = nullptr;
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "cn");
  }
  SECTION("null output, offsets, values or cuBLAS handle") {
    auto a = good;
    a.output = nullptr;
    REQUIRE_FAILS(query(a), Status::kNullPointer, "output");
    a = good;
    a.input.offsets = nullptr;
    REQUIRE_FAILS(query(a), Status::kNullPointer, "input.offsets");
    a = good;
    a.input.values = nullptr;
    REQUIRE_FAILS(query(a), Status::kNullPointer, "input.values");
    a = good;
    a.cublas = nullptr;
    REQUIRE_FAILS(query(a), Status::kNullPointer, "cublas");
    // ragged's own projection GEMM needs no handle. (The query goes on to CUB's size query, which needs a
    // device: without one it fails there, with a CUDA error.)
    a.projection = RnnProjection::kBatchInvariant;
    REQUIRE(query(a) != Status::kNullPointer);
  }
  SECTION("input and output not aligned to their elements") {
    auto a = good;
    a.input.offsets = shifted(a.input.offsets, 2);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.offsets is not aligned");
    a = good;
    a.input.values = shifted(a.input.values, 1);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "input.values is not aligned");
    a = good;
    a.output = shifted(a.output, 2);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "output is not aligned");
  }
  SECTION("optional states and check not aligned to their elements") {
    auto a = good;
    a.h0 = shifted(a.input.values, 2);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "h0 is not aligned");
    a = good;
    a.c0 = shifted(a.input.values, 1);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "c0 is not aligned");
    a = good;
    a.hn = shifted(a.output, 3);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "hn is not aligned");
    a = good;
    a.cn = shifted(a.output, 2);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "cn is not aligned");
    CheckResult check;
    a = good;
    a.check = shifted(&check, 4);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "check is not aligned");
  }
  SECTION("unknown algo or projection") {
    auto a = good;
    a.algo = static_cast<RnnAlgo>(7);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "algo");
    a.algo = static_cast<RnnAlgo>(-1);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "algo");
    a = good;
    a.projection = static_cast<RnnProjection>(2);
    REQUIRE_FAILS(query(a), Status::kInvalidArgument, "projection");
  }
}

TEST_CASE("rnn_select_algo checks the description before looking at the device", "[rnn][errors]") {
  RnnDesc desc;
  desc.input_size = 8;
  desc.hidden_size = 0;
  RnnAlgo chosen = RnnAlgo::kAuto;
  REQUIRE_FAILS(rnn_select_algo<float>(desc, RnnAlgo::kAuto, chosen), Status::kInvalidArgument, "hidden_size");
  desc.hidden_size = 32;
  REQUIRE_FAILS(rnn_select_algo<half>(desc, static_cast<RnnAlgo>(9), chosen), Status::kInvalidArgument, "algo");
  // The per-step path needs no device query.
  REQUIRE_OK(rnn_select_algo<bfloat16>(desc, RnnAlgo::kPerStep, chosen));
  REQUIRE(chosen == RnnAlgo::kPerStep);
  REQUIRE(std::string(rnn_algo_name(RnnAlgo::kPersistentStreamed)) == "persistent_streamed");
  REQUIRE(std::string(rnn_algo_name(static_cast<RnnAlgo>(9))) == "unknown");
}

// ---------------------------------------------------------------------------------------------------------------
// buffer.h (the owning layer)
// ---------------------------------------------------------------------------------------------------------------

// Views of mutable values, as a caller holds them, go to every op without spelling the template arguments: the
// ops' overloads for them forward to the read-only ones (deduction does not see RaggedView's conversion). This
// case is as much a compile test; the queries need no device.
TEST_CASE("ops take views of mutable values as they take read-only ones", "[views]") {
  std::int32_t offsets[3] = {0, 2, 3};
  std::int64_t indices[2] = {0, 1}, inverse[2] = {0, 1}, arg[2] = {};
  std::int32_t lengths[2] = {2, 1}, sizes[2] = {2, 1}, steps[3] = {0, 2, 3};
  const PackedLayout<std::int32_t> layout{2, 2, indices, inverse, lengths, sizes, steps};
  float values[3] = {1, 2, 3}, padded[4] = {}, out[3] = {}, grad[3] = {};
  const RaggedView<float, std::int32_t> ragged{values, offsets, 2, 3, 1};
  const PaddedView<float> dense{padded, 2, 2, 1};
  std::size_t bytes = 0;
  REQUIRE_OK(ragged_to_padded(nullptr, bytes, ragged, dense, 0.0f, Align::kLeft, Truncate::kRight, nullptr));
  REQUIRE_OK(padded_to_ragged(nullptr, bytes, dense, ragged, 0.0f, Align::kLeft, Truncate::kRight, nullptr));
  REQUIRE_OK(pack_sequences(nullptr, bytes, ragged, layout, out, nullptr));
  REQUIRE_OK(segment_reduce(nullptr, bytes, ragged, ReduceOp::kMax, out, arg, 0.0f, nullptr));
  REQUIRE_OK(segment_reduce_backward(nullptr, bytes, ragged, ReduceOp::kMax, grad, arg, out, nullptr));
  REQUIRE_OK(segment_softmax(nullptr, bytes, ragged, true, out, nullptr));
  REQUIRE_OK(segment_softmax_backward(nullptr, bytes, ragged, true, out, grad, values, nullptr));
  // The same calls on the read-only views still pick the op itself.
  const RaggedView<const float, std::int32_t> read_only = ragged;
  REQUIRE_OK(segment_softmax(nullptr, bytes, read_only, false, out, nullptr));
  // pack / unpack read the layout only: a read-only one (arrays a caller cannot write) goes in as it is, and
  // the writable one converts to it, field for field.
  const std::int64_t fixed_indices[2] = {0, 1};
  const std::int32_t fixed_lengths[2] = {2, 1}, fixed_sizes[2] = {2, 1}, fixed_steps[3] = {0, 2, 3};
  const PackedLayout<const std::int32_t> fixed{2, 2, fixed_indices, fixed_indices, fixed_lengths, fixed_sizes,
                                               fixed_steps};
  REQUIRE_OK(pack_sequences(nullptr, bytes, read_only, fixed, out, nullptr));
  REQUIRE_OK(pack_sequences(nullptr, bytes, ragged, fixed, out, nullptr));
  REQUIRE_OK(unpack_sequences(nullptr, bytes, out, fixed, ragged, nullptr));
  REQUIRE_OK(unpack_sequences(nullptr, bytes, out, layout, ragged, nullptr));
  const PackedLayout<const std::int32_t> converted = layout;
  REQUIRE(converted.batch == 2);
  REQUIRE(converted.max_steps == 2);
  REQUIRE(converted.sorted_indices == indices);
  REQUIRE(converted.unsorted_indices == inverse);
  REQUIRE(converted.sorted_lengths == lengths);
  REQUIRE(converted.batch_sizes == sizes);
  REQUIRE(converted.step_offsets == steps);
  static_assert(!std::is_convertible<PackedLayout<const std::int32_t>, PackedLayout<std::int32_t>>::value,
                "a read-only layout must not convert back to a writable one");
  // HeadsView converts too (AttentionArgs holds read-only views of Q, K and V).
  half q[64] = {};
  AttentionArgs<half, std::int32_t> a;
  a.q = dense_heads(q, 1, 64);
  REQUIRE(a.q.data == q);
  REQUIRE(a.q.token_stride == 64);
}

TEST_CASE("DeviceBuffer refuses a count whose bytes overflow size_t, before any CUDA call", "[buffer][errors]") {
  const std::size_t too_many = std::numeric_limits<std::size_t>::max() / sizeof(float) + 1;
  try {
    DeviceBuffer<float> buffer(too_many);
    FAIL("DeviceBuffer<float>(" << too_many << ") did not throw");
  } catch (const Error& e) {
    INFO(e.what());
    REQUIRE(e.status() == Status::kSizeOverflow);
    REQUIRE(names(e.what(), std::to_string(too_many).c_str()));
  }
}
