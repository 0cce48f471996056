// Internal device helpers shared by the segment kernels: element conversion, vector loads, the plan scan and
// the unit -> row lookup.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "async_copy.cuh"
#include "element_convert.cuh"
#include "grid_dependency.cuh"
#include "launch.cuh"
#include "ragged/check.h"
#include "ragged/view.h"
#include "segment_geometry.h"
#include "segment_launch.h"
#include "validate.h"
#include "warp_search.cuh"

namespace ragged {
namespace detail {

// V consecutive elements moved as one access (16 bytes when V * sizeof(T) == 16).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ void load_floats(const T* ptr, float (&out)[V]) {
  const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(ptr);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_float(x.v[i]);
}

template <typename T, int V>
__device__ __forceinline__ void store_floats(T* ptr, const float (&in)[V]) {
  Vec<T, V> x;
#pragma unroll
  for (int i = 0; i < V; ++i) x.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Vec<T, V>*>(ptr) = x;
}

// Row b's clamped row range (view.h), as begin and length.
template <typename OffsetT>
__device__ __forceinline__ void row_extent(const OffsetT* offsets, std::int64_t b, std::int64_t nnz,
                                           std::int64_t& begin, std::int64_t& length) {
  std::int64_t end = 0;
  clamped_row_range(offsets, b, nnz, begin, end);
  length = end - begin;
}

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x) & (kWarpSize - 1); }

// Asks L2 for a group of a warp's vector loads before they are made (prefetch.global.L2: no register held,
// nothing to wait for): `pieces` pieces of 32 vectors of V elements, piece k at element first + k * stride, each
// of kLines 128-byte lines. One line per lane: lane l takes line l / kPieces of piece l % kPieces. Elements at or
// past `limit` are not asked for. (segment_reduce's stream is the one caller.)
template <typename T, int V, int kPieces>
__device__ __forceinline__ void prefetch_pieces(const T* values, std::int64_t first, std::int64_t stride, int pieces,
                                                std::int64_t limit) {
  constexpr int kLineElems = 128 / static_cast<int>(sizeof(T));
  constexpr int kLines = (kWarpSize * V * static_cast<int>(sizeof(T)) + 127) / 128;
  static_assert(kPieces * kLines == kWarpSize, "one line per lane");
  const int lane = lane_id();
  const int k = lane % kPieces;
  const std::int64_t at = first + k * stride + lane / kPieces * kLineElems;
  if (k < pieces && at < limit) prefetch_l2(values + at);
}

// Asks L2 for elements [first, end) of `values` (prefetch.global.L2), a 128-byte line per lane of a group of
// `lanes` lanes (this one `lane`), lane after lane, and its last element by lane 0: where `first` is not at a line
// start the lines from it fall one short. For the rows a row pass loads after the ones it is finishing: their
// loads then meet L2, not DRAM, and a warp has about two rows' bytes in flight instead of one.
template <typename T>
__device__ __forceinline__ void prefetch_span(const T* values, std::int64_t first, std::int64_t end, int lane,
                                              int lanes) {
  constexpr int kLineElems = 128 / static_cast<int>(sizeof(T));
  const std::int64_t step = static_cast<std::int64_t>(lanes) * kLineElems;
  for (std::int64_t at = first + static_cast<std::int64_t>(lane) * kLineElems; at < end; at += step)
    prefetch_l2(values + at);
  if (lane == 0 && first < end) prefetch_l2(values + (end - 1));
}

// Asks L2 for a first-pass unit's data (prefetch_span, whole warp): tokens t0 .. t1 - 1 of the row starting at
// token `begin`, all of each token at narrow D (a contiguous span), column tile `tile` of each at wide D (a lane
// per token, its tile's lines).
template <typename T>
__device__ __forceinline__ void prefetch_unit(const T* values, const SegmentGeometry& g, std::int64_t begin,
                                              std::int64_t t0, std::int64_t t1, std::int64_t tile) {
  const std::int64_t D = g.inner;
  if (g.narrow) {
    prefetch_span(values, (begin + t0) * D, (begin + t1) * D, lane_id(), kWarpSize);
    return;
  }
  const std::int64_t c0 = tile * kWarpSize * g.vec, c1 = min(D, c0 + std::int64_t{kWarpSize} * g.vec);
  for (std::int64_t t = begin + t0 + lane_id(); t < begin + t1; t += kWarpSize)
    prefetch_span(values, t * D + c0, t * D + c1, 0, 1);
}

// Threads per block of every segment kernel.
constexpr int kSegmentThreads = 256;
static_assert(kSegmentThreads == kBlockWarps * kWarpSize, "segment_geometry.h counts second-pass slots by block");

__device__ __forceinline__ std::int64_t global_warp() {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
}

__device__ __forceinline__ std::int64_t total_warps() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x / kWarpSize;
}

__device__ __forceinline__ RowWork shfl_row_work(const RowWork& w, int src) {
  return RowWork{__shfl_sync(0xffffffffu, w.units, src), __shfl_sync(0xffffffffu, w.partials, src),
                 __shfl_sync(0xffffffffu, w.second_units, src)};
}

// Inclusive scan of w over the lanes of the warp (lane order).
__device__ __forceinline__ RowWork warp_inclusive_scan(RowWork w) {
  const int lane = lane_id();
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const RowWork other = shfl_row_work(w, lane >= d ? lane - d : lane);
    if (lane >= d) w = w + other;
  }
  return w;
}

// The group of rows that owns item `u` of a plan field: the largest g < groups with plan[g].*field <= u (then
// u < plan[g + 1].*field), found by the whole warp.
__device__ __forceinline__ std::int64_t find_group(const RowWork* plan, std::int64_t groups, std::int64_t u,
                                                   std::int64_t RowWork::*field) {
  const std::int64_t g = warp_search_last(groups, [&](std::int64_t i) { return plan[i].*field <= u; });
  return g < 0 ? 0 : g;  // plan[0] is all zero, so g >= 0
}

// The first-pass kernel is the one that walks the units right after the row pass. For a plan of at most
// kKernelPlanGroups groups, every block of it scans group_work into its shared memory first (stage_plan): no CUB
// launches between the row pass and the kernel, and a unit's group search costs no memory round trip. Block 0
// also writes the plan to L.plan for the kernel after it (softmax's second pass). A larger plan was scanned by
// CUB (build_plan) and stays in L.plan.
__device__ __forceinline__ unsigned char* first_pass_shared() {
  // RowWork has a constructor, which a shared-memory variable may not have: raw words, viewed as RowWork. 16-byte
  // aligned whatever static shared memory the kernel has (stage_plan's 192 bytes now), since the merge staging's
  // cp.async pieces need it.
  extern __shared__ __align__(16) std::int64_t first_pass_shared_words[];  // first_pass_shared_bytes
  return reinterpret_cast<unsigned char*>(first_pass_shared_words);
}

__device__ __forceinline__ RowWork* shared_plan() {  // [groups + 1]
  return reinterpret_cast<RowWork*>(first_pass_shared());
}

// A warp's merge staging in shared memory: `bytes` (a multiple of 16, at least kMergeStageMinBytes) at shared
// address `address` (32 bits where a generic pointer takes 64: the unit kernels run at their register caps).
struct MergeStage {
  unsigned address;
  int bytes;
};

// This warp's L.merge_stage_bytes of merge staging in a first-pass kernel, or a null one. Only the first-pass
// kernels, whose launchers give them first_pass_shared_bytes(L), merge (normalize_unit's second passes return
// before any merge).
template <typename OffsetT>
__device__ __forceinline__ MergeStage merge_stage(const SegmentLayout<OffsetT>& L) {
  if (L.merge_stage_bytes == 0) return MergeStage{0, 0};
  return MergeStage{smem_address(first_pass_shared()) + static_cast<unsigned>(merge_stage_offset(L.batch)) +
                        (threadIdx.x / kWarpSize) * static_cast<unsigned>(L.merge_stage_bytes),
                    L.merge_stage_bytes};
}

// The plan a kernel searches: the shared copy in the first-pass kernel when there is one, else L.plan. A function
// rather than a pointer kept in a register: the unit loops are tight on registers, and both are cheap to recompute.
template <bool kFirstPass, typename OffsetT>
__device__ __forceinline__ const RowWork* plan_of(const SegmentLayout<OffsetT>& L) {
  return kFirstPass && plan_scanned_in_kernel(L.batch) ? shared_plan() : L.plan;
}

