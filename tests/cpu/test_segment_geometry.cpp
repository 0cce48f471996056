// The work split of the segment kernels (kernels/segment_geometry.h), on the host: the per-row work the row pass
// sums into the plan, the bounds the workspace is sized from, and the merge tree's arrival protocol. The kernels
// trust these numbers for memory safety (partial slots, arrival counters), so they are checked here on random
// lengths for every geometry, and the tree on every chunk count up to thousands in random arrival orders.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "../../kernels/segment_geometry.h"
#include "../../kernels/segment_launch.h"
#include "ragged/view.h"
#include "common/test_util.h"

using ragged::detail::chunks_of;
using ragged::detail::climb_merge_tree;
using ragged::detail::finished_by_row_pass;
using ragged::detail::finishes_locally;
using ragged::detail::is_block_row;
using ragged::detail::is_tiny;
using ragged::detail::is_warp_row;
using ragged::detail::kBlockWarps;
using ragged::detail::kLocalFinishChunks;
using ragged::detail::kMergeFanIn;
using ragged::detail::kReduceFloatsPerLane;
using ragged::detail::kRowsPerGroup;
using ragged::detail::kSegmentPrefetchGroups;
using ragged::detail::kUnitPrefetchMaxBytes;
using ragged::detail::kWarpRowTokens;
using ragged::detail::kWarpSize;
using ragged::detail::make_segment_geometry;
using ragged::detail::max_partial_chunks;
using ragged::detail::row_groups;
using ragged::detail::row_work;
using ragged::detail::RowWork;
using ragged::detail::second_pass_slots;
using ragged::detail::SegmentGeometry;
using ragged::detail::SegmentLayout;
using ragged::detail::softmax_min_chunk_tokens;
using ragged::detail::take_unit_prefetch;

namespace {

// Every geometry the library builds: reduce (256 floats per lane) and softmax (32 forward, 16 backward, with the
// local finish and the minimum chunk of the element size), at vector width 1 and 16 bytes of float / half, with
// and without the sub-warp row pass.
std::vector<SegmentGeometry> all_geometries(std::int64_t inner) {
  std::vector<SegmentGeometry> gs;
  for (std::size_t elem_size : {4, 2}) {
    for (int vec : {1, static_cast<int>(16 / elem_size)}) {
      if (inner % vec != 0) continue;
      for (bool subwarp : {false, true}) {
        gs.push_back(make_segment_geometry(inner, vec, 256 / vec, 1, 1, subwarp));
        for (bool backward : {false, true})
          gs.push_back(make_segment_geometry(inner, vec, (backward ? 16 : 32) / vec, kLocalFinishChunks,
                                             softmax_min_chunk_tokens(backward, elem_size), subwarp));
      }
    }
  }
  return gs;
}

// The geometries, and each softmax one again with block rows of up to 20 chunks (the launcher sets block_tokens
// from the device's shared memory).
std::vector<SegmentGeometry> with_block_rows(std::vector<SegmentGeometry> gs) {
  const std::size_t count = gs.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (gs[i].local_finish_chunks == 1) continue;  // a reduction
    SegmentGeometry g = gs[i];
    g.block_tokens = 20 * g.chunk_tokens;
    gs.push_back(g);
  }
  return gs;
}

// The geometries, and the D = 1 ones again with warp rows (the launchers set warp_row_tokens where the scalar row
// pass runs: take_warp_rows).
std::vector<SegmentGeometry> with_warp_rows(std::vector<SegmentGeometry> gs) {
  const std::size_t count = gs.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (gs[i].inner != 1) continue;
    SegmentGeometry g = gs[i];
    g.warp_row_tokens = kWarpRowTokens;
    gs.push_back(g);
  }
  return gs;
}

std::vector<std::int64_t> random_lengths(std::mt19937_64& rng, std::int64_t chunk_tokens) {
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<std::int64_t> tiny(0, 4), short_row(0, 2 * chunk_tokens),
      long_row(0, 40 * chunk_tokens);
  std::vector<std::int64_t> lengths(std::uniform_int_distribution<std::size_t>(0, 400)(rng));
  for (auto& l : lengths) {
    const int k = kind(rng);
    l = k == 0 ? tiny(rng) : k == 1 ? short_row(rng) : k == 2 ? long_row(rng) : chunk_tokens * tiny(rng);
  }
  return lengths;
}

}  // namespace

