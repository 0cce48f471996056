// Shared by the segment_reduce / segment_softmax device tests: the type cases, the length sets, a device copy
// of a host ragged tensor, the malformed offsets cases, the "naive same-precision" computations that
// compare_to_reference's tolerance rule (tests/common/tolerance.h) holds half and bfloat16 results to, and exact
// comparisons.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../../kernels/segment_launch.h"  // the stream switch
#include "restore_setting.h"
#include "common/host_ragged.h"
#include "common/test_util.h"
#include "common/tolerance.h"
#include "ragged/buffer.h"
#include "ragged/reference.h"
#include "ragged/segment_reduce.h"

namespace ragged {
namespace test {
namespace segment {

using test::BF16_I32;
using test::BF16_I64;
using test::F16_I32;
using test::F16_I64;
using test::F32_I32;
using test::F32_I64;
using test::run_two_phase;

constexpr std::int64_t kInnerSizes[] = {1, 3, 64, 1000};

// ---------------------------------------------------------------------------------------------------------
// Length sets: every regime of test::all_regimes(), power-law lengths, one row holding ~all of 1M+ elements, and
// thousands of rows with scattered long ones.
// ---------------------------------------------------------------------------------------------------------
struct LengthSet {
  std::string name;
  std::vector<std::int64_t> lengths;
};

// Keeps a regime's element count around a million whatever D is (times RAGGED_TEST_SCALE: test::scaled).
inline std::int64_t regime_scale(std::int64_t inner) {
  return std::max<std::int64_t>(scaled(16, 4), scaled(4000) / inner);
}

// Heavy-tailed lengths (Pareto, alpha ~ 1.1): mostly 0..3, a few thousands of elements long.
inline std::vector<std::int64_t> power_law_lengths(std::mt19937_64& rng, std::int64_t inner) {
  std::uniform_real_distribution<double> unit(1e-9, 1.0);
  const std::int64_t cap = std::max<std::int64_t>(1, scaled(400000) / inner);
  std::vector<std::int64_t> lengths(300);
  for (auto& l : lengths)
    l = std::min<std::int64_t>(cap, static_cast<std::int64_t>(std::pow(unit(rng), -1.0 / 1.1)) - 1);
  return lengths;
}

// One row holds 2^20 (times RAGGED_TEST_SCALE) + a few thousand elements; the other rows are empty.
inline std::vector<std::int64_t> one_row_holds_all(std::mt19937_64& rng, std::int64_t inner) {
  std::vector<std::int64_t> lengths(37, 0);
  std::uniform_int_distribution<std::size_t> where(0, lengths.size() - 1);
  std::uniform_int_distribution<std::int64_t> extra(1, 5000);
  lengths[where(rng)] = (scaled(std::int64_t{1} << 20) + extra(rng) + inner - 1) / inner;
  return lengths;
}

// Thousands of rows (the plan has one entry per 128 rows, so finding a work item's row takes several steps of the
// warp-wide search), mostly of 0..2 tokens, with long rows scattered among them (single- and multi-chunk, and
// for softmax some past the local-finish limit) and runs of 1024 rows with none.
inline std::vector<std::int64_t> scattered_long_rows(std::mt19937_64& rng, std::int64_t inner,
                                                     std::int64_t rows = 0, double long_fraction = 0.003) {
  if (rows == 0) rows = std::max<std::int64_t>(300, scaled(20000) / std::max<std::int64_t>(1, inner / 16));
  std::uniform_int_distribution<std::int64_t> tiny(0, 2);
  std::uniform_int_distribution<std::int64_t> long_length(3, 40000 / inner + 3);
  std::bernoulli_distribution is_long(long_fraction);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    const bool quiet = (i / 1024) % 3 == 1;
    lengths[static_cast<std::size_t>(i)] = !quiet && (is_long(rng) || i == 5) ? long_length(rng) : tiny(rng);
  }
  return lengths;
}

// More rows than the 1024 groups of 128 whose plan the first-pass kernel scans itself (kernels/segment_geometry.h,
// kKernelPlanGroups), so that CUB scans the plan between the row pass and that kernel; long rows ten times rarer
// than in scattered_long_rows keep the values near 1M elements.
inline std::vector<std::int64_t> rows_past_kernel_plan(std::mt19937_64& rng, std::int64_t inner) {
  return scattered_long_rows(rng, inner, 1024 * 128 + 9000, 0.0003);
}

inline std::vector<LengthSet> length_sets(std::mt19937_64& rng, std::int64_t inner) {
  std::vector<LengthSet> sets;
  for (Regime regime : all_regimes())
    sets.push_back({regime_name(regime), make_lengths(regime, rng, regime_scale(inner))});
  sets.push_back({"power law", power_law_lengths(rng, inner)});
  sets.push_back({"one row holds all", one_row_holds_all(rng, inner)});
  sets.push_back({"scattered long rows", scattered_long_rows(rng, inner)});
  return sets;
}

// Offsets that break every rule (kernels must stay in bounds and write only their outputs): decreasing,
// negative, beyond nnz, offsets[0] != 0, the type's extremes, and overlapping rows that each span all of a
// multi-chunk buffer, so that together they hold far more chunks than nnz does (partial buffers are sized
// from nnz).
template <typename OffsetT>
struct MalformedOffsets {
  const char* what;
  std::vector<OffsetT> offsets;
  std::int64_t nnz;
};

template <typename OffsetT>
std::vector<MalformedOffsets<OffsetT>> malformed_offsets_cases() {
  constexpr OffsetT kMax = std::numeric_limits<OffsetT>::max();
  constexpr OffsetT kMin = std::numeric_limits<OffsetT>::min();
  std::vector<MalformedOffsets<OffsetT>> cases = {
      {"decreasing, negative and beyond nnz", {0, 5, 3, 100000, -7, 20, 20}, 20},
      {"offsets[0] != 0", {7, 2, 2, 30, 19, 25, 40}, 20},
      {"type extremes", {0, kMax, kMin, kMax, 0, 20, kMin}, 20},
      // Rows of at most 4 tokens, overlapping, from a negative offset and past nnz: the short-row passes.
      {"short rows, overlapping and out of range", {0, 3, 1, 4, -2, 2, 19, 23, 18, 21, 20, 20}, 20},
  };
  // Rows of a few hundred tokens, overlapping, one from a negative offset, one to past nnz: the warp rows at D = 1
  // (33 to 512 tokens, taken where rows average more than 16 tokens: 2000 > 16 x 10).
  cases.push_back({"overlapping rows of a few hundred tokens",
                   {0, 300, -50, 400, 700, 5000, 1000, 1900, 2000, 1700, 1950},
                   2000});
  // Long rows (tens of chunks) and rows of a few chunks, which softmax finishes locally from its partials.
  for (std::int64_t nnz : {40000, 4096}) {
    MalformedOffsets<OffsetT> overlap{nnz == 40000 ? "overlapping long rows" : "overlapping rows of a few chunks", {},
                                      nnz};
    for (int b = 0; b <= 41; ++b) overlap.offsets.push_back(b % 2 == 0 ? 0 : static_cast<OffsetT>(nnz));
    cases.push_back(overlap);
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------------------
// Device data.
// ---------------------------------------------------------------------------------------------------------
template <typename T, typename OffsetT>
struct DeviceRagged {
  DeviceBuffer<OffsetT> offsets;
  GuardedBuffer<T> values;  // `shift` guard elements on each side (Shifts)
  std::int64_t batch = 0, nnz = 0, inner = 1;

  explicit DeviceRagged(const HostRagged<T, OffsetT>& host, std::int64_t shift = 0)
      : offsets(host.offsets),
        values(host.values, static_cast<std::size_t>(shift)),
        batch(host.batch),
        nnz(host.nnz),
        inner(host.inner) {}
  RaggedView<const T, OffsetT> view() const {
    return RaggedView<const T, OffsetT>{values.data(), offsets.data(), batch, nnz, inner};
  }
};

// How many elements past its allocation's 16-byte aligned start each array of a segment op begins (a
// GuardedBuffer's guard; 0: aligned). 1 to 3 float elements, or 1 to 7 half ones, leave it off 16-byte alignment, so
// that the op must take its one-element loads (segment_vector_width) for the arrays it reads and writes in vectors:
// a GPU faults on a misaligned vector access, and so does the emulator (tests/emu/build.sh's alignment check).
// values: the input (forward); out: the forward's output, which the softmax backward reads as y; grad_out and
// grad_in: the backward's.
struct Shifts {
  std::int64_t values = 0, out = 0, grad_out = 0, grad_in = 0;
};

// Calls check(host, shifts) for every length set at each D where aligned arrays of T take 16-byte vectors (one
// vector, 64, 1000), with random values (spare_rows past the last row), taking the shift sets in turn from
// shift_sets[first]: the misaligned cases of the segment ops' tests.
template <typename T, typename OffsetT, typename Check>
void for_each_misaligned_case(std::mt19937_64& rng, const std::vector<Shifts>& shift_sets, std::size_t first,
                              std::int64_t spare_rows, Check check) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(sizeof(T));
  std::size_t round = first;
  for (std::int64_t inner : {vec, std::int64_t{64}, std::int64_t{1000}}) {
    REQUIRE(detail::segment_vector_width(inner, sizeof(T), nullptr) == vec);
    const Shifts& shifts = shift_sets[round++ % shift_sets.size()];
    for (const LengthSet& set : length_sets(rng, inner)) {
      INFO("lengths: " << set.name << " (batch " << set.lengths.size() << "), inner " << inner << ", shifts "
                       << shifts.values << " / " << shifts.out << " / " << shifts.grad_out << " / " << shifts.grad_in);
      check(test::random_ragged<T, OffsetT>(set.lengths, inner, rng, spare_rows), shifts);
    }
  }
}


// ---------------------------------------------------------------------------------------------------------
// Naive computations in T: every operation rounded to T (tolerance rule (2)).
// ---------------------------------------------------------------------------------------------------------
template <typename T>
T naive(double v) {
  return round_to<T>(v);
}

// Sequential sum / mean of each column in T; empty rows give empty_value.
template <typename T, typename OffsetT>
std::vector<T> naive_sum_or_mean(const HostRagged<T, OffsetT>& r, ReduceOp op, float empty_value) {
  std::vector<T> out(r.batch * r.inner);
  for (std::int64_t b = 0; b < r.batch; ++b) {
    for (std::int64_t d = 0; d < r.inner; ++d) {
      const std::int64_t length = r.length(b);
      T acc = naive<T>(0.0);
      for (std::int64_t i = 0; i < length; ++i) acc = naive<T>(to_double(acc) + to_double(r.at(r.begin(b) + i, d)));
      if (op == ReduceOp::kMean && length > 0) acc = naive<T>(to_double(acc) / static_cast<double>(length));
      out[b * r.inner + d] = length == 0 ? round_to<T>(empty_value) : acc;
    }
  }
  return out;
}

// Softmax / log-softmax in T: max, shift, exp, sequential sum, divide (or subtract the log), each rounded.
template <typename T, typename OffsetT>
std::vector<T> naive_softmax(const HostRagged<T, OffsetT>& r, bool log) {
  std::vector<T> out(r.values.size(), round_to<T>(std::numeric_limits<double>::quiet_NaN()));
  for (std::int64_t b = 0; b < r.batch; ++b) {
    for (std::int64_t d = 0; d < r.inner; ++d) {
      const std::int64_t begin = r.begin(b), length = r.length(b);
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t i = 0; i < length; ++i) {
        const double v = to_double(r.at(begin + i, d));
        if (std::isnan(v) || v > m) m = v;
        if (std::isnan(m)) break;
      }
      T sum = naive<T>(0.0);
      for (std::int64_t i = 0; i < length; ++i) {
        const T shifted = naive<T>(to_double(r.at(begin + i, d)) - m);
        sum = naive<T>(to_double(sum) + to_double(naive<T>(std::exp(to_double(shifted)))));
      }
      const T log_sum = naive<T>(std::log(to_double(sum)));
      for (std::int64_t i = 0; i < length; ++i) {
        const T shifted = naive<T>(to_double(r.at(begin + i, d)) - m);
        out[(begin + i) * r.inner + d] =
            log ? naive<T>(to_double(shifted) - to_double(log_sum))
                : naive<T>(to_double(naive<T>(std::exp(to_double(shifted)))) / to_double(sum));
      }
    }
  }
  return out;
}

// Softmax backward in T: softmax dx = y * (dy - sum(dy * y)); log-softmax dx = dy - exp(y) * sum(dy).
template <typename T, typename OffsetT>
std::vector<T> naive_softmax_backward(const HostRagged<T, OffsetT>& shape, bool log, const std::vector<T>& y,
                                      const std::vector<T>& dy) {
  std::vector<T> out(y.size(), round_to<T>(std::numeric_limits<double>::quiet_NaN()));
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    for (std::int64_t d = 0; d < shape.inner; ++d) {
      const std::int64_t first = shape.begin(b) * shape.inner + d, length = shape.length(b);
      T dot = naive<T>(0.0);
      for (std::int64_t i = 0; i < length; ++i) {
        const std::int64_t k = first + i * shape.inner;
        const T term = log ? dy[k] : naive<T>(to_double(dy[k]) * to_double(y[k]));
        dot = naive<T>(to_double(dot) + to_double(term));
      }
      for (std::int64_t i = 0; i < length; ++i) {
        const std::int64_t k = first + i * shape.inner;
        out[k] = log ? naive<T>(to_double(dy[k]) -
                                to_double(naive<T>(to_double(naive<T>(std::exp(to_double(y[k])))) * to_double(dot))))
                     : naive<T>(to_double(y[k]) * to_double(naive<T>(to_double(dy[k]) - to_double(dot))));
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------------------------------------

// First k in [begin, end) where the values differ (NaN equals NaN, +0 equals -0) or got was never written (the
// poison is a NaN), as a message, or "".
template <typename T>
std::string compare_values_exact(const std::vector<T>& got, const std::vector<T>& ref, std::int64_t begin,
                                 std::int64_t end) {
  for (std::int64_t k = begin; k < end; ++k)
    if (!same_value(got[k], ref[k]) || is_poison(got[k]))
      return "element " + std::to_string(k) + ": got " + std::to_string(to_double(got[k])) + ", reference " +
             std::to_string(to_double(ref[k]));
  return "";
}

// ---------------------------------------------------------------------------------------------------------
// Batch invariance: the same long row placed in two batches with different neighbours and positions.
// ---------------------------------------------------------------------------------------------------------
template <typename T, typename OffsetT>
struct EmbeddedRow {
  HostRagged<T, OffsetT> first, second;
  std::int64_t index_in_first = 0, index_in_second = 0;
};

// `row` holds length * inner values. The first batch puts 5 rows before it, the second an even number, so its
// start differs in position and parity (and so in alignment when inner is odd).
template <typename T, typename OffsetT>
EmbeddedRow<T, OffsetT> embed_row(const std::vector<T>& row, std::int64_t length, std::int64_t inner,
                                  std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> len(0, 40);
  std::vector<std::int64_t> before(11);
  std::int64_t total = 0;
  for (auto& l : before) total += (l = len(rng));
  if (total % 2 == 1) before.front() += 1;
  std::vector<std::int64_t> lengths_second = before;
  lengths_second.push_back(0);
  lengths_second.push_back(length);
  lengths_second.push_back(9);

  EmbeddedRow<T, OffsetT> e;
  e.index_in_first = 1;
  e.index_in_second = static_cast<std::int64_t>(lengths_second.size()) - 2;
  e.first = random_ragged<T, OffsetT>({5, length, 17, 0, 3}, inner, rng);
  e.second = random_ragged<T, OffsetT>(lengths_second, inner, rng);
  std::copy(row.begin(), row.end(), e.first.values.begin() + e.first.begin(e.index_in_first) * inner);
  std::copy(row.begin(), row.end(), e.second.values.begin() + e.second.begin(e.index_in_second) * inner);
  return e;
}

// The segment kernels' row streams.
using RestoreStreaming =
    RestoreSetting<bool, detail::segment_stream_enabled, detail::set_segment_stream_enabled>;
// segment_reduce's L2 prefetch distance.
using RestorePrefetch = RestoreSetting<int, detail::segment_prefetch_groups, detail::set_segment_prefetch_groups>;
// The row passes' L2 prefetch of the rows they load next.
using RestoreRowPrefetch =
    RestoreSetting<bool, detail::segment_row_prefetch_enabled, detail::set_segment_row_prefetch_enabled>;
// segment_reduce's and segment_softmax's scalar row pass at D = 1.
using RestoreScalarRows =
    RestoreSetting<bool, detail::segment_scalar_rows_enabled, detail::set_segment_scalar_rows_enabled>;
// The warp rows at D = 1 (segment_reduce's and segment_softmax's scalar row pass).
using RestoreWarpRows =
    RestoreSetting<bool, detail::segment_warp_rows_enabled, detail::set_segment_warp_rows_enabled>;
// The sub-warp row pass of short rows at D > 32.
using RestoreSubwarpRows =
    RestoreSetting<bool, detail::segment_subwarp_rows_enabled, detail::set_segment_subwarp_rows_enabled>;

// Lengths around the warp rows' bounds at D = 1 (tiny_tokens = 32 < length <= kWarpRowTokens = 512, one pass of 16
// tokens a lane), each a few times in random order among uniform 0..600 rows; `rows` rows in all. Longer rows too:
// one chunk of the softmax forward (1024), several (8192, 8193).
inline std::vector<std::int64_t> warp_row_lengths(std::mt19937_64& rng, std::int64_t rows) {
  std::vector<std::int64_t> lengths;
  for (int copy = 0; copy < 3; ++copy)
    for (std::int64_t length : {0, 1, 31, 32, 33, 34, 63, 64, 65, 100, 255, 256, 257, 480, 481, 500, 511, 512, 513,
                                544, 1024, 8192, 8193})
      lengths.push_back(length);
  std::uniform_int_distribution<std::int64_t> uniform(0, 600);
  while (static_cast<std::int64_t>(lengths.size()) < rows) lengths.push_back(uniform(rng));
  std::shuffle(lengths.begin(), lengths.end(), rng);
  return lengths;
}

// Rows of 0 to 40 tokens (the few of 33 to 40 are warp rows), more than 32 for each warp of a row pass of 4 blocks
// of 8 warps on every SM of this device (the scalar rows kernels hold at most 4 blocks), so that each warp's share
// of the warp rows' pass (warp_row_pass) spans several windows of 32 rows: 168,960 rows on an H200 (132 SMs),
// 10,240 on the emulator's 8.
inline std::vector<std::int64_t> many_rows_few_warp_rows(std::mt19937_64& rng) {
  int device = 0, sms = 0;
  REQUIRE_CUDA(cudaGetDevice(&device));
  REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(sms) * 4 * 8 * 32 * 5 / 4);
  std::uniform_int_distribution<std::int64_t> length(0, 40);
  for (auto& l : lengths) l = length(rng);
  return lengths;
}

// Lengths for the sub-warp row pass (rows of at most detail::kSubwarpRowTokens tokens at D > 32): mostly 0 to 4
// tokens, with rows of 5 to 40 and a few of several chunks among them (for the first pass's plan), over several
// groups of 128 rows, so that a batch of 32 (or of 4, wide) holds any number of short rows. `wide`: for D of
// several column tiles (up to 1024), fewer rows and long rows of at most 200 tokens, which still have several
// chunks there (64 tokens a reduce chunk in float), so that the emulator's run stays short.
// `inner` past 1024 (16-bit rows of 8 column tiles at 2048) takes 80 rows, about the elements of D = 520's.
inline std::vector<std::int64_t> subwarp_lengths(std::mt19937_64& rng, bool wide = false, std::int64_t inner = 0) {
  std::uniform_int_distribution<int> kind(0, 19);
  std::uniform_int_distribution<std::int64_t> short_row(0, detail::kSubwarpRowTokens), medium(5, 40),
      long_row(41, wide ? 200 : 600);
  const std::size_t rows =
      inner > 1024 ? 80 : std::uniform_int_distribution<std::size_t>(wide ? 150 : 300, wide ? 300 : 700)(rng);
  std::vector<std::int64_t> lengths(rows);
  for (std::int64_t& l : lengths) {
    const int k = kind(rng);
    l = k < 16 ? short_row(rng) : k < 19 ? medium(rng) : long_row(rng);
  }
  return lengths;
}

// Every row pass on (the scalar rows, the warp rows, the sub-warp rows), the settings restored at scope exit.
struct RowPassesOn {
  const RestoreScalarRows scalar_rows;
  const RestoreWarpRows warp_rows;
  const RestoreSubwarpRows subwarp_rows;
  RowPassesOn() {
    detail::set_segment_scalar_rows_enabled(true);
    detail::set_segment_warp_rows_enabled(true);
    detail::set_segment_subwarp_rows_enabled(true);
  }
};

// Length sets for the row passes' L2 prefetch at `inner` (1: warp rows; above 32: sub-warp or wide short rows),
// where the next rows a pass asks for are warp rows, or short rows of the same batch of 32 or 4.
inline std::vector<LengthSet> row_prefetch_sets(std::mt19937_64& rng, std::int64_t inner) {
  if (inner == 1) return {{"around the warp rows' bounds", warp_row_lengths(rng, 600)}};
  return {{"short rows among longer ones", subwarp_lengths(rng, inner > 256)}};
}

// Length sets that run every pass of the segment kernels at `inner`: the row passes' sets (row_prefetch_sets: warp
// rows at D = 1, sub-warp or wide short rows above 32, among rows of several chunks) and thousands of short rows
// with scattered long ones (plans of many groups, merge trees; softmax rows past the local-finish limit), and at
// D = 64 one row of ~1M elements (merge trees of three levels; a softmax row too long for a block, which the second
// pass writes). For the grid cap tests, where a grid of a few blocks walks them in many rounds.
inline std::vector<LengthSet> every_pass_sets(std::mt19937_64& rng, std::int64_t inner) {
  std::vector<LengthSet> sets = row_prefetch_sets(rng, inner);
  sets.push_back({"scattered long rows", scattered_long_rows(rng, inner)});
  if (inner == 64) sets.push_back({"one row holds all", one_row_holds_all(rng, inner)});
  return sets;
}

// The first-pass kernels' merges staged in shared memory.
using RestoreStagedMerges =
    RestoreSetting<bool, detail::segment_staged_merges_enabled, detail::set_segment_staged_merges_enabled>;
// The most merge staging per warp (less shared memory, as on a device with less of it per SM).
using RestoreMergeStageCap =
    RestoreSetting<int, detail::segment_merge_stage_cap, detail::set_segment_merge_stage_cap>;

// The length sets of length_sets() whose rows span many chunks (merge trees of two levels and more).
inline std::vector<LengthSet> long_row_sets(std::mt19937_64& rng, std::int64_t inner) {
  return {{"one row holds all", one_row_holds_all(rng, inner)},
          {"scattered long rows", scattered_long_rows(rng, inner)}};
}

// `batch` rows of 0 to 3 tokens, 4 of them (at random places) `long_tokens` long: a plan of batch / 128 groups,
// and merge trees. For the first-pass kernels' shared memory past 48 KB (the plan, then the merge staging:
// about 86,100 rows and more) and the plans CUB scans (past 131,072 rows), where the staging sits at offset 0.
inline std::vector<std::int64_t> many_rows_few_long(std::mt19937_64& rng, std::int64_t batch,
                                                    std::int64_t long_tokens) {
  std::uniform_int_distribution<std::int64_t> short_row(0, 3), place(0, batch - 1);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch));
  for (std::int64_t& l : lengths) l = short_row(rng);
  for (int k = 0; k < 4; ++k) lengths[static_cast<std::size_t>(place(rng))] = long_tokens;
  return lengths;
}

// The softmax's block rows.
using RestoreBlockRows =
    RestoreSetting<bool, detail::segment_block_rows_enabled, detail::set_segment_block_rows_enabled>;

// The elements [first, first + count) of a host vector.
template <typename T>
std::vector<T> slice(const std::vector<T>& v, std::int64_t first, std::int64_t count) {
  return std::vector<T>(v.begin() + first, v.begin() + first + count);
}

template <typename T>
constexpr bool is_low_precision() {
  return !std::is_same<T, float>::value;
}

// 24 rows of 1 to `most_chunks` - 1 whole chunks of `g` and one token each: the lengths whose partials fill the
// workspace's slots exactly (max_partial_chunks), which the caller checks against `slots`, the rows' own count.
inline std::vector<std::int64_t> rows_filling_partials(const detail::SegmentGeometry& g, std::int64_t most_chunks,
                                                       std::mt19937_64& rng, std::int64_t& nnz, std::int64_t& slots) {
  std::uniform_int_distribution<std::int64_t> whole_chunks(1, most_chunks - 1);
  std::vector<std::int64_t> lengths(24);
  nnz = slots = 0;
  for (auto& length : lengths) {
    length = whole_chunks(rng) * g.chunk_tokens + 1;
    nnz += length;
    slots += detail::row_work(length, g).partials;
  }
  return lengths;
}

}  // namespace segment
}  // namespace test
}  // namespace ragged
