// Softmax / log-softmax over the ragged dimension, forward and backward, per inner column.
//
// Same row pass, plan and units as the reductions (segment_reduce.cuh), but a unit is one or a few register tiles
// (geometry.sweeps): the warp loads them one after the other and folds each into the unit's statistic (max and sum of
// exponentials forward, online; sum of dy * y, or of dy, backward; a forward row of one tile takes the max, then the
// sum, as the reference does: one_tile_statistic). When the row is a single unit it then writes the result, from
// registers for the last tile and re-reading the others, which it read moments ago (L2): one DRAM read and one write
// of the data. A row of several chunks stores per-chunk statistics, merged in the same kernel by the row's merge tree
// (per column tile; the warp that completes a node's children merges them in chunk order: segment_geometry.h). Up to
// local_finish_chunks chunks, the warp that merges the root then re-reads the chunks to write them while they are
// still in L2. Longer rows: a second-pass kernel re-reads the row to write it (the plan counts those rows' units
// apart, so it visits no other row), unless one block's shared memory holds the row (per column tile): such a block
// row is read into it once, by one block of the second-pass kernel, and written from there (normalize_block_row), and
// the first pass skips it. Where 32 vectors are whole tokens, rows short enough are streamed instead: windows of
// lines across row boundaries, several rows finished from one load (stream_softmax_rows); at D = 1, where rows
// average more than 16 tokens, the row pass finishes those of 33 to 512 tokens a warp each (normalize_warp_row), in
// the same order. Three launches, or six for more than 131072 rows (the plan's memset and CUB scan).
//
// Templates only: kernels/segment_softmax_<value>_<offset>.cu instantiate them, one type pair per file, so that a
// build compiles the six in parallel. As one file it was the build's critical path: 177 s of nvcc for sm_90 alone
// on one core here, where two of the six took 30 and 32 s (every other kernel file: under 16 s in the full build).
#pragma once

#include <cmath>
#include <string>

#include "launch.cuh"
#include "register_tile.cuh"
#include "segment_common.cuh"
#include "segment_launch.h"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = kSegmentThreads;

__device__ __forceinline__ float nan_max(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmaxf(a, b); }

// exp(m - reference), with an empty (all -inf) part contributing nothing.
__device__ __forceinline__ float rescale(float m, float reference) {
  return m == -INFINITY ? 0.0f : expf(m - reference);
}

// Forward statistic: running max m and sum of exp(x - m).
struct ForwardStat {
  float m = -INFINITY;
  float s = 0.0f;
  // Commutes bitwise (merge_phases and the stream rely on it): both products are rounded before the add, which
  // a contraction into an FMA would not do for one of them, so that merge(a, b) and merge(b, a) would differ.
  __device__ void merge(const ForwardStat& o) {
    const float top = nan_max(m, o.m);
    s = __fmul_rn(s, rescale(m, top)) + __fmul_rn(o.s, rescale(o.m, top));
    m = top;
  }
  __device__ ForwardStat shfl(int src) const {
    return ForwardStat{__shfl_sync(0xffffffffu, m, src), __shfl_sync(0xffffffffu, s, src)};
  }
  // A partial as merge_staged_node staged it: the max, then the sum.
  static constexpr int kSecondBytes = sizeof(float);
  __device__ static ForwardStat staged(const float* m, const unsigned char* s, int at) {
    return ForwardStat{m[at], reinterpret_cast<const float*>(s)[at]};
  }
};

// A float sum merged by an add: the backward statistic (the sum of dy * y, or of dy for log-softmax) and the
// forward one-tile statistic's sum of exp(x - M) (one_tile_statistic).
struct SumStat {
  float sum = 0.0f;
  __device__ void merge(const SumStat& o) { sum += o.sum; }
  __device__ SumStat shfl(int src) const { return SumStat{__shfl_sync(0xffffffffu, sum, src)}; }
  static constexpr int kSecondBytes = 0;
  __device__ static SumStat staged(const float* sum, const unsigned char*, int at) { return SumStat{sum[at]}; }
};

struct SoftmaxForward {
  using Stat = ForwardStat;
  static constexpr bool kBackward = false;
  static constexpr int kFloatsPerLane = kSoftmaxFloatsPerLane;

  // What a tile's items past the row's end hold: they add nothing to the statistic (exp(-inf - top) = +0 for
  // any top), so the loops below need no per-item branch.
  static constexpr float kPadX = -INFINITY;
  static constexpr float kPadDy = 0.0f;

  // Folds items 0 .. N - 1 (x(i), those with counts(i)) into st: the new max first, then the running sum
  // rescaled to it plus the items' exponentials (from the empty statistic this is exactly max, then sum of
  // exp(x - max)). The max skips NaN (fmaxf, no branch per item); a NaN item makes the sum NaN instead, which
  // every later merge keeps and which turns the whole column's output into NaN, as a NaN max would. A unit's
  // tile counts every item (its pads add +0); a stream's window only the row's, which gives the same bits.
  template <int N, typename X, typename Dy, typename Counts>
  __device__ static void accumulate(Stat& st, X x, Dy, Counts counts, bool) {
    float top = st.m;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (counts(i)) top = fmaxf(top, x(i));
    if (top == -INFINITY) {  // nothing but -inf so far, or NaN: the sum stays 0 unless a NaN came
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (counts(i) && isnan(x(i))) st.s = NAN;
      return;
    }
    float sum = st.s * rescale(st.m, top);
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (counts(i)) sum += expf(x(i) - top);
    st = Stat{top, sum};
  }
  // Per column, once: log(sum) for log-softmax, 1 / sum for softmax (a multiply per element, not a division).
  struct Scale {
    float m;
    float k;
  };
  __device__ static Scale prepare(const Stat& st, bool log) { return Scale{st.m, log ? logf(st.s) : 1.0f / st.s}; }
  template <bool kLog>
  __device__ static float apply(const Scale& c, float x, float) {
    return kLog ? (x - c.m) - c.k : expf(x - c.m) * c.k;
  }
  __device__ static void store(const Stat& st, float* a, float* b, std::int64_t at) {
    a[at] = st.m;
    b[at] = st.s;
  }
  __device__ static Stat load(const float* a, const float* b, std::int64_t at) {
    return Stat{__ldcg(a + at), __ldcg(b + at)};
  }
};

// x holds y (the forward output), dy the incoming gradient.
struct SoftmaxBackward {
  using Stat = SumStat;
  static constexpr bool kBackward = true;
  static constexpr int kFloatsPerLane = kSoftmaxBackwardFloatsPerLane;

  static constexpr float kPadX = 0.0f;   // past the row's end: adds +0 to the sum either way
  static constexpr float kPadDy = 0.0f;