TEST_CASE("segment geometry: lanes, phases and tiles cover D exactly once", "[segment][geometry]") {
  for (std::int64_t inner : {1, 2, 3, 4, 8, 31, 32, 33, 64, 100, 128, 1000, 1024, 4096}) {
    for (const SegmentGeometry& g : all_geometries(inner)) {
      INFO("D = " << inner << ", vec = " << g.vec << ", chunk_tokens = " << g.chunk_tokens);
      REQUIRE(g.vcols * g.vec == inner);
      REQUIRE(g.chunk_tokens % g.phases == 0);
      REQUIRE(g.sweeps >= 1);
      REQUIRE(g.chunk_tokens % g.sweeps == 0);
      if (g.narrow) {
        REQUIRE(g.vcols * g.phases <= 32);
        REQUIRE(g.tiles == 1);
      } else {
        REQUIRE(g.phases == 1);
        REQUIRE(g.tiles * 32 >= g.vcols);
        REQUIRE((g.tiles - 1) * 32 < g.vcols);
      }
      if (g.subwarp_rows) {
        // Past D = 32 with 16-byte vectors, a short row's sub-warp is vcols lanes and a warp holds whole
        // sub-warps, or, at wide D, the sub-warp is the warp and its lanes walk at most kWideShortRowMaxTiles
        // column tiles.
        REQUIRE(inner > 32);
        REQUIRE(g.vec > 1);
        if (g.narrow) REQUIRE(32 % g.vcols == 0);
        else REQUIRE(g.tiles <= ragged::detail::kWideShortRowMaxTiles);
        REQUIRE(g.tiny_tokens == ragged::detail::kSubwarpRowTokens);
      } else {
        // A tiny row fits one lane: at most 32 elements.
        REQUIRE(g.tiny_tokens * inner <= 32);
        REQUIRE((inner > 32) == (g.tiny_tokens == 0));
      }
    }
  }
}

TEST_CASE("segment geometry: which shapes take the sub-warp row pass", "[segment][geometry]") {
  // D > 32 with 16-byte vectors, and either narrow with 32 / vcols whole rows a warp (D = 64 and 128 in float, 64
  // to 256 in half) or wide with at most 8 column tiles (a warp per row: D = 132 to 1024 in float, 264 to 2048 in
  // half); never at vector width 1, nor where it was not asked for.
  struct Case {
    std::int64_t inner;
    int vec;
    bool subwarp;
  };
  const Case cases[] = {{32, 4, false},  {33, 1, false},   {48, 4, false},   {64, 4, true},     {64, 1, false},
                        {96, 4, false},  {128, 4, true},   {132, 4, true},   {256, 4, true},    {264, 4, true},
                        {1000, 4, true}, {1024, 4, true},  {1028, 4, false}, {4096, 4, false},  {1000, 1, false},
                        {256, 1, false}, {64, 8, true},    {128, 8, true},   {256, 8, true},    {512, 8, true},
                        {40, 8, false},  {1000, 8, true},  {2048, 8, true},  {2056, 8, false}, {264, 8, true}};
  for (const Case& c : cases) {
    INFO("D = " << c.inner << ", vec = " << c.vec);
    REQUIRE(make_segment_geometry(c.inner, c.vec, 256 / c.vec, 1, 1, true).subwarp_rows == c.subwarp);
    REQUIRE_FALSE(make_segment_geometry(c.inner, c.vec, 256 / c.vec).subwarp_rows);
  }
}

