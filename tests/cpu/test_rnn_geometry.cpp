// The block product of the recurrent kernels (kernels/rnn_geometry.h), on the host: which warp does which
// k-steps of which n-tile, and the shared-memory layout. The kernels' results are only batch-invariant and
// complete if every k-step of every n-tile is added exactly once, by a warp chosen from the shapes alone, and
// the 16-bit path's two accumulator sets rely on each chunk starting at an even multiple of a split's stride.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../kernels/rnn_geometry.h"

using ragged::detail::kRnnKChunkBytes;
using ragged::detail::kRnnMaxNTilesPerWarp;
using ragged::detail::kRnnMChunk;
using ragged::detail::kRnnWarps;
using ragged::detail::make_rnn_gemm_geometry;
using ragged::detail::make_rnn_shared_layout;
using ragged::detail::plan_resident_layout;
using ragged::detail::plan_streamed_layout;
using ragged::detail::rnn_k_chunks;
using ragged::detail::RnnKeptChunks;
using ragged::detail::rnn_chunk_columns;
using ragged::detail::rnn_first_step_column;
using ragged::detail::rnn_gemm_fits_warps;
using ragged::detail::rnn_shared_ld;
using ragged::detail::rnn_warp_n_tile;
using ragged::detail::rnn_warp_split;
using ragged::detail::RnnGemmGeometry;
using ragged::detail::RnnSharedLayout;

TEST_CASE("rnn product: every k-step of every n-tile is added once, in a set fixed by the shapes", "[rnn][geometry]") {
  const int elem = GENERATE(2, 4);
  const std::int64_t k = GENERATE(1, 7, 16, 40, 128, 129, 256, 264, 300, 513, 1024, 2000);
  for (std::int64_t rows = 1; rows <= 256; rows += (rows < 40 ? 1 : 23)) {
    const RnnGemmGeometry g = make_rnn_gemm_geometry(rows, k, elem);
    INFO("rows " << rows << " k " << k << " element bytes " << elem);
    REQUIRE(g.rows_pad % 16 == 0);
    REQUIRE(g.rows_pad >= rows);
    REQUIRE(g.k_pad % 16 == 0);
    REQUIRE(g.k_pad >= k);
    REQUIRE(g.k_chunk % 16 == 0);
    REQUIRE(g.k_chunk * elem <= kRnnKChunkBytes);
    REQUIRE(g.n_tiles == g.rows_pad / 16);
    REQUIRE(g.splits >= 1);
    REQUIRE(g.n_tiles * g.splits <= (g.n_tiles >= kRnnWarps ? g.n_tiles : kRnnWarps));
    REQUIRE(rnn_gemm_fits_warps(g) == (g.n_tiles <= kRnnWarps * kRnnMaxNTilesPerWarp));
    if (!rnn_gemm_fits_warps(g)) continue;

    const int steps = g.k_pad / 16;
    // count[n][s]: how often global k-step s of n-tile n is added; set[n][s]: which accumulator set took it.
    std::vector<std::vector<int>> count(g.n_tiles, std::vector<int>(steps, 0)), set(count);
    for (int warp = 0; warp < kRnnWarps; ++warp) {
      const int split = rnn_warp_split(g, warp);
      for (int i = 0; i < kRnnMaxNTilesPerWarp; ++i) {
        const int n = rnn_warp_n_tile(g, warp, i);
        if (n < 0) continue;
        REQUIRE(n < g.n_tiles);
        REQUIRE(split < g.splits);
        for (int k0 = 0; k0 < g.k_pad; k0 += g.k_chunk) {
          const int cols = rnn_chunk_columns(g, k0);
          const int stride = 16 * g.splits;
          int j = 0;  // the warp's step index within the chunk: its parity is the set (TileAcc::add_steps)
          for (int col = rnn_first_step_column(g, split, k0); col < cols; col += stride, ++j) {
            const int s = (k0 + col) / 16;
            REQUIRE(s % g.splits == split);
            ++count[n][s];
            set[n][s] = j % 2;
          }
        }
      }
    }
    for (int n = 0; n < g.n_tiles; ++n)
      for (int s = 0; s < steps; ++s) {
        INFO("n-tile " << n << " k-step " << s);
        REQUIRE(count[n][s] == 1);
        // The two 16-bit accumulator sets must split the steps by global index, not by chunk-local position.
        if (elem == 2) REQUIRE(set[n][s] == (s / g.splits) % 2);
      }
  }
}

