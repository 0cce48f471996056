// Internal: how the segment kernels split a ragged tensor [nnz, D] into warp-sized work, shared by the host
// (workspace sizes) and the device (the kernels). Every choice here depends only on D, the vector width and a
// row's own length, never on the other rows: that is what makes a row's result independent of its batch.
//
// - A row is "tiny" when it holds at most 32 elements (D <= 32): one lane finishes it on its own, in order, in
//   the row pass (below). Past D = 32, where 32 vectors are whole tokens (D / V lanes divide the warp), a row of
//   at most kSubwarpRowTokens tokens is tiny too, and a sub-warp of D / V lanes finishes it, each lane one vector
//   column in token order (subwarp_rows). At wider D (up to kWideShortRowMaxTiles column tiles) such a row's
//   sub-warp is the whole warp, lane j taking vector columns j, j + 32, ... (wide short rows).
// - Every other non-empty row is cut into chunks of `chunk_tokens` tokens, counted from the row's own start.
//   A chunk is further cut into column tiles when D is wide. One warp reduces one (chunk, tile) unit.
//     narrow (D / V <= 32 vectors): lane j reads vector column j % (D/V) of token j / (D/V) + phases * i,
//       so a warp covers `phases` tokens per pass with coalesced loads;
//     wide: lane j reads vector column 32 * tile + j of every token of the chunk.
//   A unit is `sweeps` register tiles of phases * items_per_lane tokens, streamed one after the other (softmax
//   uses several when a tile alone holds too few tokens per column: see softmax_min_chunk_tokens).
// - A row of several chunks writes one partial per chunk (per column tile), merged in the same kernel by a
//   tree of fixed shape: the warp that completes the last of up to kMergeFanIn siblings merges them
//   (climb_merge_tree, below).
// The split needs no host sync: a row pass (a warp per group of kRowsPerGroup rows) finishes the tiny rows and
// sums the work of the others per group; a scan of those sums is the "plan". A work item is found from it by a
// warp-wide search over the groups, then a warp scan over the rows of one group. The plan costs a few bytes per
// group rather than per row, and the offsets are read once for the tiny rows that dominate the many-rows regimes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fast_divmod.h"
#include "ragged/config.h"