TEST_CASE("segment row work: what each row contributes to the plan", "[segment][geometry]") {
  auto rng = ragged::test::make_rng(311);
  for (std::int64_t inner : {1, 3, 64, 1000}) {
    for (const SegmentGeometry& g : with_warp_rows(with_block_rows(all_geometries(inner)))) {
      const std::vector<std::int64_t> lengths = random_lengths(rng, g.chunk_tokens);
      RowWork total;
      std::int64_t nnz = 0;
      for (const std::int64_t length : lengths) {
        INFO("D = " << inner << ", vec = " << g.vec << ", chunk_tokens = " << g.chunk_tokens << ", length = "
                    << length << ", block_tokens = " << g.block_tokens << ", warp_row_tokens = " << g.warp_row_tokens);
        const RowWork w = row_work(length, g);
        REQUIRE(w.second_units % kBlockWarps == 0);  // whole blocks' worth of second-pass slots
        nnz += length;
        total = total + w;
        if (finished_by_row_pass(length, g)) {  // tiny or a warp row: no work in the plan
          REQUIRE(w.units == 0);
          REQUIRE(w.partials == 0);
          REQUIRE(w.second_units == 0);
          continue;
        }
        const std::int64_t chunks = chunks_of(length, g);
        if (is_block_row(length, g)) {  // softmax: one block of the second pass per column tile, nothing else
          REQUIRE(length <= g.block_tokens);
          REQUIRE(chunks > g.local_finish_chunks);
          REQUIRE(w.units == 0);
          REQUIRE(w.partials == 0);
          REQUIRE(w.second_units == kBlockWarps * g.tiles);
          continue;
        }
        REQUIRE((length > g.block_tokens || chunks <= g.local_finish_chunks));
        REQUIRE(chunks >= 1);
        REQUIRE((chunks - 1) * g.chunk_tokens < length);
        REQUIRE(chunks * g.chunk_tokens >= length);
        REQUIRE(w.units == chunks * g.tiles);
        REQUIRE(w.partials == (chunks > 1 ? chunks : 0));
        // Softmax rows of several chunks are written either by the warp that merges their root (up to the
        // limit) or by the second pass; never both, never neither.
        const bool second_pass = chunks > 1 && !finishes_locally(chunks, g);
        REQUIRE(w.second_units == (second_pass ? second_pass_slots(w.units) : 0));
        REQUIRE(w.second_units - (second_pass ? w.units : 0) < kBlockWarps);  // idle slots: fewer than a block
        if (g.local_finish_chunks == 1) REQUIRE_FALSE(finishes_locally(chunks, g));  // reductions
      }
      // The workspace holds max_partial_chunks(nnz, batch) partial slots; the kernels' slots must fit in it.
      const std::int64_t rows = static_cast<std::int64_t>(lengths.size());
      REQUIRE(total.partials <= max_partial_chunks(nnz, rows, g));
      // The launchers size their grids from these host-side bounds on the units.
      REQUIRE(total.units <= (nnz / g.chunk_tokens + std::min(rows, nnz)) * g.tiles);
    }
  }
}

// The partial slots the workspace holds: no batch of `batch` rows over nnz values needs more, and the batch that
// needs the most (as many rows of chunk_tokens + 1 as fit, the first also taking what is left) needs exactly as
// many, so the bound asks no more workspace than some input uses.
TEST_CASE("segment partial slots: max_partial_chunks bounds every batch and is reached", "[segment][geometry]") {
  auto rng = ragged::test::make_rng(317);
  for (std::int64_t inner : {1, 3, 64, 1000}) {
    for (const SegmentGeometry& g : all_geometries(inner)) {
      const std::int64_t c = g.chunk_tokens;
      for (std::int64_t nnz : {std::int64_t{0}, c, c + 1, 2 * c + 1, 7 * c + 3, 1000 * c + 17}) {
        for (std::int64_t batch : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, std::int64_t{1000}}) {
          INFO("D = " << inner << ", vec = " << g.vec << ", chunk_tokens = " << c << ", nnz = " << nnz
                      << ", batch = " << batch);
          const std::int64_t bound = max_partial_chunks(nnz, batch, g);
          const std::int64_t split = std::min(batch, nnz / (c + 1));
          std::vector<std::int64_t> worst(static_cast<std::size_t>(batch), 0);
          for (std::int64_t i = 0; i < split; ++i) worst[static_cast<std::size_t>(i)] = c + 1;
          if (split > 0) worst[0] += nnz - split * (c + 1);
          std::int64_t partials = 0;
          for (const std::int64_t length : worst) partials += row_work(length, g).partials;
          if (g.tiny_tokens <= c) REQUIRE(partials == bound);  // rows of c + 1 tokens are not tiny
          REQUIRE(partials <= bound);
          if (batch == 0 || nnz == 0) REQUIRE(bound == 0);
          // Random batches of the same size and at most nnz values.
          for (int trial = 0; trial < 20 && batch > 0; ++trial) {
            std::vector<std::int64_t> cuts(static_cast<std::size_t>(batch) + 1);
            std::uniform_int_distribution<std::int64_t> at(0, nnz);
            for (auto& cut : cuts) cut = at(rng);
            std::sort(cuts.begin(), cuts.end());
            std::int64_t sum = 0;
            for (std::size_t b = 0; b + 1 < cuts.size(); ++b) sum += row_work(cuts[b + 1] - cuts[b], g).partials;
            REQUIRE(sum <= bound);
          }
        }
      }
    }
  }
}