  // As SoftmaxForward::accumulate: items 0 .. N - 1 with counts(i), in order. The fused multiply-adds are
  // written out: left to contraction, whether one forms may differ between the unit's and the stream's inlined
  // copies (the stream's per-item condition), and so would their bits.
  template <int N, typename Y, typename Dy, typename Counts>
  __device__ static void accumulate(Stat& st, Y y, Dy dy, Counts counts, bool log) {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (counts(i)) st.sum = log ? st.sum + dy(i) : fmaf(dy(i), y(i), st.sum);
  }
  using Scale = Stat;
  __device__ static Scale prepare(const Stat& st, bool) { return st; }
  template <bool kLog>
  __device__ static float apply(const Scale& st, float y, float dy) {
    return kLog ? fmaf(-expf(y), st.sum, dy) : y * (dy - st.sum);
  }
  __device__ static void store(const Stat& st, float* a, float*, std::int64_t at) { a[at] = st.sum; }
  __device__ static Stat load(const float* a, const float*, std::int64_t at) { return Stat{__ldcg(a + at)}; }
};

// Folds column v of a register tile, every item, into st.
template <typename Op, int N, int V>
__device__ __forceinline__ void accumulate_tile(typename Op::Stat& st, const float (&x)[N][V],
                                                const float (&dy)[N][V], int v, bool log) {
  Op::template accumulate<N>(
      st, [&](int i) { return x[i][v]; }, [&](int i) { return dy[i][v]; }, [](int) { return true; }, log);
}

template <typename Op, typename T, int N, int V>
__device__ __forceinline__ void accumulate_tile(typename Op::Stat& st, const RegisterTile<T, N, V>& x,
                                                const RegisterTile<T, N, V>& dy, int v, bool log) {
  Op::template accumulate<N>(
      st, [&](int i) { return x(i, v); }, [&](int i) { return dy(i, v); }, [](int) { return true; }, log);
}

// Forward, a row of one register tile (a unit's, or a stream's window's lines): the column's statistic in the
// reference's two passes. The maximum M over the row (fmaxf: NaN skipped, carried by the sum instead), merged over
// the phases, then the sum of exp(x - M), merged likewise, both handed to every lane of the column. Why: the online
// statistic paid two exponentials per merge of two statistics (rescale) on top of each item's, and a tile's phases
// merge in log2(phases) rounds per column: for bfloat16 rows of 1 to 4 tokens at D = 64 (4 phases, 8 columns a
// lane) 32 exponentials per row against the row's 8 per lane; one round of that merge was 344 instructions of sm_90
// SASS, run twice per row (the H200 run of a910134: 599 us for 64 MiB there, copy_frac 0.056). Here a merge is
// one fmaxf or add. The order of each lane's items is the row's token order, whatever the path (unit or window),
// and a merge commutes bitwise, so both paths give the same bits. (fmaxf(+0, -0) may return either zero, but M's
// sign cannot show: exp(x - M) is the same, and (x - M) - log(sum) differs only for x = -0 with log(sum) = 0,
// while a maximum reached by both zeros puts two items of exp(0) = 1 in the sum.) x(i, v): item i, column v of
// this lane; counts(i): whether item i counts (a window's: the row's tokens; a unit's: every item, its pads being
// -inf); items (warp-uniform): no lane counts an item from it on, so the loops stop there (a warp row's lines).
struct PhaseMax {
  float m;
  __device__ void merge(const PhaseMax& o) { m = fmaxf(m, o.m); }
  __device__ PhaseMax shfl(int src) const { return PhaseMax{__shfl_sync(0xffffffffu, m, src)}; }
};

template <int N, int V, typename X, typename Counts>
__device__ __forceinline__ void one_tile_statistic(ForwardStat (&st)[V], X x, Counts counts, const SegmentGeometry& g,
                                                   const LaneSlot& slot, int items = N) {
  PhaseMax top[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    top[v].m = -INFINITY;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= items) break;
      if (counts(i)) top[v].m = fmaxf(top[v].m, x(i, v));
    }
  }
  if (g.narrow) merge_phases_to_all(top, g, slot);
  SumStat sum[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= items) break;
      if (counts(i)) sum[v].sum += expf(x(i, v) - top[v].m);
    }
  }
  if (g.narrow) merge_phases_to_all(sum, g, slot);
#pragma unroll
  for (int v = 0; v < V; ++v) st[v] = ForwardStat{top[v].m, sum[v].sum};
}

// A tiny row, by one lane: per column, the statistic (folded 4 tokens at a time, as a unit folds its register
// tiles), then the writes. Its head (row_pass) holds tokens 0..3 of column 0, so at D = 1 a row of up to 4 tokens
// is read once, by the row pass, and written from registers.
struct XDy {
  float x;
  float dy;  // backward only
};

template <typename Op, typename T, typename OffsetT>
__device__ __forceinline__ XDy load_xdy(const SegmentSoftmaxArgs<T, OffsetT>& a, std::int64_t at) {
  return XDy{to_float(a.x[at]), Op::kBackward ? to_float(a.dy[at]) : 0.0f};
}

// kScalar: D = 1 with 32-bit indices (scalar_row_pass), the same order.
template <typename Op, bool kScalar, typename T, typename OffsetT>
__device__ __forceinline__ TinyHead<XDy> softmax_tiny_head(const SegmentSoftmaxArgs<T, OffsetT>& a,
                                                           TinyIndex<kScalar> begin, TinyIndex<kScalar> length) {
  using I = TinyIndex<kScalar>;
  const I D = kScalar ? 1 : a.layout.geometry.inner;
  return load_tiny_head(length, XDy{Op::kPadX, Op::kPadDy}, [&](I t) { return load_xdy<Op>(a, (begin + t) * D); });
}

template <typename Op, bool kScalar, typename T, typename OffsetT>
__device__ void normalize_tiny_row(const SegmentSoftmaxArgs<T, OffsetT>& a, TinyIndex<kScalar> begin,
                                   TinyIndex<kScalar> length, const TinyHead<XDy>& head) {
  using I = TinyIndex<kScalar>;
  const I D = kScalar ? 1 : a.layout.geometry.inner;
  const XDy pad{Op::kPadX, Op::kPadDy};
  for (I c = 0; c < D; ++c) {
    auto load = [&](I t) { return load_xdy<Op>(a, (begin + t) * D + c); };
    typename Op::Stat st;
    walk_tiny<kScalar>(length, head, c == 0, pad, load, [&](I, const XDy (&e)[kTinyHead]) {
      float x[kTinyHead][1], dy[kTinyHead][1];
#pragma unroll
      for (int k = 0; k < kTinyHead; ++k) {
        x[k][0] = e[k].x;
        dy[k][0] = e[k].dy;
      }
      accumulate_tile<Op, kTinyHead, 1>(st, x, dy, 0, a.log);
    });
    const typename Op::Scale scale = Op::prepare(st, a.log);
    walk_tiny<kScalar>(length, head, c == 0, pad, load, [&](I t0, const XDy (&e)[kTinyHead]) {
#pragma unroll
      for (int k = 0; k < kTinyHead; ++k)
        if (t0 + k < length)
          a.out[(begin + t0 + k) * D + c] = from_float<T>(a.log ? Op::template apply<true>(scale, e[k].x, e[k].dy)
                                                                : Op::template apply<false>(scale, e[k].x, e[k].dy));
    });
  }
}