namespace ragged {
namespace detail {

constexpr int kWarpSize = 32;
constexpr int kBlockWarps = 8;  // warps per block of every segment kernel (kSegmentThreads / kWarpSize)

struct SegmentGeometry {
  std::int64_t inner = 1;         // D
  int vec = 1;                    // V: elements per vector access
  std::int64_t vcols = 1;         // D / V
  bool narrow = true;             // vcols <= 32
  int phases = 1;                 // tokens per warp pass (narrow: 32 / vcols; wide: 1)
  std::int64_t tiles = 1;         // column tiles of 32 vectors (wide) or 1
  std::int64_t sweeps = 1;        // register tiles per unit
  std::int64_t chunk_tokens = 1;  // tokens per unit: phases * items_per_lane * sweeps
  std::int64_t tiny_tokens = 0;   // rows with 0 < length <= tiny_tokens are finished by the row pass
  bool subwarp_rows = false;      // ... by a sub-warp of vcols lanes per row (D > 32; a warp at wide D), not a lane
  // At D = 1 (the scalar row pass): rows with tiny_tokens < length <= warp_row_tokens are finished by a warp each
  // in the row pass (warp_row_pass); 0: none. Set by the launchers (take_warp_rows, segment_common.cuh).
  std::int64_t warp_row_tokens = 0;
  // Softmax: a row of 2 to local_finish_chunks chunks is written in the first pass (finishes_locally), longer
  // ones by a second pass; 1 for the reductions, which have no second pass.
  std::int64_t local_finish_chunks = 1;
  // Softmax: a longer row of at most this many tokens is a block row (is_block_row): one block of the second-pass
  // kernel holds each of its column tiles in shared memory. Set by the launcher from the device's shared memory
  // (0: none, as for the reductions).
  std::int64_t block_tokens = 0;
  // chunk_tokens and tiles as divisors: a row's chunk count and a unit's (chunk, tile) are divisions by them,
  // made for every row a walk passes.
  Divisor chunk_divisor;
  Divisor tile_divisor;
};

// Tokens of the rows a sub-warp finishes (SegmentGeometry::subwarp_rows): a lane holds one 16-byte vector of each,
// 64 bytes, loaded at once. Why: the tiny-row regime at D = 64 (rows of 0 to 4 tokens) took a warp per row in the
// first pass (a unit, or a row of a stream's window): its tokens spread over the warp's phases, merged by shuffles,
// and a step to the next row, for 256 to 1024 bytes (H200, a910134: float sum 77 us, copy_frac 0.33; bfloat16
// softmax 599 us, 0.056). A sub-warp has no merge, and a warp finishes 32 / vcols such rows at once.
constexpr int kSubwarpRowTokens = 4;

// Column tiles of the widest geometry whose short rows the row pass finishes, a warp per row (wide_short_row_pass,
// segment_common.cuh): D <= 1024 in float, 2048 in half / bfloat16, with 16-byte vectors. Why: rows of 0 to 4
// tokens at D = 1024 were units of the first pass, a warp per (row, column tile) of ~1 KB, each found by the unit
// walk (H200, 087a77a: float sum 80.5 us for 64 MiB, copy_frac 0.31, where the softmax backward, reading twice
// the bytes and writing them, took 73.9). Why a bound: a warp reads the whole row, so past it a few short rows
// would leave most warps idle where the units spread each row's tiles.
constexpr std::int64_t kWideShortRowMaxTiles = 8;

// Whether a geometry's short rows may take sub-warps: D > 32 (at most 32, a lane holds the whole row), 16-byte
// vectors, and either narrow with 32 vectors whole tokens, so that a warp holds a whole number of sub-warps, or
// wide with at most kWideShortRowMaxTiles column tiles (the sub-warp is then the whole warp).
RAGGED_HOST_DEVICE bool subwarp_rows_fit(const SegmentGeometry& g) {
  if (g.inner <= kWarpSize || g.vec == 1) return false;
  return g.narrow ? kWarpSize % g.vcols == 0 : g.tiles <= kWideShortRowMaxTiles;
}

// items_per_lane: how many vectors one lane holds per register tile (a tile is about 32 * items * V elements);
// a unit takes as many tiles as it needs to reach min_chunk_tokens tokens. subwarp_rows: the op has a sub-warp
// row pass (it takes one where subwarp_rows_fit).
inline SegmentGeometry make_segment_geometry(std::int64_t inner, int vec, std::int64_t items_per_lane,
                                             std::int64_t local_finish_chunks = 1, std::int64_t min_chunk_tokens = 1,
                                             bool subwarp_rows = false) {
  SegmentGeometry g;
  g.inner = inner;
  g.vec = vec;
  g.vcols = inner / vec;
  g.narrow = g.vcols <= kWarpSize;
  g.phases = g.narrow ? static_cast<int>(kWarpSize / (g.vcols > 0 ? g.vcols : 1)) : 1;
  g.tiles = g.narrow ? 1 : (g.vcols + kWarpSize - 1) / kWarpSize;
  const std::int64_t tile_tokens = g.phases * items_per_lane;
  g.sweeps = min_chunk_tokens > tile_tokens ? (min_chunk_tokens + tile_tokens - 1) / tile_tokens : 1;
  g.chunk_tokens = tile_tokens * g.sweeps;
  g.chunk_divisor = Divisor(g.chunk_tokens);
  g.tile_divisor = Divisor(g.tiles);
  g.tiny_tokens = inner <= kWarpSize ? kWarpSize / (inner > 0 ? inner : 1) : 0;
  if (subwarp_rows && subwarp_rows_fit(g)) {
    g.subwarp_rows = true;
    g.tiny_tokens = kSubwarpRowTokens;
  }
  g.local_finish_chunks = local_finish_chunks;
  return g;
}

// A row's share of the work (zero for tiny and empty rows); the plan is the scan of its sums over row groups.
struct RowWork {
  std::int64_t units = 0;          // (chunk, tile) units of the main pass
  std::int64_t partials = 0;       // chunks that write partials (0 unless the row has several chunks)
  // Softmax second-pass slots, kBlockWarps per block of that kernel, every row's a multiple of them: a row that
  // does not finish locally has a slot per unit (rounded up; the extra ones idle), a block row kBlockWarps per
  // column tile (one block's warps).
  std::int64_t second_units = 0;