TEST_CASE("segment warp rows: the D = 1 rows past tiny, up to one pass of a warp", "[segment][geometry]") {
  // reduce_warp_row and normalize_warp_row hold a row in one pass of kWarpRowTokens / 32 tokens a lane and take
  // them in the unit walk's order, which is a one-chunk row's: so a warp row must be one pass, and one chunk of
  // one register tile (of the reductions, of the softmax forward and of its backward), long at most.
  STATIC_REQUIRE(kWarpRowTokens % kWarpSize == 0);
  for (const SegmentGeometry& base : all_geometries(1)) {
    SegmentGeometry g = base;
    g.warp_row_tokens = kWarpRowTokens;
    INFO("vec = " << g.vec << ", chunk_tokens = " << g.chunk_tokens << ", tiny_tokens = " << g.tiny_tokens);
    REQUIRE(g.tiny_tokens == kWarpSize);
    REQUIRE(kWarpRowTokens <= g.chunk_tokens);
    REQUIRE(g.sweeps == 1);  // one register tile: take_warp_rows takes none otherwise
    for (std::int64_t length = 0; length <= 2 * kWarpRowTokens + 1; ++length) {
      INFO("length " << length);
      const bool warp_row = length > kWarpSize && length <= kWarpRowTokens;
      REQUIRE(is_warp_row(length, g) == warp_row);
      REQUIRE_FALSE(is_warp_row(length, base));  // none unless the launcher sets them
      REQUIRE(finished_by_row_pass(length, g) == (length <= kWarpRowTokens));
      REQUIRE(finished_by_row_pass(length, base) == (length <= kWarpSize));
      // A row past them has the work it has without warp rows.
      const RowWork w = row_work(length, g), without = row_work(length, base);
      REQUIRE(w.units == (length <= kWarpRowTokens ? 0 : without.units));
      REQUIRE(w.partials == (length <= kWarpRowTokens ? 0 : without.partials));
      REQUIRE(w.second_units == (length <= kWarpRowTokens ? 0 : without.second_units));
    }
  }
}

TEST_CASE("segment row groups: every row belongs to exactly one plan entry", "[segment][geometry]") {
  REQUIRE(row_groups(0) == 0);
  REQUIRE(row_groups(1) == 1);
  REQUIRE(row_groups(kRowsPerGroup) == 1);
  REQUIRE(row_groups(kRowsPerGroup + 1) == 2);
  // kRowsPerGroup is a whole number of warps: the row pass and the row search take 32 rows at a time.
  REQUIRE(kRowsPerGroup % 32 == 0);
  const std::int64_t huge = std::int64_t{1} << 59;  // check_batch's bound is INT64_MAX / 16
  REQUIRE(row_groups(huge) * kRowsPerGroup >= huge);
  REQUIRE((row_groups(huge) - 1) * kRowsPerGroup < huge);
}