// The block scan of stage_plan: every thread of the first-pass kernel's block calls it, before anything else.
template <typename OffsetT>
__device__ __forceinline__ void stage_plan(const SegmentLayout<OffsetT>& L) {
  if (!plan_scanned_in_kernel(L.batch)) return;
  __shared__ std::int64_t warp_total_words[kSegmentThreads / kWarpSize * sizeof(RowWork) / sizeof(std::int64_t)];
  RowWork* plan = shared_plan();
  RowWork* warp_totals = reinterpret_cast<RowWork*>(warp_total_words);
  constexpr int kItems = static_cast<int>(kKernelPlanGroups / kSegmentThreads);
  const std::int64_t groups = row_groups(L.batch);
  const int thread = static_cast<int>(threadIdx.x);
  const std::int64_t first = static_cast<std::int64_t>(thread) * kItems;  // thread i scans groups 4i .. 4i + 3
  RowWork items[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) items[k] = first + k < groups ? L.group_work[first + k] : RowWork{};
#pragma unroll
  for (int k = 1; k < kItems; ++k) items[k] = items[k - 1] + items[k];
  const RowWork inclusive = warp_inclusive_scan(items[kItems - 1]);
  if (lane_id() == kWarpSize - 1) warp_totals[thread / kWarpSize] = inclusive;
  __syncthreads();
  RowWork before = inclusive - items[kItems - 1];
  for (int w = 0; w < thread / kWarpSize; ++w) before = before + warp_totals[w];
  if (thread == 0) plan[0] = RowWork{};
#pragma unroll
  for (int k = 0; k < kItems; ++k)
    if (first + k < groups) plan[first + k + 1] = before + items[k];
  __syncthreads();
  if (blockIdx.x == 0)
    for (std::int64_t i = thread; i <= groups; i += kSegmentThreads) L.plan[i] = plan[i];
}

// Where item `u` of a plan field lies: the row that owns it and the work of the rows before that row.
struct RowLocation {
  std::int64_t row;
  RowWork before;
};

// The offsets of one group of rows, loaded by the whole warp at once (one memory round trip instead of one per
// 32 rows): lane l holds offsets[first_row + 32 j + l] in raw[j], and raw[kBatches] of lane 0 the group's end.
template <typename OffsetT>
struct GroupOffsets {
  static constexpr int kBatches = static_cast<int>(kRowsPerGroup / kWarpSize);
  std::int64_t first_row;
  std::int64_t end;  // one past the group's last row
  std::int64_t nnz;
  OffsetT raw[kBatches + 1];

  __device__ __forceinline__ GroupOffsets(const SegmentLayout<OffsetT>& L, std::int64_t group)
      : first_row(group * kRowsPerGroup), end(min(L.batch, group * kRowsPerGroup + kRowsPerGroup)), nnz(L.nnz) {
    const int lane = lane_id();
#pragma unroll
    for (int j = 0; j <= kBatches; ++j) {
      const std::int64_t at = first_row + j * kWarpSize + lane;
      raw[j] = at <= L.batch && (j < kBatches || lane == 0) ? L.offsets[at] : OffsetT{0};
    }
  }

  // Row first_row + 32 j + lane: its clamped range (length 0 past the group). Called by the whole warp: a row's
  // end comes from the next lane by a shuffle.
  __device__ __forceinline__ void extent(int j, std::int64_t& begin, std::int64_t& length) const {
    const int lane = lane_id();
    const OffsetT next = __shfl_down_sync(0xffffffffu, raw[j], 1);  // offsets[b + 1] for lanes < 31
    const OffsetT after = __shfl_sync(0xffffffffu, raw[j + 1], 0);  // offsets[first + 32], for lane 31
    std::int64_t stop = 0;
    clamp_row_range(static_cast<std::int64_t>(raw[j]), static_cast<std::int64_t>(lane == kWarpSize - 1 ? after : next),
                    nnz, begin, stop);
    length = first_row + j * kWarpSize + lane < end ? stop - begin : 0;
  }
};

// Called by the whole warp with the same u < plan[groups].*field: finds the group, then scans the RowWork of the
// group's rows, 32 at a time, until the row whose range of the field holds u. The group's offsets and its plan
// entry load together, so the lookup is the search's round trips plus one (just one when the first-pass kernel
// searches its shared copy: plan_of).
template <bool kFirstPass, typename OffsetT>
__device__ __forceinline__ RowLocation locate_row(const SegmentLayout<OffsetT>& L, std::int64_t u,
                                                  std::int64_t RowWork::*field) {
  const std::int64_t group = find_group(plan_of<kFirstPass>(L), row_groups(L.batch), u, field);
  RowWork base = plan_of<kFirstPass>(L)[group];
  const GroupOffsets<OffsetT> rows(L, group);
#pragma unroll
  for (int j = 0; j < GroupOffsets<OffsetT>::kBatches; ++j) {
    const std::int64_t first = rows.first_row + j * kWarpSize;
    if (first >= rows.end) break;  // warp-uniform
    std::int64_t begin = 0, length = 0;
    rows.extent(j, begin, length);
    const RowWork w = first + lane_id() < rows.end ? row_work(length, L.geometry) : RowWork{};
    const RowWork inclusive = warp_inclusive_scan(w);
    const RowWork before = base + inclusive - w;
    const unsigned owner = __ballot_sync(0xffffffffu, before.*field <= u && u < before.*field + w.*field);
    if (owner != 0) {
      const int src = __ffs(owner) - 1;
      return RowLocation{first + src, shfl_row_work(before, src)};
    }
    base = base + shfl_row_work(inclusive, kWarpSize - 1);
  }
  // Not reached: the row pass summed these same RowWork values into the plan. Any row keeps accesses in bounds.
  return RowLocation{rows.end - 1, base};
}

// step_cursor over the rows of L (segment_geometry.h).
template <typename OffsetT>
__device__ __forceinline__ bool step_cursor(UnitCursor& c, std::int64_t u, std::int64_t RowWork::*field,
                                            const SegmentLayout<OffsetT>& L) {
  auto range = [&](std::int64_t row, std::int64_t& begin, std::int64_t& length) {
    row_extent(L.offsets, row, L.nnz, begin, length);
  };
  return step_cursor(c, u, field, L.batch, L.geometry, range);
}

// The cursor at item u of a plan field, by a lookup (locate_row). Called by the whole warp.
template <bool kFirstPass, typename OffsetT>
__device__ __noinline__ UnitCursor locate_cursor(const SegmentLayout<OffsetT>& L, std::int64_t u,
                                                std::int64_t RowWork::*field) {
  const RowLocation at = locate_row<kFirstPass>(L, u, field);
  UnitCursor c;
  c.row = at.row;
  c.before = at.before;
  row_extent(L.offsets, at.row, L.nnz, c.begin, c.length);
  c.work = row_work(c.length, L.geometry);
  return c;
}

// Walks this warp's share (warp_share_begin) of the items of a plan field, in order: f(u, cursor, end) with the
// cursor at u's row handles item u and possibly more of the same share, and advances u past what it handled (at
// least one item), leaving the cursor where it was last used. One lookup per share; then each next row is a step
// (two offsets, in L1 after the first), or a lookup again past kCursorSteps rows without work. Called by the
// whole warp; u and the cursor are warp-uniform.
template <bool kFirstPass, typename OffsetT, typename F>
__device__ __forceinline__ void walk_units(const SegmentLayout<OffsetT>& L, std::int64_t RowWork::*field, F f) {
  const std::int64_t total = plan_of<kFirstPass>(L)[row_groups(L.batch)].*field;
  const std::int64_t warps = total_warps(), warp = global_warp();
  std::int64_t u = warp_share_begin(total, warps, warp);
  const std::int64_t end = warp_share_begin(total, warps, warp + 1);
  if (u >= end) return;
  UnitCursor c = locate_cursor<kFirstPass>(L, u, field);
  while (u < end) {
    if (!step_cursor(c, u, field, L)) c = locate_cursor<kFirstPass>(L, u, field);
    f(u, c, end);
  }
}

