// Segment reductions (sum, mean, max, min with arg) and their backward pass.
//
// Two launches, or five for more than 131072 rows (segment_geometry.h describes the split): the row pass
// finishes the tiny and empty rows and sums the other rows' work per group of rows; the plan scans those sums
// (each block of the next kernel does, or a memset and CUB's two-kernel scan for many groups); a persistent
// kernel walks the (chunk, tile) units of the plan, each warp a contiguous share of them (for_each_unit: one
// row lookup per warp, then a cursor stepped from row to row). A row that fits one unit is finished by its warp;
// a longer row leaves one partial per chunk, merged by the row's merge tree in the same kernel (the warp that
// completes a node's children merges them, in chunk order). The order in which a row's elements are added
// depends only on its length and D, so results are deterministic and do not depend on the other rows of the
// batch.
//
// Templates only: kernels/segment_reduce_<value>_<offset>.cu instantiate them, one type pair per file, so that a
// build compiles the six in parallel. As one file it was the build's critical path: 121 s of nvcc for sm_90 alone
// on one core here, where one of the six took 23 s (every other kernel file: under 16 s in the full build).
#pragma once

#include <string>
#include <type_traits>

#include "launch.cuh"
#include "segment_common.cuh"
#include "segment_launch.h"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = kSegmentThreads;

// Loads in flight per lane in the unit loop: 128 bytes (at most 32 loads), held raw until their adds (32
// registers whatever the type: converted to float at load, 16-bit vectors took twice that). The first H100 run
// (docs/results/2026-11-24-*) had the unit kernel at 52-58% of DRAM peak with 64 bytes: a 64 MiB tensor is only
// ~2050 units of 32 KB, 15.5 warps per SM with 2 KB in flight each (31 KB per SM), and the time stayed latency's.
template <typename T, int V>
constexpr int kUnroll = 128 / static_cast<int>(V * sizeof(T)) < 32 ? 128 / static_cast<int>(V * sizeof(T)) : 32;

// The n low bits set, for 0 <= n <= 32.
__device__ __forceinline__ unsigned low_bits(int n) { return n >= 32 ? ~0u : (1u << n) - 1u; }

// add(x, xi): the next element of one lane's walk through a row, whose index xi is greater than every index
// the accumulator has seen (so a tie never replaces); merge: any other accumulator.
struct SumAcc {
  float sum = 0.0f;
  __device__ void add(float x, std::int64_t) { sum += x; }
  __device__ void merge(const SumAcc& o) { sum += o.sum; }
  __device__ SumAcc shfl(int src) const { return SumAcc{__shfl_sync(0xffffffffu, sum, src)}; }
  __device__ float value(std::int64_t length, bool mean) const {
    return mean ? sum / static_cast<float>(length) : sum;
  }
  __device__ std::int64_t index() const { return -1; }
  __device__ void store(float* value, std::int64_t*, std::int64_t at) const { value[at] = sum; }
  __device__ static SumAcc load(const float* value, const std::int64_t*, std::int64_t at) {
    return SumAcc{__ldcg(value + at)};
  }
  // A partial as merge_staged_node staged it: the value array only.
  static constexpr int kSecondBytes = 0;
  __device__ static SumAcc staged(const float* value, const unsigned char*, int at) { return SumAcc{value[at]}; }
};

// Max (kMin = false) or min with the index of the winner. The selection is a total order (NaN first, then the
// extreme value, then the lower index), so merging in any order gives the same answer. Index: a 32-bit index
// where every index fits (the stream's one-chunk rows: StreamAccOf), which halves the index's shuffles and
// compares.
template <bool kMin, typename Index = std::int64_t>
struct ExtremeAcc {
  float v = 0.0f;
  Index i = -1;  // -1: nothing seen yet