  RAGGED_HOST_DEVICE RowWork operator+(const RowWork& o) const {
    return RowWork{units + o.units, partials + o.partials, second_units + o.second_units};
  }
  RAGGED_HOST_DEVICE RowWork operator-(const RowWork& o) const {
    return RowWork{units - o.units, partials - o.partials, second_units - o.second_units};
  }
};

// Rows per plan entry: the row pass gives a warp this many rows (kWarpSize at a time), and a work item's row is
// found inside its group by a warp scan of the group's rows.
constexpr std::int64_t kRowsPerGroup = 128;

RAGGED_HOST_DEVICE std::int64_t row_groups(std::int64_t batch) { return (batch + kRowsPerGroup - 1) / kRowsPerGroup; }

// Plans of at most this many groups (131072 rows) are scanned by each block of the first-pass kernel, into its
// shared memory (24 bytes a group), instead of by a CUB scan between the row pass and that kernel: it saves the
// scan's launches, and the units' group search then runs in shared memory rather than through L2.
constexpr std::int64_t kKernelPlanGroups = 1024;

RAGGED_HOST_DEVICE bool plan_scanned_in_kernel(std::int64_t batch) { return row_groups(batch) <= kKernelPlanGroups; }

RAGGED_HOST_DEVICE std::int64_t chunks_of(std::int64_t length, const SegmentGeometry& g) {
  return g.chunk_divisor.div_up(length);
}

// Unit `local` of a row (its index among the row's units): chunk local / tiles, column tile local % tiles.
struct UnitPlace {
  std::int64_t chunk;
  std::int64_t tile;
};

RAGGED_HOST_DEVICE UnitPlace unit_place(std::int64_t local, const SegmentGeometry& g) {
  const QuotRem r = g.tile_divisor.divmod(local);
  return UnitPlace{r.quot, r.rem};
}

// Softmax: a chunk's partial statistic costs 8 bytes per column forward (max, sum) and 4 backward, written
// once and read back. A chunk holds enough tokens that this stays at most 1/4 of what the chunk reads per column
// (one input forward, y and dy backward): 8 tokens of float forward but 16 of half / bfloat16, where a 32-float
// register tile at wide D holds only 4 (a unit then streams 4 tiles).
constexpr std::int64_t softmax_min_chunk_tokens(bool backward, std::size_t elem_size) {
  return static_cast<std::int64_t>(backward ? 8 / elem_size : 32 / elem_size);
}

// Softmax: a row of several chunks, but at most this many, is written by the warp that merges its statistics
// (the root of its merge tree, per column tile) right away, while the row is still in L2 from the first pass,
// so such rows cost one DRAM read and one write. Longer rows are written by the second-pass kernel (two reads),
// spread over every warp. One warp writes the whole (row, tile), so the limit bounds the tail it adds: at 32
// chunks the first H100 run (docs/results/2026-11-24-*) had bf16 softmax at D = 1024 (rows of ~16 chunks x 4
// tiles) take 862 us at 8.8% achieved occupancy for 64 MiB, the second pass idle. 4 chunks are 4 x 1024
// elements at D = 1, or 32 (float) to 64 (half) tokens of a 32-vector column tile at wide D.
constexpr std::int64_t kLocalFinishChunks = 4;

RAGGED_HOST_DEVICE bool finishes_locally(std::int64_t chunks, const SegmentGeometry& g) {
  return chunks > 1 && chunks <= g.local_finish_chunks;
}

RAGGED_HOST_DEVICE bool is_tiny(std::int64_t length, const SegmentGeometry& g) {
  return length == 0 || length <= g.tiny_tokens;
}

// Rows at D = 1 that a whole warp finishes in the row pass of the reductions and the softmax, in one pass of loads
// (SegmentGeometry::warp_row_tokens). Why: the H200 run of 087a77a had the float sum over 65,536 rows of 0 to 512
// tokens (uniform, D = 1) at 65.8 us and the max at 95.6 us, where the bytes at copy speed take ~17: the streams
// that took these rows pay per row a probe of the next rows' offsets, a window over every line of their group and
// the cursor's 64-bit bookkeeping, at 16 warps per SM (128 registers). A warp of the row pass (4 blocks per SM,
// 64 registers) loads such a row at once, 16 tokens a lane, and adds them in the unit walk's order (lane p: tokens
// p, p + 32, ... in order, then merge_phases' tree), so the results are the same bits. The softmax (171 us there
// for the float forward, copy_frac 0.195) holds the row in registers and writes it from there, as a window does.
constexpr std::int64_t kWarpRowTokens = 512;
// The segment ops take warp rows where their rows average more than this many tokens (take_warp_rows).
constexpr std::int64_t kWarpRowsMinMean = 16;

RAGGED_HOST_DEVICE bool is_warp_row(std::int64_t length, const SegmentGeometry& g) {
  return length > g.tiny_tokens && length <= g.warp_row_tokens;
}

// Whether the row pass finishes a row (empty, tiny or a warp row): it has no work in the plan.
RAGGED_HOST_DEVICE bool finished_by_row_pass(std::int64_t length, const SegmentGeometry& g) {
  return is_tiny(length, g) || is_warp_row(length, g);
}

// Softmax: a row too long to finish locally that one block can hold (per column tile) in shared memory. A block
// of the second-pass kernel reads it once into shared memory, folding the statistic as it goes, and writes it
// from there: one read and one write, where its chunks would take a first pass, a merge tree and a second read.
RAGGED_HOST_DEVICE bool is_block_row(std::int64_t length, const SegmentGeometry& g) {
  return length <= g.block_tokens && chunks_of(length, g) > g.local_finish_chunks;
}

// Second-pass slots of a row with `units` units in that pass: whole blocks' worth (RowWork::second_units).
RAGGED_HOST_DEVICE std::int64_t second_pass_slots(std::int64_t units) {
  return (units + kBlockWarps - 1) / kBlockWarps * kBlockWarps;
}

// Elements of one token of a block row that its block holds: the whole row's D at narrow D, one column tile (32
// vectors, the last tile's unused columns included) at wide D.
RAGGED_HOST_DEVICE std::int64_t block_row_pitch(const SegmentGeometry& g) {
  return g.narrow ? g.inner : kWarpSize * g.vec;
}

// The longest block row that `staging_bytes` of shared memory hold: its inputs (x; y and dy backward) per token.
inline std::int64_t softmax_block_tokens(const SegmentGeometry& g, std::size_t elem_size, bool backward,
                                         std::size_t staging_bytes) {
  const std::int64_t token_bytes = block_row_pitch(g) * static_cast<std::int64_t>(elem_size) * (backward ? 2 : 1);
  return static_cast<std::int64_t>(staging_bytes) / token_bytes;
}

RAGGED_HOST_DEVICE RowWork row_work(std::int64_t length, const SegmentGeometry& g) {
  if (finished_by_row_pass(length, g)) return RowWork{};
  if (is_block_row(length, g)) return RowWork{0, 0, kBlockWarps * g.tiles};
  const std::int64_t chunks = chunks_of(length, g);
  const bool second_pass = chunks > 1 && !finishes_locally(chunks, g);  // read by softmax only
  return RowWork{chunks * g.tiles, chunks > 1 ? chunks : 0, second_pass ? second_pass_slots(chunks * g.tiles) : 0};
}

// Whether segment_reduce may stream this geometry's one-chunk rows (segment_reduce.cuh, stream_rows): narrow D
// where 32 vectors are a whole number of tokens, so a line of 32 consecutive vectors of the flat values is
// `phases` whole tokens and a lane always holds the same vector column.
RAGGED_HOST_DEVICE bool streams_rows(const SegmentGeometry& g) { return g.narrow && kWarpSize % g.vcols == 0; }

// Whether segment_softmax may stream this geometry's short rows (segment_softmax.cuh, stream_softmax_rows): as
// streams_rows, with a unit of one register tile. A unit of several (sweeps) folds them one after the other,
// rescaling its sum at each, where a stream's window takes the row's max over all its items first.
RAGGED_HOST_DEVICE bool softmax_streams_rows(const SegmentGeometry& g) { return streams_rows(g) && g.sweeps == 1; }

// Each warp of a unit kernel walks a contiguous share of the units, [warp_share_begin(n, warps, w),
// warp_share_begin(n, warps, w + 1)): shares differ by at most one unit, as a grid-stride loop's would, but
// consecutive units lie in the same row or a few rows apart, so one lookup (locate_row) serves the whole share
// and the next unit's row is found by stepping (step_cursor). A lookup per unit (a group search, then a warp scan
// of up to 128 rows' work) is several hundred instructions (design.md): several times the work of a unit of a
// few tokens at wide D.
RAGGED_HOST_DEVICE std::int64_t warp_share_begin(std::int64_t items, std::int64_t warps, std::int64_t warp) {
  const QuotRem share = divmod_nonnegative(items, warps);
  return warp * share.quot + (warp < share.rem ? warp : share.rem);
}

// A warp's place in its walk: the row that owns the current unit, the work of every row before it (a prefix of
// the plan, as locate_row finds it), the row's clamped range and its own work.
struct UnitCursor {
  std::int64_t row = 0;
  RowWork before;
  std::int64_t begin = 0;
  std::int64_t length = 0;
  RowWork work;
};

// Rows step_cursor passes before it gives up: rows with no units of the field (empty, tiny, or for the softmax
// second pass, finished locally) can be many in a row, and past a few a fresh lookup is cheaper.
constexpr int kCursorSteps = 8;

// Moves c forward to the row that owns item u of `field`, given u >= c.before.*field (the walk only goes
// forward): the next rows' ranges come from range(row, begin, length), their work from row_work. Returns false,
// with c part of the way, if that row lies more than kCursorSteps rows on (the caller then looks u up afresh).
template <typename Range>
RAGGED_HOST_DEVICE bool step_cursor(UnitCursor& c, std::int64_t u, std::int64_t RowWork::*field, std::int64_t batch,
                                    const SegmentGeometry& g, Range range) {
  // Not unrolled: each step waits on its row's offsets anyway, and unrolled the 8 steps were ~16 KB of SASS in
  // every unit kernel. (The host compiler, which also sees this function, knows no such pragma.)
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
  for (int step = 0; step < kCursorSteps; ++step) {
    if (u < c.before.*field + c.work.*field) return true;
    if (c.row + 1 >= batch) return false;  // u past the plan: not for a u < plan[groups].*field
    c.before = c.before + c.work;
    c.row += 1;
    range(c.row, c.begin, c.length);
    c.work = row_work(c.length, g);
  }
  return u < c.before.*field + c.work.*field;
}

// Upper bound of the partial chunks of a batch of `batch` rows over nnz rows of values. Only a row of several
// chunks writes partials; it is longer than chunk_tokens (C), so at most m = min(batch, nnz / (C + 1)) rows do,
// each ceil(L / C) <= (L + C - 1) / C of them: at most (nnz + m (C - 1)) / C in all, and none when m = 0. That is
// 2 nnz / (C + 1) when every row is C + 1 long (the bound is reached), but about nnz / C when a few rows hold the
// values, where the former 2 nnz / C + 1 asked twice what they use. Kernels still check against this bound
// because malformed offsets can make clamped rows overlap.
inline std::int64_t max_partial_chunks(std::int64_t nnz, std::int64_t batch, const SegmentGeometry& g) {
  const std::int64_t c = g.chunk_tokens;
  const std::int64_t split_rows = batch < nnz / (c + 1) ? batch : nnz / (c + 1);
  return split_rows == 0 ? 0 : (nnz + split_rows * (c - 1)) / c;
}

// The merge tree of a (row, column tile) of `chunks` >= 2 chunks. Level 0 is the chunks' partials; node j of
// level l + 1 merges nodes jF .. jF + F - 1 of level l (fewer for the last node), in that order, and is stored in
// the partial slot of its first chunk; the level with one node is the root, the row's result. The shape, and so
// the order of every merge, depends only on the chunk count, whichever warp runs a merge: results stay
// deterministic and independent of the batch. Why a tree: merged by one warp after the main pass (the former
// combine kernel), the partials of one huge row cost an L2 round trip per 16 of them per column: at D = 64 a
// lane merged all 2048 chunks of a 64 MB float row, 128 trips (~40 us at ~0.3 us, against ~22 us for the data),
// and softmax's 16K, 1024 trips. The tree runs its merges while the other warps stream, and leaves
// log_F(chunks) of them after the last chunk (3 for 2048), each its fences and atomic plus one round trip (a node
// of at most 32 (child, column) pairs), a few through shared memory (wider nodes with 16-byte vectors:
// kMergeStageBytes below), or F / kMergeBatch = 4 per column (the others; segment_common.cuh).
// A warp that has stored its chunk climbs: arrive(c) returns how many warps had arrived before it at counter c
// (its parent's); the last of the parent's children merges them, merge(first, span, children, root) with child
// k in chunk slot first + k * span, and climbs on. Returns whether this warp merged the root.
// Counters: the level-1 parents take 0 .. n1 - 1, level 2 the next n2, ...; n1 + n2 + ... < chunks / (F - 1) +
// levels <= chunks, so a row's counters fit in the range of its partial slots.
constexpr std::int64_t kMergeFanIn = 16;

RAGGED_HOST_DEVICE std::int64_t merge_parents(std::int64_t nodes) { return (nodes + kMergeFanIn - 1) / kMergeFanIn; }

// Merges of more (child, column) pairs than a warp has lanes go through shared memory (merge_staged_node,
// segment_common.cuh) where partial rows are 16-byte aligned (16-byte vectors: D a multiple of V): each
// warp of a first-pass kernel has kMergeStageBytes there, into which cp.async copies a node's children, column
// range after column range, with no registers held for them. Why: a lane merged such a node a column at a time, 4
// children per round trip (what the unit kernels' registers allow inlined), so a node of 16 children and 128
// float columns (D = 1024, 16-byte vectors) cost 16 L2 round trips, 32 in half / bfloat16, and after a huge row's
// last chunk its tree's levels follow one another (one huge float row took 65 us for the max at D = 1024 against
// 35.6 at D = 1, H200, 087a77a). Staged, that node is 2 round trips for a sum, 4 for softmax's (max, sum) and 7 for
// max / min's (value, index).
// A warp stages less, down to kMergeStageMinBytes (merge staging's round trips double with each halving), where the
// whole of it would cost its first-pass kernel a resident block per SM (fit_merge_stage_bytes): at 100 KB of shared
// memory per SM (sm_86, sm_89) the 32 KB a block of 8 warps takes would leave a block of the float reductions' 3
// no room. The least still holds 4 columns of 16 children of the widest partial (a float and a 64-bit index).
constexpr std::int64_t kMergeStageBytes = 4096;
constexpr std::int64_t kMergeStageMinBytes = 1024;
static_assert(kMergeStageMinBytes >= 4 * kMergeFanIn * (4 + 8), "a staged round must hold 4 columns");

RAGGED_HOST_DEVICE bool stages_merges(const SegmentGeometry& g) { return g.vec > 1; }

// Dynamic shared memory of a first-pass kernel: the plan its blocks scan (plan_scanned_in_kernel), then, 16-byte
// aligned, each warp's merge staging where the geometry stages merges.
RAGGED_HOST_DEVICE std::int64_t first_pass_plan_bytes(std::int64_t batch) {
  return plan_scanned_in_kernel(batch) ? (row_groups(batch) + 1) * static_cast<std::int64_t>(sizeof(RowWork)) : 0;
}
RAGGED_HOST_DEVICE std::int64_t merge_stage_offset(std::int64_t batch) {
  return (first_pass_plan_bytes(batch) + 15) / 16 * 16;
}

// The merge staging per warp a first-pass launch takes: the most of `most`, most / 2, most / 4, ... down to
// kMergeStageMinBytes, with which as many blocks stay resident per SM as with the plan alone; 0 (merges through
// registers) where none does, or where `most` is 0. resident(bytes): blocks per SM of the kernel with `bytes` of
// dynamic shared memory (0 where they pass its limit).
template <typename Resident>
std::int64_t fit_merge_stage_bytes(std::int64_t batch, std::int64_t most, Resident resident) {
  if (most <= 0) return 0;
  const int without = resident(first_pass_plan_bytes(batch));
  for (std::int64_t bytes = most; bytes >= kMergeStageMinBytes; bytes /= 2)
    if (resident(merge_stage_offset(batch) + kBlockWarps * bytes) >= without) return bytes;
  return 0;
}

template <typename Arrive, typename Merge>
RAGGED_HOST_DEVICE bool climb_merge_tree(std::int64_t chunk, std::int64_t chunks, Arrive arrive, Merge merge) {
  std::int64_t node = chunk, nodes = chunks, span = 1, counters = 0;
  while (true) {
    const std::int64_t parent = node / kMergeFanIn;
    const std::int64_t first = parent * kMergeFanIn;
    const std::int64_t children = nodes - first < kMergeFanIn ? nodes - first : kMergeFanIn;
    if (arrive(counters + parent) != children - 1) return false;
    const bool root = nodes <= kMergeFanIn;
    merge(first * span, span, children, root);
    if (root) return true;
    counters += merge_parents(nodes);
    nodes = merge_parents(nodes);
    node = parent;
    span *= kMergeFanIn;
  }
}

}  // namespace detail
}  // namespace ragged

namespace ragged {
namespace detail {

// 16-byte accesses when every row start is 16-byte aligned (D a multiple of the vector and an aligned base
// pointer, as cudaMalloc gives); otherwise one element at a time. The vector width fixes the phase layout and
// so the summation order: for bitwise batch invariance, keep the values' base pointer 16-byte aligned.
inline int segment_vector_width(std::int64_t inner, std::size_t elem_size, const void* values) {
  const std::int64_t vec = static_cast<std::int64_t>(16 / elem_size);
  const bool aligned = (reinterpret_cast<std::uintptr_t>(values) % 16) == 0;
  return (inner % vec == 0 && aligned) ? static_cast<int>(vec) : 1;
}

}  // namespace detail
}  // namespace ragged
