// Internal device helpers shared by the attention kernels: sequence spans from offsets or lengths, the
// query-tile schedule (which block works on which sequence), the causal / length mask bounds, exp2.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "async_copy.cuh"
#include "attention_launch.h"
#include "ragged/view.h"
#include "warp_search.cuh"

namespace ragged {
namespace detail {

constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------------------------------------------

struct SeqSpan {
  std::int64_t start;   // first row in the buffer
  std::int64_t length;  // rows, clamped so that [start, start + length) lies in [0, rows)
};

__device__ __forceinline__ std::int64_t load_index(const void* p, bool index64, std::int64_t i) {
  return index64 ? static_cast<const std::int64_t*>(p)[i]
                 : static_cast<std::int64_t>(static_cast<const std::int32_t*>(p)[i]);
}

// Sequence b's rows, clamped as every ragged kernel clamps them (clamped_row_range, view.h).
__device__ __forceinline__ SeqSpan seq_span(const AttentionSeqIndex& s, std::int64_t b) {
  if (s.offsets == nullptr) {
    std::int64_t length = load_index(s.lengths, s.index64, b);
    length = length < 0 ? 0 : (length > s.max_len ? s.max_len : length);
    return SeqSpan{b * s.max_len, length};
  }
  std::int64_t begin = 0, end = 0;
  if (s.index64) clamped_row_range(static_cast<const std::int64_t*>(s.offsets), b, s.rows, begin, end);
  else clamped_row_range(static_cast<const std::int32_t*>(s.offsets), b, s.rows, begin, end);
  return SeqSpan{begin, end - begin};
}

// Where sequence b's slots start in the buffer (b may equal batch): offsets[b] clamped into [0, rows], or
// b * max_len for a padded layout.
__device__ __forceinline__ std::int64_t seq_origin(const AttentionSeqIndex& s, std::int64_t b) {
  if (s.offsets == nullptr) return b * s.max_len;
  const std::int64_t o = load_index(s.offsets, s.index64, b);
  return o < 0 ? 0 : (o > s.rows ? s.rows : o);
}

// ---------------------------------------------------------------------------------------------------------------
// The query-tile schedule, without a scan and without a host-side maximum length.
//
// Query tiles hold `tile` rows. Sequence b owns the block slots [first_slot(b), first_slot(b + 1)) with
//   first_slot(b) = floor(origin(b) / tile) + b.
// That range has floor(o_{b+1} / tile) - floor(o_b / tile) + 1 >= ceil(length_b / tile) slots, so every query
// tile gets a slot, and the slots of all sequences number at most floor(rows / tile) + batch: the grid size,
// known on the host. Slots past a sequence's tiles (at most one per sequence) exit at once.
// ---------------------------------------------------------------------------------------------------------------

__device__ __forceinline__ std::int64_t first_slot(const AttentionSeqIndex& s, std::int64_t b, int tile) {
  return seq_origin(s, b) / tile + b;
}

// The sequence that owns `slot`: the largest b in [0, batch) with first_slot(b) <= slot, or -1 when there is
// none (only with malformed offsets). Searched by the whole warp (every lane must call it).
__device__ __forceinline__ std::int64_t find_slot_owner(const AttentionSeqIndex& s, std::int64_t batch, int tile,
                                                         std::int64_t slot) {
  return warp_search_last(batch, [&](std::int64_t b) { return first_slot(s, b, tile) <= slot; });
}

// What one block computes: query rows [m0, m0 + tile) of sequence b (fewer at the sequence's end).
struct QueryTile {
  bool valid;
  std::int64_t b;
  SeqSpan q, k;
  std::int64_t m0;      // first query row of the tile, within the sequence
  int rows;             // query rows of the tile that exist (1..tile)
};

__device__ __forceinline__ QueryTile find_query_tile(const AttentionParams& p, int tile, std::int64_t slot) {
  QueryTile t{};
  t.valid = false;
  const std::int64_t b = find_slot_owner(p.q_seq, p.batch, tile, slot);
  if (b < 0) return t;
  t.b = b;
  t.q = seq_span(p.q_seq, b);
  const std::int64_t tiles = (t.q.length + tile - 1) / tile;
  const std::int64_t local = slot - first_slot(p.q_seq, b, tile);
  if (local < 0 || local >= tiles) return t;
  // Reverse order within a sequence: the last tiles see the most keys under a causal mask, so they start first
  // and the short ones fill in behind them.
  t.m0 = (tiles - 1 - local) * tile;
  const std::int64_t rows = t.q.length - t.m0;
  t.rows = static_cast<int>(rows < tile ? rows : tile);
  t.k = seq_span(p.k_seq, b);
  t.valid = true;
  return t;
}

// ---------------------------------------------------------------------------------------------------------------
// Masks. Query i sees key j iff j < L_k and, when causal, j <= i + (L_k - L_q) (bottom-right aligned).
// ---------------------------------------------------------------------------------------------------------------

// Keys [0, end) that some row of the tile may see.
__device__ __forceinline__ std::int64_t visible_key_end(const QueryTile& t, bool causal) {
  if (!causal) return t.k.length;
  const std::int64_t last_row = t.m0 + t.rows - 1;
  const std::int64_t end = last_row + (t.k.length - t.q.length) + 1;
  return end < 0 ? 0 : (end > t.k.length ? t.k.length : end);
}

// Whether key tile [key0, key0 + key_tile) needs the element-wise mask for the tile's rows: it runs past the
// keys, or (causal) some key in it lies right of the diagonal of the tile's first row.
__device__ __forceinline__ bool key_tile_needs_mask(const QueryTile& t, bool causal, std::int64_t key0, int key_tile) {
  if (key0 + key_tile > t.k.length) return true;
  return causal && key0 + key_tile - 1 > t.m0 + (t.k.length - t.q.length);
}

__device__ __forceinline__ bool key_hidden(std::int64_t row, std::int64_t key, std::int64_t k_length,
                                           std::int64_t diagonal, bool causal) {
  return key >= k_length || (causal && key > row + diagonal);
}

// ---------------------------------------------------------------------------------------------------------------
// exp2
// ---------------------------------------------------------------------------------------------------------------

// 2^x with the MUFU unit (about 2 ulp; -inf -> +0, which is what masked scores need).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---------------------------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------------------------

// Grid x of a launch with query tiles of `tile` rows (see the schedule above).
inline Status attention_grid(const AttentionParams& p, int tile, dim3& grid) {
  const std::int64_t slots = p.q_seq.rows / tile + p.batch;
  if (slots > INT_MAX)
    return fail(Status::kSizeOverflow, "attention: " + std::to_string(slots) +
                                           " query-tile slots exceed the grid limit; split the batch");
  grid = dim3(static_cast<unsigned>(slots), static_cast<unsigned>(p.heads_q), 1);
  return Status::kSuccess;
}

}  // namespace detail
}  // namespace ragged