  // Whether (x, xi) comes before this one in the order. Selects instead of branches: merges run in chains of
  // shuffles (merge_phases), where the branches' convergence barriers sat between every two of them.
  __device__ bool beats(float x, Index xi) const {
    const bool x_nan = isnan(x), v_nan = isnan(v);
    const bool lower = xi < i;
    const bool more_extreme = kMin ? x < v : x > v;  // false when either is NaN
    return (i < 0) | (x_nan & (!v_nan | lower)) | (!x_nan & !v_nan & (more_extreme | ((x == v) & lower)));
  }
  // The order above, for an element of a higher index than any seen: it wins if nothing was seen, if it is the
  // first NaN, or if it is strictly more extreme than a non-NaN value (a tie keeps the lower index). Selects
  // instead of branches: this runs once per element.
  __device__ void add(float x, std::int64_t xi) {
    const bool v_nan = isnan(v);
    const bool take = (i < 0) | (isnan(x) & !v_nan) | (!v_nan & (kMin ? x < v : x > v));
    v = take ? x : v;
    i = take ? static_cast<Index>(xi) : i;
  }
  // add(x[k], t + k * step) for each k whose bit is set in `valid`, in k order, with the same result, for a group
  // of loads: the group's extreme by independent min / max chains (no index, no dependency on v), one comparison
  // with the accumulator, and the first index of that extreme only when the group wins (x[k] == m: of +0 and -0
  // the first keeps its own sign, as add() would). `valid` may differ between lanes: the other elements are
  // masked by predicates, not skipped by branches. A NaN is found by sums (a NaN makes its chain's sum NaN; so do
  // +inf and -inf together, which only sends the group the slow way): the group then goes through add(). The
  // sums cost one add per element where isnan() cost a compare, which ptxas also kept per element, as bits of a
  // mask, for the fallback's add(): three more instructions per element (sm_90 SASS). Why grouped at all: with
  // add()'s select chain on v and a 64-bit index per element, ptxas placed each load right before its element's
  // chain, so a lane kept one or two loads in flight (the H200 run of 8cbd4e5: one huge float row at D = 1 took
  // 74.3 us for the max against 34.6 for the sum), and the stream path's window paid a warp-uniform branch and
  // that chain per element (uniform lengths at D = 1: 112 us for the max against 72.9 for the sum).
  template <int U>
  __device__ void add_masked(const float (&x)[U], unsigned valid, std::int64_t t, std::int64_t step) {
    static_assert(U <= 32, "one bit of `valid` per element");
    if (valid == 0u) return;
    constexpr int kChains = U < 4 ? U : 4;
    float m[kChains], sum[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      m[c] = kMin ? INFINITY : -INFINITY;
      sum[c] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < U; ++k)
      if ((valid >> k) & 1u) {
        m[k % kChains] = kMin ? fminf(m[k % kChains], x[k]) : fmaxf(m[k % kChains], x[k]);
        sum[k % kChains] += x[k];
      }
#pragma unroll
    for (int c = 1; c < kChains; ++c) {
      m[0] = kMin ? fminf(m[0], m[c]) : fmaxf(m[0], m[c]);
      sum[0] += sum[c];
    }
    if (isnan(sum[0])) {
#pragma unroll
      for (int k = 0; k < U; ++k)
        if ((valid >> k) & 1u) add(x[k], t + k * step);
      return;
    }
    if (i >= 0 && !(kMin ? m[0] < v : m[0] > v)) return;  // also when v is NaN: a NaN is never replaced
    int first = 0;
    float best = x[0];  // x[first], kept by the unrolled loop: an index into x would put x in local memory
#pragma unroll
    for (int k = U - 1; k >= 0; --k)
      if (((valid >> k) & 1u) && x[k] == m[0]) {
        first = k;
        best = x[k];
      }
    v = best;
    i = static_cast<Index>(t + first * step);
  }
  __device__ void merge(const ExtremeAcc& o) {
    const bool take = (o.i >= 0) & beats(o.v, o.i);
    v = take ? o.v : v;
    i = take ? o.i : i;
  }
  __device__ ExtremeAcc shfl(int src) const {
    ExtremeAcc r;
    r.v = __shfl_sync(0xffffffffu, v, src);
    r.i = __shfl_sync(0xffffffffu, i, src);
    return r;
  }
  __device__ float value(std::int64_t, bool) const { return v; }
  __device__ std::int64_t index() const { return i; }
  __device__ void store(float* value, std::int64_t* index, std::int64_t at) const {
    static_assert(std::is_same<Index, std::int64_t>::value, "partials hold 64-bit indices");
    value[at] = v;
    index[at] = i;
  }
  __device__ static ExtremeAcc load(const float* value, const std::int64_t* index, std::int64_t at) {
    ExtremeAcc r;
    r.v = __ldcg(value + at);
    r.i = __ldcg(index + at);
    return r;
  }
  // A partial as merge_staged_node staged it: the value, then the 64-bit index.
  static constexpr int kSecondBytes = sizeof(std::int64_t);
  __device__ static ExtremeAcc staged(const float* value, const unsigned char* index, int at) {
    ExtremeAcc r;
    r.v = value[at];
    r.i = static_cast<Index>(reinterpret_cast<const std::int64_t*>(index)[at]);
    return r;
  }
};

// Output `at` (row b, column col: b * D + col) of a row of `length` tokens: empty_value and arg -1 when empty.
template <typename T, typename OffsetT, typename Acc>
__device__ __forceinline__ void write_result_at(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t at, const Acc& acc,
                                                std::int64_t length) {
  const bool mean = a.op == ReduceOp::kMean;
  a.out[at] = from_float<T>(length == 0 ? a.empty_value : acc.value(length, mean));
  if (a.arg != nullptr) a.arg[at] = length == 0 ? -1 : acc.index();
}

template <typename T, typename OffsetT, typename Acc>
__device__ __forceinline__ void write_result(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t b, std::int64_t col,
                                             const Acc& acc, std::int64_t length) {
  write_result_at(a, b * a.layout.geometry.inner + col, acc, length);
}

// A row of at most 32 elements, by one lane, in element order; head: tokens 0..3 of column 0 (row_pass).
// kScalar: D = 1 with 32-bit indices (scalar_row_pass), the same order.
template <bool kScalar, typename T, typename OffsetT>
__device__ __forceinline__ TinyHead<float> reduce_tiny_head(const SegmentReduceArgs<T, OffsetT>& a,
                                                            TinyIndex<kScalar> begin, TinyIndex<kScalar> length) {
  using I = TinyIndex<kScalar>;
  const I D = kScalar ? 1 : a.layout.geometry.inner;
  return load_tiny_head(length, 0.0f, [&](I t) { return to_float(a.values[(begin + t) * D]); });
}

template <typename T, typename OffsetT, typename Acc, bool kScalar>
__device__ void reduce_tiny_row(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t b, TinyIndex<kScalar> begin,
                                TinyIndex<kScalar> length, const TinyHead<float>& head) {
  using I = TinyIndex<kScalar>;
  const I D = kScalar ? 1 : a.layout.geometry.inner;
  for (I c = 0; c < D; ++c) {
    Acc acc;
    walk_tiny<kScalar>(
        length, head, c == 0, 0.0f, [&](I t) { return to_float(a.values[(begin + t) * D + c]); },
        [&](I t0, const float (&x)[kTinyHead]) {
#pragma unroll
          for (int k = 0; k < kTinyHead; ++k)
            if (t0 + k < length) acc.add(x[k], t0 + k);
        });
    write_result_at(a, b * D + c, acc, length);
  }
}