// f(u, cursor) for each item u of this warp's share, one at a time (walk_units).
template <bool kFirstPass, typename OffsetT, typename F>
__device__ __forceinline__ void for_each_unit(const SegmentLayout<OffsetT>& L, std::int64_t RowWork::*field, F f) {
  walk_units<kFirstPass>(L, field, [&](std::int64_t& u, UnitCursor& c, std::int64_t) {
    f(u, static_cast<const UnitCursor&>(c));
    ++u;
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Streams of one-chunk rows (segment_reduce.cuh stream_rows, segment_softmax.cuh stream_softmax_rows): where 32
// vectors are whole tokens (streams_rows), a warp reads its share's values in lines of 32 vectors, across row
// boundaries, and moves from one row with units to the next by the helpers below.

// A streamed row: its index and clamped range.
struct StreamRow {
  std::int64_t row;
  std::int64_t begin;
  std::int64_t length;
};

// A stream lane's place: lane = phase * vcols + vcol, with phases = 32 / vcols a power of two, 1 << shift.
struct StreamLane {
  int phase;
  int vcol;
  int shift;
};

__device__ __forceinline__ StreamLane stream_lane(const SegmentGeometry& g) {
  const int vcols = static_cast<int>(g.vcols);
  return StreamLane{lane_id() / vcols, lane_id() % vcols, __ffs(g.phases) - 1};
}

// A stream's start at the cursor's row: that row, and in `entry` the work of the rows before it (step_stream). The
// cursor is cleared: step_stream rebuilds it on the way out, and until then its registers are the stream's (left
// live, its nine 64-bit fields cost the 16-bit stream kernels 100-400 bytes of spills).
__device__ __forceinline__ StreamRow begin_stream(UnitCursor& c, RowWork& entry) {
  const StreamRow r{c.row, c.begin, c.length};
  entry = c.before;
  c = UnitCursor{};
  return r;
}

// The first row after `after` with units (not finished by the row pass: empty, tiny or a warp row), probed 32
// rows per memory round trip (a lane per row) where step_cursor reads a row at a time: in the power-law regime
// tiny rows lie between the streamed ones. False if none lies within 128 rows (the caller looks it up). Called by
// the whole warp.
template <typename OffsetT>
__device__ __forceinline__ bool next_row_with_units(const SegmentLayout<OffsetT>& L, std::int64_t after,
                                                    StreamRow& next) {
  for (int probe = 0; probe < 4; ++probe) {
    const std::int64_t row = after + 1 + probe * kWarpSize + lane_id();
    std::int64_t begin = 0, length = 0;
    if (row < L.batch) row_extent(L.offsets, row, L.nnz, begin, length);
    const unsigned found = __ballot_sync(0xffffffffu, row < L.batch && !finished_by_row_pass(length, L.geometry));
    if (found != 0) {
      const int src = __ffs(found) - 1;
      next = StreamRow{after + 1 + probe * kWarpSize + src, __shfl_sync(0xffffffffu, begin, src),
                       __shfl_sync(0xffffffffu, length, src)};
      return true;
    }
  }
  return false;
}

// A stream's move past row r, which it has just finished (unit u, a row of one unit): to the next row with units,
// r, when streams(r) says the stream takes it. Otherwise returns false, with u past r and either u == end (the
// share is done) or the cursor c at u's row for the unit walk (walk_units). entry: c.before when the stream began;
// the rows it finished have one unit each, no partials and no second-pass units.
template <typename OffsetT, typename Streams>
__device__ __forceinline__ bool step_stream(const SegmentLayout<OffsetT>& L, std::int64_t& u, UnitCursor& c,
                                            std::int64_t end, const RowWork& entry, StreamRow& r, Streams streams) {
  if (++u >= end) return false;
  StreamRow next;
  if (!next_row_with_units(L, r.row, next)) {  // far away: the walk looks it up
    c = locate_cursor<true>(L, u, &RowWork::units);
    return false;
  }
  r = next;
  if (streams(r)) return true;
  c.row = r.row;
  c.before = RowWork{u, entry.partials, entry.second_units};
  c.begin = r.begin;
  c.length = r.length;
  c.work = row_work(r.length, L.geometry);
  return false;
}

// The end of the row that holds the last unit of a share [.., end): how far a stream may load.
template <typename OffsetT>
__device__ __forceinline__ std::int64_t share_token_end(const SegmentLayout<OffsetT>& L, std::int64_t end) {
  const UnitCursor last = locate_cursor<true>(L, end - 1, &RowWork::units);
  return last.begin + last.length;
}

// Tokens of a tiny row that the row pass loads ahead (TinyHead): the first kTinyHead tokens of its column 0.
constexpr int kTinyHead = 4;

template <typename Elem>
struct TinyHead {
  Elem at[kTinyHead];
};

// The index type of a tiny row's tokens: 32 bits in the scalar row pass (scalar_row_pass), else 64.
template <bool kScalar>
using TinyIndex = typename std::conditional<kScalar, int, std::int64_t>::type;

// The head of a tiny row of `length` >= 1 tokens: at[t] = load(t) for t < length, `pad` past the end. The loads
// are unconditional (past the end they repeat the last token) so that ptxas issues them together.
template <typename I, typename Elem, typename Load>
__device__ __forceinline__ TinyHead<Elem> load_tiny_head(I length, Elem pad, Load load) {
  TinyHead<Elem> head;
#pragma unroll
  for (int k = 0; k < kTinyHead; ++k) {
    const Elem x = load(min(static_cast<I>(k), length - 1));
    head.at[k] = k < length ? x : pad;
  }
  return head;
}

// Walks tokens 0 .. length - 1 (length >= 1) of one column of a tiny row in groups of kTinyHead: f(t0, x) with
// x[k] = load(t0 + k), `pad` past the end. Every load of a group is issued before f runs, so a group costs one
// memory round trip, not one per token (left to itself nvcc unrolls a per-token loop by 4 and loads the
// remaining 1-3 tokens one round trip apart). With `from_head` the first group is the head, already in registers.
// kRolled: the loop over the groups is not unrolled (the scalar row pass: nvcc unrolled it by 4 there, 29 ->
// 41 KB of SASS in the float sum's kernel, for rows of 5 to 32 tokens).
template <bool kRolled = false, typename I, typename Elem, typename Load, typename F>
__device__ __forceinline__ void walk_tiny(I length, const TinyHead<Elem>& head, bool from_head, Elem pad, Load load,
                                          F f) {
  auto group = [&](I t0) {
    Elem x[kTinyHead];
    if (from_head && t0 == 0) {
#pragma unroll
      for (int k = 0; k < kTinyHead; ++k) x[k] = head.at[k];
    } else {
#pragma unroll
      for (int k = 0; k < kTinyHead; ++k) {
        const Elem e = load(min(static_cast<I>(t0 + k), length - 1));  // unconditional, as in load_tiny_head
        x[k] = t0 + k < length ? e : pad;
      }
    }
    f(t0, x);
  };
  if constexpr (kRolled) {
#pragma unroll 1
    for (I t0 = 0; t0 < length; t0 += kTinyHead) group(t0);
  } else {
    for (I t0 = 0; t0 < length; t0 += kTinyHead) group(t0);
  }
}

// Arrival counters of the merge trees (merge_tile_partials): the row pass zeroes them (zero_arrivals).
template <typename OffsetT>
RAGGED_HOST_DEVICE std::int64_t arrival_words(const SegmentLayout<OffsetT>& L) {
  return L.arrivals == nullptr ? 0 : L.partial_capacity * L.geometry.tiles;
}

// Asks L2 for the offsets of row group `group` (129 of them, from its first row's), when it exists.
template <typename OffsetT>
__device__ __forceinline__ void prefetch_group_offsets(const SegmentLayout<OffsetT>& L, std::int64_t group) {
  const std::int64_t at = group * kRowsPerGroup + static_cast<std::int64_t>(lane_id()) * (128 / sizeof(OffsetT));
  if (group < row_groups(L.batch) && at <= min(L.batch, group * kRowsPerGroup + kRowsPerGroup))
    prefetch_l2(L.offsets + at);
}

// The merge trees' counters start at zero: every row pass zeroes them, grid-stride (build_plan sizes its grid for
// a warp per 1024 of them, less under a test's grid cap), which saves a memset launch.
template <typename OffsetT>
__device__ __forceinline__ void zero_arrivals(const SegmentLayout<OffsetT>& L) {
  const std::int64_t words = arrival_words(L);
  for (std::int64_t i = global_warp() * kWarpSize + lane_id(); i < words; i += total_warps() * kWarpSize)
    L.arrivals[i] = 0;
}

// The row pass, a warp per group of kRowsPerGroup rows (grid-stride), kWarpSize rows at a time with a lane per
// row. A tiny non-empty row is finished by its lane, tiny(b, begin, length, head) (lanes diverge there); the
// empty rows of each 32 are handed to the whole warp, empty(first, mask) (bit i: row first + i). The RowWork of
// the other rows is summed into the group's entry of group_work, which the plan scans. It also zeroes the
// arrival counters.
// The many-tiny-rows regime is latency-bound (offsets -> values -> store per row), so a group takes two memory
// round trips, not one per 32 rows: all its offsets first (one per lane per 32 rows plus the group's end; a
// row's end comes from the next lane by a shuffle), then, for every tiny row of the group at once,
// head = load_head(b, begin, length), the op's loads that come first (no stores: those would order the loads
// of the next rows behind them). tiny() then starts from registers.
template <typename OffsetT, typename LoadHead, typename Tiny, typename Empty>
__device__ __forceinline__ void row_pass(const SegmentLayout<OffsetT>& L, LoadHead load_head, Tiny tiny,
                                         Empty empty) {
  // Where the first-pass kernel follows (plans of up to kKernelPlanGroups groups), its blocks may be scheduled
  // now and wait at wait_for_prior_grid() for this grid's end and writes: its launch overlaps this pass instead
  // of following it. CUB's scan of a larger plan is an ordinary launch and still starts after this grid ends.
  allow_dependent_grid();
  constexpr int kBatches = GroupOffsets<OffsetT>::kBatches;
  using Head = decltype(load_head(std::int64_t{}, std::int64_t{}, std::int64_t{}));
  const int lane = lane_id();
  zero_arrivals(L);
  const std::int64_t groups = row_groups(L.batch);
  const std::int64_t warps = total_warps();
  for (std::int64_t group = global_warp(); group < groups; group += warps) {
    // L2 prefetch (L.prefetch_groups > 0): the offsets of this warp's group after next. Why: a group costs two
    // dependent round trips (its offsets, then its rows' heads), and at 8M rows of ~2 floats (64 MiB) each warp
    // walks ~20 groups one after another; from L2 the first is a few hundred ns, not ~1 us. The values of the
    // next group too would need its first and last offsets held across this group's rows: 2 registers, which
    // spilled the int64 sum row kernels (ptxas, sm_90: 12-40 bytes at 80 registers).
    if (L.prefetch_groups > 0) prefetch_group_offsets(L, group + 2 * warps);
    const GroupOffsets<OffsetT> rows(L, group);
    Head head[kBatches];
#pragma unroll
    for (int j = 0; j < kBatches; ++j) {
      std::int64_t begin = 0, length = 0;
      rows.extent(j, begin, length);
      if (length > 0 && is_tiny(length, L.geometry))
        head[j] = load_head(rows.first_row + j * kWarpSize + lane, begin, length);
    }
    // The ranges are recomputed below (shuffles, no memory) rather than kept: 4 batches' begin and length would
    // hold 16 more registers in a kernel whose speed is its resident warps.
    RowWork sum;
#pragma unroll
    for (int j = 0; j < kBatches; ++j) {
      const std::int64_t first = rows.first_row + j * kWarpSize;
      if (first >= rows.end) break;  // warp-uniform
      std::int64_t begin = 0, length = 0;
      rows.extent(j, begin, length);
      const std::int64_t b = first + lane;
      if (length > 0) {
        if (is_tiny(length, L.geometry)) tiny(b, begin, length, head[j]);
        else sum = sum + row_work(length, L.geometry);
      }
      const unsigned empties = __ballot_sync(0xffffffffu, b < rows.end && length == 0);
      if (empties != 0) empty(first, empties);
    }
    for (int d = 1; d < kWarpSize; d <<= 1) sum = sum + shfl_row_work(sum, lane ^ d);
    if (lane == 0) L.group_work[group] = sum;
  }
}

// The row pass at D = 1 where every element index fits 32 bits (takes_scalar_rows; segment_reduce's and
// segment_softmax's scalar rows kernels). Why: in the many-tiny-rows regime the row pass issues instructions
// more than it waits on memory. The H100 profile of 1c910f2 had segment_reduce's at 68% of its issue slots, ~590
// instructions per row, and the H200 run of a910134 took 299 us for 16.7 M bfloat16 rows of ~2 tokens against
// 162 us for the 8.4 M float rows of the same bytes (the softmax 337 against 170): the time goes with the rows.
// row_pass pays per row for 64-bit ranges and addresses (a multiply by D per load), a loop over the columns, the
// empty rows handed to the whole warp, and its group's work summed by 64-bit shuffles even where no row has any.
// Here each lane finishes its row, empty or tiny, with 32-bit indices: load_head(begin, length) for every tiny
// row of length >= 1 of the group (its 4 batches of 32 rows, before any store, as row_pass), then
// finish(b, begin, length, head) for every row of the group without units (head unset when length is 0). The
// rows with units are summed into group_work as row_pass sums them.
template <typename OffsetT>
__device__ __forceinline__ void scalar_extent(const GroupOffsets<OffsetT>& rows, int j, OffsetT nnz, int live,
                                              int& begin, int& length) {
  // Row first_row + 32 j + lane: its clamped range (clamp_row_range, in OffsetT, then narrowed: it lies in
  // [0, nnz]), length 0 past the group's `live` rows. Called by the whole warp.
  const int lane = lane_id();
  const OffsetT next = __shfl_down_sync(0xffffffffu, rows.raw[j], 1);  // offsets[b + 1] for lanes < 31
  const OffsetT after = __shfl_sync(0xffffffffu, rows.raw[j + 1], 0);  // offsets[first + 32], for lane 31
  OffsetT lo = rows.raw[j];
  OffsetT hi = lane == kWarpSize - 1 ? after : next;
  lo = lo < OffsetT{0} ? OffsetT{0} : (lo > nnz ? nnz : lo);
  hi = hi < lo ? lo : (hi > nnz ? nnz : hi);
  begin = static_cast<int>(lo);
  length = j * kWarpSize + lane < live ? static_cast<int>(hi - lo) : 0;
}

template <typename OffsetT, typename LoadHead, typename Finish>
__device__ __forceinline__ void scalar_row_pass(const SegmentLayout<OffsetT>& L, LoadHead load_head, Finish finish) {
  allow_dependent_grid();  // as row_pass
  constexpr int kBatches = GroupOffsets<OffsetT>::kBatches;
  using Head = decltype(load_head(0, 1));
  const int lane = lane_id();
  zero_arrivals(L);
  const OffsetT nnz = static_cast<OffsetT>(L.nnz);
  const int tiny = static_cast<int>(L.geometry.tiny_tokens);
  const std::int64_t groups = row_groups(L.batch);
  const std::int64_t warps = total_warps();
  for (std::int64_t group = global_warp(); group < groups; group += warps) {
    if (L.prefetch_groups > 0) prefetch_group_offsets(L, group + 2 * warps);  // as row_pass
    const GroupOffsets<OffsetT> rows(L, group);
    const int live = static_cast<int>(rows.end - rows.first_row);
    int begin[kBatches], length[kBatches];
    Head head[kBatches];
#pragma unroll
    for (int j = 0; j < kBatches; ++j) {
      scalar_extent(rows, j, nnz, live, begin[j], length[j]);
      if (length[j] > 0 && length[j] <= tiny) head[j] = load_head(begin[j], length[j]);
    }
    RowWork work;
    bool long_rows = false;
#pragma unroll
    for (int j = 0; j < kBatches; ++j) {
      if (j * kWarpSize >= live) break;  // warp-uniform
      if (length[j] > tiny) {
        work = work + row_work(length[j], L.geometry);
        long_rows = true;
      } else if (j * kWarpSize + lane < live) {
        finish(rows.first_row + j * kWarpSize + lane, begin[j], length[j], head[j]);
      }
    }
    // Only rows longer than tiny have work: a group of tiny and empty rows writes zeros without the shuffles. (Not
    // work.units != 0: a softmax block row has second_units and no units.)
    if (__any_sync(0xffffffffu, long_rows))
      for (int d = 1; d < kWarpSize; d <<= 1) work = work + shfl_row_work(work, lane ^ d);
    if (lane == 0) L.group_work[group] = work;
  }
}

// The warp rows of the batch (is_warp_row: at D = 1, where the scalar row pass runs, so every element index fits 32
// bits), after the row pass proper: each warp takes a contiguous share of the rows (warp_share_begin), reads their
// ranges 32 at a time (a lane per row) and finishes each warp row among them with finish(b, begin, length), called by
// the whole warp. The plan has no work for these rows (row_work). A share rather than a grid stride: a warp's rows
// then lie next to one another in memory, and their offsets in one line. Where L.prefetch_rows, prefetch(first, end,
// lane, lanes) (whole warp, elements [first, end), as prefetch_span takes them) first asks L2 for the next warp row
// of the 32, if any. Why: a warp row is one round trip of at most 2 KB a warp, a few tens of KB per SM, short of what
// covers DRAM's latency at full bandwidth; with the next row asked for, each row's loads after the first meet L2.
template <typename OffsetT, typename Prefetch, typename Finish>
__device__ __forceinline__ void warp_row_pass(const SegmentLayout<OffsetT>& L, Prefetch prefetch, Finish finish) {
  const SegmentGeometry& g = L.geometry;
  const std::int64_t warps = total_warps(), warp = global_warp();
  const std::int64_t end = warp_share_begin(L.batch, warps, warp + 1);
  for (std::int64_t first = warp_share_begin(L.batch, warps, warp); first < end; first += kWarpSize) {
    const std::int64_t b = first + lane_id();
    std::int64_t begin = 0, length = 0;
    if (b < end) row_extent(L.offsets, b, L.nnz, begin, length);
    unsigned rows = __ballot_sync(0xffffffffu, b < end && is_warp_row(length, g));
    while (rows != 0) {  // warp-uniform
      const int src = __ffs(rows) - 1;
      rows &= rows - 1;
      if (L.prefetch_rows && rows != 0) {
        const int next = __ffs(rows) - 1;
        const int next_begin = __shfl_sync(0xffffffffu, static_cast<int>(begin), next);
        prefetch(next_begin, next_begin + __shfl_sync(0xffffffffu, static_cast<int>(length), next), lane_id(),
                 kWarpSize);
      }
      finish(first + src, __shfl_sync(0xffffffffu, static_cast<int>(begin), src),
             __shfl_sync(0xffffffffu, static_cast<int>(length), src));
    }
  }
}

// The position of the n-th set bit of mask (n from 0; n < __popc(mask)): a binary search over its halves.
__device__ __forceinline__ int nth_set_bit(unsigned mask, int n) {
  int pos = 0;
#pragma unroll
  for (int width = kWarpSize / 2; width > 0; width >>= 1) {
    const int below = __popc((mask >> pos) & ((1u << width) - 1u));
    if (n >= below) {
      n -= below;
      pos += width;
    }
  }
  return pos;
}

// The sum of the work of group `group`'s rows into group_work (the plan's entry), as row_pass sums it: a lane per
// row, the rows without work (empty, or finished by the row pass) adding nothing. Called by the whole warp.
template <typename OffsetT>
__device__ __forceinline__ void write_group_work(const SegmentLayout<OffsetT>& L, std::int64_t group) {
  constexpr int kBatches = GroupOffsets<OffsetT>::kBatches;
  const int lane = lane_id();
  const GroupOffsets<OffsetT> rows(L, group);
  RowWork work;
  bool long_rows = false;
#pragma unroll
  for (int j = 0; j < kBatches; ++j) {
    const std::int64_t first = rows.first_row + j * kWarpSize;
    if (first >= rows.end) break;  // warp-uniform
    std::int64_t begin = 0, length = 0;
    rows.extent(j, begin, length);
    if (first + lane < rows.end && !finished_by_row_pass(length, L.geometry)) {
      work = work + row_work(length, L.geometry);
      long_rows = true;
    }
  }
  if (__any_sync(0xffffffffu, long_rows))
    for (int d = 1; d < kWarpSize; d <<= 1) work = work + shfl_row_work(work, lane ^ d);
  if (lane == 0) L.group_work[group] = work;
}

// A short row's tokens of one vector column, held by its sub-warp lane (subwarp_row_pass): tokens 0 ..
// kSubwarpRowTokens - 1 of the row; those past its length stay unset.
template <typename T, int V>
struct SubwarpColumn {
  Vec<T, V> x[kSubwarpRowTokens];
};

// The loads are predicated, not branched around, so ptxas issues them together (sm_90: LDG.E.128 under predicates).
template <typename T, int V>
__device__ __forceinline__ SubwarpColumn<T, V> load_subwarp_column(const T* values, std::int64_t D,
                                                                   std::int64_t begin, std::int64_t length, int col) {
  SubwarpColumn<T, V> h;
  const T* column = values + begin * D + static_cast<std::int64_t>(col) * V;
#pragma unroll
  for (int k = 0; k < kSubwarpRowTokens; ++k)
    if (k < length) h.x[k] = *reinterpret_cast<const Vec<T, V>*>(column + k * D);
  return h;
}

// The row pass of geometries with sub-warp rows (SegmentGeometry::subwarp_rows: D > 32, rows of at most
// tiny_tokens = kSubwarpRowTokens tokens): a warp per batch of 32 rows (grid-stride), and per batch a sub-warp of
// vcols lanes per empty or short row, 32 / vcols rows at once, lane `col` of a sub-warp vector column col. The
// warp of a group's first batch also writes the group's entry of group_work (write_group_work); it zeroes the
// arrival counters as row_pass does. kPasses rows per sub-warp are loaded before any is finished:
// held = load(begin, length, col) for each (length >= 1; no stores, which would order the next loads behind
// them), then finish(b, begin, length, col, held) for each, empty rows included (held unset). Why a batch per
// warp, not a group as in row_pass: 131072 rows of 0..4 tokens at D = 64 are 1024 groups, a quarter of the
// warps resident on an H200, each walking 64 rounds of loads; as batches, 4096 warps of 8 rounds. Where
// L.prefetch_rows, each sub-warp then asks L2 for the row it takes in the next round of the batch, if any, with
// prefetch(first, end, col, vcols) (elements [first, end), as prefetch_span takes them), before the finishes.
template <int kPasses, typename OffsetT, typename Load, typename Prefetch, typename Finish>
__device__ __forceinline__ void subwarp_row_pass(const SegmentLayout<OffsetT>& L, Load load, Prefetch prefetch,
                                                 Finish finish) {
  allow_dependent_grid();  // as row_pass
  using Held = decltype(load(std::int64_t{}, std::int64_t{}, int{}));
  constexpr std::int64_t kBatchesPerGroup = kRowsPerGroup / kWarpSize;
  const SegmentGeometry& g = L.geometry;
  const int lane = lane_id();
  const int vcols = static_cast<int>(g.vcols);
  const int at_once = kWarpSize / vcols;  // rows a pass finishes
  const int sub = lane / vcols, col = lane % vcols;
  zero_arrivals(L);
  const std::int64_t batches = (L.batch + kWarpSize - 1) / kWarpSize;
  const std::int64_t warps = total_warps();
  for (std::int64_t batch = global_warp(); batch < batches; batch += warps) {
    if (L.prefetch_groups > 0) {
      // The offsets of this warp's batch after next (as row_pass asks for its group's): its 33 offsets, a line of
      // 128 bytes per lane.
      constexpr int kPerLine = 128 / static_cast<int>(sizeof(OffsetT));
      const std::int64_t at = (batch + 2 * warps) * kWarpSize + lane * kPerLine;
      if (lane * kPerLine <= kWarpSize && at <= L.batch) prefetch_l2(L.offsets + at);
    }
    if (batch % kBatchesPerGroup == 0) write_group_work(L, batch / kBatchesPerGroup);
    const std::int64_t b = batch * kWarpSize + lane;
    std::int64_t begin = 0, length = 0;
    if (b < L.batch) row_extent(L.offsets, b, L.nnz, begin, length);
    unsigned rows = __ballot_sync(0xffffffffu, b < L.batch && is_tiny(length, g));
    while (rows != 0) {  // warp-uniform
      const int count = __popc(rows);
      int src[kPasses];
      std::int64_t row_begin[kPasses], row_length[kPasses];
      Held held[kPasses];
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int n = p * at_once + sub;
        src[p] = n < count ? nth_set_bit(rows, n) : -1;
        const int from = src[p] < 0 ? lane : src[p];
        row_begin[p] = __shfl_sync(0xffffffffu, begin, from);
        row_length[p] = __shfl_sync(0xffffffffu, length, from);
        if (src[p] >= 0 && row_length[p] > 0) held[p] = load(row_begin[p], row_length[p], col);
      }
      const int taken = kPasses * at_once;
      if (L.prefetch_rows && taken < count) {  // warp-uniform
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
          const int n = taken + p * at_once + sub;
          const int next = n < count ? nth_set_bit(rows, n) : -1;
          const std::int64_t next_begin = __shfl_sync(0xffffffffu, begin, next < 0 ? lane : next);
          const std::int64_t next_end = next_begin + __shfl_sync(0xffffffffu, length, next < 0 ? lane : next);
          if (next >= 0) prefetch(next_begin * g.inner, next_end * g.inner, col, vcols);
        }
      }
#pragma unroll
      for (int p = 0; p < kPasses; ++p)
        if (src[p] >= 0) finish(batch * kWarpSize + src[p], row_begin[p], row_length[p], col, held[p]);
      // Drop the rows just finished: the lowest kPasses * at_once set bits.
      rows = taken >= count ? 0u : rows & ~((1u << nth_set_bit(rows, taken)) - 1u);
    }
  }
}

// Rows whose offsets a warp of the wide short-row pass reads at once (one load each by lanes 0 to 3), then
// finishes one after another. Why 4, not subwarp_row_pass's 32: a short row at D = 1024 is up to 16 KB of floats,
// and 64 MiB of rows of 0..4 tokens are 8192 rows, as batches of 32 work for 256 warps (an H200 holds thousands);
// as batches of 4, 2048 warps with 4 rows of 1 or 2 rounds of loads each.
constexpr int kWideBatchRows = 4;
static_assert(kRowsPerGroup % kWideBatchRows == 0 && kWideBatchRows <= kWarpSize,
              "a group is whole batches, and a batch's rows one lane each");

// The row pass of wide geometries with short rows (SegmentGeometry::subwarp_rows, vcols > 32, at most
// kWideShortRowMaxTiles tiles): a warp per batch of kWideBatchRows rows (grid-stride), and per empty or short row
// of it the whole warp, lane j taking vector columns j, j + 32, ..., kTilesAtOnce of them loaded before any is
// finished. The contract is subwarp_row_pass's: held = load(begin, length, col) for a row of length >= 1, then
// finish(b, begin, length, col, held) for every column, empty rows included (held unset). The warp of a group's
// first batch writes the group's entry of group_work; it zeroes the arrival counters as row_pass does. Where
// L.prefetch_rows, once a row's first loads are made the warp asks L2 for its later column tiles, if any, and for
// the next short row of the batch, with prefetch(first, end, lane, kWarpSize) (elements [first, end), as
// prefetch_span takes them). Why: a row of several rounds of loads waited a DRAM round trip for each (8 of them
// for the float softmax backward at D = 1024), and a warp held one round's bytes in flight.
template <int kTilesAtOnce, typename OffsetT, typename Load, typename Prefetch, typename Finish>
__device__ __forceinline__ void wide_short_row_pass(const SegmentLayout<OffsetT>& L, Load load, Prefetch prefetch,
                                                    Finish finish) {
  allow_dependent_grid();  // as row_pass
  using Held = decltype(load(std::int64_t{}, std::int64_t{}, int{}));
  constexpr std::int64_t kBatchesPerGroup = kRowsPerGroup / kWideBatchRows;
  const SegmentGeometry& g = L.geometry;
  const int lane = lane_id();
  const int vcols = static_cast<int>(g.vcols);
  zero_arrivals(L);
  const std::int64_t batches = (L.batch + kWideBatchRows - 1) / kWideBatchRows;
  const std::int64_t warps = total_warps();
  for (std::int64_t batch = global_warp(); batch < batches; batch += warps) {
    // The offsets of this warp's batch after next, as subwarp_row_pass asks for its batch's.
    const std::int64_t ahead = (batch + 2 * warps) * kWideBatchRows;
    if (L.prefetch_groups > 0 && lane == 0 && ahead <= L.batch) prefetch_l2(L.offsets + ahead);
    if (batch % kBatchesPerGroup == 0) write_group_work(L, batch / kBatchesPerGroup);
    const std::int64_t b = batch * kWideBatchRows + lane;
    const bool mine = lane < kWideBatchRows && b < L.batch;
    std::int64_t begin = 0, length = 0;
    if (mine) row_extent(L.offsets, b, L.nnz, begin, length);
    unsigned rows = __ballot_sync(0xffffffffu, mine && is_tiny(length, g));
    while (rows != 0) {  // warp-uniform
      const int src = __ffs(rows) - 1;
      rows &= rows - 1;
      const std::int64_t row_begin = __shfl_sync(0xffffffffu, begin, src);
      const std::int64_t row_length = __shfl_sync(0xffffffffu, length, src);
      for (int first = 0; first < vcols; first += kTilesAtOnce * kWarpSize) {
        Held held[kTilesAtOnce];
#pragma unroll
        for (int k = 0; k < kTilesAtOnce; ++k) {
          const int col = first + k * kWarpSize + lane;
          if (col < vcols && row_length > 0) held[k] = load(row_begin, row_length, col);
        }
        if (L.prefetch_rows && first == 0) {  // warp-uniform
          const std::int64_t D = g.inner, later = std::int64_t{kTilesAtOnce} * kWarpSize * g.vec;
          if (later < D)
            for (std::int64_t t = row_begin; t < row_begin + row_length; ++t)
              prefetch(t * D + later, (t + 1) * D, lane, kWarpSize);
          if (rows != 0) {
            const int next = __ffs(rows) - 1;
            const std::int64_t next_begin = __shfl_sync(0xffffffffu, begin, next);
            prefetch(next_begin * D, (next_begin + __shfl_sync(0xffffffffu, length, next)) * D, lane, kWarpSize);
          }
        }
#pragma unroll
        for (int k = 0; k < kTilesAtOnce; ++k) {
          const int col = first + k * kWarpSize + lane;
          if (col < vcols) finish(batch * kWideBatchRows + src, row_begin, row_length, col, held[k]);
        }
      }
    }
  }
}

// Which vector column and token phase a lane takes in a (chunk, tile) unit, and whether it reads at all
// (segment_geometry.h describes the layout).
struct LaneSlot {
  std::int64_t vcol;
  int phase;
  bool active;
};

__device__ __forceinline__ LaneSlot lane_slot(const SegmentGeometry& g, std::int64_t tile) {
  const int lane = lane_id();
  if (g.narrow) {  // vcols <= 32: 32-bit division
    const int vcols = static_cast<int>(g.vcols);
    const int phase = lane / vcols;
    return LaneSlot{lane - phase * vcols, phase, phase < g.phases};
  }
  const std::int64_t vcol = tile * kWarpSize + lane;
  return LaneSlot{vcol, 0, vcol < g.vcols};
}

// Merges the accumulators of a narrow unit's token phases (lane = phase * vcols + vcol) into the phase-0 lanes,
// by a tree of fixed shape: for s = P/2, P/4, ..., 1 (P: phases rounded up to a power of two), phase p merges
// phase p + s when p + s < phases. At D = 1 that is 5 rounds of shuffles where a serial gather by phase 0 took
// 31, one after another (each a shuffle and, for softmax, two expf). The order depends only on phases, so
// results stay deterministic and independent of the batch. Other lanes end with partial merges. Called by the
// whole warp; Acc has merge(other) and shfl(src_lane).
template <typename Acc, int V>
__device__ __forceinline__ void merge_phases(Acc (&acc)[V], const SegmentGeometry& g, const LaneSlot& slot) {
  // phases rounded up to a power of two (a loop here ran once per row in the streams)
  const int span = g.phases <= 1 ? 1 : 1 << (32 - __clz(g.phases - 1));
  const int lane = lane_id();
  for (int s = span >> 1; s > 0; s >>= 1) {
    const int from = lane + s * static_cast<int>(g.vcols);
    const bool take = slot.phase + s < g.phases;  // then `from` is a lane of phase p + s
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const Acc other = acc[v].shfl(from < kWarpSize ? from : lane);
      if (take) acc[v].merge(other);
    }
  }
}

