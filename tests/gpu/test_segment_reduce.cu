// segment_reduce and segment_reduce_backward on the device against the CPU reference: every op (max / min with and
// without an arg output), every T, both offset types, D in {1, 3, 64, 1000}, every length regime plus power-law
// lengths and one row holding ~all of 1M+ elements; rows whose partials take merge trees of one to three levels; NaN,
// infinities, ties and signed zeros; bitwise determinism and batch invariance; streamed rows against the unit walk,
// bitwise; the sub-warp row pass of short rows at D > 32 against the first pass (max / min bitwise, every op at wide
// D); the warp rows at D = 1 against the streams, bitwise; grids capped at 1 and 3 blocks, bitwise; capture in a CUDA
// graph; arrays off 16-byte alignment; a short workspace and malformed offsets (the other argument errors:
// tests/cpu/test_argument_checks.cpp).
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <numeric>

#include "../../kernels/segment_launch.h"
#include "gpu/dependent_launch.h"
#include "gpu/segment_common.h"
#include "ragged/tensor.h"

using namespace ragged;
using namespace ragged::test::segment;
using test::HostRagged;

namespace {

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin};

bool is_extreme(ReduceOp op) { return op == ReduceOp::kMax || op == ReduceOp::kMin; }

template <typename T>
struct ReduceOutput {
  std::vector<T> out;
  std::vector<std::int64_t> arg;  // empty when no arg output was asked for
};

// segment_reduce on the device, outputs poisoned first (out and arg `shift` elements into their allocations, with
// as many guard elements after them, which must stay poisoned).
template <typename T, typename OffsetT>
ReduceOutput<T> device_reduce(const DeviceRagged<T, OffsetT>& d, ReduceOp op, bool with_arg, float empty_value,
                              std::int64_t shift = 0) {
  const auto guard = static_cast<std::size_t>(shift);
  test::GuardedBuffer<T> out(static_cast<std::size_t>(d.batch * d.inner), guard);
  test::GuardedBuffer<std::int64_t> arg(with_arg ? static_cast<std::size_t>(d.batch * d.inner) : 0, guard);
  std::int64_t* arg_ptr = with_arg ? arg.data() : nullptr;
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return segment_reduce(workspace, bytes, d.view(), op, out.data(), arg_ptr, empty_value, nullptr);
  }));
  if (shift > 0) REQUIRE((out.guards_intact() && arg.guards_intact()));
  return {out.to_host(), with_arg ? arg.to_host() : std::vector<std::int64_t>()};
}

// segment_reduce_backward on the device with shape.values null (it must not be read), grad_in poisoned first;
// grad_out and grad_in as far into their allocations as `shifts` says.
template <typename T, typename OffsetT>
std::vector<T> device_reduce_backward(const DeviceRagged<T, OffsetT>& d, ReduceOp op, const std::vector<T>& grad_out,
                                      const std::vector<std::int64_t>& arg, const Shifts& shifts = {}) {
  const test::GuardedBuffer<T> d_grad_out(grad_out, static_cast<std::size_t>(shifts.grad_out));
  DeviceBuffer<std::int64_t> d_arg(arg);
  test::GuardedBuffer<T> grad_in(static_cast<std::size_t>(d.nnz * d.inner), static_cast<std::size_t>(shifts.grad_in));
  RaggedView<const T, OffsetT> shape = d.view();
  shape.values = nullptr;
  const std::int64_t* arg_ptr = is_extreme(op) ? d_arg.data() : nullptr;
  REQUIRE_OK(run_two_phase([&](void* workspace, std::size_t& bytes) {
    return segment_reduce_backward(workspace, bytes, shape, op, d_grad_out.data(), arg_ptr, grad_in.data(), nullptr);
  }));
  if (shifts.grad_in > 0) REQUIRE(grad_in.guards_intact());
  return grad_in.to_host();
}

// Every op forward (with and without arg) and backward on one input, against the CPU reference; each array
// `shifts` elements into its allocation.
template <typename T, typename OffsetT>
void check_all_ops(const HostRagged<T, OffsetT>& host, float empty_value, std::mt19937_64& rng,
                   const Shifts& shifts = {}) {
  const DeviceRagged<T, OffsetT> dev(host, shifts.values);
  const std::int64_t inner = host.inner, count = host.batch * inner;
  const std::int64_t used = static_cast<std::int64_t>(host.offsets.back()) * inner;

  // sum |x| per output: the scale of float accumulation error.
  std::vector<double> abs_sum(count, 0.0);
  for (std::int64_t b = 0; b < host.batch; ++b)
    for (std::int64_t row = host.begin(b); row < host.begin(b) + host.length(b); ++row)
      for (std::int64_t d = 0; d < inner; ++d) abs_sum[b * inner + d] += std::abs(test::to_double(host.at(row, d)));

  for (ReduceOp op : kAllOps) {
    INFO("op " << reduce_op_name(op) << ", empty_value " << empty_value);
    std::vector<T> ref(count);
    std::vector<std::int64_t> ref_arg(count, -2);
    reference::segment_reduce(host.view(), op, ref.data(), is_extreme(op) ? ref_arg.data() : nullptr, empty_value);

    std::vector<std::int64_t> device_arg;
    if (is_extreme(op)) {
      // Max / min move one input value: exact, with and without the arg output.
      ReduceOutput<T> with_arg = device_reduce(dev, op, true, empty_value, shifts.out);
      std::string failure = compare_values_exact(with_arg.out, ref, 0, count);
      INFO("with arg: " << failure);
      REQUIRE(failure.empty());
      REQUIRE(with_arg.arg == ref_arg);
      ReduceOutput<T> no_arg = device_reduce(dev, op, false, empty_value, shifts.out);
      failure = compare_values_exact(no_arg.out, ref, 0, count);
      INFO("without arg: " << failure);
      REQUIRE(failure.empty());
      device_arg = with_arg.arg;
    } else {
      ReduceOutput<T> got = device_reduce(dev, op, false, empty_value, shifts.out);
      std::vector<double> bound(count);
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t length = host.length(k / inner);
        bound[k] = op == ReduceOp::kSum ? 1e-5 * abs_sum[k] : 1e-5 * abs_sum[k] / std::max<std::int64_t>(length, 1);
      }
      std::vector<T> naive_t;
      if (is_low_precision<T>()) naive_t = naive_sum_or_mean(host, op, empty_value);
      const std::string failure =
          test::compare_to_reference(got.out, ref, is_low_precision<T>() ? &naive_t : nullptr, bound, 0, count);
      INFO(failure);
      REQUIRE(failure.empty());
      // Empty sequences give empty_value exactly.
      for (std::int64_t b = 0; b < host.batch; ++b)
        if (host.length(b) == 0)
          REQUIRE(std::memcmp(&got.out[b * inner], &ref[b * inner], inner * sizeof(T)) == 0);
    }

    // Backward: copies and routing are exact; the mean's division may round differently by one ulp.
    const std::vector<T> grad_out = test::random_values<T>(count, rng);
    std::vector<T> grad_ref(host.values.size());
    reference::segment_reduce_backward(host.view(), op, grad_out.data(), ref_arg.data(), grad_ref.data());
    const std::vector<T> grad_got = device_reduce_backward(dev, op, grad_out, device_arg, shifts);
    const std::string failure =
        op == ReduceOp::kMean
            ? test::compare_to_reference<T>(grad_got, grad_ref, nullptr, std::vector<double>(grad_ref.size(), 0.0), 0,
                                            used)
            : compare_values_exact(grad_got, grad_ref, 0, used);
    INFO("backward: " << failure);
    REQUIRE(failure.empty());
  }
}