// The results of the empty rows first + i (bit i of `empty`): a row at a time across the warp's lanes, or,
// when the rows outnumber their D columns, a lane per row (at D = 1 one store per lane, where the warp's loop
// took a round per empty row: a fifth of the rows in the many-tiny-rows regime).
template <typename T, typename OffsetT>
__device__ void write_empty_rows(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t first, unsigned empty) {
  const std::int64_t D = a.layout.geometry.inner;
  if (D < __popc(empty)) {
    const int lane = lane_id();
    if ((empty >> lane) & 1u) {
      for (std::int64_t col = 0; col < D; ++col) {
        a.out[(first + lane) * D + col] = from_float<T>(a.empty_value);
        if (a.arg != nullptr) a.arg[(first + lane) * D + col] = -1;
      }
    }
    return;
  }
  while (empty != 0) {
    const std::int64_t row = first + __ffs(empty) - 1;
    empty &= empty - 1;
    for (std::int64_t col = lane_id(); col < D; col += kWarpSize) {
      a.out[row * D + col] = from_float<T>(a.empty_value);
      if (a.arg != nullptr) a.arg[row * D + col] = -1;
    }
  }
}

// Held to 3 blocks per SM: the many-tiny-rows regime is latency-bound here, so resident warps are its speed.
// Uncapped, ptxas (sm_90, nvcc 13.0) gave the sum / mean instantiations 102 registers (2 blocks, 16 warps per
// SM) where max / min took 74-79; at 3 blocks every instantiation fits 80 registers with no spill.
template <typename T, typename OffsetT, typename Acc>
__global__ void __launch_bounds__(kThreads, 3)
    segment_reduce_rows_kernel(const __grid_constant__ SegmentReduceArgs<T, OffsetT> a) {
  row_pass(
      a.layout,
      [&](std::int64_t, std::int64_t begin, std::int64_t length) { return reduce_tiny_head<false>(a, begin, length); },
      [&](std::int64_t b, std::int64_t begin, std::int64_t length, const TinyHead<float>& head) {
        reduce_tiny_row<T, OffsetT, Acc, false>(a, b, begin, length, head);
      },
      [&](std::int64_t first, unsigned empty) { write_empty_rows(a, first, empty); });
}


// Unit u, in the row of cursor `at`. kGrouped (max / min): a group of loads goes to Acc::add_masked per vector
// lane (the same result as add() per element), else to add() per element.
template <typename T, typename OffsetT, typename Acc, int V, bool kGrouped>
__device__ __forceinline__ void reduce_unit(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t u,
                                            const UnitCursor& at) {
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  const std::int64_t D = g.inner;
  const std::int64_t b = at.row;
  const std::int64_t local = u - at.before.units;
  const UnitPlace place = unit_place(local, g);
  const std::int64_t chunk = place.chunk;
  const LaneSlot slot = lane_slot(g, place.tile);
  const std::int64_t begin = at.begin, length = at.length;
  const std::int64_t t0 = chunk * g.chunk_tokens;
  const std::int64_t t1 = min(length, t0 + g.chunk_tokens);

  if (L.prefetch_units) prefetch_unit(a.values, g, begin, t0, t1, place.tile);  // warp-uniform
  Acc acc[V];
  if (slot.active) {
    // This lane's tokens: t = t0 + phase + i * phases for i < n, at element offset `offset` + i * stride. They
    // go in groups of U: every load of a group first, then the adds in token order. The full groups pass
    // count = U, a constant once inlined, so they load without a check; the last, partial one loads under
    // its count. Offsets step by a constant instead of a 64-bit multiply per load.
    constexpr int U = kUnroll<T, V>;
    const std::int64_t step = g.phases;
    const std::int64_t stride = step * D;
    std::int64_t t = t0 + slot.phase;
    const std::int64_t n = t < t1 ? divmod_nonnegative(t1 - t + step - 1, step).quot : 0;
    std::int64_t offset = (begin + t) * D + slot.vcol * V;
    auto add_group = [&](int count) {
      // Slots past `count` are zeroed, not left unset: unset, they kept the previous group's values alive across
      // the partial group, which ptxas spilled (float max, 3 blocks per SM).
      Vec<T, V> raw[U];
#pragma unroll
      for (int k = 0; k < U; ++k) {
        if (k < count) {
          raw[k] = *reinterpret_cast<const Vec<T, V>*>(a.values + offset + k * stride);
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) raw[k].v[v] = from_float<T>(0.0f);
        }
      }
      if constexpr (kGrouped) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          float x[U];
#pragma unroll
          for (int k = 0; k < U; ++k) x[k] = to_float(raw[k].v[v]);
          acc[v].add_masked(x, low_bits(count), t, step);
        }
      } else {
#pragma unroll
        for (int k = 0; k < U; ++k)
          if (k < count) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v].add(to_float(raw[k].v[v]), t + k * step);
          }
      }
    };
    // No L2 prefetch here, unlike the stream: asking 2 groups ahead made the unit walk 4-11% slower on the H200
    // (a910134: one huge row at D = 1, 64, 1024 and rows of 256 at D = 1024; the A/B of RAGGED_SEGMENT_PREFETCH=0
    // in docs/results/2026-11-27-h200-a910134773d1), where the streams gained 1-5% from it.
    for (std::int64_t i = 0; i + U <= n; i += U, t += U * step, offset += U * stride) add_group(U);
    if (n % U != 0) add_group(static_cast<int>(n % U));
  }
  if (g.narrow) merge_phases(acc, g, slot);
  const bool holder = g.narrow ? slot.phase == 0 : slot.active;
  const std::int64_t chunks = chunks_of(length, g);
  if (chunks == 1) {
    if (holder) {
#pragma unroll
      for (int v = 0; v < V; ++v) write_result(a, b, slot.vcol * V + v, acc[v], length);
    }
    return;
  }
  // Several chunks: store this one's partial, then climb the row's merge tree; the warp that merges its root
  // writes the row's results for this column tile.
  const std::int64_t first = at.before.partials;
  if (first + chunks > L.partial_capacity) return;  // only reachable with malformed (overlapping) offsets
  if (holder) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v].store(a.partial_value, a.partial_index, (first + chunk) * D + slot.vcol * V + v);
  }
  merge_tile_partials<Acc, (V > 1)>(
      L, place.tile, first, chunk, chunks,
      [&](std::int64_t at) { return Acc::load(a.partial_value, a.partial_index, at); },
      [&](const Acc& merged, std::int64_t at) { merged.store(a.partial_value, a.partial_index, at); },
      [&](std::int64_t col, const Acc& merged) { write_result(a, b, col, merged, length); },
      PartialArrays{a.partial_value, a.partial_index});
}