// Whether a unit of this kernel can take several register tiles (geometry.sweeps > 1): only when one tile holds
// fewer tokens than the softmax minimum chunk, i.e. 16-bit elements with 16-byte vectors.
template <typename Op, typename T, int V>
constexpr bool kMaySweep = Op::kFloatsPerLane / V < softmax_min_chunk_tokens(Op::kBackward, sizeof(T));

enum class Pass {
  kFirst,        // statistic; the output too when the row is one chunk
  kSecond,       // the second-pass kernel: output of the rows that do not finish locally
  kLocalSecond,  // output of a row that finishes locally, by the warp that merged its root
};

// Unit `local` of row b, whose partials start at slot first_partial. First pass: statistic, and the output too
// when the row is this single unit; returns true (warp-uniform) when this warp merged the root of a locally
// finished (row, tile). Second passes: the output from the row's merged statistic, read from the
// row's first partial slot. The unit's tokens are read one register tile (phases * N tokens) at a time.
// kLog == a.log: a template parameter so that the write loop does not choose per element.
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
__device__ bool normalize_unit(const SegmentSoftmaxArgs<T, OffsetT>& a, std::int64_t b, std::int64_t local,
                               std::int64_t first_partial, Pass pass) {
  constexpr int N = Op::kFloatsPerLane / V;
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  const std::int64_t D = g.inner;
  const UnitPlace place = unit_place(local, g);
  const std::int64_t chunk = place.chunk;
  const LaneSlot slot = lane_slot(g, place.tile);
  std::int64_t begin = 0, length = 0;
  row_extent(L.offsets, b, L.nnz, begin, length);
  const std::int64_t chunks = chunks_of(length, g);
  const bool single = chunks == 1;
  const bool local_finish = finishes_locally(chunks, g);
  // All warp-uniform: the whole warp works on row b. A row whose partial slots would pass the workspace (only
  // with malformed, overlapping offsets) keeps no statistics and gets no output.
  if (pass == Pass::kSecond && (single || local_finish)) return false;
  if (!single && first_partial + chunks > L.partial_capacity) return false;
  const bool second_pass = pass != Pass::kFirst;
  const std::int64_t t0 = chunk * g.chunk_tokens;
  const std::int64_t t1 = min(length, t0 + g.chunk_tokens);
  const std::int64_t tile_tokens = static_cast<std::int64_t>(g.phases) * N;
  // Register tiles holding tokens of this chunk (>= 1); always 1 where a tile is a whole chunk (the launcher
  // checks), which keeps those kernels' loops out of the code.
  const int sweeps =
      kMaySweep<Op, T, V> ? static_cast<int>(divmod_nonnegative(t1 - t0 + tile_tokens - 1, tile_tokens).quot) : 1;

  // Lane item i of register tile s is token first(s) + i * phases, at element offset at(s) + i * stride; the
  // tile's first count(s) items lie inside the chunk. Items are addressed from the tile's offset instead of
  // (begin + t) * D each (a 64-bit multiply per item), and one compare against the count guards an item.
  const std::int64_t stride = static_cast<std::int64_t>(g.phases) * D;
  auto first = [&](int s) { return t0 + s * tile_tokens + slot.phase; };
  auto at = [&](int s) { return (begin + first(s)) * D + slot.vcol * V; };
  auto count = [&](int s) {
    const std::int64_t left = t1 - first(s);
    const std::int64_t items = left > 0 ? divmod_nonnegative(left + g.phases - 1, g.phases).quot : 0;
    return !slot.active || left <= 0 ? 0 : items < N ? static_cast<int>(items) : N;
  };
  // A unit of several register tiles loads them one after another, each a round trip after the one before; where
  // L.prefetch_rows, its later tiles (second pass: all but the last, which it loads first) are asked of L2 before
  // the first load, so those round trips meet L2. Not for the local finish, which re-reads what it read moments ago.
  if constexpr (kMaySweep<Op, T, V>) {
    if (L.prefetch_rows && sweeps > 1 && pass != Pass::kLocalSecond) {  // warp-uniform
      const std::int64_t from = second_pass ? t0 : t0 + tile_tokens;
      const std::int64_t to = second_pass ? t0 + (sweeps - 1) * tile_tokens : t1;
      prefetch_unit(a.x, g, begin, from, to, place.tile);
      if constexpr (Op::kBackward) prefetch_unit(a.dy, g, begin, from, to, place.tile);
    }
  }
  RegisterTile<T, N, V> x, dy;
  auto load_tile = [&](int s) {
    const int n = count(s);
    const std::int64_t offset = at(s);
    x.load(n, [&](int i) { return a.x + offset + i * stride; }, Op::kPadX);
    if constexpr (Op::kBackward) dy.load(n, [&](int i) { return a.dy + offset + i * stride; }, Op::kPadDy);
    x.widen();
    if constexpr (Op::kBackward) dy.widen();
  };

  // First pass: every tile, folded into the statistic. Second passes: only the last tile here (the write loop
  // below starts with it). Either way the last tile is in registers afterwards. A forward row of one tile takes
  // its statistic in two passes over the tile instead (one_tile_statistic), as a stream's window does.
  const bool one_tile = !Op::kBackward && single && sweeps == 1 && !second_pass;
  typename Op::Stat st[V];
#pragma unroll 1
  for (int s = second_pass ? sweeps - 1 : 0; s < sweeps; ++s) {
    load_tile(s);
    if (!second_pass && !one_tile) {
#pragma unroll
      for (int v = 0; v < V; ++v) accumulate_tile<Op>(st[v], x, dy, v, kLog);
    }
  }
  if (second_pass) {
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (slot.active) st[v] = Op::load(a.partial_a, a.partial_b, first_partial * D + slot.vcol * V + v);
  } else if (one_tile) {
    // Every item, pads included: a pad (-inf) adds exp(-inf - M) = +0, or NaN where M is -inf, i.e. where the
    // column's real items are all -inf or NaN and its sum is NaN anyway; so the window's bits, which skip them.
    if constexpr (!Op::kBackward)
      one_tile_statistic<N, V>(st, [&](int i, int v) { return x(i, v); }, [](int) { return true; }, g, slot);
  } else {
    if (g.narrow) merge_phases_to_all(st, g, slot);
    if (!single) {
      // Store this chunk's statistics and climb the row's merge tree; its root leaves the row's statistics in
      // the first partial slot, for the local finish (the caller) or the second-pass kernel.
      const bool holder = g.narrow ? slot.phase == 0 : slot.active;
      if (holder) {
#pragma unroll
        for (int v = 0; v < V; ++v)
          Op::store(st[v], a.partial_a, a.partial_b, (first_partial + chunk) * D + slot.vcol * V + v);
      }
      using Stat = typename Op::Stat;
      auto store = [&](const Stat& merged, std::int64_t at) { Op::store(merged, a.partial_a, a.partial_b, at); };
      const bool root = merge_tile_partials<Stat, (V > 1)>(
          L, place.tile, first_partial, chunk, chunks,
          [&](std::int64_t at) { return Op::load(a.partial_a, a.partial_b, at); }, store,
          [&](std::int64_t col, const Stat& merged) { store(merged, first_partial * D + col); },
          PartialArrays{a.partial_a, a.partial_b});
      return root && local_finish;
    }
  }
  typename Op::Scale scale[V];
#pragma unroll
  for (int v = 0; v < V; ++v) scale[v] = Op::prepare(st[v], kLog);
  // Last tile first: it is still in registers.
#pragma unroll 1
  for (int s = sweeps - 1; s >= 0; --s) {
    if (s != sweeps - 1) load_tile(s);
    const int n = count(s);
    std::int64_t offset = at(s);
#pragma unroll
    for (int i = 0; i < N; ++i, offset += stride) {
      if (i >= n) continue;
      float y[V];
#pragma unroll
      for (int v = 0; v < V; ++v) y[v] = Op::template apply<kLog>(scale[v], x(i, v), Op::kBackward ? dy(i, v) : 0.0f);
      store_floats<T, V>(a.out + offset, y);
    }
  }
  return false;
}