TEST_CASE("softmax chunks: partial statistics cost at most 1/4 of a chunk's reads, with the fewest sweeps",
          "[segment][geometry]") {
  for (std::int64_t inner : {1, 2, 3, 8, 32, 64, 128, 256, 264, 1000, 1024, 4096}) {
    for (std::size_t elem_size : {4, 2}) {
      for (int vec : {1, static_cast<int>(16 / elem_size)}) {
        if (inner % vec != 0) continue;
        for (bool backward : {false, true}) {
          const std::int64_t items = (backward ? 16 : 32) / vec;
          const std::int64_t min_tokens = softmax_min_chunk_tokens(backward, elem_size);
          const SegmentGeometry g = make_segment_geometry(inner, vec, items, kLocalFinishChunks, min_tokens);
          INFO("D = " << inner << ", element bytes " << elem_size << ", vec = " << vec
                      << (backward ? ", backward" : ", forward") << ": chunk_tokens = " << g.chunk_tokens
                      << ", sweeps = " << g.sweeps);
          const std::int64_t tile_tokens = g.phases * items;
          REQUIRE(g.chunk_tokens == tile_tokens * g.sweeps);
          const std::int64_t stat_bytes = backward ? 4 : 8, inputs = backward ? 2 : 1;
          REQUIRE(4 * stat_bytes <= g.chunk_tokens * inputs * static_cast<std::int64_t>(elem_size));
          REQUIRE((g.sweeps == 1 || (g.sweeps - 1) * tile_tokens < min_tokens));
        }
      }
    }
  }
  // The case the sweeps exist for: half at wide D, a 32-float register tile holds 4 tokens of a 256-column tile.
  const SegmentGeometry half_wide =
      make_segment_geometry(1024, 8, 4, kLocalFinishChunks, softmax_min_chunk_tokens(false, 2));
  CHECK(half_wide.sweeps == 4);
  CHECK(half_wide.chunk_tokens == 16);
  const SegmentGeometry float_wide =
      make_segment_geometry(1024, 4, 8, kLocalFinishChunks, softmax_min_chunk_tokens(false, 4));
  CHECK(float_wide.sweeps == 1);
  CHECK(float_wide.chunk_tokens == 8);
}

namespace {

// One row's merge tree run on the host the way the kernels run it: the chunks arrive in `order`, each climbing
// (climb_merge_tree) with a plain counter array for the atomics. A slot holds the list of chunks merged into it,
// so the root's list shows whether every chunk was merged exactly once and in order.
struct TreeRun {
  std::vector<std::int64_t> root;  // the chunks the root merged, in merge order
  int roots = 0;                   // climbs that merged the root
  std::int64_t max_counter = -1;   // the highest counter index used
  int levels = 0;                  // merges on the longest climb
  bool children_complete = true;   // every merge found each child holding all of its chunks
};

TreeRun run_merge_tree(std::int64_t chunks, const std::vector<std::int64_t>& order) {
  TreeRun run;
  std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(chunks));
  std::vector<int> counters(static_cast<std::size_t>(chunks), 0);
  for (const std::int64_t chunk : order) {
    slots[static_cast<std::size_t>(chunk)] = {chunk};
    int merges = 0;
    auto arrive = [&](std::int64_t c) {
      run.max_counter = std::max(run.max_counter, c);
      return c < chunks ? counters[static_cast<std::size_t>(c)]++ : -1;
    };
    auto merge = [&](std::int64_t first, std::int64_t span, std::int64_t children, bool root) {
      ++merges;
      std::vector<std::int64_t> merged;
      for (std::int64_t k = 0; k < children; ++k) {
        const std::vector<std::int64_t>& child = slots[static_cast<std::size_t>(first + k * span)];
        // A child node covers chunks first + k * span .. (+ span, or the row's end), all of them.
        const std::int64_t lo = first + k * span, hi = std::min(chunks, lo + span);
        if (child.size() != static_cast<std::size_t>(hi - lo) || (!child.empty() && child.front() != lo))
          run.children_complete = false;
        merged.insert(merged.end(), child.begin(), child.end());
      }
      if (root) run.root = merged;
      slots[static_cast<std::size_t>(first)] = merged;
    };
    if (climb_merge_tree(chunk, chunks, arrive, merge)) ++run.roots;
    run.levels = std::max(run.levels, merges);
  }
  return run;
}

}  // namespace