// Every length set at each of `inners`, for the sum and for the max with its arg: check(dev, op), under INFO
// naming the case. For the tests that run one input under two settings and want the same bits.
template <typename T, typename OffsetT, typename Check>
void for_each_sum_and_max_case(std::mt19937_64& rng, std::initializer_list<std::int64_t> inners, Check check) {
  for (std::int64_t inner : inners) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
      const DeviceRagged<T, OffsetT> dev(test::random_ragged<T, OffsetT>(set.lengths, inner, rng));
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        INFO("op " << reduce_op_name(op));
        check(dev, op);
      }
    }
  }
}

template <typename T>
void require_same_bits(const ReduceOutput<T>& got, const ReduceOutput<T>& expected) {
  REQUIRE_BITWISE_EQUAL(got.out, expected.out);
  REQUIRE(got.arg == expected.arg);
}

// op on dev with the merges staged in shared memory gives the bits of the register merges (staging left on).
template <typename T, typename OffsetT>
void require_staged_merges_keep_bits(const DeviceRagged<T, OffsetT>& dev, ReduceOp op) {
  detail::set_segment_staged_merges_enabled(false);
  const ReduceOutput<T> registers = device_reduce(dev, op, is_extreme(op), -1.5f);
  detail::set_segment_staged_merges_enabled(true);
  require_same_bits(device_reduce(dev, op, is_extreme(op), -1.5f), registers);
}

}  // namespace

TEMPLATE_TEST_CASE("segment_reduce on the device matches the CPU reference", "[segment][gpu]", F32_I32, F32_I64,
                   F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(401);
  const float empty_values[] = {0.0f, -1.5f, -std::numeric_limits<float>::infinity()};
  int round = 0;
  for (std::int64_t inner : kInnerSizes) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner);
      const auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
      check_all_ops(host, empty_values[round++ % 3], rng);
    }
  }
}

TEMPLATE_TEST_CASE("segment_reduce on the device: arrays off 16-byte alignment", "[segment][gpu]", F32_I64, BF16_I32) {
  // The forward reads the values in 16-byte vectors and the backward writes grad_in so, where the array is 16-byte
  // aligned and D a multiple of the vector (segment_vector_width); off alignment, one element at a time, with the
  // other geometry (chunk sizes, tiny rows, sub-warp rows). The forward's outputs and the backward's grad_out are
  // accessed an element at a time whatever their alignment: shifted too. At each D where aligned arrays take
  // vectors, every op, every length set, against the CPU reference; a vector access off alignment faults on the
  // GPU and in the emulator.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(433);
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  // The second set: grad_in aligned, grad_out not.
  for_each_misaligned_case<T, OffsetT>(rng, {{1, 1, 1, 1}, {vec - 1, 3, 1, 0}}, 0, 0,
                                       [&](const HostRagged<T, OffsetT>& host, const Shifts& shifts) {
                                         check_all_ops(host, -1.5f, rng, shifts);
                                       });
}

TEMPLATE_TEST_CASE("segment_reduce on the device: a plan too large for the first-pass kernel to scan",
                   "[segment][gpu]", F32_I32, F32_I64, BF16_I32) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(409);
  for (std::int64_t inner : {1, 3}) {
    const auto lengths = rows_past_kernel_plan(rng, inner);
    INFO("batch " << lengths.size() << ", inner " << inner);
    check_all_ops(test::random_ragged<T, OffsetT>(lengths, inner, rng), -1.5f, rng);
  }
}