// Lines of 32 vectors a stream holds at once: the unit's register tile (kFloatsPerLane / V vectors per lane),
// held raw. A row fits a window when its tokens lie on at most that many lines from its first line (a one-chunk
// row does unless it is nearly chunk_tokens long and starts off a line boundary).
template <typename Op, int V>
constexpr int kWindowLines = Op::kFloatsPerLane / V;

template <typename Op, int V>
__device__ __forceinline__ bool fits_window(const SegmentGeometry& g, std::int64_t begin, std::int64_t length) {
  const int shift = __ffs(g.phases) - 1;  // a line is phases = 1 << shift tokens
  return ((begin + length - 1) >> shift) - (begin >> shift) < kWindowLines<Op, V>;
}

// Row r, which lies on lines k0 .. k1 - 1 of a stream's window (x, dy: this lane's vectors of the window's lines,
// at element offsets base + k * 32 V; token: the token of this lane's vector on line 0), finished from registers
// as normalize_unit finishes a one-chunk row: the statistic of this lane's tokens of the row, merged over the
// phases (forward: one_tile_statistic's two passes; backward: the sum, merge_phases' tree), then the writes. The
// lane meets the tokens of normalize_unit's phase (token - begin) mod phases in the
// same order; its phases are rotated by the row's start, which the tree does not see (a rotation maps each of its
// levels of power-of-two pairs onto itself, and a merge of two statistics commutes bitwise), so the bits are
// normalize_unit's.
template <typename Op, typename T, typename OffsetT, int V, bool kLog, int U>
__device__ __forceinline__ void normalize_window_row(const SegmentSoftmaxArgs<T, OffsetT>& a, const Vec<T, V> (&x)[U],
                                                     const Vec<T, V> (&dy)[U], const StreamRow& r,
                                                     std::int64_t first_token, std::int64_t token, std::int64_t base,
                                                     int shift, int phase, int vcol) {
  const SegmentGeometry& g = a.layout.geometry;
  const int k0 = static_cast<int>((r.begin - first_token) >> shift);
  const int k1 = static_cast<int>((r.begin + r.length - first_token + g.phases - 1) >> shift);
  // This lane's token index in the row at line k (a window spans at most chunk_tokens: 32 bits).
  const int at0 = static_cast<int>(token - r.begin);
  const unsigned length = static_cast<unsigned>(r.length);
  auto counts = [&](int k) { return k >= k0 && k < k1 && static_cast<unsigned>(at0 + k * g.phases) < length; };
  typename Op::Stat st[V];
  const LaneSlot slot{vcol, phase, true};
  if constexpr (Op::kBackward) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      Op::template accumulate<U>(
          st[v], [&](int k) { return to_float(x[k].v[v]); }, [&](int k) { return to_float(dy[k].v[v]); }, counts,
          kLog);
    }
    merge_phases_to_all(st, g, slot);
  } else {
    one_tile_statistic<U, V>(st, [&](int k, int v) { return to_float(x[k].v[v]); }, counts, g, slot);
  }
  typename Op::Scale scale[V];
#pragma unroll
  for (int v = 0; v < V; ++v) scale[v] = Op::prepare(st[v], kLog);
#pragma unroll
  for (int k = 0; k < U; ++k) {
    if (!counts(k)) continue;
    float y[V];
#pragma unroll
    for (int v = 0; v < V; ++v)
      y[v] = Op::template apply<kLog>(scale[v], to_float(x[k].v[v]), Op::kBackward ? to_float(dy[k].v[v]) : 0.0f);
    store_floats<T, V>(a.out + base + k * kWarpSize * V, y);
  }
}

// The rows that fit a window (fits_window) of this warp's share from unit u on (c at u's row), streamed: a window is
// the U lines of 32 vectors from a row's first line, loaded at once (its x, and dy backward); every row that lies
// inside it is finished from registers (normalize_window_row), then the next window starts at the first row that does
// not. Why: rows of a few hundred bytes to a few KB (D = 64 with 1 to 4 tokens, D = 1 with lengths around 256; the
// sub-warp rows and the warp rows take most of those now) are one unit each in the walk, whose per-unit cost (the
// cursor step, the setup with its 64-bit divisions, a round trip for the loads, exponentials of the whole tile's
// padding) exceeded the row's data; a window serves several such rows with one round trip and computes only their
// items. Returns with u past the rows it finished and c at u's row when that row does not fit a window (the unit walk
// takes it), or with u == end. token_end: the end of the share's last row; nothing past it is loaded.
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
__device__ void stream_softmax_rows(const SegmentSoftmaxArgs<T, OffsetT>& a, std::int64_t& u, UnitCursor& c,
                                    std::int64_t end, std::int64_t token_end) {
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  constexpr int U = kWindowLines<Op, V>;
  const int lane = lane_id();
  const StreamLane place = stream_lane(g);
  const int phase = place.phase, vcol = place.vcol, shift = place.shift;
  RowWork entry;
  StreamRow r = begin_stream(c, entry);
  while (true) {
    // Line k of the window holds tokens first_token + k * phases .. + phases - 1; this lane's vector of it lies
    // at element base + k * 32 V.
    const std::int64_t line = r.begin >> shift;
    const std::int64_t first_token = line << shift;
    const std::int64_t window_end = first_token + (static_cast<std::int64_t>(U) << shift);
    const std::int64_t token = first_token + phase;
    const std::int64_t base = (line * kWarpSize + lane) * V;
    Vec<T, V> x[U], dy[U];  // dy: backward only
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const bool load = token + k * g.phases < token_end;
#pragma unroll
      for (int v = 0; v < V; ++v) x[k].v[v] = dy[k].v[v] = from_float<T>(0.0f);
      if (load) {
        x[k] = *reinterpret_cast<const Vec<T, V>*>(a.x + base + k * kWarpSize * V);
        if constexpr (Op::kBackward) dy[k] = *reinterpret_cast<const Vec<T, V>*>(a.dy + base + k * kWarpSize * V);
      }
    }
    do {
      normalize_window_row<Op, T, OffsetT, V, kLog>(a, x, dy, r, first_token, token, base, shift, phase, vcol);
      if (!step_stream(L, u, c, end, entry, r,
                       [&](const StreamRow& s) { return fits_window<Op, V>(g, s.begin, s.length); }))
        return;
      // Malformed offsets only can place the next row before this one.
    } while (r.begin >= first_token && r.begin + r.length <= window_end);
  }
}