// Lines a stream loads at once: 64 bytes per lane (2 KB per warp; at the stream kernel's 2 blocks of 8 warps per
// SM, 32 KB in flight per SM, where ~25 KB covers DRAM's latency at 3.35 TB/s and ~1 us). Half of kUnroll: the
// stream's state (group and row bounds) lives across the loads, and with 128 bytes the float kernels, then held
// to 80 registers, spilled 100-250 bytes. At 2 blocks per SM 128 bytes fit (ptxas, sm_90: 102-128 registers, no
// spills except bfloat16 max / min at V = 8, 308 bytes of spill loads), but every row a group holds scans all
// of the group's lines (the window loop below), so at D = 1 a row's cost would double with them: a GPU A/B.
template <typename T, int V>
constexpr int kStreamLines = kUnroll<T, V> / 2;

// Row r, finished as reduce_unit finishes a one-chunk row: the phases merge by merge_phases' tree and phase 0
// writes; the accumulators are left empty for the next row. A stream's lane p * vcols + col holds the row's
// phase (p - begin) mod phases, not phase p as in reduce_unit, but that changes nothing: phases is a power of two,
// and a rotation maps each level of the tree's pairs, {j, j + s} with s = phases / 2, phases / 4, ..., onto the
// same pairs, so every merge sees the same two operands, at most swapped. A sum's add commutes bitwise; the
// extremes merge by a total order. So the bits are reduce_unit's without a shuffle to undo the rotation.
template <typename T, typename OffsetT, typename Acc, int V>
__device__ __forceinline__ void finish_streamed_row(const SegmentReduceArgs<T, OffsetT>& a, Acc (&acc)[V],
                                                    const StreamRow& r, int phase, int vcol) {
  merge_phases(acc, a.layout.geometry, LaneSlot{vcol, phase, true});
  if (phase == 0) {
#pragma unroll
    for (int v = 0; v < V; ++v) write_result(a, r.row, vcol * V + v, acc[v], r.length);
  }
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = Acc{};
}

// The stream's accumulator for the op's Acc: max / min with a 32-bit index (a one-chunk row's indices fit it; the
// result is the same, as index() widens it), so that merge_phases shuffles and compares one index word, not two.
template <typename Acc>
struct StreamAccOf {
  using type = Acc;
};
template <bool kMin>
struct StreamAccOf<ExtremeAcc<kMin>> {
  using type = ExtremeAcc<kMin, int>;
};

// The row pass of geometries with sub-warp rows (subwarp_row_pass, segment_common.cuh; wide_short_row_pass at wide D,
// kWide): lane col of a short row's sub-warp adds its vector column's tokens in order, from StreamAccOf<Acc>{} (a
// 32-bit index), and writes the column's results; an empty row gets empty_value and arg -1. The order is the CPU
// reference's (a column in token order). At narrow D it is not the first pass's (a row's tokens spread over phases,
// then merged); at wide D it is (one phase: a unit's lane adds its column's tokens in order), so wide short rows give
// the units' bits. One row per sub-warp at a time (64 bytes per lane in flight; at wide D kWideReduceTiles tiles of a
// row: 256 bytes in float, 128 in 16 bits). Blocks per SM (ptxas, sm_90): 4 for float with int32 offsets (64 registers,
// no spill), 3 for the others (at 4, bfloat16 spilled 28-132 bytes and float with int64 offsets 4); two rows at a time
// spilled the float sum 12 bytes at 3 blocks (80 registers). The wide kernels: 2 (float: 4 tiles of 4 tokens are 64
// registers of loads; 16-bit: 2 tiles, where 4 spilled 244-364 bytes at 128 registers).
template <typename T, typename OffsetT, bool kWide>
constexpr int kSubwarpReduceBlocks = kWide ? 2 : sizeof(T) == 4 && sizeof(OffsetT) == 4 ? 4 : 3;
template <typename T>
constexpr int kWideReduceTiles = sizeof(T) == 4 ? 4 : 2;

template <typename T, typename OffsetT, typename Acc, int V, bool kWide>
__global__ void __launch_bounds__(kThreads, (kSubwarpReduceBlocks<T, OffsetT, kWide>))
    segment_reduce_subwarp_rows_kernel(const __grid_constant__ SegmentReduceArgs<T, OffsetT> a) {
  using Scalar = typename StreamAccOf<Acc>::type;
  const std::int64_t D = a.layout.geometry.inner;
  auto load = [&](std::int64_t begin, std::int64_t length, int col) {
    return load_subwarp_column<T, V>(a.values, D, begin, length, col);
  };
  auto finish = [&](std::int64_t b, std::int64_t, std::int64_t length, int col, const SubwarpColumn<T, V>& h) {
    Scalar acc[V];
#pragma unroll
    for (int k = 0; k < kSubwarpRowTokens; ++k)
      if (k < length) {
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v].add(to_float(h.x[k].v[v]), k);
      }
#pragma unroll
    for (int v = 0; v < V; ++v) write_result(a, b, col * V + v, acc[v], length);
  };
  auto prefetch = [&](std::int64_t first, std::int64_t end, int lane, int lanes) {
    prefetch_span(a.values, first, end, lane, lanes);
  };
  if constexpr (kWide) wide_short_row_pass<kWideReduceTiles<T>>(a.layout, load, prefetch, finish);
  else subwarp_row_pass<1>(a.layout, load, prefetch, finish);
}