TEMPLATE_TEST_CASE("segment_reduce on the device: merge trees of one, two and three levels", "[segment][gpu]",
                   F32_I32, BF16_I64) {
  // A row of several chunks is merged by a tree of fan-in F (kernels/segment_geometry.h, climb_merge_tree): rows
  // of F, F + 1, F * F - 1 and F * F + 1 chunks take 1, 2, 2 and 3 levels (the last: a root of 2 children, one of
  // them a node of one chunk). The chunk size is the kernels' own, for the 16-byte vectors of aligned values.
  // D = 1 merges every node lane per child (merge_node's narrow nodes), D = 33 both a column per lane and lanes per
  // child (column tiles of 32 columns and of 1). With 16-byte vectors the nodes wider than the warp go through
  // shared memory (merge_staged_node), a range of columns per round trip: D = 64 (one tile; max / min's (value,
  // index) pairs take ranges of 20 columns, the last one 4 wide) and D = 264 (tiles of 128 and 8 float columns, or of
  // 256 and 8 in 16 bits, the wide ones in several ranges), on rows of up to 2 levels there.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(410);
  const std::int64_t F = detail::kMergeFanIn;
  for (std::int64_t inner : {1, 33, 64, 264}) {
    const int vec = inner % static_cast<std::int64_t>(16 / sizeof(T)) == 0 ? static_cast<int>(16 / sizeof(T)) : 1;
    const std::int64_t chunk =
        detail::make_segment_geometry(inner, vec, detail::kReduceFloatsPerLane / vec).chunk_tokens;
    const std::vector<std::int64_t> lengths =
        inner < 264
            ? std::vector<std::int64_t>{F * F * chunk + 1, 0, F * chunk, 3, F * chunk + 1, (F * F - 1) * chunk - 7}
            : std::vector<std::int64_t>{F * chunk + 1, 0, F * chunk, 3, 3 * F * chunk - 5};
    INFO("inner " << inner << ", chunk " << chunk << " tokens");
    check_all_ops(test::random_ragged<T, OffsetT>(lengths, inner, rng), 0.0f, rng);
  }
}

TEMPLATE_TEST_CASE("segment_reduce on the device: rows that fill every partial slot of the workspace",
                   "[segment][gpu]", F32_I32, BF16_I64) {
  // The query sizes the partials for the lengths that need the most of them (max_partial_chunks): every row
  // k chunks and one token long. Here the workspace holds exactly the slots the rows use, so a slot counted
  // wrong on the device lands past the bound, where the kernels' guard drops the row and the check fails.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(413);
  for (std::int64_t inner : {1, 3, 64, 264}) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    const detail::SegmentGeometry g =
        detail::make_segment_geometry(inner, vec, detail::kReduceFloatsPerLane / vec);
    std::int64_t nnz = 0, slots = 0;
    const std::vector<std::int64_t> lengths = rows_filling_partials(g, 4, rng, nnz, slots);
    INFO("inner " << inner << ", chunk " << g.chunk_tokens << " tokens, " << slots << " partial slots");
    REQUIRE(slots == detail::max_partial_chunks(nnz, static_cast<std::int64_t>(lengths.size()), g));
    check_all_ops(test::random_ragged<T, OffsetT>(lengths, inner, rng), 0.0f, rng);
  }
}

TEMPLATE_TEST_CASE("segment_reduce on the device: NaN, infinities, ties and signed zeros", "[segment][gpu]", F32_I32,
                   F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(402);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // The infinities: a group of loads holding both sends max / min down their NaN path (ExtremeAcc::add_masked).
  const double inf = std::numeric_limits<double>::infinity();
  const double tie_values[] = {-inf, -2.0, -1.0, -0.0, 0.0, 1.0, 2.0, inf};
  std::uniform_int_distribution<int> pick_tie(0, 7);
  std::bernoulli_distribution column_has_nan(0.3);
  for (std::int64_t inner : kInnerSizes) {
    for (const LengthSet& set : length_sets(rng, inner)) {
      for (bool ties : {false, true}) {
        INFO("lengths: " << set.name << ", inner " << inner << (ties ? ", tie-heavy values" : ", random values"));
        auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
        if (ties)
          for (T& v : host.values) v = test::round_to<T>(tie_values[pick_tie(rng)]);
        // About 30% of the columns get one to three NaNs at random rows.
        for (std::int64_t b = 0; b < host.batch; ++b) {
          if (host.length(b) == 0) continue;
          std::uniform_int_distribution<std::int64_t> row(host.begin(b), host.begin(b) + host.length(b) - 1);
          for (std::int64_t d = 0; d < inner; ++d)
            if (column_has_nan(rng))
              for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) host.at(row(rng), d) = test::round_to<T>(nan);
        }
        check_all_ops(host, -1.5f, rng);
      }
    }
  }
}

TEMPLATE_TEST_CASE("segment_reduce is deterministic and batch-invariant", "[segment][gpu][determinism]", F32_I32,
                   F32_I64, F16_I32, F16_I64, BF16_I32, BF16_I64) {
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(403);
  // Long rows (> 100k elements) so the multi-chunk path runs, and one-chunk rows, which the kernel streams
  // (stream_rows) or, at D = 1 and up to 512 tokens, finishes a warp each in the row pass (where the batch's rows
  // average more than 16 tokens): embed_row starts the row at an odd token in one batch and an even one in the
  // other, so the stream's lanes hold its token phases rotated differently.
  const std::pair<std::int64_t, std::int64_t> cases[] = {{1, 300007}, {64, 5003}, {1, 257}, {1, 33}, {64, 77}};
  for (const auto& [inner, length] : cases) {
    const std::vector<T> row = test::random_values<T>(length * inner, rng);
    const auto e = embed_row<T, OffsetT>(row, length, inner, rng);
    const DeviceRagged<T, OffsetT> first(e.first), second(e.second);
    for (ReduceOp op : kAllOps) {
      INFO("inner " << inner << ", length " << length << ", op " << reduce_op_name(op));
      const bool with_arg = is_extreme(op);
      const ReduceOutput<T> run1 = device_reduce(first, op, with_arg, 0.0f);
      const ReduceOutput<T> run2 = device_reduce(first, op, with_arg, 0.0f);
      REQUIRE_BITWISE_EQUAL(run1.out, run2.out);
      REQUIRE(run1.arg == run2.arg);
      const ReduceOutput<T> other = device_reduce(second, op, with_arg, 0.0f);
      REQUIRE_BITWISE_EQUAL(slice(run1.out, e.index_in_first * inner, inner),
                            slice(other.out, e.index_in_second * inner, inner));
      if (with_arg)
        REQUIRE(slice(run1.arg, e.index_in_first * inner, inner) == slice(other.arg, e.index_in_second * inner, inner));
    }
  }
}