// merge_phases, then the phase-0 lane of each column hands the merged accumulators to the column's other lanes,
// so that every lane of a narrow unit holds its column's result. Called by the whole warp.
template <typename Acc, int V>
__device__ __forceinline__ void merge_phases_to_all(Acc (&acc)[V], const SegmentGeometry& g, const LaneSlot& slot) {
  merge_phases(acc, g, slot);
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = acc[v].shfl(static_cast<int>(slot.vcol));
}

// The columns [col0, col1) of column tile `tile` of a unit: all D when the warp spans them (narrow), else 32
// vectors.
__device__ __forceinline__ void tile_columns(const SegmentGeometry& g, std::int64_t tile, std::int64_t& col0,
                                             std::int64_t& col1) {
  col0 = g.narrow ? 0 : tile * kWarpSize * g.vec;
  col1 = g.narrow ? g.inner : min(g.inner, col0 + kWarpSize * g.vec);
}

// Partials a lane loads at once when merging. They are independent, but a loop that merges each as it arrives
// waits one round trip per partial. 16 at once (a node's children) inlined into the unit kernels cost up to 100
// more registers (float sum 80 -> 128, float max 95 -> 186, half max 128 -> 182; ptxas, sm_90), losing blocks
// per SM in the kernels that stream the data; 4 keep every unit kernel at its former blocks per SM.
constexpr int kMergeBatch = 4;

