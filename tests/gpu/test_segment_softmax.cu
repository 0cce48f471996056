// segment_softmax / log-softmax and their backward passes on the device against the CPU reference: every T, both
// offset types, D in {1, 3, 64, 1000}, every length regime plus power-law lengths and one row holding ~all of 1M+
// elements; rows around the local-finish and block-row limits; NaN and masked (-inf) inputs; spare rows past
// offsets[batch] left untouched; bitwise determinism and batch invariance; streamed rows against the unit walk,
// bitwise; short rows at D > 32 in the sub-warp row pass (a warp each at wide D); rows of 33 to 512 tokens at D = 1
// taken a warp each, bitwise against the streams; grids capped at 1 and 3 blocks, bitwise; launches after a
// cudaDeviceReset; arrays off 16-byte alignment; a short workspace and malformed offsets (the other argument errors:
// tests/cpu/test_argument_checks.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "../../kernels/segment_geometry.h"  // kLocalFinishChunks: the lengths below straddle it
#include "gpu/dependent_launch.h"
#include "gpu/segment_common.h"
#include "ragged/tensor.h"

using namespace ragged;
using namespace ragged::test::segment;
using test::HostRagged;
using test::is_poison;

namespace {

constexpr std::int64_t kSpareRows = 3;  // capacity past offsets[batch]: never written

// out poisoned first, `shift` elements into its allocation (with as many guard elements after it, which must stay
// poisoned).
template <typename T, typename OffsetT>
std::vector<T> device_softmax(const DeviceRagged<T, OffsetT>& d, bool log, std::int64_t shift = 0) {
  test::GuardedBuffer<T> out(static_cast<std::size_t>(d.nnz * d.inner), static_cast<std::size_t>(shift));
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return segment_softmax(workspace, bytes, d.view(), log, out.data(), nullptr);
  }));
  if (shift > 0) REQUIRE(out.guards_intact());
  return out.to_host();
}

// segment_softmax_backward with shape.values null (it must not be read), grad_in poisoned first; y (shifts.out),
// dy (shifts.grad_out) and grad_in as far into their allocations as `shifts` says.
template <typename T, typename OffsetT>
std::vector<T> device_softmax_backward(const DeviceRagged<T, OffsetT>& d, bool log, const std::vector<T>& y,
                                       const std::vector<T>& dy, const Shifts& shifts = {}) {
  const test::GuardedBuffer<T> d_y(y, static_cast<std::size_t>(shifts.out));
  const test::GuardedBuffer<T> d_dy(dy, static_cast<std::size_t>(shifts.grad_out));
  test::GuardedBuffer<T> grad_in(static_cast<std::size_t>(d.nnz * d.inner), static_cast<std::size_t>(shifts.grad_in));
  RaggedView<const T, OffsetT> shape = d.view();
  shape.values = nullptr;
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return segment_softmax_backward(workspace, bytes, shape, log, d_y.data(), d_dy.data(), grad_in.data(), nullptr);
  }));
  if (shifts.grad_in > 0) REQUIRE(grad_in.guards_intact());
  return grad_in.to_host();
}

// Softmax and log-softmax, forward then backward (from the first run's y), with a library switch on and then
// off (set_enabled(bool)): the two must agree bitwise.
template <typename T, typename OffsetT, typename SetEnabled>
void require_switch_keeps_bits(const DeviceRagged<T, OffsetT>& dev, const std::vector<T>& dy, SetEnabled set_enabled) {
  for (bool log : {false, true}) {
    INFO((log ? "log-softmax" : "softmax"));
    set_enabled(true);
    const std::vector<T> on = device_softmax(dev, log);
    const std::vector<T> grad_on = device_softmax_backward(dev, log, on, dy);
    set_enabled(false);
    const std::vector<T> off = device_softmax(dev, log);
    const std::vector<T> grad_off = device_softmax_backward(dev, log, on, dy);
    REQUIRE_BITWISE_EQUAL(on, off);
    REQUIRE_BITWISE_EQUAL(grad_on, grad_off);
  }
}

// require_switch_keeps_bits on random values (and dy) of each length set at `inner`, spare rows after each.
template <typename T, typename OffsetT, typename SetEnabled>
void require_sets_keep_bits(const std::vector<LengthSet>& sets, std::int64_t inner, std::mt19937_64& rng,
                            SetEnabled set_enabled) {
  for (const LengthSet& set : sets) {
    INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
    const auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng, kSpareRows);
    const DeviceRagged<T, OffsetT> dev(host);
    const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
    require_switch_keeps_bits(dev, dy, set_enabled);
  }
}