namespace {

// Each length set at D = `inner`, with random values and with values from {NaN, -inf, -1, -0, 0, 1, inf}, and each
// op: set(true), then set(false), on the same input, must give the same bits and args. The special values are
// ties, signed zeros, NaN and both infinities: where max / min's grouped fold takes its other paths (the first
// index of a tie; a NaN, or +inf with -inf, sending a group through add()). Max / min only on them: a sum's merges
// may swap their operands, which a GPU's add does not show (every NaN it makes is the canonical one) but the
// emulator's x86 add does (it keeps the first operand's NaN, sign included).
template <typename T, typename OffsetT, typename Set>
void require_setting_keeps_bits(const std::vector<LengthSet>& sets, std::int64_t inner, std::mt19937_64& rng,
                                Set set_enabled) {
  const double special_values[] = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity(),
                                   -1.0, -0.0, 0.0, 1.0, std::numeric_limits<double>::infinity()};
  std::discrete_distribution<int> pick_special({1, 2, 8, 8, 8, 8, 2});
  for (const LengthSet& set : sets) {
    for (bool ties : {false, true}) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner
                       << (ties ? ", values from {NaN, -inf, -1, -0, 0, 1, inf}" : ", random values"));
      auto host = test::random_ragged<T, OffsetT>(set.lengths, inner, rng);
      if (ties)
        for (T& v : host.values) v = test::round_to<T>(special_values[pick_special(rng)]);
      const DeviceRagged<T, OffsetT> dev(host);
      for (ReduceOp op : kAllOps) {
        if (ties && !is_extreme(op)) continue;
        INFO("op " << reduce_op_name(op));
        set_enabled(true);
        const ReduceOutput<T> on = device_reduce(dev, op, is_extreme(op), -1.5f);
        set_enabled(false);
        require_same_bits(on, device_reduce(dev, op, is_extreme(op), -1.5f));
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("segment_reduce: streamed rows give the unit walk's bits", "[segment][gpu][determinism]",
                   F32_I32, F16_I64, BF16_I32) {
  // At narrow D where 32 vectors are whole tokens the kernel streams one-chunk rows (stream_rows) instead of
  // walking them as units; its summation order is meant to be the unit walk's, so results must agree bitwise.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(419);
  const RestoreStreaming restore;
  // Short rows at D = 64 take the sub-warp row pass by default, and rows of 33 to 512 tokens at D = 1 the warp
  // rows, neither the stream nor the walk: both off here, so that the stream is compared with the walk on them too.
  const RestoreSubwarpRows restore_subwarp;
  const RestoreWarpRows restore_warp_rows;
  detail::set_segment_subwarp_rows_enabled(false);
  detail::set_segment_warp_rows_enabled(false);
  for (std::int64_t inner : {1, 2, 8, 64}) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    REQUIRE(detail::streams_rows(detail::make_segment_geometry(inner, vec, detail::kReduceFloatsPerLane / vec)));
    require_setting_keeps_bits<T, OffsetT>(length_sets(rng, inner), inner, rng, detail::set_segment_stream_enabled);
  }
}

TEMPLATE_TEST_CASE("segment_reduce: the sub-warp row pass gives the first pass's bits (max and min; every op at "
                   "wide D)",
                   "[segment][gpu]", F32_I32, F32_I64, BF16_I32, F16_I64) {
  // Rows of at most 4 tokens at D > 32 with 16-byte vectors are finished by the row pass
  // (segment_reduce_subwarp_rows_kernel) instead of the first pass: by a sub-warp at D = 64, 128, 256 where 32 /
  // vcols whole rows fit a warp, by the whole warp over the column tiles at wider D (264: 3 float tiles, the last
  // of 2 lanes, or 2 bfloat16 ones, the last of 1; 520: 5 float tiles, more than one round of loads; 2048 in half
  // and bfloat16: 8 tiles, the most a wide short row takes, in 4 rounds). D = 1000 in the reference tests is 8
  // float tiles. Max / min select one input by a total order (NaN first, then the
  // extreme, then the lower index), so both paths must give the same bits and the same arg, ties, signed zeros,
  // NaN and infinities included. At narrow D the sums add in another order, so they are held against the
  // reference (also under both settings); at wide D a unit's lane adds its column in token order too, so every
  // op must agree bitwise.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(421);
  const RestoreSubwarpRows restore;
  const double special_values[] = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity(),
                                   -1.0, -0.0, 0.0, 1.0, std::numeric_limits<double>::infinity()};
  std::discrete_distribution<int> pick_special({1, 2, 8, 8, 8, 8, 2});
  std::vector<std::int64_t> inners{64, 128, 256, 264, 520};
  if (sizeof(T) == 2) inners.push_back(2048);
  for (std::int64_t inner : inners) {
    const int vec = detail::segment_vector_width(inner, sizeof(T), nullptr);
    const auto g = detail::make_segment_geometry(inner, vec, detail::kReduceFloatsPerLane / vec, 1, 1, true);
    const std::int64_t vcols = inner / vec;
    REQUIRE(g.subwarp_rows == (vcols <= 32 ? 32 % vcols == 0 : (vcols + 31) / 32 <= detail::kWideShortRowMaxTiles));
    REQUIRE(g.subwarp_rows);
    std::vector<ReduceOp> same_bits{ReduceOp::kMax, ReduceOp::kMin};
    if (!g.narrow) same_bits.insert(same_bits.end(), {ReduceOp::kSum, ReduceOp::kMean});
    for (bool ties : {false, true}) {
      INFO("inner " << inner << (ties ? ", values from {NaN, -inf, -1, -0, 0, 1, inf}" : ", random values"));
      auto host = test::random_ragged<T, OffsetT>(subwarp_lengths(rng, !g.narrow, inner), inner, rng);
      if (ties)
        for (T& v : host.values) v = test::round_to<T>(special_values[pick_special(rng)]);
      const DeviceRagged<T, OffsetT> dev(host);
      for (ReduceOp op : same_bits) {
        INFO("op " << reduce_op_name(op));
        detail::set_segment_subwarp_rows_enabled(true);
        const ReduceOutput<T> subwarp = device_reduce(dev, op, is_extreme(op), -1.5f);
        detail::set_segment_subwarp_rows_enabled(false);
        require_same_bits(subwarp, device_reduce(dev, op, is_extreme(op), -1.5f));
      }
      if (!ties)
        for (bool on : {true, false}) {
          INFO((on ? "sub-warp rows" : "first pass"));
          detail::set_segment_subwarp_rows_enabled(on);
          check_all_ops(host, -1.5f, rng);
        }
    }
  }
}