// Whether the stream's window folds a row's lines at once (ExtremeAcc::add_masked: add()'s result, each lane's
// lines of the row masked by predicates): max / min. The sum adds per line, skipping other rows' by branches.
template <typename Acc>
constexpr bool kGroupedStream = !std::is_same<Acc, SumAcc>::value;

// A warp row (is_warp_row: D = 1, more than tiny_tokens and at most kWarpRowTokens tokens), by the whole warp:
// lane p loads tokens p, p + 32, ... at once, adds them in that order from StreamAccOf<Acc>{} (max / min by
// add_masked, add()'s result), then merge_phases' tree and phase 0 writes. That is reduce_unit's and
// stream_rows' order for a one-chunk row at D = 1 (32 phases of one token), so the bits are theirs.
template <typename T, typename OffsetT, typename Acc>
__device__ __forceinline__ void reduce_warp_row(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t b, int begin,
                                                int length) {
  constexpr int kHeld = static_cast<int>(kWarpRowTokens / kWarpSize);
  const int lane = lane_id();
  float x[kHeld];
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int t = k * kWarpSize + lane;
    x[k] = t < length ? to_float(a.values[begin + t]) : 0.0f;
  }
  typename StreamAccOf<Acc>::type acc[1];
  if constexpr (kGroupedStream<Acc>) {
    // This lane's tokens below length: k < ceil((length - lane) / 32), at most kHeld.
    const int held = length > lane ? min(kHeld, (length - lane + kWarpSize - 1) / kWarpSize) : 0;
    acc[0].add_masked(x, low_bits(held), lane, kWarpSize);
  } else {
#pragma unroll
    for (int k = 0; k < kHeld; ++k)
      if (k * kWarpSize + lane < length) acc[0].add(x[k], k * kWarpSize + lane);
  }
  merge_phases(acc, a.layout.geometry, LaneSlot{0, lane, true});
  if (lane == 0) write_result_at(a, b, acc[0], length);
}

// The row pass at D = 1 (scalar_row_pass, segment_common.cuh): the same bits as row_pass's, a tiny row added in
// token order from Acc{} with a 32-bit index where max / min keep one (StreamAccOf); then, where the launcher set
// warp_row_tokens, the warp rows (warp_row_pass, reduce_warp_row). Its own kernel, held to 4 blocks per SM (ptxas,
// sm_90: 62-64 registers, no spill; at 5 blocks 12-32 bytes of spill), where row_pass's holds 3.
template <typename T, typename OffsetT, typename Acc>
__global__ void __launch_bounds__(kThreads, 4)
    segment_reduce_scalar_rows_kernel(const __grid_constant__ SegmentReduceArgs<T, OffsetT> a) {
  using Scalar = typename StreamAccOf<Acc>::type;
  scalar_row_pass(
      a.layout, [&](int begin, int length) { return reduce_tiny_head<true>(a, begin, length); },
      [&](std::int64_t b, int begin, int length, const TinyHead<float>& head) {
        if (length == 0) write_result_at(a, b, Scalar{}, 0);  // empty_value, arg -1
        else reduce_tiny_row<T, OffsetT, Scalar, true>(a, b, begin, length, head);
      });
  if (a.layout.geometry.warp_row_tokens > 0)
    warp_row_pass(
        a.layout,
        [&](std::int64_t first, std::int64_t end, int lane, int lanes) {
          prefetch_span(a.values, first, end, lane, lanes);
        },
        [&](std::int64_t b, int begin, int length) { reduce_warp_row<T, OffsetT, Acc>(a, b, begin, length); });
}