// The row passes' L2 prefetch of the rows they load next (prefetch_span): x, and dy backward.
template <typename Op, typename T, typename OffsetT>
__device__ __forceinline__ auto prefetch_x_dy(const SegmentSoftmaxArgs<T, OffsetT>& a) {
  return [&a](std::int64_t first, std::int64_t end, int lane, int lanes) {
    prefetch_span(a.x, first, end, lane, lanes);
    if constexpr (Op::kBackward) prefetch_span(a.dy, first, end, lane, lanes);
  };
}

// A short row's x (and dy, backward) of one vector column, held by its sub-warp lane (subwarp_row_pass).
template <typename T, int V>
struct SubwarpXDy {
  SubwarpColumn<T, V> x;
  SubwarpColumn<T, V> dy;  // backward only
};

// A short row of `length` <= kSubwarpRowTokens tokens, finished by lane col of its sub-warp from registers: per
// column the statistic (forward: one_tile_statistic's two passes in one lane, the max, then the sum of
// exp(x - max); backward: accumulate's sum in token order), then the writes. Semantics are the first pass's (a
// NaN, a column of only -inf or a +inf give NaN); the order is the CPU reference's, token by token.
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
__device__ __forceinline__ void normalize_subwarp_row(const SegmentSoftmaxArgs<T, OffsetT>& a, std::int64_t begin,
                                                      std::int64_t length, int col, const SubwarpXDy<T, V>& h) {
  constexpr int N = kSubwarpRowTokens;
  const std::int64_t D = a.layout.geometry.inner;
  auto counts = [&](int k) { return k < length; };
  typename Op::Stat st[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    auto x = [&](int k) { return to_float(h.x.x[k].v[v]); };
    if constexpr (Op::kBackward) {
      Op::template accumulate<N>(st[v], x, [&](int k) { return to_float(h.dy.x[k].v[v]); }, counts, kLog);
    } else {
      float top = -INFINITY, sum = 0.0f;
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (counts(k)) top = fmaxf(top, x(k));
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (counts(k)) sum += expf(x(k) - top);
      st[v] = ForwardStat{top, sum};
    }
  }
  typename Op::Scale scale[V];
#pragma unroll
  for (int v = 0; v < V; ++v) scale[v] = Op::prepare(st[v], kLog);
  T* out = a.out + begin * D + static_cast<std::int64_t>(col) * V;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (!counts(k)) continue;
    float y[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float dy = 0.0f;
      if constexpr (Op::kBackward) dy = to_float(h.dy.x[k].v[v]);
      y[v] = Op::template apply<kLog>(scale[v], to_float(h.x.x[k].v[v]), dy);
    }
    store_floats<T, V>(out + k * D, y);
  }
}

// Column tiles a wide short row's warp loads at once: x (forward, 2 tiles of 4 tokens, 32 registers), or x and dy
// (backward, 1 tile). Held to 2 blocks per SM: float forward 94-100 registers, bfloat16 121-128.
template <typename Op>
constexpr int kWideSoftmaxTiles = Op::kBackward ? 1 : 2;

// The row pass of geometries with sub-warp rows (subwarp_row_pass, segment_common.cuh; wide_short_row_pass at
// wide D, kWide): each short row read once and written from registers by its sub-warp (normalize_subwarp_row); an
// empty row has no output. One row per sub-warp at a time (at wide D, kWideSoftmaxTiles of its column tiles).
// Registers (ptxas, sm_90, no spills): the float forward 64-68 at 3 blocks per SM; at 2, the half forward 80-84,
// bfloat16 forward 96-101, and the backward 80-86 (float), 89-96 (half), 119-122 (bfloat16). 3 blocks spilled
// 24-48 bytes in the 16-bit forward; two rows per sub-warp, 24-1496 at 2 blocks.
template <typename Op, typename T, typename OffsetT, int V, bool kLog, bool kWide>
__global__ void __launch_bounds__(kThreads, Op::kBackward || sizeof(T) < 4 || kWide ? 2 : 3)
    segment_softmax_subwarp_rows_kernel(const __grid_constant__ SegmentSoftmaxArgs<T, OffsetT> a) {
  const std::int64_t D = a.layout.geometry.inner;
  auto load = [&](std::int64_t begin, std::int64_t length, int col) {
    SubwarpXDy<T, V> h;
    h.x = load_subwarp_column<T, V>(a.x, D, begin, length, col);
    if constexpr (Op::kBackward) h.dy = load_subwarp_column<T, V>(a.dy, D, begin, length, col);
    return h;
  };
  auto finish = [&](std::int64_t, std::int64_t begin, std::int64_t length, int col, const SubwarpXDy<T, V>& h) {
    if (length > 0) normalize_subwarp_row<Op, T, OffsetT, V, kLog>(a, begin, length, col, h);
  };
  if constexpr (kWide) wide_short_row_pass<kWideSoftmaxTiles<Op>>(a.layout, load, prefetch_x_dy<Op>(a), finish);
  else subwarp_row_pass<1>(a.layout, load, prefetch_x_dy<Op>(a), finish);
}

template <typename Op, typename T, typename OffsetT>
__global__ void __launch_bounds__(kThreads)
    segment_softmax_rows_kernel(const __grid_constant__ SegmentSoftmaxArgs<T, OffsetT> a) {
  row_pass(
      a.layout,
      [&](std::int64_t, std::int64_t begin, std::int64_t length) {
        return softmax_tiny_head<Op, false>(a, begin, length);
      },
      [&](std::int64_t, std::int64_t begin, std::int64_t length, const TinyHead<XDy>& head) {
        normalize_tiny_row<Op, false>(a, begin, length, head);
      },
      [](std::int64_t, unsigned) {});  // an empty row has no output
}