TEST_CASE("segment merge tree: each chunk merged once, in chunk order, by one root", "[segment][geometry]") {
  auto rng = ragged::test::make_rng(312);
  std::vector<std::int64_t> counts;
  for (std::int64_t c = 2; c <= 600; ++c) counts.push_back(c);
  for (std::int64_t c : {4095, 4096, 4097, 65535, 65536, 65537, 70001}) counts.push_back(c);
  for (const std::int64_t chunks : counts) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(chunks));
    for (std::int64_t i = 0; i < chunks; ++i) order[static_cast<std::size_t>(i)] = i;
    // In chunk order, in reverse, and shuffled: the warps that finish a node differ, the result must not.
    for (int arrangement = 0; arrangement < 3; ++arrangement) {
      if (arrangement == 1) std::reverse(order.begin(), order.end());
      if (arrangement == 2) std::shuffle(order.begin(), order.end(), rng);
      INFO("chunks " << chunks << ", arrival order " << arrangement);
      const TreeRun run = run_merge_tree(chunks, order);
      REQUIRE(run.roots == 1);
      REQUIRE(run.children_complete);
      REQUIRE(run.root.size() == static_cast<std::size_t>(chunks));
      for (std::int64_t i = 0; i < chunks; ++i) REQUIRE(run.root[static_cast<std::size_t>(i)] == i);
      // The counters stay inside the row's own range of partial slots (the workspace holds one per slot).
      REQUIRE(run.max_counter < chunks);
      // Depth: ceil(log_F(chunks)) merges on the critical path.
      int depth = 0;
      for (std::int64_t covered = 1; covered < chunks; covered *= kMergeFanIn) ++depth;
      REQUIRE(run.levels <= depth);
    }
  }
}

namespace {

// Offsets for a length set, optionally broken the way malformed input is (decreasing, negative or past nnz
// entries): the kernels clamp each row's pair (clamp_row_range), so rows can overlap or vanish, and the walk must
// still agree with the plan the row pass summed from the same clamped lengths.
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& lengths, bool malformed, std::mt19937_64& rng) {
  std::vector<std::int64_t> offsets(lengths.size() + 1, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) offsets[i + 1] = offsets[i] + lengths[i];
  if (malformed && !lengths.empty()) {
    std::uniform_int_distribution<std::size_t> at(0, lengths.size());
    for (int k = 0; k < 8; ++k) {
      const std::size_t i = at(rng);
      offsets[i] = k % 3 == 0 ? -5 : k % 3 == 1 ? offsets.back() + 100 : offsets[i] / 2;
    }
  }
  return offsets;
}

}  // namespace