TEST_CASE("rnn product: the splits depend on the weight rows only, and use every warp they can", "[rnn][geometry]") {
  for (std::int64_t rows = 1; rows <= 256; ++rows) {
    const RnnGemmGeometry g = make_rnn_gemm_geometry(rows, 1024, 2);
    INFO("rows " << rows);
    if (g.n_tiles >= kRnnWarps) {
      REQUIRE(g.splits == 1);
    } else {
      REQUIRE(g.splits == kRnnWarps / g.n_tiles);
    }
    int busy = 0;
    for (int warp = 0; warp < kRnnWarps; ++warp) busy += rnn_warp_n_tile(g, warp, 0) >= 0;
    REQUIRE(busy == (g.n_tiles >= kRnnWarps ? kRnnWarps : g.n_tiles * g.splits));
  }
}

namespace {

void require_disjoint_aligned(const RnnSharedLayout& s, const RnnGemmGeometry& gate, const RnnGemmGeometry& proj,
                              bool has_proj, bool resident, int elem) {
  const std::size_t gate_bytes =
      resident ? static_cast<std::size_t>(gate.rows_pad) * rnn_shared_ld(gate.k_pad, elem) * elem
               : static_cast<std::size_t>(s.stages) * s.weight_buffer;
  REQUIRE(s.gate_weights % 128 == 0);
  REQUIRE(s.proj_weights % 128 == 0);
  REQUIRE(s.activations % 128 == 0);
  REQUIRE(s.activation_buffer % 128 == 0);
  REQUIRE(s.partials % 128 == 0);
  if (!resident) {
    // The kept chunks after the stage buffers, one buffer each.
    REQUIRE(s.kept_weights % 128 == 0);
    REQUIRE(s.gate_weights + gate_bytes <= s.kept_weights);
    REQUIRE(s.kept_weights + static_cast<std::size_t>(s.kept_chunks) * s.weight_buffer <= s.proj_weights);
  } else {
    REQUIRE(s.kept_chunks == 0);
  }
  REQUIRE(s.gate_weights + gate_bytes <= s.proj_weights);
  if (!resident) {
    REQUIRE(s.weight_buffer % 128 == 0);
    REQUIRE(s.weight_buffer >= static_cast<std::size_t>(gate.rows_pad) * rnn_shared_ld(gate.k_chunk, elem) * elem);
    // The persistent kernel with streamed weights streams W_hr's chunks through the same buffers.
    if (has_proj)
      REQUIRE(s.weight_buffer >= static_cast<std::size_t>(proj.rows_pad) * rnn_shared_ld(proj.k_chunk, elem) * elem);
  }
  if (has_proj && resident)
    REQUIRE(s.proj_weights + static_cast<std::size_t>(proj.rows_pad) * rnn_shared_ld(proj.k_pad, elem) * elem <=
            s.activations);
  const int k_chunk = has_proj && proj.k_chunk > gate.k_chunk ? proj.k_chunk : gate.k_chunk;
  REQUIRE(s.activation_buffer >= static_cast<std::size_t>(kRnnMChunk) * rnn_shared_ld(k_chunk, elem) * elem);
  REQUIRE(s.activations + static_cast<std::size_t>(s.stages) * s.activation_buffer <= s.partials);
  // Each phase's partials: [splits][kRnnMChunk][rows_pad + 4] floats of its own geometry.
  REQUIRE(s.partials + static_cast<std::size_t>(gate.splits) * kRnnMChunk * (gate.rows_pad + 4) * sizeof(float) <=
          s.total);
  if (has_proj)
    REQUIRE(s.partials + static_cast<std::size_t>(proj.splits) * kRnnMChunk * (proj.rows_pad + 4) * sizeof(float) <=
            s.total);
}

}  // namespace