TEMPLATE_TEST_CASE("segment_reduce: the scalar row pass gives row_pass's bits", "[segment][gpu][determinism]",
                   F32_I32, F16_I32, BF16_I64) {
  // At D = 1 the row pass is segment_reduce_scalar_rows_kernel (32-bit indices, a lane per tiny or empty row, and
  // where rows average more than 16 tokens a warp per row of 33 to 512) instead of row_pass; it adds a tiny row's
  // tokens in the same order, and a warp row's in the streams', so every op must agree bitwise, the rows it hands
  // to the unit kernel included (its group sums are that kernel's plan).
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(977);
  const RestoreScalarRows restore;
  require_setting_keeps_bits<T, OffsetT>(length_sets(rng, 1), 1, rng, detail::set_segment_scalar_rows_enabled);
}

TEMPLATE_TEST_CASE("segment_reduce: warp rows give the streams' bits", "[segment][gpu][determinism]", F32_I32,
                   F16_I32, BF16_I64) {
  // At D = 1 the row pass also finishes the rows of 33 to 512 tokens, a warp each (warp_row_pass, reduce_warp_row),
  // which the first pass's streams took before; it adds each lane's tokens in the streams' order and merges the
  // lanes by the same tree, so every op must agree bitwise, args included. (The scalar row pass test compares the
  // warp rows with row_pass and the streams on the length sets whose rows average more than 16 tokens.) The last
  // set's warp shares span several windows of 32 rows (many_rows_few_warp_rows). The scalar row pass is set on:
  // warp rows need it.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(983);
  const RestoreWarpRows restore;
  const RestoreScalarRows restore_scalar_rows;
  detail::set_segment_scalar_rows_enabled(true);
  const std::vector<LengthSet> sets = {{"around the warp rows' bounds", warp_row_lengths(rng, 3000)},
                                       {"many rows, few of them warp rows", many_rows_few_warp_rows(rng)}};
  for (const LengthSet& set : sets) {  // the launcher takes warp rows where rows average more than this
    const std::int64_t nnz = std::accumulate(set.lengths.begin(), set.lengths.end(), std::int64_t{0});
    REQUIRE(nnz > detail::kWarpRowsMinMean * static_cast<std::int64_t>(set.lengths.size()));
  }
  require_setting_keeps_bits<T, OffsetT>(sets, 1, rng, detail::set_segment_warp_rows_enabled);
  // And against the CPU reference, every op and its backward, on the bounds' lengths.
  detail::set_segment_warp_rows_enabled(true);
  check_all_ops(test::random_ragged<T, OffsetT>(warp_row_lengths(rng, 1000), 1, rng), -1.5f, rng);
}

TEMPLATE_TEST_CASE("segment_reduce: every L2 prefetch distance gives the same bits", "[segment][gpu][determinism]",
                   F32_I32, BF16_I64) {
  // The row pass, the unit loop and the stream ask L2 for lines ahead of their loads (prefetch_group_offsets,
  // prefetch_pieces); a prefetch changes no value, so any difference is a bug in the loops around it. Under the
  // emulator every prefetched address is also checked to lie in device memory (offsets and values are allocated
  // to their exact size).
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(733);
  const RestorePrefetch restore;
  for_each_sum_and_max_case<T, OffsetT>(rng, {1, 3, 64, 1000}, [](const DeviceRagged<T, OffsetT>& dev, ReduceOp op) {
    detail::set_segment_prefetch_groups(0);
    const ReduceOutput<T> plain = device_reduce(dev, op, is_extreme(op), -1.5f);
    for (int groups = 1; groups <= detail::kSegmentMaxPrefetchGroups; ++groups) {
      INFO("prefetch " << groups << " groups ahead");
      detail::set_segment_prefetch_groups(groups);
      require_same_bits(device_reduce(dev, op, is_extreme(op), -1.5f), plain);
    }
  });
}

TEMPLATE_TEST_CASE("segment_reduce: the row passes' L2 prefetch gives the same bits", "[segment][gpu][determinism]",
                   F32_I32, BF16_I64) {
  // The warp rows (D = 1), the sub-warp rows (D = 64) and the wide short rows (D = 520: 5 float tiles or 3
  // bfloat16 ones, more than one round of loads) ask L2 for the rows they load next, and the wide ones for their
  // later column tiles (prefetch_span); a prefetch changes no value, so any difference is a bug in the loops
  // around it. Under the emulator every prefetched address is checked to lie in device memory.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(1151);
  const RestoreRowPrefetch restore;
  const RowPassesOn row_passes;
  for (std::int64_t inner : {1, 64, 520})
    require_setting_keeps_bits<T, OffsetT>(row_prefetch_sets(rng, inner), inner, rng,
                                           detail::set_segment_row_prefetch_enabled);
}