// A warp row (is_warp_row: D = 1, more than tiny_tokens and at most kWarpRowTokens tokens), by the whole warp:
// lane p loads tokens p, p + 32, ... at once (x, and dy backward), takes the statistic of its tokens in that
// order, merged over the lanes (forward: one_tile_statistic's two passes; backward: the sum, merge_phases' tree),
// then writes them from registers. That is normalize_unit's and a stream window's order for a one-chunk row at
// D = 1 (32 phases of one token; take_warp_rows holds a warp row to one chunk), so the bits are theirs.
template <typename Op, typename T, typename OffsetT>
__device__ __forceinline__ void normalize_warp_row(const SegmentSoftmaxArgs<T, OffsetT>& a, int begin, int length) {
  constexpr int kHeld = static_cast<int>(kWarpRowTokens / kWarpSize);
  const int lane = lane_id();
  float x[kHeld], dy[kHeld];  // dy: backward only
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int t = k * kWarpSize + lane;
    x[k] = t < length ? to_float(a.x[begin + t]) : Op::kPadX;
    dy[k] = Op::kBackward && t < length ? to_float(a.dy[begin + t]) : Op::kPadDy;
  }
  // The row's lines (warp-uniform): past them every lane holds pads, which the loops skip.
  const int lines = (length + kWarpSize - 1) / kWarpSize;
  auto counts = [&](int k) { return k * kWarpSize + lane < length; };
  const LaneSlot slot{0, lane, true};
  typename Op::Stat st[1];
  if constexpr (Op::kBackward) {
    Op::template accumulate<kHeld>(
        st[0], [&](int k) { return x[k]; }, [&](int k) { return dy[k]; }, counts, a.log);
    merge_phases_to_all(st, a.layout.geometry, slot);
  } else {
    one_tile_statistic<kHeld, 1>(st, [&](int k, int) { return x[k]; }, counts, a.layout.geometry, slot, lines);
  }
  const typename Op::Scale scale = Op::prepare(st[0], a.log);
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    if (k >= lines) break;
    if (counts(k))
      a.out[begin + k * kWarpSize + lane] = from_float<T>(a.log ? Op::template apply<true>(scale, x[k], dy[k])
                                                                : Op::template apply<false>(scale, x[k], dy[k]));
  }
}

// The row pass at D = 1 (scalar_row_pass, segment_common.cuh): the same bits as row_pass's; then, where the
// launcher set warp_row_tokens, the warp rows (warp_row_pass, normalize_warp_row). Blocks per SM (ptxas, sm_90):
// forward 4 (61-64 registers, no spill), backward 3 as row_pass's (at 4 it spilled 28-128 bytes).
template <typename Op, typename T, typename OffsetT>
__global__ void __launch_bounds__(kThreads, Op::kBackward ? 3 : 4)
    segment_softmax_scalar_rows_kernel(const __grid_constant__ SegmentSoftmaxArgs<T, OffsetT> a) {
  scalar_row_pass(
      a.layout, [&](int begin, int length) { return softmax_tiny_head<Op, true>(a, begin, length); },
      [&](std::int64_t, int begin, int length, const TinyHead<XDy>& head) {
        if (length > 0) normalize_tiny_row<Op, true>(a, begin, length, head);  // an empty row has no output
      });
  if (a.layout.geometry.warp_row_tokens > 0)
    warp_row_pass(a.layout, prefetch_x_dy<Op>(a),
                  [&](std::int64_t, int begin, int length) { normalize_warp_row<Op>(a, begin, length); });
}

// Capped at 128 registers (2 blocks of 256 per SM): without the cap ptxas gives the forward kernel with scalar
// loads ~160 (one block per SM); with it no first-pass kernel spills (sm_90: 96-128 registers). kStream: the
// geometry streams the rows that fit a window (softmax_streams_rows), a separate kernel so that the others keep
// their registers.
template <typename Op, typename T, typename OffsetT, int V, bool kLog, bool kStream>
__global__ void __launch_bounds__(kThreads, 2)
    segment_softmax_kernel(const __grid_constant__ SegmentSoftmaxArgs<T, OffsetT> a) {
  allow_dependent_grid();  // the second pass may start (and wait) while this one runs
  wait_for_prior_grid();
  const SegmentLayout<OffsetT>& L = a.layout;
  stage_plan(L);
  const std::int64_t tiles = L.geometry.tiles;
  std::int64_t token_end = -1;  // found when the share first streams
  // Each warp walks a contiguous share of the units with a cursor (walk_units), as the reductions do: a
  // lookup per unit (a plan search and a scan of up to 128 rows' offsets) cost ~1900 instructions per unit at
  // D = 64 on rows of 0..4 tokens (first H100 run: 201 M instructions, 314 us for 64 MiB). A warp that merges the
  // root of a locally finished (row, tile) writes that tile's chunks before its next unit; they are at most
  // kLocalFinishChunks units read just before, by this warp or the next ones, so still in L2. One
  // normalize_unit call site for both passes keeps the kernel at one inlined copy of it (registers).
  walk_units<true>(L, &RowWork::units, [&](std::int64_t& u, UnitCursor& at, std::int64_t end) {
    if (kStream && fits_window<Op, V>(L.geometry, at.begin, at.length)) {
      if (token_end < 0) token_end = share_token_end(L, end);
      stream_softmax_rows<Op, T, OffsetT, V, kLog>(a, u, at, end, token_end);
      return;
    }
    std::int64_t local = u - at.before.units, tile = 0, chunk = 0, chunks = 0;
    ++u;
    Pass pass = Pass::kFirst;
    while (true) {
      const bool root = normalize_unit<Op, T, OffsetT, V, kLog>(a, at.row, local, at.before.partials, pass);
      if (pass == Pass::kFirst) {
        if (!root) return;
        pass = Pass::kLocalSecond;
        tile = unit_place(local, L.geometry).tile;
        chunks = chunks_of(at.length, L.geometry);
      } else if (++chunk == chunks) {
        return;
      }
      local = chunk * tiles + tile;
    }
  });
}

// Block rows (is_block_row): rows too long to finish locally whose column tiles one block holds in shared memory.
// The block's threads take a (row, tile)'s tokens as the lanes of a unit would (lane_slot), warp w the token
// passes w, w + 8, ...: a thread loads its items kFloatsPerLane / V vectors at a time, folds them into its
// statistic as a unit folds a register tile, and parks them in shared memory (token t at t * pitch); the phases
// merge within the warp (merge_phases), the warps in warp order (merge_block_warps); then each thread writes the
// items it parked. One DRAM read and one write of the row, where its chunks would be read twice (first and second
// pass), and a statistic whose order depends only on the row's length and the geometry.
constexpr int kBlockRowBlocksPerSm = 2;  // one block loads while the other writes