TEST_CASE("rnn shared layouts: pieces are aligned and disjoint", "[rnn][geometry]") {
  const int elem = GENERATE(2, 4);
  const bool resident = GENERATE(false, true);
  const int stages = GENERATE(2, 3, 4);
  const int kept = GENERATE(0, 1, 3);
  for (std::int64_t units : {1, 3, 8, 16, 40}) {
    for (std::int64_t state : {7, 24, 300, 1024}) {
      const RnnGemmGeometry gate = make_rnn_gemm_geometry(4 * units, state, elem);
      const RnnGemmGeometry proj = make_rnn_gemm_geometry((state + 7) / 8, 4 * state, elem);
      for (const bool has_proj : {false, true}) {
        INFO("units " << units << " state " << state << " proj " << has_proj << " resident " << resident
                      << " stages " << stages << " kept " << kept);
        const RnnSharedLayout s = make_rnn_shared_layout(gate, proj, has_proj, resident, elem, stages, kept);
        REQUIRE(s.stages == stages);
        if (!resident) {
          REQUIRE(s.kept_chunks == kept);
          // Each kept chunk costs exactly one buffer.
          REQUIRE(s.total == make_rnn_shared_layout(gate, proj, has_proj, false, elem, stages).total +
                                 static_cast<std::size_t>(kept) * s.weight_buffer);
        }
        require_disjoint_aligned(s, gate, proj, has_proj, resident, elem);
      }
    }
  }
}

TEST_CASE("rnn shared layouts: the persistent shapes expected on an H100 fit its 227 KB", "[rnn][geometry]") {
  // What gpu_test_rnn's "keeps mid-sized recurrent weights on chip" case asks of a 132-SM H100: the fewest
  // units per block that give every SM at most one block (plan_rnn_persistent starts its search there).
  constexpr std::size_t kH100OptIn = 227 * 1024;
  // bfloat16 LSTM, H = 1024, both directions: 16 units per block, 64 gate rows.
  const RnnGemmGeometry lstm = make_rnn_gemm_geometry(4 * 16, 1024, 2);
  const RnnSharedLayout lstm_layout = make_rnn_shared_layout(lstm, lstm, false, true, 2);
  CHECK(lstm_layout.total <= kH100OptIn);
  // float GRU, H = 1024, one direction: 8 units per block, 24 gate rows.
  const RnnGemmGeometry gru = make_rnn_gemm_geometry(3 * 8, 1024, 4);
  const RnnSharedLayout gru_layout = make_rnn_shared_layout(gru, gru, false, true, 4);
  CHECK(gru_layout.total <= kH100OptIn);
}

TEST_CASE("rnn resident layouts: h staged four deep at H = 1024 on an H100 / H200", "[rnn][geometry]") {
  // bfloat16 LSTM, H = 1024, one direction on 132 SMs: 8 units a block, 32 gate rows of 1,032 x 2 bytes (66,048),
  // 4 chunks of 256 columns, an activation buffer of 32 x 264 x 2 = 16,896 bytes, partials of 4 splits x 32 x 36
  // floats (18,432). Two buffers: 118,272 bytes; one per chunk: 152,064.
  constexpr std::size_t kH100OptIn = 227 * 1024;
  const RnnGemmGeometry lstm = make_rnn_gemm_geometry(4 * 8, 1024, 2);
  REQUIRE(rnn_k_chunks(lstm) == 4);
  const RnnSharedLayout deep = plan_resident_layout(lstm, lstm, false, 2, kH100OptIn, 4);
  CHECK(deep.stages == 4);
  CHECK(deep.total == 152064);
  const RnnSharedLayout two = plan_resident_layout(lstm, lstm, false, 2, kH100OptIn, 2);
  CHECK(two.stages == 2);
  CHECK(two.total == 118272);
  CHECK(two.total == make_rnn_shared_layout(lstm, lstm, false, true, 2).total);  // the layout before
  // Where four do not fit, three; where three do not, two (which the plan then checks).
  CHECK(plan_resident_layout(lstm, lstm, false, 2, 152064 - 1, 4).stages == 3);
  CHECK(plan_resident_layout(lstm, lstm, false, 2, 152064 - 16896 - 1, 4).stages == 2);
  // H = 512 has two chunks: nothing past two buffers to gain.
  const RnnGemmGeometry small = make_rnn_gemm_geometry(4 * 4, 512, 2);
  CHECK(plan_resident_layout(small, small, false, 2, kH100OptIn, 4).stages == 2);
}