TEST_CASE("segment unit walk: contiguous warp shares, and the cursor finds every unit's row", "[segment][geometry]") {
  using ragged::clamp_row_range;
  using ragged::detail::kCursorSteps;
  using ragged::detail::step_cursor;
  using ragged::detail::UnitCursor;
  using ragged::detail::warp_share_begin;
  auto rng = ragged::test::make_rng(313);
  for (std::int64_t inner : {1, 3, 64, 1000}) {
    for (const SegmentGeometry& g : all_geometries(inner)) {
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<std::int64_t> lengths = random_lengths(rng, g.chunk_tokens);
        if (trial == 4) lengths.assign(300, 0), lengths[137] = 50 * g.chunk_tokens;  // one huge row, rest empty
        const bool malformed = trial == 5;
        const std::vector<std::int64_t> offsets = offsets_of(lengths, malformed, rng);
        const auto batch = static_cast<std::int64_t>(lengths.size());
        const std::int64_t nnz = malformed ? offsets.back() / 2 + 1 : offsets.back();
        // The rows as the kernels see them, and the plan's prefix before each row.
        std::vector<std::int64_t> begin(lengths.size()), length(lengths.size());
        std::vector<RowWork> before(lengths.size() + 1);
        for (std::size_t b = 0; b < lengths.size(); ++b) {
          std::int64_t end = 0;
          clamp_row_range(offsets[b], offsets[b + 1], nnz, begin[b], end);
          length[b] = end - begin[b];
          before[b + 1] = before[b] + row_work(length[b], g);
        }
        auto range = [&](std::int64_t row, std::int64_t& row_begin, std::int64_t& row_length) {
          row_begin = begin[static_cast<std::size_t>(row)];
          row_length = length[static_cast<std::size_t>(row)];
        };
        for (std::int64_t RowWork::*field : {&RowWork::units, &RowWork::second_units}) {
          const std::int64_t total = before.back().*field;
          // The owner of item u: the row whose range of the field holds it (what locate_row returns).
          auto owner = [&](std::int64_t u) {
            std::int64_t row = 0;
            while (!(before[static_cast<std::size_t>(row)].*field <= u &&
                     u < before[static_cast<std::size_t>(row) + 1].*field))
              ++row;
            return row;
          };
          auto cursor_at = [&](std::int64_t row) {
            UnitCursor c;
            c.row = row;
            c.before = before[static_cast<std::size_t>(row)];
            range(row, c.begin, c.length);
            c.work = row_work(c.length, g);
            return c;
          };
          for (std::int64_t warps : {1, 2, 7, 64, 1000}) {
            INFO("D = " << inner << ", vec = " << g.vec << ", chunk_tokens = " << g.chunk_tokens << ", trial "
                        << trial << ", items " << total << ", warps " << warps);
            // The shares tile [0, total) in warp order, and differ by at most one item.
            REQUIRE(warp_share_begin(total, warps, 0) == 0);
            REQUIRE(warp_share_begin(total, warps, warps) == total);
            for (std::int64_t w = 0; w < warps; ++w) {
              const std::int64_t first = warp_share_begin(total, warps, w);
              const std::int64_t end = warp_share_begin(total, warps, w + 1);
              REQUIRE(end - first >= total / warps);
              REQUIRE(end - first <= total / warps + 1);
              if (first >= end) continue;
              // The walk of for_each_unit: a lookup, then steps; a failed step looks up afresh.
              UnitCursor c = cursor_at(owner(first));
              for (std::int64_t u = first; u < end; ++u) {
                const std::int64_t from = c.row;
                const bool stepped = step_cursor(c, u, field, batch, g, range);
                const std::int64_t row = owner(u);
                // A step gives up exactly when the row lies more than kCursorSteps rows on.
                REQUIRE(stepped == (row - from <= kCursorSteps));
                if (!stepped) c = cursor_at(row);
                REQUIRE(c.row == row);
                REQUIRE(c.before.units == before[static_cast<std::size_t>(row)].units);
                REQUIRE(c.before.partials == before[static_cast<std::size_t>(row)].partials);
                REQUIRE(c.before.second_units == before[static_cast<std::size_t>(row)].second_units);
                REQUIRE(c.begin == begin[static_cast<std::size_t>(row)]);
                REQUIRE(c.length == length[static_cast<std::size_t>(row)]);
                REQUIRE(c.before.*field <= u);
                REQUIRE(u < c.before.*field + c.work.*field);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("merge staging: the most a first-pass block takes without losing a resident block", "[segment][geometry]") {
  using ragged::detail::first_pass_plan_bytes;
  using ragged::detail::fit_merge_stage_bytes;
  using ragged::detail::kMergeStageBytes;
  using ragged::detail::kMergeStageMinBytes;
  using ragged::detail::merge_stage_offset;
  // A kernel held to `blocks` per SM by its registers, on an SM of `per_sm` bytes of shared memory, each block
  // setting aside 1 KB and 192 static bytes (stage_plan's) besides its dynamic ones, as the occupancy calculator
  // counts them.
  struct Sm {
    int blocks;
    std::int64_t per_sm;
    std::vector<std::int64_t> asked;
    int operator()(std::int64_t dynamic) {
      asked.push_back(dynamic);
      return static_cast<int>(std::min<std::int64_t>(blocks, per_sm / (dynamic + 1024 + 192)));
    }
  };
  auto fit = [](std::int64_t batch, int blocks, std::int64_t per_sm, std::int64_t most = kMergeStageBytes) {
    Sm sm{blocks, per_sm, {}};
    const std::int64_t bytes = fit_merge_stage_bytes(batch, most, std::ref(sm));
    // Never a staging with fewer blocks than the plan alone, and nothing smaller than one that keeps them.
    const int without = sm(first_pass_plan_bytes(batch));
    if (bytes > 0) REQUIRE(sm(merge_stage_offset(batch) + kBlockWarps * bytes) == without);
    if (bytes < most && 2 * std::max(bytes, kMergeStageMinBytes / 2) <= most)
      REQUIRE(sm(merge_stage_offset(batch) + kBlockWarps * std::max(2 * bytes, kMergeStageMinBytes)) < without);
    return bytes;
  };
  const std::int64_t h100 = 233472, a100 = 167936, ada = 102400;  // cudaDevAttrMaxSharedMemoryPerMultiprocessor
  // An H100 / H200 keeps the whole staging at any plan (3 blocks of at most 58.6 KB).
  for (std::int64_t batch : {1, 1000, 86500, 131072, 140000}) {
    INFO("batch " << batch);
    CHECK(fit(batch, 3, h100) == kMergeStageBytes);
    CHECK(fit(batch, 2, h100) == kMergeStageBytes);
  }
  // An A100 halves it for the 3-block kernels once the plan passes ~21 KB (about 117,000 rows), and not past
  // 131,072 rows, where CUB's plan leaves the shared memory to the staging.
  CHECK(fit(100000, 3, a100) == kMergeStageBytes);
  CHECK(fit(131072, 3, a100) == kMergeStageBytes / 2);
  CHECK(fit(140000, 3, a100) == kMergeStageBytes);
  CHECK(fit(131072, 2, a100) == kMergeStageBytes);
  // 100 KB per SM (sm_86, sm_89): 3 blocks keep 4 KB a warp for a plan of a few entries only (in this model, which
  // leaves out the calculator's 128-byte granularity), then 2 KB, then 1 KB for the largest plans.
  CHECK(fit(1, 3, ada) == kMergeStageBytes);
  CHECK(fit(1000, 3, ada) == kMergeStageBytes / 2);
  CHECK(fit(131072, 3, ada) == kMergeStageBytes / 4);
  CHECK(fit(131072, 2, ada) == kMergeStageBytes / 2);
  // Where even the least staging costs a block, none: merges through registers (4 blocks of a full plan just fit).
  CHECK(fit(131072, 4, 104000) == 0);
  CHECK(fit(131072, 4, ada) == kMergeStageMinBytes);  // 3 blocks with the plan alone, and with 1 KB a warp
  // None asked for, none taken, and no query.
  Sm idle{3, h100, {}};
  CHECK(fit_merge_stage_bytes(1000, 0, std::ref(idle)) == 0);
  CHECK(idle.asked.empty());
  // A smaller cap is the most it takes.
  CHECK(fit(1, 3, h100, kMergeStageMinBytes) == kMergeStageMinBytes);
}

TEST_CASE("segment_reduce's unit prefetch: inputs of at most kUnitPrefetchMaxBytes, with the L2 prefetch on",
          "[segment][geometry]") {
  // take_unit_prefetch decides from the values' bytes (nnz * D * element size) and the prefetch setting only.
  for (std::int64_t inner : {1, 3, 64, 1000}) {
    for (std::size_t elem_size : {std::size_t{2}, std::size_t{4}}) {
      INFO("D = " << inner << ", " << elem_size << "-byte elements");
      SegmentLayout<std::int64_t> L;
      L.geometry = make_segment_geometry(inner, 1, kReduceFloatsPerLane);
      L.prefetch_groups = kSegmentPrefetchGroups;
      const std::int64_t most = kUnitPrefetchMaxBytes / (inner * static_cast<std::int64_t>(elem_size));
      for (std::int64_t nnz : {std::int64_t{0}, std::int64_t{1}, most}) {
        L.nnz = nnz;
        take_unit_prefetch(L, elem_size);
        REQUIRE(L.prefetch_units);
      }
      L.nnz = most + 1;
      take_unit_prefetch(L, elem_size);
      REQUIRE_FALSE(L.prefetch_units);
      L.nnz = std::int64_t{1} << 40;
      take_unit_prefetch(L, elem_size);
      REQUIRE_FALSE(L.prefetch_units);
      L.nnz = 1;
      L.prefetch_groups = 0;  // RAGGED_SEGMENT_PREFETCH=0: no prefetch at all
      take_unit_prefetch(L, elem_size);
      REQUIRE_FALSE(L.prefetch_units);
    }
  }
}