// Merges the warps' statistics of each column in warp order and hands every thread its column's result. On entry
// the holders (narrow: the phase-0 lanes, after merge_phases; wide: the active lanes) hold their warp's. Called
// by the whole block.
template <typename Stat, int V>
__device__ __forceinline__ void merge_block_warps(Stat (&st)[V], const SegmentGeometry& g, const LaneSlot& slot) {
  static_assert(sizeof(Stat) <= sizeof(std::int64_t), "a statistic per scratch word");
  __shared__ std::int64_t scratch_words[kBlockWarps * kWarpSize];
  Stat* scratch = reinterpret_cast<Stat*>(scratch_words);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = lane_id();
  const bool holder = g.narrow ? slot.phase == 0 : slot.active;
  const int column_lane = g.narrow ? static_cast<int>(slot.vcol) : lane;  // where the column's holder sits
#pragma unroll
  for (int v = 0; v < V; ++v) {
    __syncthreads();  // the previous column's readers are done with the scratch
    if (holder) scratch[warp * kWarpSize + lane] = st[v];
    __syncthreads();
    if (warp == 0 && holder) {
      Stat merged = scratch[lane];
      for (int w = 1; w < kBlockWarps; ++w) merged.merge(scratch[w * kWarpSize + lane]);
      scratch[lane] = merged;
    }
    __syncthreads();
    st[v] = scratch[column_lane];
  }
}

// Column tile `tile` of the block row [begin, begin + length), by the whole block, through `staged` (room for
// length * block_row_pitch elements, twice backward: the launcher sized block_tokens to it).
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
__device__ void normalize_block_row(const SegmentSoftmaxArgs<T, OffsetT>& a, std::int64_t begin, std::int64_t length,
                                    std::int64_t tile, T* staged) {
  constexpr int N = Op::kFloatsPerLane / V;  // items per load batch: a unit's register tile
  const SegmentGeometry& g = a.layout.geometry;
  const std::int64_t D = g.inner;
  const LaneSlot slot = lane_slot(g, tile);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const std::int64_t pitch = block_row_pitch(g);
  // Item k of this thread is token first + k * step: at element at0 + k * global_step of the values and
  // staged0 + k * staged_step of the staging (ints: a block row fits in shared memory).
  const std::int64_t first = slot.phase + static_cast<std::int64_t>(g.phases) * warp;
  const std::int64_t step = static_cast<std::int64_t>(g.phases) * kBlockWarps;
  const int items =
      slot.active && first < length ? static_cast<int>(divmod_nonnegative(length - first + step - 1, step).quot) : 0;
  const std::int64_t at0 = (begin + first) * D + slot.vcol * V, global_step = step * D;
  const int column = static_cast<int>(slot.vcol - (g.narrow ? 0 : tile * kWarpSize)) * V;
  const int staged0 = static_cast<int>(first * pitch) + column, staged_step = static_cast<int>(step * pitch);
  T* staged_dy = staged + length * pitch;  // backward: dy after y

  typename Op::Stat st[V];
#pragma unroll 1
  for (int k0 = 0; k0 < items; k0 += N) {
    RegisterTile<T, N, V> x, dy;
    const int n = items - k0 < N ? items - k0 : N;
    const std::int64_t at = at0 + k0 * global_step;
    x.load(n, [&](int i) { return a.x + at + i * global_step; }, Op::kPadX);
    if constexpr (Op::kBackward) dy.load(n, [&](int i) { return a.dy + at + i * global_step; }, Op::kPadDy);
    x.widen();
    if constexpr (Op::kBackward) dy.widen();
#pragma unroll
    for (int v = 0; v < V; ++v) accumulate_tile<Op>(st[v], x, dy, v, kLog);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= n) continue;
      const int staged_at = staged0 + (k0 + i) * staged_step;
      x.store(i, staged + staged_at);
      if constexpr (Op::kBackward) dy.store(i, staged_dy + staged_at);
    }
  }
  if (g.narrow) merge_phases(st, g, slot);
  merge_block_warps(st, g, slot);  // its barriers also order the staging's writes before the reads below

  typename Op::Scale scale[V];
#pragma unroll
  for (int v = 0; v < V; ++v) scale[v] = Op::prepare(st[v], kLog);
#pragma unroll 1
  for (int k0 = 0; k0 < items; k0 += N) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (k0 + i >= items) continue;
      const int at = staged0 + (k0 + i) * staged_step;
      float x[V], dy[V], y[V];
      load_floats<T, V>(staged + at, x);
      if constexpr (Op::kBackward) load_floats<T, V>(staged_dy + at, dy);
#pragma unroll
      for (int v = 0; v < V; ++v) y[v] = Op::template apply<kLog>(scale[v], x[v], Op::kBackward ? dy[v] : 0.0f);
      store_floats<T, V>(a.out + at0 + (k0 + i) * global_step, y);
    }
  }
  __syncthreads();  // the staging is the block's next block row's
}

// The rows the first pass left, by slots (RowWork::second_units): the units of the rows that did not finish
// locally, written from their merged statistics, and the block rows. A warp takes one slot at a time; the slots of
// a block row's column tile are kBlockWarps consecutive ones, aligned, which the grid-stride loop gives to the
// warps of one block in the same round, so that block takes the tile whole. Its dynamic shared memory stages the
// block rows (kBlockRowBlocksPerSm blocks per SM).
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
__global__ void __launch_bounds__(kThreads, kBlockRowBlocksPerSm)
    segment_softmax_second_pass_kernel(const __grid_constant__ SegmentSoftmaxArgs<T, OffsetT> a) {
  extern __shared__ __align__(16) unsigned char block_staging[];
  wait_for_prior_grid();
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  const std::int64_t total = L.plan[row_groups(L.batch)].second_units;  // a multiple of kBlockWarps
  // Last slot first: the first pass walked the units in order, so its last ones are what L2 still holds (up to
  // its size), and the start of this pass re-reads them from there. The order changes no result.
  for (std::int64_t i = global_warp(); i < total; i += total_warps()) {
    const std::int64_t u = total - 1 - i;
    const RowLocation at = locate_row<false>(L, u, &RowWork::second_units);
    const std::int64_t local = u - at.before.second_units;
    std::int64_t begin = 0, length = 0;
    row_extent(L.offsets, at.row, L.nnz, begin, length);
    if (is_block_row(length, g)) {  // the same row for the block's every warp: its barriers are safe
      normalize_block_row<Op, T, OffsetT, V, kLog>(a, begin, length, local / kBlockWarps,
                                                   reinterpret_cast<T*>(block_staging));
    } else if (local < chunks_of(length, g) * g.tiles) {  // not one of the row's idle slots
      normalize_unit<Op, T, OffsetT, V, kLog>(a, at.row, local, at.before.partials, Pass::kSecond);
    }
  }
}