// Forward (softmax and log-softmax) and backward on one input against the CPU reference.
template <typename T, typename OffsetT>
void check_softmax(const HostRagged<T, OffsetT>& host, std::mt19937_64& rng, const Shifts& shifts = {}) {
  const DeviceRagged<T, OffsetT> dev(host, shifts.values);
  const std::int64_t inner = host.inner, size = static_cast<std::int64_t>(host.values.size());
  const std::int64_t used = static_cast<std::int64_t>(host.offsets.back()) * inner;

  for (bool log : {false, true}) {
    INFO((log ? "log-softmax" : "softmax"));
    std::vector<T> ref(size, test::round_to<T>(std::numeric_limits<double>::quiet_NaN()));
    reference::segment_softmax(host.view(), log, ref.data());
    const std::vector<T> got = device_softmax(dev, log, shifts.out);
    // float: exp and the sum in float keep ~1e-6 relative error; log-softmax's error is absolute in log(sum).
    std::vector<double> bound(size);
    for (std::int64_t k = 0; k < used; ++k) {
      const double r = std::abs(test::to_double(ref[k]));
      bound[k] = log ? 1e-5 * (1.0 + (std::isfinite(r) ? r : 0.0)) : 1e-5 * r;
    }
    std::vector<T> naive_t;
    if (is_low_precision<T>()) naive_t = naive_softmax(host, log);
    std::string failure =
        test::compare_to_reference(got, ref, is_low_precision<T>() ? &naive_t : nullptr, bound, 0, used);
    INFO("forward: " << failure);
    REQUIRE(failure.empty());
    for (std::int64_t k = used; k < size && failure.empty(); ++k)
      if (!is_poison(got[k])) failure = "spare element " + std::to_string(k) + " (past offsets[batch]) was written";
    INFO(failure);
    REQUIRE(failure.empty());

    // Backward from the reference's y (spare rows hold NaN: they must not leak into any sequence).
    const std::vector<T> dy = test::random_values<T>(size, rng);
    std::vector<T> grad_ref(size, test::round_to<T>(std::numeric_limits<double>::quiet_NaN()));
    reference::segment_softmax_backward(host.view(), log, ref.data(), dy.data(), grad_ref.data());
    const std::vector<T> grad_got = device_softmax_backward(dev, log, ref, dy, shifts);
    // Error scale per element: softmax |y| (|dy| + sum |dy y|); log-softmax |dy| + exp(y) sum |dy|.
    std::vector<double> grad_bound(size, 0.0);
    for (std::int64_t b = 0; b < host.batch; ++b) {
      for (std::int64_t d = 0; d < inner; ++d) {
        const std::int64_t first = host.begin(b) * inner + d, length = host.length(b);
        double column = 0.0;
        for (std::int64_t i = 0; i < length; ++i) {
          const std::int64_t k = first + i * inner;
          column += std::abs(test::to_double(dy[k]) * (log ? 1.0 : test::to_double(ref[k])));
        }
        for (std::int64_t i = 0; i < length; ++i) {
          const std::int64_t k = first + i * inner;
          const double y = test::to_double(ref[k]), g = std::abs(test::to_double(dy[k]));
          grad_bound[k] = 1e-5 * (log ? g + std::exp(y) * column : std::abs(y) * (g + column));
        }
      }
    }
    std::vector<T> naive_grad;
    if (is_low_precision<T>()) naive_grad = naive_softmax_backward(host, log, ref, dy);
    failure = test::compare_to_reference(grad_got, grad_ref, is_low_precision<T>() ? &naive_grad : nullptr,
                                         grad_bound, 0, used);
    INFO("backward: " << failure);
    REQUIRE(failure.empty());
  }
}

}  // namespace

