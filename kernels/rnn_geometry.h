// Internal: the block-level matrix product of the recurrent kernels and its shared-memory layout, computed the
// same way on the host (launch configuration) and on the device (carving the dynamic shared memory).
//
// A block owns `rows` rows of a weight matrix W [*, k] (its slice of W_hh's gate rows, or of W_hr). Per step it
// computes C[m][q] = sum_k A[m][k] * W[q][k] for the active batch rows m, kRnnMChunk rows at a time, with A (the
// previous hidden state) staged through shared memory in chunks of k_chunk columns, `stages` buffers deep (the
// next stages - 1 chunks load while one is multiplied). The output columns q come in n-tiles of 16, spread over
// the warps; a warp computes both 16-row m-tiles of its n-tile (the second only when the chunk has more than 16
// rows), so each weight fragment it loads feeds two products. When there are fewer n-tiles than warps, the
// k-steps (16 columns each) are split over `splits` warps per n-tile by k-step index modulo splits, and the
// partial tiles are added in split order. The split depends only on the shapes, never on the batch, so every
// output's summation order is fixed: results do not depend on the batch size or on where a sequence sits in the
// batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ragged/config.h"

namespace ragged {
namespace detail {

constexpr int kRnnThreads = 256;
constexpr int kRnnWarps = kRnnThreads / 32;
constexpr int kRnnMChunk = 32;           // batch rows per pass (two 16-row tiles)
constexpr int kRnnKChunkBytes = 512;     // bytes of a row staged at once: 256 half / bfloat16 or 128 float columns
constexpr int kRnnMaxNTilesPerWarp = 2;  // n-tiles one warp holds (each with both m-tiles)
constexpr int kRnnSkewBytes = 16;        // row padding of shared tiles: conflict-free 16-byte accesses
// Buffers of a staged operand. Streamed weights make every pass a walk over k_pad / k_chunk chunks (8 at
// H = 2048) that waits on memory at each chunk, so three, where shared memory allows, keep two chunks in flight
// instead of one. Resident weights leave only the activations to stage: as many buffers as a pass has k chunks,
// up to kRnnResidentMaxStages, where shared memory holds them (plan_resident_layout), else kRnnResidentStages,
// the fewest that overlap a load with a product. Why: with two, a pass of 4 chunks (H = 1024 in 16 bits) waits
// about two round trips to L2 for h, one per pair of chunks; with four, all of them go out at once and it waits
// about one (a model, not measured: RAGGED_RNN_RESIDENT_STAGES=2 is the old depth, for an A/B on a GPU).
constexpr int kRnnResidentStages = 2;
constexpr int kRnnResidentMaxStages = 4;
constexpr int kRnnStreamedStages = 3;

RAGGED_HOST_DEVICE std::int64_t rnn_round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

struct RnnGemmGeometry {
  int rows = 0;      // weight rows the block owns
  int rows_pad = 0;  // rounded up to a tile (16)
  int k = 0;         // dot-product length
  int k_pad = 0;     // rounded up to a k-step (16)
  int k_chunk = 0;   // columns per staging pass (multiple of 16)
  int n_tiles = 0;   // 16-column output tiles: rows_pad / 16
  int splits = 1;    // warps sharing one n-tile's k-steps
};

RAGGED_HOST_DEVICE RnnGemmGeometry make_rnn_gemm_geometry(std::int64_t rows, std::int64_t k, int elem_bytes) {
  RnnGemmGeometry g;
  g.rows = static_cast<int>(rows);
  g.rows_pad = static_cast<int>(rnn_round_up(rows < 1 ? 1 : rows, 16));
  g.k = static_cast<int>(k);
  g.k_pad = static_cast<int>(rnn_round_up(k < 1 ? 1 : k, 16));
  const int chunk = kRnnKChunkBytes / elem_bytes;
  g.k_chunk = g.k_pad < chunk ? g.k_pad : chunk;
  g.n_tiles = g.rows_pad / 16;
  g.splits = g.n_tiles >= kRnnWarps ? 1 : kRnnWarps / g.n_tiles;
  return g;
}

// Whether the warps can hold every tile of a pass.
RAGGED_HOST_DEVICE bool rnn_gemm_fits_warps(const RnnGemmGeometry& g) {
  return g.n_tiles <= kRnnWarps * kRnnMaxNTilesPerWarp;
}

// The warp assignment of a pass (host and device, so that a CPU test can check what the kernel does).
// Split of `warp`: with several splits, warp / n_tiles (a split >= splits means the warp idles).
RAGGED_HOST_DEVICE int rnn_warp_split(const RnnGemmGeometry& g, int warp) {
  return g.splits > 1 ? warp / g.n_tiles : 0;
}

// The i-th n-tile of `warp` (i < kRnnMaxNTilesPerWarp), or -1: with one split, n-tiles warp, warp + 8, ...;
// with several, only n-tile warp % n_tiles.
RAGGED_HOST_DEVICE int rnn_warp_n_tile(const RnnGemmGeometry& g, int warp, int i) {
  if (g.splits > 1) return i == 0 && rnn_warp_split(g, warp) < g.splits ? warp % g.n_tiles : -1;
  return warp + i * kRnnWarps < g.n_tiles ? warp + i * kRnnWarps : -1;
}

// Column (within a chunk starting at column k0) of the first k-step of `split`: global step index = split
// (mod splits); the warp then takes every splits-th step of the chunk.
RAGGED_HOST_DEVICE int rnn_first_step_column(const RnnGemmGeometry& g, int split, int k0) {
  return ((split - (k0 / 16) % g.splits) + g.splits) % g.splits * 16;
}

// Columns of the chunk starting at k0.
RAGGED_HOST_DEVICE int rnn_chunk_columns(const RnnGemmGeometry& g, int k0) {
  return g.k_pad - k0 < g.k_chunk ? g.k_pad - k0 : g.k_chunk;
}

// Leading dimension (elements) of a shared tile row holding `cols` columns of `elem_bytes` elements.
RAGGED_HOST_DEVICE int rnn_shared_ld(int cols, int elem_bytes) { return cols + kRnnSkewBytes / elem_bytes; }

// Byte offsets of the pieces of a block's dynamic shared memory (each 128-byte aligned). Staged operands have
// `stages` buffers, `*_buffer` bytes apart.
struct RnnSharedLayout {
  int stages = kRnnResidentStages;
  // resident: [gate.rows_pad][ld(gate.k_pad)], streamed: stages x [max rows_pad][ld(max k_chunk)]
  std::size_t gate_weights = 0;
  std::size_t weight_buffer = 0;  // streamed: bytes from one weight buffer to the next
  // Streamed (the persistent kernel's): the gate rows' first kept_chunks k chunks stay in shared memory for the
  // whole layer, chunk c at kept_weights + c * weight_buffer in a stage buffer's shape, and only the others
  // stream each step. 0 on the per-step path and where the weights are resident.
  int kept_chunks = 0;
  std::size_t kept_weights = 0;
  std::size_t proj_weights = 0;   // resident with a projection: [proj.rows_pad][ld(proj.k_pad)]
  std::size_t activations = 0;    // stages x [kRnnMChunk][ld(max k_chunk)]
  std::size_t activation_buffer = 0;
  std::size_t partials = 0;       // float [splits][kRnnMChunk][rows_pad + 4] of either phase
  std::size_t total = 0;
};

RAGGED_HOST_DEVICE std::size_t rnn_align128(std::size_t x) { return (x + 127) / 128 * 128; }

// Bytes of a staged matrix of `rows` rows of `cols` elements at the skewed pitch (rnn_shared_ld).
RAGGED_HOST_DEVICE std::size_t rnn_shared_matrix_bytes(int rows, int cols, int elem_bytes) {
  return static_cast<std::size_t>(rows) * rnn_shared_ld(cols, elem_bytes) * elem_bytes;
}

// `gate` is always used; `proj` only when has_proj. `resident`: whole weight slices stay in shared memory.
// `stages`: buffers per staged operand (>= 2). `kept_chunks`: streamed gate chunks kept for the whole layer
// (RnnSharedLayout; ignored where resident).
RAGGED_HOST_DEVICE RnnSharedLayout make_rnn_shared_layout(const RnnGemmGeometry& gate, const RnnGemmGeometry& proj,
                                                          bool has_proj, bool resident, int elem_bytes,
                                                          int stages = kRnnResidentStages, int kept_chunks = 0) {
  RnnSharedLayout s;
  s.stages = stages;
  std::size_t at = 0;
  s.gate_weights = at;
  if (resident) {
    at = rnn_align128(at + rnn_shared_matrix_bytes(gate.rows_pad, gate.k_pad, elem_bytes));
  } else {
    // A buffer holds a chunk of the gate rows, or of the projection rows where one kernel streams both (the
    // persistent kernel with streamed weights: its projection phase streams W_hr through the same buffers).
    int rows = gate.rows_pad, k_chunk = gate.k_chunk;
    if (has_proj) {
      rows = proj.rows_pad > rows ? proj.rows_pad : rows;
      k_chunk = proj.k_chunk > k_chunk ? proj.k_chunk : k_chunk;
    }
    s.weight_buffer = rnn_align128(rnn_shared_matrix_bytes(rows, k_chunk, elem_bytes));
    at += static_cast<std::size_t>(stages) * s.weight_buffer;
    s.kept_chunks = kept_chunks > 0 ? kept_chunks : 0;
    s.kept_weights = at;
    at += static_cast<std::size_t>(s.kept_chunks) * s.weight_buffer;
  }
  s.proj_weights = at;
  if (has_proj && resident)
    at = rnn_align128(at + rnn_shared_matrix_bytes(proj.rows_pad, proj.k_pad, elem_bytes));
  // Each phase stages its own chunks and fills its own partials: the larger of the two sizes each piece.
  int k_chunk = gate.k_chunk;
  std::size_t partial_rows = static_cast<std::size_t>(gate.splits) * (gate.rows_pad + 4);
  if (has_proj) {
    k_chunk = proj.k_chunk > k_chunk ? proj.k_chunk : k_chunk;
    const std::size_t proj_rows = static_cast<std::size_t>(proj.splits) * (proj.rows_pad + 4);
    partial_rows = proj_rows > partial_rows ? proj_rows : partial_rows;
  }
  s.activations = at;
  s.activation_buffer = rnn_align128(rnn_shared_matrix_bytes(kRnnMChunk, k_chunk, elem_bytes));
  at += static_cast<std::size_t>(stages) * s.activation_buffer;
  s.partials = at;
  at = rnn_align128(at + partial_rows * kRnnMChunk * sizeof(float));
  s.total = at;
  return s;
}

// k chunks of a pass: k_pad / k_chunk rounded up.
RAGGED_HOST_DEVICE int rnn_k_chunks(const RnnGemmGeometry& g) { return (g.k_pad + g.k_chunk - 1) / g.k_chunk; }

// The layout of a persistent block with resident weights: one activation buffer per k chunk of its passes (the
// gates', or the projection's where it has more), at most max_stages (clamped to [kRnnResidentStages,
// kRnnResidentMaxStages]), the most of those that `dynamic_max` bytes hold; kRnnResidentStages where none does
// (which may not fit either: then its total is past dynamic_max). The depth changes when loads go out, never the
// summation order, so not the bits.
RAGGED_HOST_DEVICE RnnSharedLayout plan_resident_layout(const RnnGemmGeometry& gate, const RnnGemmGeometry& proj,
                                                        bool has_proj, int elem_bytes, std::size_t dynamic_max,
                                                        int max_stages) {
  int chunks = rnn_k_chunks(gate);
  if (has_proj && rnn_k_chunks(proj) > chunks) chunks = rnn_k_chunks(proj);
  int deepest = max_stages < kRnnResidentMaxStages ? max_stages : kRnnResidentMaxStages;
  deepest = chunks < deepest ? chunks : deepest;
  for (int stages = deepest; stages > kRnnResidentStages; --stages) {
    const RnnSharedLayout deep = make_rnn_shared_layout(gate, proj, has_proj, true, elem_bytes, stages);
    if (deep.total <= dynamic_max) return deep;
  }
  return make_rnn_shared_layout(gate, proj, has_proj, true, elem_bytes, kRnnResidentStages);
}

// How the persistent kernel with streamed weights uses the shared memory its stage buffers leave (one block per
// SM, so every byte of the device's opt-in size is the block's): it keeps the first k chunks of its gate rows
// there for the whole layer, and streams only the rest each step. Why: each streamed chunk costs a step
// ~1-2 us on the H200 (087a77a: bfloat16 H = 1024 streamed 13.1 us a step against 8.9 resident, 4 chunks;
// H = 2048 27.9, 8 chunks), so a kept chunk is that much less to wait for. Not run on a GPU yet.
//   kNone   stream every chunk (the kernel up to 2026-11-30)
//   kSpare  keep what fits beside the deepest staging that fits (three buffers where they fit)
//   kMost   keep the most chunks, with two buffers where that keeps more than kSpare (bfloat16 H = 2048 on an
//           H100 / H200, 64 LSTM gate rows a block: 3 of 8 chunks, against 1 with three buffers; 48 GRU rows: 5
//           against 3)
enum class RnnKeptChunks : int { kNone = 0, kSpare = 1, kMost = 2 };

// The streamed layout of a persistent block under `policy`, keeping at most `cap` chunks: kRnnStreamedStages
// buffers where `dynamic_max` bytes hold them, else kRnnResidentStages (which may not fit either: then its total
// is past dynamic_max, kept_chunks 0).
RAGGED_HOST_DEVICE RnnSharedLayout plan_streamed_layout(const RnnGemmGeometry& gate, const RnnGemmGeometry& proj,
                                                        bool has_proj, int elem_bytes, std::size_t dynamic_max,
                                                        RnnKeptChunks policy, int cap) {
  const auto keeping = [&](int stages) {
    const RnnSharedLayout bare = make_rnn_shared_layout(gate, proj, has_proj, false, elem_bytes, stages, 0);
    if (policy == RnnKeptChunks::kNone || bare.total >= dynamic_max) return bare;
    std::size_t room = (dynamic_max - bare.total) / bare.weight_buffer;
    const int chunks = rnn_k_chunks(gate);
    int kept = static_cast<int>(room < static_cast<std::size_t>(chunks) ? room : static_cast<std::size_t>(chunks));
    kept = kept < cap ? kept : (cap > 0 ? cap : 0);
    return make_rnn_shared_layout(gate, proj, has_proj, false, elem_bytes, stages, kept);
  };
  const RnnSharedLayout deep = keeping(kRnnStreamedStages);
  if (deep.total > dynamic_max) return keeping(kRnnResidentStages);
  if (policy != RnnKeptChunks::kMost) return deep;
  const RnnSharedLayout shallow = keeping(kRnnResidentStages);
  return shallow.kept_chunks > deep.kept_chunks ? shallow : deep;
}

}  // namespace detail
}  // namespace ragged