TEMPLATE_TEST_CASE("segment_reduce: grids of one and three blocks give the full grid's bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // Every segment kernel walks its work grid-stride, a full grid often in one round on the tests' inputs. Capped
  // at 1 or 3 blocks (set_grid_cap), each warp takes many rows, batches, units and second-pass slots, one
  // after another: the row passes (D = 1: scalar and warp rows; 64: sub-warp rows; 264 and 520: wide short rows,
  // 520 in two rounds of loads a row; 3: row_pass), the unit walks and streams, their prefetches ahead, and the
  // merge trees. A row's result does not depend on which warp computed it, so any difference is a bug in a loop.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(1201);
  const test::RestoreGridCap restore;
  const RowPassesOn row_passes;
  for (unsigned cap : {1u, 3u}) {
    INFO("grid of at most " << cap << " blocks");
    for (std::int64_t inner : {1, 3, 64, 264, 520})
      require_setting_keeps_bits<T, OffsetT>(every_pass_sets(rng, inner), inner, rng,
                                             [cap](bool on) { detail::set_grid_cap(on ? cap : 0u); });
  }
}

TEMPLATE_TEST_CASE("segment_reduce: merges staged in shared memory give the register merges' bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // With 16-byte vectors a merge-tree node of more (child, column) pairs than lanes is copied into shared memory a
  // range of columns per round trip and merged from there (merge_staged_node); switched off, a lane merges a column
  // at a time from L2. The same merges of the same values in the same order, so any difference is a copy that
  // missed or misplaced a partial. Sum (one float per partial) and max (a float and a 64-bit index): D = 8 (a
  // one-tile node of 8 columns), 64, 264 (tiles of 128 / 256 columns and of 8) and 1000 (a partial last tile),
  // over every length set (rows of one to thousands of chunks).
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(811);
  const RestoreStagedMerges restore;
  for_each_sum_and_max_case<T, OffsetT>(rng, {8, 64, 264, 1000}, require_staged_merges_keep_bits<T, OffsetT>);
}