TEST_CASE("rnn resident layouts: as deep as the chunks, the cap and the device allow", "[rnn][geometry]") {
  const int elem = GENERATE(2, 4);
  const std::size_t optin = GENERATE(std::size_t{101376}, std::size_t{166912}, std::size_t{232448});
  const int cap = GENERATE(1, 2, 3, 4, 9);
  for (std::int64_t rows : {4, 16, 32, 48, 64, 104}) {
    for (std::int64_t state : {24, 300, 520, 1024, 1536, 2048}) {
      const RnnGemmGeometry gate = make_rnn_gemm_geometry(rows, state, elem);
      const RnnGemmGeometry proj = make_rnn_gemm_geometry(8, 2 * state, elem);
      for (const bool has_proj : {false, true}) {
        INFO("rows " << rows << " state " << state << " proj " << has_proj << " opt-in " << optin << " cap " << cap);
        const RnnSharedLayout s = plan_resident_layout(gate, proj, has_proj, elem, optin, cap);
        const int chunks = std::max(rnn_k_chunks(gate), has_proj ? rnn_k_chunks(proj) : 0);
        const int deepest = std::min({chunks, std::max(cap, 2), 4});
        require_disjoint_aligned(s, gate, proj, has_proj, true, elem);
        REQUIRE(s.stages >= 2);
        REQUIRE(s.stages <= std::max(deepest, 2));
        REQUIRE(s.total == make_rnn_shared_layout(gate, proj, has_proj, true, elem, s.stages).total);
        // Deeper than two only where it fits; one more buffer would not, unless the depth is already the most.
        if (s.stages > 2) REQUIRE(s.total <= optin);
        if (s.stages < deepest)
          REQUIRE(make_rnn_shared_layout(gate, proj, has_proj, true, elem, s.stages + 1).total > optin);
      }
    }
  }
}

TEST_CASE("rnn shared layouts: the per-step path's largest blocks stream three deep on an H100", "[rnn][geometry]") {
  // kMaxStepUnits (16) float LSTM units, 64 gate rows, at any hidden size: the streamed chunks do not grow with k.
  constexpr std::size_t kH100OptIn = 227 * 1024;
  const RnnGemmGeometry lstm = make_rnn_gemm_geometry(4 * 16, 2048, 4);
  const RnnSharedLayout deep = make_rnn_shared_layout(lstm, lstm, false, false, 4, ragged::detail::kRnnStreamedStages);
  CHECK(deep.total <= kH100OptIn);
  // On a 99 KB device (sm_86 / sm_89) they fit at no depth: the launcher shrinks the blocks (tests/emu/run.sh).
  CHECK(make_rnn_shared_layout(lstm, lstm, false, false, 4, 2).total > 99 * 1024);
}

TEST_CASE("rnn shared layouts: the streamed persistent blocks of H = 2048 stream three deep on an H100",
          "[rnn][geometry]") {
  // What gpu_test_rnn's "streams larger ones through a persistent grid" case asks of a 132-SM H100: bfloat16
  // LSTM, H = 2048, one direction, 16 units per block (128 blocks), 64 gate rows, whose 256 KB of W_hh no
  // block holds resident.
  constexpr std::size_t kH100OptIn = 227 * 1024;
  const RnnGemmGeometry lstm = make_rnn_gemm_geometry(4 * 16, 2048, 2);
  CHECK(make_rnn_shared_layout(lstm, lstm, false, true, 2).total > kH100OptIn);
  const RnnSharedLayout streamed =
      make_rnn_shared_layout(lstm, lstm, false, false, 2, ragged::detail::kRnnStreamedStages);
  CHECK(streamed.total == 169472);
  CHECK(streamed.total <= kH100OptIn);
}