// The one-chunk rows of this warp's share from unit u on (c at u's row), streamed: the warp reads the flat values
// in lines of 32 vectors (`phases` tokens), U lines at a time, and a lane adds the vector it holds to the row
// that owns it. Lane l = p * vcols + col always holds column col of the tokens = p (mod phases), so within a row
// it meets exactly the tokens of reduce_unit's phase (p - begin) mod phases, in the same order, and the result is
// bitwise reduce_unit's (finish_streamed_row). Why: at one unit per row a warp spent several hundred instructions
// and a memory round trip per unit (cursor step, the unit's setup, its loads, then the merge) on rows of a few
// hundred bytes (D = 1 with lengths around 256; D = 64 with rows of 1 to 4 tokens); a stream keeps U lines in
// flight across rows and spends per row only the merge and the step to the next row. Returns with u past the
// rows it finished and c at u's row when that row has several chunks (the unit path takes it), or with
// u == end. token_end: the end of the share's last row; nothing past it is loaded.
template <typename T, typename OffsetT, typename Acc, int V>
__device__ void stream_rows(const SegmentReduceArgs<T, OffsetT>& a, std::int64_t& u, UnitCursor& c, std::int64_t end,
                            std::int64_t token_end) {
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  constexpr int U = kStreamLines<T, V>;
  const int lane = lane_id();
  const StreamLane place = stream_lane(g);
  const int phase = place.phase, vcol = place.vcol, shift = place.shift;
  RowWork entry;
  StreamRow r = begin_stream(c, entry);
  typename StreamAccOf<Acc>::type acc[V];
  std::int64_t line = r.begin >> shift;  // the group's first line
  // L2 prefetch: the lines below line + asked have been asked for (or loaded); each ask is 2U lines, one 128-byte
  // line per lane (prefetch_pieces), made while fewer than `ahead` groups past the current one are asked for.
  const int ahead = L.prefetch_groups;
  int asked = 0;
  while (true) {
    // Line k of the group holds tokens (line + k) * phases .. + phases - 1; this lane's vector of it lies at
    // element ((line + k) * 32 + lane) * V.
    const std::int64_t first_token = line << shift;
    const std::int64_t token = first_token + phase;
    const T* src = a.values + (line * kWarpSize + lane) * V;
    Vec<T, V> raw[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      if (token + k * g.phases < token_end) {
        raw[k] = *reinterpret_cast<const Vec<T, V>*>(src + k * kWarpSize * V);
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) raw[k].v[v] = from_float<T>(0.0f);
      }
    }
    while (ahead > 0 && asked < (ahead + 1) * U) {
      const std::int64_t from = line + max(asked, U);
      const std::int64_t lines_left = (token_end - (from << shift) + g.phases - 1) >> shift;
      if (lines_left <= 0) break;
      prefetch_pieces<T, V, 2 * U>(a.values, from * kWarpSize * V, kWarpSize * V,
                                   static_cast<int>(min(static_cast<std::int64_t>(2 * U), lines_left)),
                                   token_end * g.inner);
      asked = max(asked, U) + 2 * U;
    }
    const std::int64_t group_end = first_token + (static_cast<std::int64_t>(U) << shift);
    while (true) {
      // This lane's token index in the row at line 0 (a one-chunk row and a group both span at most
      // chunk_tokens, so it fits 32 bits).
      const std::int64_t row_end = r.begin + r.length;
      const int at0 = static_cast<int>(token - r.begin);
      if constexpr (kGroupedStream<Acc>) {
        // This lane's lines of the row, [lo, hi): those whose token at0 + k * phases lies in [0, length).
        const int length = static_cast<int>(r.length);
        const int lo = at0 >= 0 ? 0 : min(U, (g.phases - 1 - at0) >> shift);
        const int hi = max(0, min(U, (length - at0 + g.phases - 1) >> shift));
        const unsigned valid = low_bits(hi) & ~low_bits(lo);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          float x[U];
#pragma unroll
          for (int k = 0; k < U; ++k) x[k] = to_float(raw[k].v[v]);
          acc[v].add_masked(x, valid, at0, g.phases);
        }
      } else {
        // The row's lines in this group, [k0, k1).
        const int k0 = r.begin > first_token ? static_cast<int>((r.begin - first_token) >> shift) : 0;
        const int k1 = row_end < group_end ? static_cast<int>((row_end - first_token + g.phases - 1) >> shift) : U;
        const unsigned length = static_cast<unsigned>(r.length);
#pragma unroll
        for (int k = 0; k < U; ++k) {
          if (k >= k0 && k < k1) {  // warp-uniform
            const int at = at0 + k * g.phases;
            if (static_cast<unsigned>(at) < length) {
#pragma unroll
              for (int v = 0; v < V; ++v) acc[v].add(to_float(raw[k].v[v]), at);
            }
          }
        }
      }
      if (row_end > group_end) {  // the row goes on in the next group
        line += U;
        asked -= U;
        break;
      }
      finish_streamed_row(a, acc, r, phase, vcol);
      // A row of several chunks goes back to the unit walk.
      if (!step_stream(L, u, c, end, entry, r, [&](const StreamRow& s) { return s.length <= g.chunk_tokens; }))
        return;
      if (r.begin < first_token || r.begin >= group_end) {
        // The next row starts past this group (rows without units between), or, with malformed offsets only,
        // before it: load from its first line (and ask for the lines after it afresh).
        line = r.begin >> shift;
        asked = 0;
        break;
      }
    }
  }
}

// Blocks per SM the unit kernel is held to (__launch_bounds__): what ptxas reached before the units were walked
// in contiguous shares (float: 79-80 registers, 3 blocks, except max with scalar loads at 100; 16-bit: 93-128,
// 2), which a cursor kept across the unit's body would otherwise cost (float sum 79 -> 100, half max 120 -> 148).
// With 128 bytes in flight per lane (kUnroll; ptxas, sm_90): float V = 4 stays at 80 registers with 16 bytes of
// stack (per-unit values, stored and reloaded outside the load loop), float sum V = 1 at 80, float max / min
// V = 1 at 123, 16-bit V = 1 at 98 and V = 8 at 110 (sum) to 128 (max / min): the same blocks per SM.
template <typename T, typename Acc, int V>
constexpr int kReduceMinBlocks = sizeof(T) == 4 && (V > 1 || std::is_same<Acc, SumAcc>::value) ? 3 : 2;

// Whether the unit kernel's max / min take a group of loads at once (ExtremeAcc::add_masked). Not where ptxas
// (sm_90) spilled with it: float at V = 4 held to 3 blocks per SM (20 -> 558 bytes), bfloat16 at V = 8 (stream
// kernel 16 -> 64 bytes of spill stores; the other 0 -> 8).
template <typename T, typename Acc, int V, bool kStream>
constexpr bool kGroupedUnits = !std::is_same<Acc, SumAcc>::value &&
                               (kStream || kReduceMinBlocks<T, Acc, V> < 3) &&
                               !(std::is_same<T, __nv_bfloat16>::value && V > 1);