TEMPLATE_TEST_CASE("segment_reduce: smaller merge stagings give the register merges' bits",
                   "[segment][gpu][determinism]", F32_I32, BF16_I64) {
  // Where the device's shared memory per SM would lose the first-pass kernel a resident block (A100 past ~117,000
  // rows, sm_86 / sm_89), the launcher stages 2 KB or 1 KB a warp instead of 4 KB: fewer columns per round trip
  // (max / min at 1 KB: 4 columns of 16 children), the same merges. Rows of many chunks at D = 64 and 1000.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(815);
  const RestoreStagedMerges restore;
  const RestoreMergeStageCap restore_cap;
  for (std::int64_t inner : {64, 1000}) {
    for (const LengthSet& set : long_row_sets(rng, inner)) {
      const DeviceRagged<T, OffsetT> dev(test::random_ragged<T, OffsetT>(set.lengths, inner, rng));
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (int cap : {2048, 1024}) {
          INFO("lengths: " << set.name << ", inner " << inner << ", op " << reduce_op_name(op) << ", " << cap
                           << " bytes a warp");
          detail::set_segment_merge_stage_cap(cap);
          REQUIRE(detail::segment_merge_stage_cap() == cap);
          require_staged_merges_keep_bits(dev, op);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("segment_reduce: staged merges with the plan in shared memory past 48 KB and with CUB's plan",
                   "[segment][gpu]", F32_I32, BF16_I64) {
  // The first-pass kernel's dynamic shared memory is the plan (24 bytes per 128 rows, up to 131,072 rows) and then
  // 32 KB of merge staging: past 48 KB with the kernel's static bytes from about 86,100 rows (the launcher raises
  // the kernel's limit), and the staging alone past 131,072 rows (CUB scans the plan). Batches on both sides of
  // those bounds at D = 8, each with rows of 17 chunks (two levels), against the reference and, for sum and max,
  // bitwise against the register merges.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(813);
  const RestoreStagedMerges restore;
  const std::int64_t inner = 8;
  const std::int64_t chunk = detail::make_segment_geometry(inner, static_cast<int>(16 / sizeof(T)),
                                                           detail::kReduceFloatsPerLane / (16 / sizeof(T)))
                                 .chunk_tokens;
  for (std::int64_t batch : {85000, 86500, 100000, 140000}) {
    INFO("batch " << batch);
    const auto host = test::random_ragged<T, OffsetT>(many_rows_few_long(rng, batch, 17 * chunk + 5), inner, rng);
    check_all_ops(host, -1.5f, rng);
    const DeviceRagged<T, OffsetT> dev(host);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) require_staged_merges_keep_bits(dev, op);
  }
}

TEMPLATE_TEST_CASE("segment_reduce: dependent launches give the ordinary launches' bits", "[segment][gpu][determinism]",
                   F32_I32, BF16_I64) {
  // The row pass and the unit kernel follow one another as programmatic dependents (kernels/grid_dependency.cuh);
  // with ordinary launches the same kernels run one after another, so any difference is a read that did not
  // wait for the kernel before.
  using T = typename TestType::Value;
  using OffsetT = typename TestType::Offset;
  auto rng = test::make_rng(659);
  for_each_sum_and_max_case<T, OffsetT>(rng, {1, 64, 1000}, [](const DeviceRagged<T, OffsetT>& dev, ReduceOp op) {
    const auto outputs = test::dependent_and_ordinary([&] { return device_reduce(dev, op, is_extreme(op), -1.5f); });
    require_same_bits(outputs.first, outputs.second);
  });
}

TEST_CASE("segment_reduce and its backward can be captured in a CUDA graph", "[segment][gpu][graph]") {
  // Global is what frameworks capture with by default (it refuses unsafe calls from any thread).
  const cudaStreamCaptureMode capture_mode = GENERATE(cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal);
  INFO("capture mode " << (capture_mode == cudaStreamCaptureModeGlobal ? "global" : "thread-local"));
  auto rng = test::make_rng(404);
  const auto host =
      test::random_ragged<float, std::int32_t>(test::make_lengths(test::Regime::kRandom, rng, 3000), 3, rng);
  const DeviceRagged<float, std::int32_t> dev(host);
  const std::int64_t count = host.batch * host.inner;
  DeviceBuffer<float> out(count);
  DeviceBuffer<std::int64_t> arg(count);
  DeviceBuffer<float> grad_in(host.values.size());
  const std::vector<float> grad_out_host = test::random_values<float>(count, rng);
  DeviceBuffer<float> grad_out(grad_out_host);

  std::size_t forward_bytes = 0, backward_bytes = 0;
  REQUIRE_OK(segment_reduce(nullptr, forward_bytes, dev.view(), ReduceOp::kMax, out.data(), arg.data(), 0.0f, nullptr));
  REQUIRE_OK(segment_reduce_backward(nullptr, backward_bytes, dev.view(), ReduceOp::kMax, grad_out.data(), arg.data(),
                                     grad_in.data(), nullptr));
  DeviceBuffer<unsigned char> forward_ws(std::max<std::size_t>(forward_bytes, 1));
  DeviceBuffer<unsigned char> backward_ws(std::max<std::size_t>(backward_bytes, 1));
  test::poison_workspace(forward_ws);
  test::poison_workspace(backward_ws);
  REQUIRE_CUDA(cudaDeviceSynchronize());

  Status forward = Status::kSuccess, backward = Status::kSuccess;
  test::CapturedGraph graph(
      [&](cudaStream_t stream) {
        forward = segment_reduce(forward_ws.data(), forward_bytes, dev.view(), ReduceOp::kMax, out.data(), arg.data(),
                                 0.0f, stream);
        backward = segment_reduce_backward(backward_ws.data(), backward_bytes, dev.view(), ReduceOp::kMax,
                                           grad_out.data(), arg.data(), grad_in.data(), stream);
        return forward;
      },
      capture_mode);
  REQUIRE_OK(forward);
  REQUIRE_OK(backward);
  for (int replay = 0; replay < 2; ++replay) {
    test::poison(out);
    test::poison(arg);
    test::poison(grad_in);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE_CUDA(graph.launch());
    std::vector<float> ref(count), grad_ref(host.values.size());
    std::vector<std::int64_t> ref_arg(count);
    reference::segment_reduce(host.view(), ReduceOp::kMax, ref.data(), ref_arg.data(), 0.0f);
    reference::segment_reduce_backward(host.view(), ReduceOp::kMax, grad_out_host.data(), ref_arg.data(),
                                       grad_ref.data());
    const std::vector<float> got = out.to_host(), grad_got = grad_in.to_host();
    REQUIRE_BITWISE_EQUAL(got, ref);
    REQUIRE(arg.to_host() == ref_arg);
    REQUIRE_BITWISE_EQUAL(grad_got, grad_ref);
  }
}

// The argument errors are checked without a GPU in tests/cpu/test_argument_checks.cpp; these need the query
// (CUB's temp size) or the device data.
TEMPLATE_TEST_CASE("segment_reduce: a short workspace is refused, an empty batch writes nothing",
                   "[segment][gpu][errors]", std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  const std::vector<std::int64_t> lengths = {3, 0, 4};
  auto rng = test::make_rng(405);
  const auto host = test::random_ragged<float, OffsetT>(lengths, 2, rng);
  const DeviceRagged<float, OffsetT> dev(host);
  DeviceBuffer<float> out(6), grad_out(6), grad_in(14);
  DeviceBuffer<std::int64_t> arg(6);
  std::size_t bytes = 0;

  SECTION("a workspace smaller than the query returned") {
    REQUIRE_OK(segment_reduce(nullptr, bytes, dev.view(), ReduceOp::kSum, out.data(), nullptr, 0.0f, nullptr));
    REQUIRE(bytes > 0);
    DeviceBuffer<unsigned char> workspace(bytes);
    test::poison_workspace(workspace);
    std::size_t too_few = bytes - 1;
    REQUIRE(segment_reduce(workspace.data(), too_few, dev.view(), ReduceOp::kSum, out.data(), nullptr, 0.0f,
                           nullptr) == Status::kWorkspaceTooSmall);
    REQUIRE(segment_reduce_backward(nullptr, bytes, dev.view(), ReduceOp::kMean, grad_out.data(), nullptr,
                                    grad_in.data(), nullptr) == Status::kSuccess);
    if (bytes > 0) {
      too_few = bytes - 1;
      REQUIRE(segment_reduce_backward(workspace.data(), too_few, dev.view(), ReduceOp::kMean, grad_out.data(),
                                      nullptr, grad_in.data(), nullptr) == Status::kWorkspaceTooSmall);
    }
  }
  SECTION("an empty batch succeeds and writes nothing") {
    const std::vector<OffsetT> zero = {0};
    DeviceBuffer<OffsetT> offsets(zero);
    for (std::int64_t nnz : {0, 7}) {
      RaggedView<const float, OffsetT> empty{nnz > 0 ? dev.values.data() : nullptr, offsets.data(), 0, nnz, 2};
      test::poison(out);
      test::poison(arg);
      test::poison(grad_in);
      const std::vector<float> out_before = out.to_host();
      const std::vector<std::int64_t> arg_before = arg.to_host();
      const std::vector<float> grad_before = grad_in.to_host();
      for (ReduceOp op : kAllOps) {
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_reduce(ws, b, empty, op, out.data(), is_extreme(op) ? arg.data() : nullptr, 1.0f, nullptr);
        }));
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_reduce_backward(ws, b, empty, op, grad_out.data(), is_extreme(op) ? arg.data() : nullptr,
                                         grad_in.data(), nullptr);
        }));
      }
      const std::vector<float> out_after = out.to_host(), grad_after = grad_in.to_host();
      REQUIRE_BITWISE_EQUAL(out_after, out_before);
      REQUIRE(arg.to_host() == arg_before);
      REQUIRE_BITWISE_EQUAL(grad_after, grad_before);
    }
  }
}