// acc.merge(load(0)), ..., acc.merge(load(count - 1)), in that order, kMergeBatch loads issued before their
// merges. The last batch repeats load(count - 1) past the end: with predicated loads, or a clamped index per
// load, ptxas interleaved the loads with the merges, a round trip apart again.
template <typename Acc, typename Load>
__device__ __forceinline__ void merge_in_order(Acc& acc, int count, Load load) {
#pragma unroll 1
  for (int j0 = 0; j0 < count; j0 += kMergeBatch) {
    Acc x[kMergeBatch];
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) x[j] = load(j0 + j < count ? j0 + j : count - 1);
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j)
      if (j0 + j < count) acc.merge(x[j]);
  }
}

// Where a merge tree's partials lie, for merges staged through shared memory (merge_staged_node): a float per
// (slot, column) in `first`, and, where Acc::kSecondBytes > 0, an element of that many bytes in `second`.
struct PartialArrays {
  const float* first;
  const void* second;
};

// Columns of a staged node merged per round trip: all of a lane's columns at most 2 (kWarpSize * 2: two
// accumulators held), and as many as `children` partials of them fit the stage's bytes; a multiple of 4, so that
// every child's piece of each array is whole 16-byte copies (at least 4: kMergeStageMinBytes).
template <typename Acc>
__device__ __forceinline__ int staged_round_columns(int children, int cols, int stage_bytes) {
  constexpr int kColumnBytes = 4 + Acc::kSecondBytes;
  const int fit = stage_bytes / (children * kColumnBytes) / 4 * 4;
  const int most = 2 * kWarpSize < fit ? 2 * kWarpSize : fit;
  return cols < most ? cols : most;
}