TEMPLATE_TEST_CASE("segment_softmax on the device matches the CPU reference", "[segment][gpu]", F32_I32, F32_I64,
                   F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(501);
  for (std::int64_t inner : kInnerSizes) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
      check_softmax(test::random_ragged<T, OffsetT>(set.lengths, inner, rng, kSpareRows), rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax on the device: arrays off 16-byte alignment", "[segment][gpu]", F32_I64,
                   BF16_I32) {
  // The unit and row passes move 16-byte vectors where every array they touch is 16-byte aligned and D a multiple
  // of the vector (values and out forward; y, dy and grad_in backward: softmax_geometry); where one is not, they
  // all go an element at a time. Each D where aligned arrays take vectors gets one of three shift sets (the
  // rotation starts elsewhere for each type): the input off alignment and the output aligned, the other way round,
  // and all off, against the CPU reference in every length set; a vector access off alignment faults on the GPU
  // and in the emulator.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(512);
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  for_each_misaligned_case<T, OffsetT>(rng, {{1, 0, 1, 0}, {0, 1, 0, 0}, {vec - 1, 3, 2, 1}}, sizeof(T) == 4 ? 0 : 1,
                                       kSpareRows, [&](const HostRagged<T, OffsetT>& host, const Shifts& shifts) {
                                         check_softmax(host, rng, shifts);
                                       });
}

TEMPLATE_TEST_CASE("segment_softmax on the device: a plan too large for the first-pass kernel to scan",
                   "[segment][gpu]", F32_I32, F32_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(510);
  for (std::int64_t inner : {1, 3}) {
    const auto lengths = rows_past_kernel_plan(rng, inner);
    INFO("batch " << lengths.size() << ", inner " << inner);
    check_softmax(test::random_ragged<T, OffsetT>(lengths, inner, rng, kSpareRows), rng);
  }
}

TEMPLATE_TEST_CASE("segment_softmax rows on both sides of the local-finish limit", "[segment][gpu]", F32_I32,
                   BF16_I64) {
  // Rows of 2 .. kLocalFinishChunks (K) chunks are written by the warp that merges the root of their merge tree;
  // longer ones by the second-pass kernel (segment_softmax.cuh). With a fan-in of 16 the trees here have one or two
  // levels; "one row holds all" (1024 chunks at D = 1 and 64) has three. Forward chunks hold 1024 tokens at D = 1 and
  // 16 at D = 64; at D = 1000 (column tiles) 8 float tokens, or 16 bfloat16 tokens streamed as 4 register tiles of 4
  // (backward chunks are half as long). These lengths straddle both limits, with a one-chunk row, a row shorter than
  // a register tile and an empty one in between, in one batch. With block rows on (the default) the rows past the
  // local finish that fit the second-pass kernel's shared memory are block rows (tested below); off, every one of
  // them takes the second pass.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(506);
  const RestoreBlockRows restore;
  for (bool block_rows : {true, false}) {
    detail::set_segment_block_rows_enabled(block_rows);
    for (std::int64_t inner : {1, 64, 1000}) {
      const std::int64_t chunk = inner == 1 ? 1024 : inner == 64 ? 16 : sizeof(T) == 2 ? 16 : 8;
      constexpr std::int64_t K = ragged::detail::kLocalFinishChunks;
      const std::vector<std::int64_t> lengths = {chunk + 1,      chunk * K - 1, 0, chunk * K,       chunk * K + 1,
                                                 chunk * 64 + 5, chunk / 2,     3, chunk * (K + 1), 2 * chunk,
                                                 chunk * 16 - 1, chunk * 33};
      INFO("inner " << inner << (block_rows ? ", block rows on" : ", block rows off"));
      check_softmax(test::random_ragged<T, OffsetT>(lengths, inner, rng, kSpareRows), rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax rows that fill every partial slot of the workspace", "[segment][gpu]", F32_I32,
                   BF16_I64) {
  // As segment_reduce's: rows of k chunks and one token, for the forward's chunk and then the backward's, so the
  // workspace holds exactly the slots the rows use (k + 1 <= kLocalFinishChunks: the root's merger writes them).
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(514);
  for (std::int64_t inner : {1, 64, 264, 1000}) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    for (bool backward : {false, true}) {
      const detail::SegmentGeometry g = detail::make_softmax_geometry(inner, vec, sizeof(T), backward);
      std::int64_t nnz = 0, slots = 0;
      const std::vector<std::int64_t> lengths =
          rows_filling_partials(g, detail::kLocalFinishChunks, rng, nnz, slots);
      INFO("inner " << inner << (backward ? ", backward" : ", forward") << "'s chunk of " << g.chunk_tokens
                    << " tokens, " << slots << " partial slots");
      REQUIRE(slots == detail::max_partial_chunks(nnz, static_cast<std::int64_t>(lengths.size()), g));
      check_softmax(test::random_ragged<T, OffsetT>(lengths, inner, rng), rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax block rows, held in shared memory by one block", "[segment][gpu]", F32_I32,
                   F16_I64, BF16_I32) {
  // A row longer than the local finish whose column tiles fit the second-pass kernel's shared memory (at most
  // block_tokens tokens) is read into it by one block, per tile, and written from there (is_block_row,
  // segment_softmax.cuh). Lengths on both sides of both limits, forward's and backward's, in one batch, at narrow
  // and wide D (D = 1000: 4 or 8 column tiles, the last one partial), against the reference.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(511);
  for (std::int64_t inner : kInnerSizes) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    std::vector<std::int64_t> lengths = {0, 3};
    for (bool backward : {false, true}) {
      detail::SegmentGeometry g = detail::make_softmax_geometry(inner, vec, sizeof(T), backward);
      std::int64_t tokens = 0, log_tokens = 0;
      REQUIRE_OK((detail::segment_softmax_block_tokens<T, OffsetT>(g, backward, false, tokens)));
      REQUIRE_OK((detail::segment_softmax_block_tokens<T, OffsetT>(g, backward, true, log_tokens)));
      REQUIRE(tokens == log_tokens);
      const std::int64_t local = g.local_finish_chunks * g.chunk_tokens;  // the longest row finished locally
      INFO("inner " << inner << (backward ? ", backward" : ", forward") << ": block rows of " << local + 1 << " to "
                    << tokens << " tokens");
      REQUIRE(tokens > local);  // an H100 (or the emulated one) holds some
      g.block_tokens = tokens;
      REQUIRE(detail::is_block_row(local + 1, g));
      REQUIRE(detail::is_block_row(tokens, g));
      REQUIRE_FALSE(detail::is_block_row(local, g));
      REQUIRE_FALSE(detail::is_block_row(tokens + 1, g));
      const std::int64_t middle = std::uniform_int_distribution<std::int64_t>(local + 2, tokens - 1)(rng);
      lengths.insert(lengths.end(), {local, local + 1, middle, tokens, tokens + 1});
    }
    std::shuffle(lengths.begin(), lengths.end(), rng);
    INFO("inner " << inner);
    check_softmax(test::random_ragged<T, OffsetT>(lengths, inner, rng, kSpareRows), rng);
  }
}

TEST_CASE("segment_softmax raises its shared-memory limit again after cudaDeviceReset", "[segment][gpu][reset]") {
  // The second-pass kernel takes more than the 48 KB default for its block rows, so its launcher raises the
  // kernel's limit (shared_bytes_for_residency, launch.cuh). The limit belongs to the context: after a reset the
  // new context starts at the default, and a launcher that raised it once per process failed every launch after
  // (cudaErrorInvalidValue). Block rows and local ones, before and after a reset, against the reference.
  auto rng = test::make_rng(613);
  const std::int64_t inner = 64;
  const detail::SegmentGeometry g = detail::make_softmax_geometry(inner, 4, sizeof(float), false);
  std::int64_t tokens = 0;
  REQUIRE_OK((detail::segment_softmax_block_tokens<float, std::int32_t>(g, false, false, tokens)));
  const std::int64_t local = g.local_finish_chunks * g.chunk_tokens;
  REQUIRE(tokens > local);  // an H100 (or the emulated one) holds some
  const std::vector<std::int64_t> lengths = {3, 0, tokens, local + 1, local};
  check_softmax(test::random_ragged<float, std::int32_t>(lengths, inner, rng, kSpareRows), rng);
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  check_softmax(test::random_ragged<float, std::int32_t>(lengths, inner, rng, kSpareRows), rng);
}

TEMPLATE_TEST_CASE("segment_softmax on the device: NaN and masked (-inf) inputs", "[segment][gpu]", F32_I32,
                   F16_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(502);
  std::bernoulli_distribution masked(0.2), column_has_nan(0.2);
  for (std::int64_t inner : kInnerSizes) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << ", inner " << inner);
      auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng, kSpareRows);
      for (std::int64_t b = 0; b < host.batch; ++b) {
        const std::int64_t length = host.length(b);
        if (length == 0) continue;
        std::uniform_int_distribution<std::int64_t> row(host.begin(b), host.begin(b) + length - 1);
        for (std::int64_t d = 0; d < inner; ++d) {
          // Mask (-inf) about 20% of the entries, but never the first of a sequence: a fully masked column has no
          // maximum and is left to the NaN case.
          for (std::int64_t i = 1; i < length; ++i)
            if (masked(rng))
              host.at(host.begin(b) + i, d) = test::round_to<T>(-std::numeric_limits<double>::infinity());
          if (column_has_nan(rng)) host.at(row(rng), d) = test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
        }
      }
      check_softmax(host, rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax on the device: fully masked columns and a NaN inside a masked chunk",
                   "[segment][gpu]", F32_I32, BF16_I64) {
  // Per row, two columns: one of nothing but -inf (no maximum: every output is NaN, as the reference's
  // exp(-inf - -inf)), and one of finite values except for a whole forward chunk of -inf holding one NaN. The
  // kernels' max skips NaN and carries it through the sum instead, so the chunk (and each register tile of it)
  // whose real items are only -inf and the NaN must still make the column NaN; the rest of the column being
  // finite, a lost NaN shows as finite outputs. Rows of one chunk to past the local-finish limit, at D = 1 and
  // at D = 1000 (column tiles; bfloat16 there streams 4 register tiles per chunk), and at D = 1 tiny rows (up to
  // 32 tokens, one lane each; the last two fit the 4 tokens the row pass loads ahead).
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(507);
  const T neg_inf = test::round_to<T>(-std::numeric_limits<double>::infinity());
  const T nan = test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
  for (std::int64_t inner : {1, 1000}) {
    // Forward chunk lengths (segment_geometry.h): 1024 tokens at D = 1; 8 float or 16 bfloat16 tokens at D = 1000.
    const std::int64_t chunk = inner == 1 ? 1024 : sizeof(T) == 2 ? 16 : 8;
    const std::vector<std::int64_t> lengths = inner == 1 ? std::vector<std::int64_t>{40, 3000, 40000, 7, 0, 2500, 3, 4}
                                                         : std::vector<std::int64_t>{3, 17, 300, 1100, 0, 40};
    auto host = test::random_ragged<T, OffsetT>(lengths, inner, rng, kSpareRows);
    std::uniform_int_distribution<std::int64_t> column(0, inner - 1);
    for (std::int64_t b = 0; b < host.batch; ++b) {
      const std::int64_t length = host.length(b);
      if (length == 0) continue;
      std::uniform_int_distribution<std::int64_t> token(0, length - 1);
      const std::int64_t nan_at = token(rng), first = nan_at / chunk * chunk;
      // D = 1 has one column: the even rows are fully masked, the odd ones get the masked chunk and the NaN.
      const std::int64_t masked = inner == 1 ? (b % 2 == 0 ? 0 : -1) : column(rng);
      const std::int64_t with_nan = inner == 1 ? (b % 2 == 1 ? 0 : -1) : (masked + 1) % inner;
      if (masked >= 0)
        for (std::int64_t i = 0; i < length; ++i) host.at(host.begin(b) + i, masked) = neg_inf;
      if (with_nan >= 0) {
        for (std::int64_t i = first; i < std::min(length, first + chunk); ++i)
          host.at(host.begin(b) + i, with_nan) = neg_inf;
        host.at(host.begin(b) + nan_at, with_nan) = nan;
      }
    }
    INFO("inner " << inner);
    check_softmax(host, rng);
  }
}

TEMPLATE_TEST_CASE("segment_softmax is deterministic and batch-invariant", "[segment][gpu][determinism]", F32_I32,
                   F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(503);
  // Rows of > 100k elements (the multi-chunk path) and one-chunk rows, which the kernel streams where they fit
  // a window (stream_softmax_rows): embed_row starts the row at an odd token in one batch and an even one in the
  // other, so the stream's lanes hold its phases rotated differently. A row of 1019 tokens at D = 1 fits the
  // forward window (32 lines of 32 tokens) from token 5, where the first batch starts it, and not from token 282
  // (26 past a line), where this seed's second batch does: the unit walk takes it there. (64, 200), (1000, 100)
  // and (1, 10000) are block rows (held in shared memory by one block) for every type, forward and backward.
  const std::pair<std::int64_t, std::int64_t> cases[] = {{1, 300007}, {64, 5003}, {1, 257},   {1, 33},    {1, 1019},
                                                         {64, 7},     {64, 3},    {64, 200}, {1000, 100}, {1, 10000}};
  for (const auto& [inner, length] : cases) {
    const std::vector<T> row = test::random_values<T>(length * inner, rng);
    const std::vector<T> row_dy = test::random_values<T>(length * inner, rng);
    const auto e = embed_row<T, OffsetT>(row, length, inner, rng);
    const DeviceRagged<T, OffsetT> first(e.first), second(e.second);
    const std::int64_t at_first = e.first.begin(e.index_in_first) * inner;
    const std::int64_t at_second = e.second.begin(e.index_in_second) * inner;
    const std::int64_t count = length * inner;
    for (bool log : {false, true}) {
      INFO("inner " << inner << (log ? ", log-softmax" : ", softmax"));
      const std::vector<T> run1 = device_softmax(first, log);
      const std::vector<T> run2 = device_softmax(first, log);
      REQUIRE_BITWISE_EQUAL(run1, run2);
      const std::vector<T> other = device_softmax(second, log);
      REQUIRE_BITWISE_EQUAL(slice(run1, at_first, count), slice(other, at_second, count));

      // Backward: the same y and dy rows in both batches, random neighbours.
      std::vector<T> y_first = run1, y_second = other;
      std::vector<T> dy_first = test::random_values<T>(y_first.size(), rng);
      std::vector<T> dy_second = test::random_values<T>(y_second.size(), rng);
      std::copy(row_dy.begin(), row_dy.end(), dy_first.begin() + at_first);
      std::copy(row_dy.begin(), row_dy.end(), dy_second.begin() + at_second);
      const std::vector<T> grad1 = device_softmax_backward(first, log, y_first, dy_first);
      const std::vector<T> grad2 = device_softmax_backward(first, log, y_first, dy_first);
      REQUIRE_BITWISE_EQUAL(grad1, grad2);
      const std::vector<T> grad_other = device_softmax_backward(second, log, y_second, dy_second);
      REQUIRE_BITWISE_EQUAL(slice(grad1, at_first, count), slice(grad_other, at_second, count));
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: streamed rows give the unit walk's bits", "[segment][gpu][determinism]",
                   F32_I32, F16_I64, BF16_I32) {
  // At narrow D where 32 vectors are whole tokens the kernel streams the rows that fit a window of lines
  // (stream_softmax_rows) instead of walking them as units; its order is meant to be the unit walk's, so forward
  // and backward results must agree bitwise. `ties`: values from {+0, -0, -inf, 1, -1} in 60% of the places, so
  // that a column's maximum is often a zero of either sign reached in several phases (fmaxf may return either
  // zero; one_tile_statistic says why the sign cannot reach an output) and masked items sit among the row's
  // tokens.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(509);
  const RestoreStreaming restore;
  // Short rows at D = 64 take the sub-warp row pass by default, and rows of 33 to 512 tokens at D = 1 the warp
  // rows, neither the stream nor the walk: both off here, so that the stream is compared with the walk on them too.
  const RestoreSubwarpRows restore_subwarp;
  const RestoreWarpRows restore_warp_rows;
  detail::set_segment_subwarp_rows_enabled(false);
  detail::set_segment_warp_rows_enabled(false);
  const double specials[] = {0.0, -0.0, -std::numeric_limits<double>::infinity(), 1.0, -1.0};
  std::uniform_int_distribution<int> pick(0, 9);
  for (std::int64_t inner : {1, 2, 8, 64}) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    for (bool backward : {false, true})
      REQUIRE(detail::softmax_streams_rows(detail::make_softmax_geometry(inner, vec, sizeof(T), backward)));
    for (const LengthSet& set : length_sets(rng, inner)) {
      for (bool ties : {false, true}) {
        INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner
                         << (ties ? ", ties" : ""));
        auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
        if (ties)
          for (T& value : host.values)
            if (const int k = pick(rng); k < 6) value = test::round_to<T>(specials[k % 5]);
        const DeviceRagged<T, OffsetT> dev(host);
        const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
        require_switch_keeps_bits(dev, dy, detail::set_segment_stream_enabled);  // streamed, then walked
      }
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: merges staged in shared memory give the register merges' bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // With 16-byte vectors a merge-tree node of more (child, column) pairs than lanes is copied into shared memory a
  // range of columns per round trip and merged from there (merge_staged_node: the forward's (max, sum) pairs, the
  // backward's sums); switched off, a lane merges a column at a time from L2. The same merges in the same order,
  // so the outputs must agree bitwise. Block rows off, so that every row past the local finish takes the chunks,
  // their merge tree and the second pass.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(812);
  const RestoreStagedMerges restore;
  const RestoreBlockRows restore_block_rows;
  detail::set_segment_block_rows_enabled(false);
  for (std::int64_t inner : {8, 64, 264, 1000}) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
      const auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
      const DeviceRagged<T, OffsetT> dev(host);
      const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
      require_switch_keeps_bits(dev, dy, detail::set_segment_staged_merges_enabled);  // staged, then registers
    }
  }
  // The first-pass kernel's shared memory past 48 KB (the plan, then the staging; the launcher raises the limit)
  // and the staging alone after CUB's plan (past 131,072 rows), with rows of 17 chunks at D = 8.
  const std::int64_t chunk =
      detail::make_softmax_geometry(8, static_cast<int>(16 / sizeof(T)), sizeof(T), false).chunk_tokens;
  for (std::int64_t batch : {86500, 100000, 140000}) {
    INFO("batch " << batch << ", inner 8");
    const auto host = test::random_ragged<T, OffsetT>(many_rows_few_long(rng, batch, 17 * chunk + 5), 8, rng);
    const DeviceRagged<T, OffsetT> dev(host);
    const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
    require_switch_keeps_bits(dev, dy, detail::set_segment_staged_merges_enabled);
  }
}

TEMPLATE_TEST_CASE("segment_softmax: smaller merge stagings give the register merges' bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // 2 KB and 1 KB of staging a warp (what the launcher takes where 4 KB would lose the first-pass kernel a
  // resident block): fewer columns of (max, sum) pairs or of sums per round trip, the same merges. Block rows off.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(816);
  const RestoreStagedMerges restore;
  const RestoreMergeStageCap restore_cap;
  const RestoreBlockRows restore_block_rows;
  detail::set_segment_block_rows_enabled(false);
  for (std::int64_t inner : {64, 1000}) {
    for (const LengthSet& set : long_row_sets(rng, inner)) {
      const auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
      const DeviceRagged<T, OffsetT> dev(host);
      const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
      for (int cap : {2048, 1024}) {
        INFO("lengths: " << set.name << ", inner " << inner << ", " << cap << " bytes a warp");
        detail::set_segment_merge_stage_cap(cap);
        REQUIRE(detail::segment_merge_stage_cap() == cap);
        require_switch_keeps_bits(dev, dy, detail::set_segment_staged_merges_enabled);  // staged, then registers
      }
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: short rows at D > 32 in the sub-warp row pass", "[segment][gpu]", F32_I32,
                   F16_I64, BF16_I32) {
  // Rows of at most 4 tokens at D > 32 with 16-byte vectors are read once and written from registers by the row pass
  // (segment_softmax_subwarp_rows_kernel), forward and backward: by a sub-warp at D = 64, 128, 256 where 32 / vcols
  // whole rows fit a warp, by the whole warp over the column tiles at wider D (264: 3 float tiles, the last of 2
  // lanes, or 2 bfloat16 ones, the last of 1; 520: 5 float tiles, more than one round of loads; 2048 in half and
  // bfloat16: 8 tiles, the most a wide short row takes). D = 1000 in the reference tests is 8 float tiles. Against
  // the reference with the pass on and off, on random values and on rows with fully masked (-inf) columns, masked
  // items and NaN, whose outputs must be NaN as the reference's.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(991);
  const RestoreSubwarpRows restore;
  std::bernoulli_distribution masked(0.25), column_masked(0.1), nan(0.02);
  std::vector<std::int64_t> inners{64, 128, 256, 264, 520};
  if (sizeof(T) == 2) inners.push_back(2048);
  for (std::int64_t inner : inners) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    for (bool backward : {false, true})
      REQUIRE(detail::make_softmax_geometry(inner, vec, sizeof(T), backward, true).subwarp_rows);
    const bool wide = inner / vec > 32;
    for (bool special : {false, true}) {
      INFO("inner " << inner << (special ? ", masked columns, masked items and NaN" : ", random values"));
      auto host = test::random_ragged<T, OffsetT>(subwarp_lengths(rng, wide, inner), inner, rng, kSpareRows);
      if (special)
        for (std::int64_t b = 0; b < host.batch; ++b)
          for (std::int64_t d = 0; d < inner; ++d) {
            const bool whole = column_masked(rng);
            for (std::int64_t i = 0; i < host.length(b); ++i) {
              T& v = host.at(host.begin(b) + i, d);
              if (whole || masked(rng)) v = test::round_to<T>(-std::numeric_limits<double>::infinity());
              else if (nan(rng)) v = test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
            }
          }
      for (bool on : {true, false}) {
        INFO((on ? "sub-warp rows" : "first pass"));
        detail::set_segment_subwarp_rows_enabled(on);
        check_softmax(host, rng);
      }
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: the scalar row pass gives row_pass's bits", "[segment][gpu][determinism]",
                   F32_I32, F16_I64, BF16_I32) {
  // At D = 1 the row pass is segment_softmax_scalar_rows_kernel (32-bit indices, a lane per tiny row, and where
  // rows average more than 16 tokens a warp per row of 33 to 512) instead of row_pass; it folds and writes a tiny
  // row in the same order, and a warp row in the streams', so forward and backward must agree bitwise, the rows it
  // hands to the first-pass kernel included. Masked (-inf) and NaN inputs take the statistic's other paths.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(983);
  const RestoreScalarRows restore;
  std::bernoulli_distribution masked(0.3), nan(0.02);
  for (const LengthSet& set : length_sets(rng, 1)) {
    for (bool special : {false, true}) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << ")"
                       << (special ? ", 30% -inf and 2% NaN" : ", random values"));
      auto host = test::random_ragged<T, OffsetT>(set.lengths, 1, rng);
      if (special)
        for (T& v : host.values)
          if (masked(rng)) v = test::round_to<T>(-std::numeric_limits<double>::infinity());
          else if (nan(rng)) v = test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
      const DeviceRagged<T, OffsetT> dev(host);
      const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
      require_switch_keeps_bits(dev, dy, detail::set_segment_scalar_rows_enabled);  // scalar, then row_pass
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: warp rows give the streams' bits", "[segment][gpu][determinism]", F32_I32,
                   F16_I32, BF16_I64) {
  // At D = 1 the row pass also finishes the rows of 33 to 512 tokens, a warp each (warp_row_pass,
  // normalize_warp_row), which the first pass's streams took before (or its units, where a row does not fit a
  // window); it takes each lane's tokens in their order and merges the lanes by the same tree, so forward and
  // backward must agree bitwise. Values: random; ties (+0, -0, -inf, 1, -1 in 60% of the places, as the stream
  // test); 30% -inf and 2% NaN, every fifth row all -inf (no maximum: NaN outputs); and 20% -inf with 2% +inf
  // (a row with +inf has NaN outputs: inf - inf). Not NaN and +inf together: the emulator's x86 arithmetic keeps a
  // NaN operand's payload, so a row with two kinds of NaN (the input's, inf - inf's) may differ by merge order
  // there, which a GPU's canonical NaN does not show. The second set's warp shares span several windows of 32 rows
  // (many_rows_few_warp_rows). The scalar row pass is set on: warp rows need it.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(991);
  const RestoreWarpRows restore;
  const RestoreScalarRows restore_scalar_rows;
  detail::set_segment_scalar_rows_enabled(true);
  const std::vector<LengthSet> sets = {{"around the warp rows' bounds", warp_row_lengths(rng, 3000)},
                                       {"many rows, few of them warp rows", many_rows_few_warp_rows(rng)}};
  const double specials[] = {0.0, -0.0, -std::numeric_limits<double>::infinity(), 1.0, -1.0};
  const T neg_inf = test::round_to<T>(-std::numeric_limits<double>::infinity());
  std::uniform_int_distribution<int> pick(0, 9);
  std::bernoulli_distribution masked(0.3), nan(0.02), inf_masked(0.2), inf(0.02);
  for (const LengthSet& set : sets) {
    const std::int64_t nnz = std::accumulate(set.lengths.begin(), set.lengths.end(), std::int64_t{0});
    REQUIRE(nnz > detail::kWarpRowsMinMean * static_cast<std::int64_t>(set.lengths.size()));  // warp rows taken
    for (const char* values : {"random", "ties", "masked", "infinite"}) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), values " << values);
      auto host = test::random_ragged<T, OffsetT>(set.lengths, 1, rng);
      if (values[0] == 't')
        for (T& value : host.values)
          if (const int k = pick(rng); k < 6) value = test::round_to<T>(specials[k % 5]);
      if (values[0] == 'm') {
        for (T& value : host.values)
          if (masked(rng)) value = neg_inf;
          else if (nan(rng)) value = test::round_to<T>(std::numeric_limits<double>::quiet_NaN());
        for (std::int64_t b = 0; b < host.batch; b += 5)
          for (std::int64_t i = 0; i < host.length(b); ++i) host.at(host.begin(b) + i, 0) = neg_inf;
      }
      if (values[0] == 'i')
        for (T& value : host.values)
          if (inf_masked(rng)) value = neg_inf;
          else if (inf(rng)) value = test::round_to<T>(std::numeric_limits<double>::infinity());
      const DeviceRagged<T, OffsetT> dev(host);
      const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
      require_switch_keeps_bits(dev, dy, detail::set_segment_warp_rows_enabled);  // warp rows, then streams
    }
  }
  // And against the CPU reference, forward and backward, on the bounds' lengths.
  detail::set_segment_warp_rows_enabled(true);
  check_softmax(test::random_ragged<T, OffsetT>(warp_row_lengths(rng, 1000), 1, rng, kSpareRows), rng);
}

TEMPLATE_TEST_CASE("segment_softmax: the row passes' L2 prefetch gives the same bits", "[segment][gpu][determinism]",
                   F32_I32, BF16_I64) {
  // As segment_reduce's test: the warp rows (D = 1), the sub-warp rows (D = 64) and the wide short rows (D = 520,
  // several rounds of loads forward and backward) ask L2 for x (and dy) of the rows they load next; outputs and
  // gradients must not move. Under the emulator every prefetched address is checked to lie in device memory.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(1153);
  const RestoreRowPrefetch restore;
  const RowPassesOn row_passes;
  for (std::int64_t inner : {1, 64, 520})  // prefetch, then none
    require_sets_keep_bits<T, OffsetT>(row_prefetch_sets(rng, inner), inner, rng,
                                       detail::set_segment_row_prefetch_enabled);
}

TEMPLATE_TEST_CASE("segment_softmax: grids of one and three blocks give the full grid's bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // As segment_reduce's test: capped at 1 or 3 blocks (set_grid_cap), every grid-stride loop of the row
  // passes, the first pass and the second pass (block rows and rows past the local-finish limit included) takes many
  // rounds; forward and backward must not move.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(1203);
  const test::RestoreGridCap restore;
  const RowPassesOn row_passes;
  for (unsigned cap : {1u, 3u}) {
    INFO("grid of at most " << cap << " blocks");
    for (std::int64_t inner : {1, 3, 64, 264, 520})
      require_sets_keep_bits<T, OffsetT>(every_pass_sets(rng, inner), inner, rng,
                                         [cap](bool on) { detail::set_grid_cap(on ? cap : 0u); });
  }
}

TEST_CASE("segment_softmax and its backward can be captured in a CUDA graph", "[segment][gpu][graph]") {
  auto rng = test::make_rng(507);
  // Short rows, a block row and one past the block rows' limit, so the captured work includes every pass.
  std::vector<std::int64_t> lengths = test::make_lengths(test::Regime::kRandom, rng, 30);
  lengths.push_back(10000);
  lengths.push_back(200003);
  const auto host = test::random_ragged<float, std::int32_t>(lengths, 1, rng);
  const DeviceRagged<float, std::int32_t> dev(host);
  const std::vector<float> expected_y = device_softmax(dev, /*log=*/true);
  const std::vector<float> dy = test::random_values<float>(expected_y.size(), rng);
  const std::vector<float> expected_grad = device_softmax_backward(dev, /*log=*/true, expected_y, dy);

  DeviceBuffer<float> y(expected_y.size()), d_dy(dy), grad_in(expected_y.size());
  std::size_t forward_bytes = 0, backward_bytes = 0;
  REQUIRE_OK(segment_softmax(nullptr, forward_bytes, dev.view(), true, y.data(), nullptr));
  REQUIRE_OK(segment_softmax_backward(nullptr, backward_bytes, dev.view(), true, y.data(), d_dy.data(),
                                      grad_in.data(), nullptr));
  DeviceBuffer<unsigned char> forward_ws(std::max<std::size_t>(forward_bytes, 1));
  DeviceBuffer<unsigned char> backward_ws(std::max<std::size_t>(backward_bytes, 1));
  test::poison_workspace(forward_ws);
  test::poison_workspace(backward_ws);
  test::CapturedGraph graph([&](cudaStream_t stream) {
    // The backward pass reads the y the forward pass writes in the same graph.
    const Status forward = segment_softmax(forward_ws.data(), forward_bytes, dev.view(), true, y.data(), stream);
    const Status backward = segment_softmax_backward(backward_ws.data(), backward_bytes, dev.view(), true, y.data(),
                                                     d_dy.data(), grad_in.data(), stream);
    return forward != Status::kSuccess ? forward : backward;
  });
  REQUIRE_OK(graph.enqueued);
  for (int replay = 0; replay < 2; ++replay) {
    test::poison(y);
    test::poison(grad_in);
    forward_ws.fill_bytes(0xa5);  // the workspace holds nothing a replay may rely on
    backward_ws.fill_bytes(0xa5);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE_CUDA(graph.launch());
    REQUIRE_WRITTEN_AND_EQUAL(y.to_host(), expected_y);
    REQUIRE_WRITTEN_AND_EQUAL(grad_in.to_host(), expected_grad);
  }
}

// The argument errors are checked without a GPU in tests/cpu/test_argument_checks.cpp; these need the query
// (CUB's temp size) or the device data.
TEMPLATE_TEST_CASE("segment_softmax: dependent launches give the ordinary launches' bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // The row pass, first pass and second pass follow one another as programmatic dependents
  // (kernels/grid_dependency.cuh); with ordinary launches the same kernels run one after another, so any
  // difference is a read that did not wait for the kernel before.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(653);
  for (std::int64_t inner : {1, 64, 1000}) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
      const auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
      const DeviceRagged<T, OffsetT> dev(host);
      const std::vector<T> dy = test::random_values<T>(host.values.size(), rng);
      // Both backward passes take the dependent run's y, so that each pair differs only in its launches.
      const auto y = test::dependent_and_ordinary([&] { return device_softmax(dev, false); });
      const auto grad =
          test::dependent_and_ordinary([&] { return device_softmax_backward(dev, false, y.first, dy); });
      REQUIRE_BITWISE_EQUAL(y.first, y.second);
      REQUIRE_BITWISE_EQUAL(grad.first, grad.second);
    }
  }
}

TEMPLATE_TEST_CASE("segment_softmax: a short workspace is refused, an empty batch writes nothing",
                   "[segment][gpu][errors]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(504);
  const auto host = test::random_ragged<float, OffsetT>({3, 0, 4}, 2, rng);
  const DeviceRagged<float, OffsetT> dev(host);
  DeviceBuffer<float> out(14), grad_out(14), grad_in(14);
  std::size_t bytes = 0;

  SECTION("a workspace smaller than the query returned") {
    REQUIRE_OK(segment_softmax(nullptr, bytes, dev.view(), false, out.data(), nullptr));
    REQUIRE(bytes > 0);
    DeviceBuffer<unsigned char> workspace(bytes);
    test::poison_workspace(workspace);
    std::size_t too_few = bytes - 1;
    REQUIRE(segment_softmax(workspace.data(), too_few, dev.view(), false, out.data(), nullptr) ==
            Status::kWorkspaceTooSmall);
    REQUIRE_OK(segment_softmax_backward(nullptr, bytes, dev.view(), false, out.data(), grad_out.data(),
                                        grad_in.data(), nullptr));
    REQUIRE(bytes > 0);
    DeviceBuffer<unsigned char> backward_workspace(bytes);
    test::poison_workspace(backward_workspace);
    too_few = bytes - 1;
    REQUIRE(segment_softmax_backward(backward_workspace.data(), too_few, dev.view(), false, out.data(),
                                     grad_out.data(), grad_in.data(), nullptr) == Status::kWorkspaceTooSmall);
  }
  SECTION("an empty batch succeeds and writes nothing") {
    const std::vector<OffsetT> zero = {0};
    DeviceBuffer<OffsetT> offsets(zero);
    for (std::int64_t nnz : {0, 7}) {
      RaggedView<const float, OffsetT> empty{nnz > 0 ? dev.values.data() : nullptr, offsets.data(), 0, nnz, 2};
      test::poison(out);
      test::poison(grad_in);
      const std::vector<float> out_before = out.to_host(), grad_before = grad_in.to_host();
      for (bool log : {false, true}) {
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_softmax(ws, b, empty, log, out.data(), nullptr);
        }));
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_softmax_backward(ws, b, empty, log, grad_out.data(), grad_out.data(), grad_in.data(),
                                          nullptr);
        }));
      }
      const std::vector<float> out_after = out.to_host(), grad_after = grad_in.to_host();
      REQUIRE_BITWISE_EQUAL(out_after, out_before);
      REQUIRE_BITWISE_EQUAL(grad_after, grad_before);
    }
  }
}