TEMPLATE_TEST_CASE("segment_reduce stays in bounds with malformed offsets and args", "[segment][gpu][errors]",
                   std::int32_t, std::int64_t) {
  using OffsetT = TestType;
  auto rng = test::make_rng(406);
  for (const MalformedOffsets<OffsetT>& c : malformed_offsets_cases<OffsetT>()) {
    for (std::int64_t inner : {1, 3, 64, 264}) {
      if (inner > 64 && c.nnz > 2000) continue;  // D = 264 (the wide short-row pass) on the small cases only
      INFO(c.what << ", inner " << inner);
      const std::int64_t batch = static_cast<std::int64_t>(c.offsets.size()) - 1;
      DeviceBuffer<OffsetT> offsets(c.offsets);
      DeviceBuffer<float> values(test::random_values<float>(c.nnz * inner, rng));
      DeviceBuffer<float> grad_out(test::random_values<float>(batch * inner, rng));
      // Outputs with guards on both sides: a write out of bounds is seen on any device, not only under a checker.
      test::GuardedBuffer<float> out(static_cast<std::size_t>(batch * inner));
      test::GuardedBuffer<float> grad_in(static_cast<std::size_t>(c.nnz * inner));
      // Args out of every range: backward must not route a gradient through them.
      std::vector<std::int64_t> wild_args(batch * inner);
      for (std::size_t k = 0; k < wild_args.size(); ++k)
        wild_args[k] = k % 3 == 0 ? -5 : (k % 3 == 1 ? (std::int64_t{1} << 40) : static_cast<std::int64_t>(k));
      test::GuardedBuffer<std::int64_t> arg(wild_args);
      const RaggedView<const float, OffsetT> view{values.data(), offsets.data(), batch, c.nnz, inner};
      for (ReduceOp op : kAllOps) {
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_reduce_backward(ws, b, view, op, grad_out.data(), is_extreme(op) ? arg.data() : nullptr,
                                         grad_in.data(), nullptr);
        }));
        REQUIRE_OK(run_two_phase([&](void* ws, std::size_t& b) {
          return segment_reduce(ws, b, view, op, out.data(), is_extreme(op) ? arg.data() : nullptr, 0.0f, nullptr);
        }));
      }
      REQUIRE_CUDA(cudaGetLastError());
      REQUIRE(out.guards_intact());
      REQUIRE(grad_in.guards_intact());
      REQUIRE(arg.guards_intact());
    }
  }
}

TEST_CASE("segment_reduce_backward puts the gradient nowhere for an arg outside the sequence", "[segment][gpu]") {
  auto rng = test::make_rng(407);
  const auto host = test::random_ragged<float, std::int64_t>({4, 0, 9, 1, 300}, 3, rng);
  const DeviceRagged<float, std::int64_t> dev(host);
  const std::int64_t count = host.batch * host.inner;
  std::vector<std::int64_t> args(count);
  std::uniform_int_distribution<std::int64_t> any(-3, 310);
  for (auto& a : args) a = any(rng);
  const std::vector<float> grad_out = test::random_values<float>(count, rng);
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<float> ref(host.values.size());
    reference::segment_reduce_backward(host.view(), op, grad_out.data(), args.data(), ref.data());
    const std::vector<float> got = device_reduce_backward(dev, op, grad_out, args);
    REQUIRE_BITWISE_EQUAL(got, ref);
  }
}

TEST_CASE("RaggedTensor::reduce and reduce_backward give the low-level results", "[segment][gpu][tensor]") {
  auto rng = test::make_rng(408);
  const std::vector<std::int64_t> lengths = {7, 0, 130, 1, 45};
  const auto host = test::random_ragged<bfloat16, std::int64_t>(lengths, 6, rng);
  const DeviceRagged<bfloat16, std::int64_t> dev(host);
  const auto x = RaggedTensor<bfloat16, std::int64_t>::from_host(host.values, lengths, {2, 3});
  const std::int64_t count = host.batch * host.inner;

  DeviceBuffer<std::int64_t> arg;
  const DeviceBuffer<bfloat16> max = x.reduce(ReduceOp::kMax, -1.5f, &arg);
  const ReduceOutput<bfloat16> want = device_reduce(dev, ReduceOp::kMax, true, -1.5f);
  REQUIRE_WRITTEN_AND_EQUAL(max.to_host(), want.out);
  REQUIRE_WRITTEN_AND_EQUAL(arg.to_host(), want.arg);
  // A refused call leaves the caller's arg buffer as it was: it is replaced only once the op has run.
  REQUIRE_THROWS_WITH(x.reduce(ReduceOp::kSum, 0.0f, &arg), Catch::Contains("only max and min have one"));
  REQUIRE(arg.to_host() == want.arg);

  const std::vector<bfloat16> grad_out_host = test::random_values<bfloat16>(static_cast<std::size_t>(count), rng);
  const DeviceBuffer<bfloat16> grad_out(grad_out_host);
  for (ReduceOp op : kAllOps) {
    const RaggedTensor<bfloat16, std::int64_t> grad =
        x.reduce_backward(op, grad_out, is_extreme(op) ? &arg : nullptr);
    REQUIRE(grad.nnz() == host.nnz);
    REQUIRE(grad.inner_dims() == std::vector<std::int64_t>{2, 3});
    REQUIRE(grad.offsets_to_host() == host.offsets);
    REQUIRE_WRITTEN_AND_EQUAL(
        grad.values_to_host(),
        device_reduce_backward(dev, op, grad_out_host, is_extreme(op) ? want.arg : std::vector<std::int64_t>(count)));
  }
  REQUIRE_THROWS_WITH(x.reduce_backward(ReduceOp::kMin, grad_out), Catch::Contains("needs the arg indices"));
  const DeviceBuffer<bfloat16> short_grad(static_cast<std::size_t>(count - 1));
  REQUIRE_THROWS_WITH(x.reduce_backward(ReduceOp::kSum, short_grad), Catch::Contains("grad_out holds 29 values"));
}