// merge_node for a node of more (child, column) pairs than lanes, where the partials' rows are 16-byte aligned
// (D, col0 and col1 multiples of 4, arrays 16-byte aligned): per round trip, cp.async copies the node's children's
// partials of the next staged_round_columns columns into this warp's `stage` (its bytes hold each array's
// [children][columns] in turn), then lane c merges column c (and c + 32) from there, children in order. The same
// merges of the same values as merge_in_order's, so the same bits. Called by the whole warp.
template <typename Acc, typename Store, typename Root>
__device__ __forceinline__ void merge_staged_node(const PartialArrays& parts, MergeStage stage, Store store,
                                                  Root root, std::int64_t slot0, std::int64_t span, int children,
                                                  std::int64_t D, std::int64_t col0, std::int64_t col1, bool is_root) {
  constexpr int kSecond = Acc::kSecondBytes;
  const int lane = lane_id();
  const int cols = static_cast<int>(col1 - col0);
  const int round = staged_round_columns<Acc>(children, cols, stage.bytes);
  const int first_pieces = round / 4;              // 16-byte copies per child of the floats
  const int second_pieces = round * kSecond / 16;  // ... and of the second array's elements
  const int first_total = children * first_pieces;
  const int pieces = first_total + children * second_pieces;
  // Child k's partials of column col0 + c: element (slot0 + k * span) * D + col0 + c of each array.
  const std::int64_t child_step = span * D;
  const unsigned char* first_src = reinterpret_cast<const unsigned char*>(parts.first + (slot0 * D + col0));
  const unsigned char* second_src = static_cast<const unsigned char*>(parts.second) + (slot0 * D + col0) * kSecond;
  const unsigned stage_first = stage.address;
  const unsigned stage_second = stage_first + static_cast<unsigned>(children * round * 4);
  const unsigned char* const at = static_cast<const unsigned char*>(__cvta_shared_to_generic(stage.address));
  const float* staged_first = reinterpret_cast<const float*>(at);
  const unsigned char* staged_second = at + children * round * 4;
#pragma unroll 1
  for (int c0 = 0; c0 < cols; c0 += round) {
    const int width = cols - c0 < round ? cols - c0 : round;  // a multiple of 4, as cols and round are
#pragma unroll 1
    for (int p = lane; p < pieces; p += kWarpSize) {
      const bool in_first = p < first_total;
      const int q = in_first ? p : p - first_total;
      const int per_child = in_first ? first_pieces : second_pieces;
      const int child = q / per_child, piece = q - child * per_child;
      const int bytes = in_first ? 4 : kSecond;
      const unsigned char* src = (in_first ? first_src : second_src) + (child * child_step + c0) * bytes;
      const unsigned dst = (in_first ? stage_first : stage_second) + static_cast<unsigned>((child * round) * bytes);
      // The last range's pieces past its width copy nothing (src-size 0), from the child's first column.
      const bool inside = piece * 16 < width * bytes;
      cp_async_16(dst + piece * 16, inside ? src + piece * 16 : src, inside);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
#pragma unroll 1
    for (int w = 0; w < 2; ++w) {  // one accumulator live at a time: the unit kernels are tight on registers
      const int c = lane + w * kWarpSize;
      if (c < width) {
        Acc acc;
        for (int k = 0; k < children; ++k) acc.merge(Acc::staged(staged_first, staged_second, k * round + c));
        if (is_root) root(col0 + c0 + c, acc);
        else store(acc, slot0 * D + col0 + c0 + c);
      }
    }
    __syncwarp();  // every lane has read the stage before the next range overwrites it
  }
}

// One node of a merge tree: for each column col0 + lane, col0 + lane + 32, ... below col1, merges its
// `children` (<= kMergeFanIn) children at partial slots slot0 + k * span in order, then store(acc, slot0 * D +
// col), or root(col, acc) at the root. With a `stage` (stages_merges) a node of more pairs than lanes goes
// through it (merge_staged_node). Called by the whole warp.
template <typename Acc, bool kStaged, typename Load, typename Store, typename Root>
__device__ __forceinline__ void merge_node(Load load, Store store, Root root, const PartialArrays& parts,
                                           MergeStage stage, std::int64_t slot0, std::int64_t span, int children,
                                           std::int64_t D, std::int64_t col0, std::int64_t col1, bool is_root) {
  const int cols = static_cast<int>(min(col1 - col0, static_cast<std::int64_t>(kWarpSize) + 1));
  if (cols * children <= kWarpSize) {
    // A narrow node (D = 1 or 2; a wider D or a column tile's last few columns with few children): each (child,
    // column) pair is one lane's load, so the node costs one round trip where merge_in_order's batches took
    // children / kMergeBatch of them, on the path after a huge row's last chunk (a level per 16x chunks).
    // Column c's lane then merges the children in order through shuffles: the same merges of the same values
    // as merge_in_order, so the same bits.
    const int lane = lane_id();
    Acc mine;
    if (lane < cols * children) mine = load((slot0 + (lane / cols) * span) * D + col0 + lane % cols);
    Acc acc;
    for (int k = 0; k < children; ++k) {
      const Acc child = mine.shfl(k * cols + (lane < cols ? lane : 0));
      if (lane < cols) acc.merge(child);
    }
    if (lane < cols) {
      if (is_root) root(col0 + lane, acc);
      else store(acc, slot0 * D + col0 + lane);
    }
    __syncwarp();
    return;
  }
  // Staged unless that takes more round trips than the registers' (a column a lane, kMergeBatch children per
  // trip): with 1 KB a warp, max / min's 12-byte partials go 4 columns a trip, 32 trips for a 128-column tile of
  // 16 children, where the registers take 16. Either way the same merges, so the same bits.
  if (kStaged && stage.bytes > 0) {
    const int full_cols = static_cast<int>(col1 - col0);
    const int round = staged_round_columns<Acc>(children, full_cols, stage.bytes);
    const int staged_trips = (full_cols + round - 1) / round;
    const int register_trips =
        (full_cols + kWarpSize - 1) / kWarpSize * ((children + kMergeBatch - 1) / kMergeBatch);
    if (staged_trips <= register_trips) {
      merge_staged_node<Acc>(parts, stage, store, root, slot0, span, children, D, col0, col1, is_root);
      return;
    }
  }
  for (std::int64_t col = col0 + lane_id(); col < col1; col += kWarpSize) {
    Acc acc;
    merge_in_order(acc, children, [&](int k) { return load((slot0 + k * span) * D + col); });
    if (is_root) root(col, acc);
    else store(acc, slot0 * D + col);
  }
  __syncwarp();
}

// The merge tree (segment_geometry.h, climb_merge_tree) of one (row, column tile), run by a warp that has just
// stored the partials of its chunk `chunk` of `chunks` >= 2 for the tile's columns. The row's partials sit in
// slots first .. first + chunks - 1 (a slot holds D columns: `load(at)` / `store(acc, at)` at at = slot * D +
// column; loads must bypass L1, other SMs wrote them), its counters at L.arrivals[(first + c) * tiles + tile].
// Inner nodes are stored to their slot; the root's column results go to root(col, acc). Returns true
// (warp-uniform) when this warp merged the root. Called by the whole warp.
// The arrival is CUDA's threadfence reduction: publish, count; the last arrival fences before it reads, so it
// sees every sibling's stores. The counters pick the warp, never the order.
template <typename Acc, bool kStaged, typename OffsetT, typename Load, typename Store, typename Root>
__device__ __forceinline__ bool merge_tile_partials(const SegmentLayout<OffsetT>& L, std::int64_t tile,
                                                    std::int64_t first, std::int64_t chunk, std::int64_t chunks,
                                                    Load load, Store store, Root root, const PartialArrays& parts) {
  const SegmentGeometry& g = L.geometry;
  std::int64_t col0 = 0, col1 = 0;
  tile_columns(g, tile, col0, col1);
  auto arrive = [&](std::int64_t counter) {
    __threadfence();
    __syncwarp();
    int arrived = 0;
    if (lane_id() == 0) arrived = atomicAdd(L.arrivals + (first + counter) * g.tiles + tile, 1);
    return __shfl_sync(0xffffffffu, arrived, 0);
  };
  auto merge = [&](std::int64_t child0, std::int64_t span, std::int64_t children, bool is_root) {
    __threadfence();
    __syncwarp();  // orders lane 0's acquire (its atomic, then the fence) before every lane's loads
    const MergeStage stage = kStaged ? merge_stage(L) : MergeStage{0, 0};
    merge_node<Acc, kStaged>(load, store, root, parts, stage, first + child0, span, static_cast<int>(children),
                             g.inner, col0, col1, is_root);
  };
  return climb_merge_tree(chunk, chunks, arrive, merge);
}

// Blocks for a persistent segment kernel that walks `warp_items` warp-sized items, with `shared_bytes` of
// dynamic shared memory per block.
template <typename Kernel>
inline Status persistent_grid(Kernel kernel, std::int64_t warp_items, unsigned& blocks, std::size_t shared_bytes = 0) {
  return resident_grid_size(kernel, kSegmentThreads, warp_items, kSegmentThreads / kWarpSize, blocks, shared_bytes);
}

// Dynamic shared memory of the first-pass kernel: stage_plan's copy of the plan (or none), then the warps' merge
// staging where the layout has it.
template <typename OffsetT>
inline std::size_t first_pass_shared_bytes(const SegmentLayout<OffsetT>& L) {
  return static_cast<std::size_t>(L.merge_stage_bytes > 0
                                      ? merge_stage_offset(L.batch) + kBlockWarps * std::int64_t{L.merge_stage_bytes}
                                      : first_pass_plan_bytes(L.batch));
}

// A first-pass kernel's shared memory past the 48 KB a block may use without opting in (a plan of up to 1024
// groups, 24.6 KB, 32 KB of merge staging, and stage_plan's 192 static bytes: the 48 KB count static and dynamic
// alike) needs the kernel's limit raised, before the occupancy queries too (they answer for the limit in force).
// Raised only then, so that a launch that fits pays for no attribute call, and then by one call: the static size
// and the device's limit are asked once per kernel and device (kernel_shared_limits). The limit is set again on
// every such launch, as shared_bytes_for_residency's: it belongs to the context.
inline Status allow_first_pass_shared(const void* kernel, std::size_t shared, const char* kernel_name) {
  constexpr std::size_t kDefaultLimit = 48 * 1024;
  KernelSharedLimits limits;
  RAGGED_RETURN_IF_ERROR(kernel_shared_limits(kernel, limits));
  if (shared + limits.static_bytes <= kDefaultLimit) return Status::kSuccess;
  return set_shared_limit(kernel, shared, limits.dynamic_max, kernel_name);
}

// The first-pass launch's layout and dynamic shared memory (`shared`): L.merge_stage_bytes lowered to what costs
// the kernel no resident block per SM (fit_merge_stage_bytes; 0 at worst: merges through registers), and the
// kernel's limit raised where the bytes need it. On an H100 / H200 (228 KB per SM) every first-pass kernel keeps the
// whole staging at any plan size (3 blocks of 58.6 KB at most); at 164 KB (A100) the 3-block kernels halve it for
// plans of more than about 117,000 rows, and at 100 KB (sm_86, sm_89) they keep it for a plan of one group only
// (and past 131,072 rows, where CUB's plan takes no shared memory; design.md).
template <typename Args, typename OffsetT>
inline Status fit_first_pass_shared(void (*kernel)(Args), SegmentLayout<OffsetT>& L, std::size_t& shared,
                                    const char* kernel_name) {
  const void* const entry = reinterpret_cast<const void*>(kernel);
  if (L.merge_stage_bytes > 0) {
    KernelSharedLimits limits;
    RAGGED_RETURN_IF_ERROR(kernel_shared_limits(entry, limits));
    // The limit first, for the largest staging that fits the kernel at all, so that the queries below see it (and
    // the launch: the staging taken is no larger).
    std::int64_t most = L.merge_stage_bytes;
    while (most >= kMergeStageMinBytes &&
           static_cast<std::size_t>(merge_stage_offset(L.batch) + kBlockWarps * most) > limits.dynamic_max)
      most /= 2;
    if (most >= kMergeStageMinBytes)
      RAGGED_RETURN_IF_ERROR(allow_first_pass_shared(
          entry, static_cast<std::size_t>(merge_stage_offset(L.batch) + kBlockWarps * most), kernel_name));
    Status status = Status::kSuccess;
    const auto resident = [&](std::int64_t bytes) {
      int blocks = 0;
      if (status == Status::kSuccess && static_cast<std::size_t>(bytes) <= limits.dynamic_max)
        status = resident_blocks_per_sm(entry, kSegmentThreads, static_cast<std::size_t>(bytes), blocks);
      return blocks;
    };
    L.merge_stage_bytes = static_cast<int>(fit_merge_stage_bytes(L.batch, most, resident));
    RAGGED_RETURN_IF_ERROR(status);
    shared = first_pass_shared_bytes(L);
    if (L.merge_stage_bytes > 0) return Status::kSuccess;
  }
  shared = first_pass_shared_bytes(L);  // the plan alone: up to 24.6 KB, under the default limit
  return allow_first_pass_shared(entry, shared, kernel_name);
}

// Launches a first- or second-pass kernel, which follows the kernel before it in the stream: as a programmatic
// dependent where the device allows it (grid_dependency.cuh). Those kernels call wait_for_prior_grid() first:
// everything they read but the input is written by the launches before them.
template <typename Args>
inline Status launch_following(void (*kernel)(Args), unsigned blocks, std::size_t shared, cudaStream_t stream,
                               const Args& args, const char* kernel_name) {
  bool dependent = false;
  RAGGED_RETURN_IF_ERROR(dependent_launch_available(kernel, dependent));
  return launch_after_prior(dependent, kernel_name, kernel, dim3(blocks), dim3(kSegmentThreads), shared, stream,
                            args);
}

// Whether an op's row pass is its scalar rows kernel (scalar_row_pass): D = 1, every element index in 32 bits,
// and not turned off (segment_scalar_rows_enabled).
template <typename OffsetT>
inline bool takes_scalar_rows(const SegmentLayout<OffsetT>& L) {
  return L.geometry.inner == 1 && L.nnz <= std::numeric_limits<std::int32_t>::max() && segment_scalar_rows_enabled();
}

// Sets the warp rows (SegmentGeometry::warp_row_tokens = kWarpRowTokens) in L's geometry, for both launches of a
// segment op, where its scalar row pass runs (scalar_rows: takes_scalar_rows, read once by the caller), they are
// not turned off (segment_warp_rows_enabled), they fit one chunk of one register tile (so that the op's streams
// and units would give them one statistic of 32 phases, whose order the warp keeps), and the rows average more
// than kWarpRowsMinMean
// tokens. Why the mean: the warp rows' pass reads the offsets again (4 or 8 bytes a row), which in the
// many-tiny-rows regime (rows of 0 to 4 tokens at D = 1: 8 bytes of floats a row on average, 4 of offsets, 4 of
// output) would add a quarter to the bytes moved, for rows none of which is a warp row. The results are the same
// bits either way, so a choice from the batch's mean leaves them batch-invariant.
template <typename OffsetT>
inline void take_warp_rows(SegmentLayout<OffsetT>& L, bool scalar_rows) {
  if (scalar_rows && segment_warp_rows_enabled() && kWarpRowTokens <= L.geometry.chunk_tokens &&
      L.geometry.sweeps == 1 && L.nnz > kWarpRowsMinMean * L.batch)
    L.geometry.warp_row_tokens = kWarpRowTokens;
}

// The first launches of every segment op: its row pass (`rows_kernel`, a kernel calling row_pass, which
// finishes the tiny and empty rows, writes group_work and zeroes the arrival counters), then, for plans of more
// than kKernelPlanGroups groups, CUB's scan of group_work into the plan (smaller plans are scanned by the
// first-pass kernel).
template <typename Args, typename OffsetT>
inline Status build_plan(void (*rows_kernel)(Args), const Args& args, const SegmentLayout<OffsetT>& L,
                         const char* kernel_name, cudaStream_t stream) {
  unsigned blocks = 0;
  // A warp per group of rows (row_pass), or per batch of 32 (subwarp_row_pass) or kWideBatchRows
  // (wide_short_row_pass).
  const std::int64_t rows_per_warp =
      !L.geometry.subwarp_rows ? kRowsPerGroup : L.geometry.narrow ? kWarpSize : kWideBatchRows;
  // Warp rows (warp_row_pass): a warp per row, as many as are resident.
  const std::int64_t warp_items =
      std::max({(L.batch + rows_per_warp - 1) / rows_per_warp, (arrival_words(L) + 1023) / 1024,
                L.geometry.warp_row_tokens > 0 ? L.batch : std::int64_t{0}});
  RAGGED_RETURN_IF_ERROR(persistent_grid(rows_kernel, warp_items, blocks));
  // The chain's first kernel: an ordinary launch (everything before the op is complete when it starts). It must
  // stay one: it zeroes the arrival counters with no wait, which a previous op on this workspace may still use.
  RAGGED_RETURN_IF_ERROR(
      launch_after_prior(false, kernel_name, rows_kernel, dim3(blocks), dim3(kSegmentThreads), 0, stream, args));
  if (plan_scanned_in_kernel(L.batch)) return Status::kSuccess;
  std::size_t bytes = L.cub_temp_bytes;
  return launch_segment_plan(L.cub_temp, bytes, L.group_work, row_groups(L.batch), L.plan, stream);
}

}  // namespace detail
}  // namespace ragged