// kStream: the geometry streams one-chunk rows (streams_rows; a separate kernel, so that the others keep their
// registers).
template <typename T, typename OffsetT, typename Acc, int V, bool kStream>
__global__ void __launch_bounds__(kThreads, (kStream ? 2 : kReduceMinBlocks<T, Acc, V>))
    segment_reduce_kernel(const __grid_constant__ SegmentReduceArgs<T, OffsetT> a) {
  wait_for_prior_grid();
  const SegmentLayout<OffsetT>& L = a.layout;
  stage_plan(L);
  std::int64_t token_end = -1;  // found when the share first streams
  walk_units<true>(L, &RowWork::units, [&](std::int64_t& u, UnitCursor& c, std::int64_t end) {
    if (kStream && c.length <= L.geometry.chunk_tokens) {
      if (token_end < 0) token_end = share_token_end(L, end);
      stream_rows<T, OffsetT, Acc, V>(a, u, c, end, token_end);
    } else {
      reduce_unit<T, OffsetT, Acc, V, kGroupedUnits<T, Acc, V, kStream>>(a, u, c);
      ++u;
    }
  });
}

template <typename T, typename OffsetT, typename Acc, int V>
Status launch_reduce(const SegmentReduceArgs<T, OffsetT>& args, cudaStream_t stream) {
  SegmentReduceArgs<T, OffsetT> a = args;
  const bool scalar_rows = takes_scalar_rows(a.layout);  // read once: the warp rows need this row pass
  take_warp_rows(a.layout, scalar_rows);
  take_unit_prefetch(a.layout, sizeof(T));
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  // D = 1 with 32-bit indices: the scalar row pass (segment_reduce_scalar_rows_kernel), the same results. Short
  // rows at D > 32 (subwarp_rows, only at V > 1): the sub-warp row pass.
  if (g.subwarp_rows) {
    if constexpr (V > 1)
      RAGGED_RETURN_IF_ERROR(g.narrow ? build_plan(&segment_reduce_subwarp_rows_kernel<T, OffsetT, Acc, V, false>, a,
                                                   L, "segment_reduce_subwarp_rows_kernel", stream)
                                      : build_plan(&segment_reduce_subwarp_rows_kernel<T, OffsetT, Acc, V, true>, a,
                                                   L, "segment_reduce_subwarp_rows_kernel", stream));
    else
      return fail(Status::kInvalidArgument, "segment_reduce: sub-warp rows without 16-byte vectors");
  } else {
    RAGGED_RETURN_IF_ERROR(scalar_rows
                               ? build_plan(&segment_reduce_scalar_rows_kernel<T, OffsetT, Acc>, a, L,
                                            "segment_reduce_scalar_rows_kernel", stream)
                               : build_plan(&segment_reduce_rows_kernel<T, OffsetT, Acc>, a, L,
                                            "segment_reduce_rows_kernel", stream));
  }
  unsigned blocks = 0;
  // Work bounds known on the host: every row's units fit in (nnz / chunk + rows) * tiles.
  const std::int64_t units = (L.nnz / g.chunk_tokens + std::min(L.batch, L.nnz)) * g.tiles;
  const auto kernel = streams_rows(g) && segment_stream_enabled() ? &segment_reduce_kernel<T, OffsetT, Acc, V, true>
                                                                    : &segment_reduce_kernel<T, OffsetT, Acc, V, false>;
  SegmentReduceArgs<T, OffsetT> first = a;  // its merge staging fitted to the device
  std::size_t shared = 0;
  RAGGED_RETURN_IF_ERROR(fit_first_pass_shared(kernel, first.layout, shared, "segment_reduce_kernel"));
  RAGGED_RETURN_IF_ERROR(persistent_grid(kernel, units, blocks, shared));
  return launch_following(kernel, blocks, shared, stream, first, "segment_reduce_kernel");
}

template <typename T, typename OffsetT, typename Acc>
Status launch_reduce_vec(const SegmentReduceArgs<T, OffsetT>& a, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (a.layout.geometry.vec == kVec) return launch_reduce<T, OffsetT, Acc, kVec>(a, stream);
  if (a.layout.geometry.vec == 1) return launch_reduce<T, OffsetT, Acc, 1>(a, stream);
  return fail(Status::kUnsupportedShape, "segment_reduce: no kernel for vector width " +
                                             std::to_string(a.layout.geometry.vec));
}

// ---------------------------------------------------------------------------------------------------------------
// Backward: d_in[row, c] = d_out[b, c] (sum), d_out[b, c] / length (mean), or d_out[b, c] at the arg row and 0
// elsewhere (max, min). Same work list as the forward pass, writing instead of reading.

template <typename T, typename OffsetT>
__device__ __forceinline__ float grad_at(const SegmentReduceBackwardArgs<T, OffsetT>& a, std::int64_t at,
                                         std::int64_t length) {
  const float g = to_float(a.grad_out[at]);
  return a.op == ReduceOp::kMean ? g / static_cast<float>(length) : g;
}

// A tiny row, by one lane. Its head (loaded by row_pass with the group's other rows): column 0's gradient and
// arg index, all the row reads before it writes.
struct BackwardHead {
  float grad = 0.0f;
  std::int64_t arg = -1;
};

template <typename T, typename OffsetT>
__device__ __forceinline__ BackwardHead backward_column(const SegmentReduceBackwardArgs<T, OffsetT>& a,
                                                        std::int64_t at, std::int64_t length) {
  const bool routed = a.op == ReduceOp::kMax || a.op == ReduceOp::kMin;
  return BackwardHead{grad_at(a, at, length), routed ? a.arg[at] : -1};
}