namespace {

// Softmax and log-softmax, forward and backward, of random T values under malformed offsets: they must run,
// touching nothing out of bounds (values hold exactly nnz tokens, for the emulator's guard page and
// compute-sanitizer; the outputs have guards of their own, checked on any device).
template <typename T, typename OffsetT>
void run_malformed_softmax(const MalformedOffsets<OffsetT>& c, std::int64_t inner, std::mt19937_64& rng) {
  const std::int64_t batch = static_cast<std::int64_t>(c.offsets.size()) - 1;
  const std::int64_t size = c.nnz * inner;
  DeviceBuffer<OffsetT> offsets(c.offsets);
  DeviceBuffer<T> values(test::random_values<T>(size, rng));
  DeviceBuffer<T> dy(test::random_values<T>(size, rng));
  test::GuardedBuffer<T> out(static_cast<std::size_t>(size)), grad_in(static_cast<std::size_t>(size));
  const RaggedView<const T, OffsetT> view{values.data(), offsets.data(), batch, c.nnz, inner};
  for (bool log : {false, true}) {
    REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
      return segment_softmax(ws, b, view, log, out.data(), nullptr);
    }));
    REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
      return segment_softmax_backward(ws, b, view, log, values.data(), dy.data(), grad_in.data(), nullptr);
    }));
  }
  REQUIRE(out.guards_intact());  // no write past either end of the outputs
  REQUIRE(grad_in.guards_intact());
  REQUIRE_CUDA(cudaGetLastError());
}

}  // namespace