TEST_CASE("rnn streamed layouts: the kept chunks of H = 2048 on an H100 / H200", "[rnn][geometry]") {
  // bfloat16, H = 2048, 16 units per block (128 blocks on 132 SMs): 8 chunks of 256 columns, a buffer of 64 LSTM
  // gate rows 64 x 264 x 2 = 33,792 bytes, of 48 GRU rows 25,344. With three buffers the LSTM block takes 169,472
  // bytes (above) and keeps (232,448 - 169,472) / 33,792 = 1 chunk; with two, 118,784 and 3 chunks. The GRU
  // block: 140,032 and 3 chunks, or 97,792 and 5.
  constexpr std::size_t kH100OptIn = 227 * 1024;
  const RnnGemmGeometry lstm = make_rnn_gemm_geometry(4 * 16, 2048, 2);
  const RnnGemmGeometry gru = make_rnn_gemm_geometry(3 * 16, 2048, 2);
  REQUIRE(rnn_k_chunks(lstm) == 8);
  const auto plan = [&](const RnnGemmGeometry& g, RnnKeptChunks policy, int cap = 1 << 30) {
    return plan_streamed_layout(g, g, false, 2, kH100OptIn, policy, cap);
  };
  const RnnSharedLayout none = plan(lstm, RnnKeptChunks::kNone);
  CHECK(none.stages == 3);
  CHECK(none.kept_chunks == 0);
  CHECK(none.total == 169472);
  const RnnSharedLayout spare = plan(lstm, RnnKeptChunks::kSpare);
  CHECK(spare.stages == 3);
  CHECK(spare.kept_chunks == 1);
  CHECK(spare.total == 169472 + 33792);
  const RnnSharedLayout most = plan(lstm, RnnKeptChunks::kMost);
  CHECK(most.stages == 2);
  CHECK(most.kept_chunks == 3);
  CHECK(most.total == 118784 + 3 * 33792);
  CHECK(plan(lstm, RnnKeptChunks::kMost, 2).kept_chunks == 2);
  CHECK(plan(lstm, RnnKeptChunks::kMost, 0).kept_chunks == 0);
  const RnnSharedLayout gru_spare = plan(gru, RnnKeptChunks::kSpare);
  CHECK(gru_spare.stages == 3);
  CHECK(gru_spare.kept_chunks == 3);
  CHECK(gru_spare.total == 140032 + 3 * 25344);
  const RnnSharedLayout gru_most = plan(gru, RnnKeptChunks::kMost);
  CHECK(gru_most.stages == 2);
  CHECK(gru_most.kept_chunks == 5);
  CHECK(gru_most.total == 97792 + 5 * 25344);
}

TEST_CASE("rnn streamed layouts: the kept chunks fit, fill the room and follow the policy", "[rnn][geometry]") {
  const int elem = GENERATE(2, 4);
  // Opt-in shared memory of sm_86 / sm_89, A100 and H100.
  const std::size_t optin = GENERATE(std::size_t{101376}, std::size_t{166912}, std::size_t{232448});
  const int cap = GENERATE(0, 2, 1 << 30);
  for (std::int64_t rows : {4, 16, 48, 64, 104}) {
    for (std::int64_t state : {24, 300, 520, 1024, 2048, 4096}) {
      const RnnGemmGeometry gate = make_rnn_gemm_geometry(rows, state, elem);
      const RnnGemmGeometry proj = make_rnn_gemm_geometry(8, 2 * state, elem);
      for (const bool has_proj : {false, true}) {
        INFO("rows " << rows << " state " << state << " proj " << has_proj << " opt-in " << optin << " cap " << cap);
        const RnnSharedLayout none = plan_streamed_layout(gate, proj, has_proj, elem, optin, RnnKeptChunks::kNone, cap);
        const RnnSharedLayout spare =
            plan_streamed_layout(gate, proj, has_proj, elem, optin, RnnKeptChunks::kSpare, cap);
        const RnnSharedLayout most = plan_streamed_layout(gate, proj, has_proj, elem, optin, RnnKeptChunks::kMost, cap);
        REQUIRE(none.kept_chunks == 0);
        // kNone is the layout before kept chunks: three buffers where they fit, else two.
        const RnnSharedLayout deep = make_rnn_shared_layout(gate, proj, has_proj, false, elem, 3);
        REQUIRE(none.stages == (deep.total <= optin ? 3 : 2));
        if (none.total > optin) {  // fits at no depth: nothing kept
          REQUIRE(spare.kept_chunks == 0);
          REQUIRE(most.kept_chunks == 0);
          continue;
        }
        for (const RnnSharedLayout* s : {&spare, &most}) {
          require_disjoint_aligned(*s, gate, proj, has_proj, false, elem);
          REQUIRE(s->total <= optin);
          REQUIRE(s->kept_chunks <= rnn_k_chunks(gate));
          REQUIRE(s->kept_chunks <= cap);
          // No room left for another chunk, unless every chunk the cap allows is kept.
          if (s->kept_chunks < std::min(cap, rnn_k_chunks(gate)))
            REQUIRE(s->total + s->weight_buffer > optin);
        }
        REQUIRE(spare.stages == none.stages);  // kSpare never gives up a buffer
        REQUIRE(most.kept_chunks >= spare.kept_chunks);
        if (most.stages != spare.stages) REQUIRE(most.kept_chunks > spare.kept_chunks);
      }
    }
  }
}