template <typename T, typename OffsetT>
__device__ void backward_tiny_row(const SegmentReduceBackwardArgs<T, OffsetT>& a, std::int64_t b, std::int64_t begin,
                                  std::int64_t length, const BackwardHead& head) {
  const std::int64_t D = a.layout.geometry.inner;
  const bool routed = a.op == ReduceOp::kMax || a.op == ReduceOp::kMin;
  for (std::int64_t c = 0; c < D; ++c) {
    const BackwardHead column = c == 0 ? head : backward_column(a, b * D + c, length);
    for (std::int64_t t = 0; t < length; ++t)
      a.grad_in[(begin + t) * D + c] = from_float<T>(!routed || t == column.arg ? column.grad : 0.0f);
  }
}

template <typename T, typename OffsetT>
__global__ void __launch_bounds__(kThreads)
    segment_reduce_backward_rows_kernel(const __grid_constant__ SegmentReduceBackwardArgs<T, OffsetT> a) {
  row_pass(
      a.layout,
      [&](std::int64_t b, std::int64_t, std::int64_t length) {
        return backward_column(a, b * a.layout.geometry.inner, length);
      },
      [&](std::int64_t b, std::int64_t begin, std::int64_t length, const BackwardHead& head) {
        backward_tiny_row(a, b, begin, length, head);
      },
      [](std::int64_t, unsigned) {});  // an empty row has no gradient to write
}

template <typename T, typename OffsetT, int V>
__global__ void __launch_bounds__(kThreads)
    segment_reduce_backward_kernel(const __grid_constant__ SegmentReduceBackwardArgs<T, OffsetT> a) {
  wait_for_prior_grid();
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  const std::int64_t D = g.inner;
  const bool routed = a.op == ReduceOp::kMax || a.op == ReduceOp::kMin;
  stage_plan(L);
  for_each_unit<true>(L, &RowWork::units, [&](std::int64_t unit, const UnitCursor& at) {
    const std::int64_t b = at.row;
    const UnitPlace place = unit_place(unit - at.before.units, g);
    const LaneSlot slot = lane_slot(g, place.tile);
    if (!slot.active) return;
    const std::int64_t begin = at.begin, length = at.length;
    const std::int64_t t0 = place.chunk * g.chunk_tokens;
    const std::int64_t t1 = min(length, t0 + g.chunk_tokens);
    float grad[V];
    std::int64_t arg[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const std::int64_t at_col = b * D + slot.vcol * V + v;
      grad[v] = grad_at(a, at_col, length);
      arg[v] = routed ? a.arg[at_col] : -1;
    }
    // The offset steps by a constant rather than being recomputed per token (a 64-bit multiply each).
    const std::int64_t stride = g.phases * D;
    std::int64_t offset = (begin + t0 + slot.phase) * D + slot.vcol * V;
    for (std::int64_t t = t0 + slot.phase; t < t1; t += g.phases, offset += stride) {
      float x[V];
#pragma unroll
      for (int v = 0; v < V; ++v) x[v] = !routed || t == arg[v] ? grad[v] : 0.0f;
      store_floats<T, V>(a.grad_in + offset, x);
    }
  });
}

template <typename T, typename OffsetT, int V>
Status launch_backward(const SegmentReduceBackwardArgs<T, OffsetT>& a, cudaStream_t stream) {
  const SegmentLayout<OffsetT>& L = a.layout;
  RAGGED_RETURN_IF_ERROR(build_plan(&segment_reduce_backward_rows_kernel<T, OffsetT>, a, L,
                                    "segment_reduce_backward_rows_kernel", stream));
  unsigned blocks = 0;
  const std::int64_t units = (L.nnz / L.geometry.chunk_tokens + std::min(L.batch, L.nnz)) * L.geometry.tiles;
  const std::size_t shared = static_cast<std::size_t>(first_pass_plan_bytes(L.batch));  // no merges: the plan only
  RAGGED_RETURN_IF_ERROR(persistent_grid(&segment_reduce_backward_kernel<T, OffsetT, V>, units, blocks, shared));
  return launch_following(&segment_reduce_backward_kernel<T, OffsetT, V>, blocks, shared, stream, a,
                          "segment_reduce_backward_kernel");
}

}  // namespace

template <typename T, typename OffsetT>
Status launch_segment_reduce(const SegmentReduceArgs<T, OffsetT>& args, cudaStream_t stream) {
  switch (args.op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return launch_reduce_vec<T, OffsetT, SumAcc>(args, stream);
    case ReduceOp::kMax: return launch_reduce_vec<T, OffsetT, ExtremeAcc<false>>(args, stream);
    case ReduceOp::kMin: return launch_reduce_vec<T, OffsetT, ExtremeAcc<true>>(args, stream);
  }
  return fail(Status::kInvalidArgument,
              "segment_reduce: unknown ReduceOp " + std::to_string(static_cast<int>(args.op)));
}

template <typename T, typename OffsetT>
Status launch_segment_reduce_backward(const SegmentReduceBackwardArgs<T, OffsetT>& args, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (args.layout.geometry.vec == kVec) return launch_backward<T, OffsetT, kVec>(args, stream);
  if (args.layout.geometry.vec == 1) return launch_backward<T, OffsetT, 1>(args, stream);
  return fail(Status::kUnsupportedShape, "segment_reduce_backward: no kernel for vector width " +
                                             std::to_string(args.layout.geometry.vec));
}

#define RAGGED_INSTANTIATE_SEGMENT_REDUCE(T, O)                                                                   \
  template Status launch_segment_reduce<T, O>(const SegmentReduceArgs<T, O>&, cudaStream_t);                     \
  template Status launch_segment_reduce_backward<T, O>(const SegmentReduceBackwardArgs<T, O>&, cudaStream_t);

}  // namespace detail
}  // namespace ragged