TEMPLATE_TEST_CASE("segment_softmax stays in bounds with malformed offsets", "[segment][gpu][errors]", std::int32_t,
                   std::int64_t) {
  // float at D = 1, 3, 64 and 264 (the wide short-row pass; the cases of at most 2000 tokens there), and bfloat16
  // at D = 264 and 520, whose units of several register tiles ask L2 for their later tiles (normalize_unit).
  using OffsetT = TestType;
  auto rng = test::make_rng(505);
  for (const MalformedOffsets<OffsetT>& c : malformed_offsets_cases<OffsetT>()) {
    for (std::int64_t inner : {1, 3, 64, 264}) {
      if (inner > 64 && c.nnz > 2000) continue;
      INFO(c.what << ", float, inner " << inner);
      run_malformed_softmax<float>(c, inner, rng);
    }
    for (std::int64_t inner : {264, 520}) {
      if (c.nnz > 2000) continue;
      INFO(c.what << ", bfloat16, inner " << inner);
      run_malformed_softmax<bfloat16>(c, inner, rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment workspace sizes do not depend on where the tensors sit", "[segment][gpu]", half, float) {
  // The vector width follows the pointers' alignment and changes the chunk size; a caller that queries once
  // and runs on other tensors of the same shape must not be refused (kWorkspaceTooSmall).
  using T = TestType;
  const std::int64_t batch = 3, nnz = 50000, inner = 1024;
  const std::vector<std::int32_t> offsets = {0, 1000, 1000, 50000};
  DeviceBuffer<std::int32_t> d_offsets(offsets);
  DeviceBuffer<T> values(static_cast<std::size_t>(nnz * inner + 1)), out(static_cast<std::size_t>(nnz * inner + 1));
  DeviceBuffer<T> reduced(static_cast<std::size_t>(batch * inner));
  auto sizes = [&](std::int64_t shift) {
    const RaggedView<const T, std::int32_t> view{values.data() + shift, d_offsets.data(), batch, nnz, inner};
    std::size_t softmax = 0, backward = 0, reduce = 0;
    REQUIRE_OK(segment_softmax(nullptr, softmax, view, false, out.data() + shift, nullptr));
    REQUIRE_OK(segment_softmax_backward(nullptr, backward, view, false, view.values, view.values, out.data() + shift,
                                        nullptr));
    REQUIRE_OK(segment_reduce(nullptr, reduce, view, ReduceOp::kSum, reduced.data(), nullptr, 0.0f, nullptr));
    return std::vector<std::size_t>{softmax, backward, reduce};
  };
  REQUIRE(sizes(0) == sizes(1));
}

TEST_CASE("RaggedTensor::softmax and softmax_backward give the low-level results", "[segment][gpu][tensor]") {
  auto rng = test::make_rng(509);
  const std::vector<std::int64_t> lengths = {3, 0, 2000, 1, 64};
  const auto host = test::random_ragged<half, std::int32_t>(lengths, 5, rng);
  const DeviceRagged<half, std::int32_t> dev(host);
  const auto x = RaggedTensor<half, std::int32_t>::from_host(host.values, lengths, {5});
  const std::vector<half> dy = test::random_values<half>(host.values.size(), rng);
  const auto grad_out = RaggedTensor<half, std::int32_t>::from_host(dy, lengths, {5});
  for (const bool log : {false, true}) {
    const RaggedTensor<half, std::int32_t> y = x.softmax(log);
    const std::vector<half> want_y = device_softmax(dev, log);
    REQUIRE_WRITTEN_AND_EQUAL(y.values_to_host(), want_y);
    const RaggedTensor<half, std::int32_t> dx = y.softmax_backward(grad_out, log);
    REQUIRE(dx.offsets_to_host() == host.offsets);
    REQUIRE_WRITTEN_AND_EQUAL(dx.values_to_host(), device_softmax_backward(dev, log, want_y, dy));
  }
  const auto other =
      RaggedTensor<half, std::int32_t>::from_host(std::vector<half>(10, test::from_double<half>(1.0)), {2}, {5});
  REQUIRE_THROWS_WITH(x.softmax(false).softmax_backward(other), Catch::Contains("grad_out is [2 tokens of 1"));
}