// Shared memory of the second-pass kernel for its block rows, and the longest block row it holds (both 0 where
// block rows are off or no token fits).
template <typename Op, typename T, typename OffsetT, int V, bool kLog>
Status block_row_staging(const SegmentGeometry& g, std::size_t& bytes, std::int64_t& tokens) {
  bytes = 0;
  tokens = 0;
  if (!segment_block_rows_enabled()) return Status::kSuccess;
  const auto kernel = &segment_softmax_second_pass_kernel<Op, T, OffsetT, V, kLog>;
  RAGGED_RETURN_IF_ERROR(
      shared_bytes_for_residency(reinterpret_cast<const void*>(kernel), kBlockRowBlocksPerSm, bytes));
  tokens = softmax_block_tokens(g, sizeof(T), Op::kBackward, bytes);
  if (tokens == 0) bytes = 0;
  return Status::kSuccess;
}

template <typename Op, typename T, typename OffsetT, int V, bool kLog>
Status launch_softmax(const SegmentSoftmaxArgs<T, OffsetT>& args, cudaStream_t stream) {
  const SegmentGeometry& given = args.layout.geometry;
  if (given.chunk_tokens != static_cast<std::int64_t>(given.phases) * (Op::kFloatsPerLane / V) * given.sweeps ||
      (given.sweeps > 1 && !kMaySweep<Op, T, V>))
    return fail(Status::kInvalidArgument, "segment_softmax: geometry does not match the kernel's register tile");
  // The block rows' limit enters the geometry before the row pass plans with it.
  SegmentSoftmaxArgs<T, OffsetT> a = args;
  std::size_t staging = 0;
  RAGGED_RETURN_IF_ERROR(
      (block_row_staging<Op, T, OffsetT, V, kLog>(a.layout.geometry, staging, a.layout.geometry.block_tokens)));
  const bool scalar_rows = takes_scalar_rows(a.layout);  // read once: the warp rows need this row pass
  take_warp_rows(a.layout, scalar_rows);
  const SegmentLayout<OffsetT>& L = a.layout;
  const SegmentGeometry& g = L.geometry;
  // D = 1 with 32-bit indices: the scalar row pass (segment_softmax_scalar_rows_kernel), the same results, and
  // the warp rows in it. Short rows at D > 32 (subwarp_rows, only at V > 1): the sub-warp row pass.
  if (g.subwarp_rows) {
    if constexpr (V > 1)
      RAGGED_RETURN_IF_ERROR(
          g.narrow ? build_plan(&segment_softmax_subwarp_rows_kernel<Op, T, OffsetT, V, kLog, false>, a, L,
                                "segment_softmax_subwarp_rows_kernel", stream)
                   : build_plan(&segment_softmax_subwarp_rows_kernel<Op, T, OffsetT, V, kLog, true>, a, L,
                                "segment_softmax_subwarp_rows_kernel", stream));
    else
      return fail(Status::kInvalidArgument, "segment_softmax: sub-warp rows without 16-byte vectors");
  } else {
    RAGGED_RETURN_IF_ERROR(scalar_rows
                               ? build_plan(&segment_softmax_scalar_rows_kernel<Op, T, OffsetT>, a, L,
                                            "segment_softmax_scalar_rows_kernel", stream)
                               : build_plan(&segment_softmax_rows_kernel<Op, T, OffsetT>, a, L,
                                            "segment_softmax_rows_kernel", stream));
  }
  const std::int64_t units = (L.nnz / g.chunk_tokens + std::min(L.batch, L.nnz)) * g.tiles;
  unsigned blocks = 0;
  const auto kernel = softmax_streams_rows(g) && segment_stream_enabled()
                          ? &segment_softmax_kernel<Op, T, OffsetT, V, kLog, true>
                          : &segment_softmax_kernel<Op, T, OffsetT, V, kLog, false>;
  SegmentSoftmaxArgs<T, OffsetT> first = a;  // its merge staging fitted to the device
  std::size_t shared = 0;
  RAGGED_RETURN_IF_ERROR(fit_first_pass_shared(kernel, first.layout, shared, "segment_softmax_kernel"));
  RAGGED_RETURN_IF_ERROR(persistent_grid(kernel, units, blocks, shared));
  RAGGED_RETURN_IF_ERROR(launch_following(kernel, blocks, shared, stream, first, "segment_softmax_kernel"));
  const auto second = &segment_softmax_second_pass_kernel<Op, T, OffsetT, V, kLog>;
  RAGGED_RETURN_IF_ERROR(persistent_grid(second, units, blocks, staging));
  return launch_following(second, blocks, staging, stream, a, "segment_softmax_second_pass_kernel");
}

template <typename Op, typename T, typename OffsetT>
Status launch_softmax_vec(const SegmentSoftmaxArgs<T, OffsetT>& a, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (a.layout.geometry.vec == kVec)
    return a.log ? launch_softmax<Op, T, OffsetT, kVec, true>(a, stream)
                 : launch_softmax<Op, T, OffsetT, kVec, false>(a, stream);
  if (a.layout.geometry.vec == 1)
    return a.log ? launch_softmax<Op, T, OffsetT, 1, true>(a, stream)
                 : launch_softmax<Op, T, OffsetT, 1, false>(a, stream);
  return fail(Status::kUnsupportedShape,
              "segment_softmax: no kernel for vector width " + std::to_string(a.layout.geometry.vec));
}

template <typename Op, typename T, typename OffsetT>
Status block_tokens_of(const SegmentGeometry& g, bool log, std::int64_t& tokens) {
  constexpr int kVec = 16 / sizeof(T);
  std::size_t bytes = 0;
  if (g.vec == kVec)
    return log ? block_row_staging<Op, T, OffsetT, kVec, true>(g, bytes, tokens)
               : block_row_staging<Op, T, OffsetT, kVec, false>(g, bytes, tokens);
  if (g.vec == 1)
    return log ? block_row_staging<Op, T, OffsetT, 1, true>(g, bytes, tokens)
               : block_row_staging<Op, T, OffsetT, 1, false>(g, bytes, tokens);
  return fail(Status::kUnsupportedShape, "segment_softmax: no kernel for vector width " + std::to_string(g.vec));
}

}  // namespace

template <typename T, typename OffsetT>
Status segment_softmax_block_tokens(const SegmentGeometry& g, bool backward, bool log, std::int64_t& tokens) {
  return backward ? block_tokens_of<SoftmaxBackward, T, OffsetT>(g, log, tokens)
                  : block_tokens_of<SoftmaxForward, T, OffsetT>(g, log, tokens);
}

template <typename T, typename OffsetT>
Status launch_segment_softmax(const SegmentSoftmaxArgs<T, OffsetT>& args, cudaStream_t stream) {
  return args.backward ? launch_softmax_vec<SoftmaxBackward>(args, stream)
                       : launch_softmax_vec<SoftmaxForward>(args, stream);
}

#define RAGGED_INSTANTIATE_SEGMENT_SOFTMAX(T, O)                                                          \
  template Status launch_segment_softmax<T, O>(const SegmentSoftmaxArgs<T, O>&, cudaStream_t);             \
  template Status segment_softmax_block_tokens<T, O>(const SegmentGeometry&, bool, bool, std::int64_t&);

}  // namespace detail
}  // namespace ragged
