// Ragged <-> padded copies of narrow rows, a group of tokens per thread. Where a token (a row of the ragged
// values) is 1, 2, 4 or 8 bytes and aligned to its size, and the output is 16-byte aligned, a thread writes 16
// bytes of the output: kTokens = 16 / row_bytes consecutive tokens (padded slots, or ragged rows), each gathered
// with a load of its own. convert.cu's kernels move one vector per thread, at most a token here, and pay per
// vector a division by max_len or a search of the offsets, then the sequence's clamped range and slot map; here
// that is paid once per group, and again only where the group crosses into another sequence. Why: at D = 1 that
// arithmetic held both directions to 0.22-0.34 of a copy of the same bytes on the H200 (087a77a, 64 MiB of
// float tokens in rows of mean 256: ragged_to_padded 147 us and padded_to_ragged 152, copies 51 and 35 us),
// where D >= 8 ran at 0.80-0.92.
//
// The outputs are convert.cu's, byte for byte: ragged_to_padded's for any offsets (a padded slot depends only on
// its own clamped sequence), padded_to_ragged's for sorted offsets (a ragged row is found by the same search,
// find_sequence over the tile's range of sequences, stepped forward within a group only past offsets[b + 1],
// which for sorted offsets is where the search's answer changes; malformed offsets may pick another sequence
// than convert.cu's search, in bounds either way). Rows outside every sequence are not written (a group with one
// is written token by token).
#include <climits>
#include <cstdint>
#include <string>

#include "byte_vector.h"
#include "convert_launch.h"
#include "fast_divmod.h"
#include "launch.cuh"
#include "sequence_search.cuh"
#include "validate.h"

namespace ragged {
namespace detail {
namespace {

constexpr int kThreads = 256;

// 16 bytes of tokens, stored with one 16-byte access.
template <typename Token>
struct alignas(16) TokenGroup {
  static constexpr int kTokens = 16 / static_cast<int>(sizeof(Token));
  Token t[kTokens];
};

// Groups a thread takes per tile: 16 tokens' loads in flight (8 of 8 bytes), as convert.cu's 4 vectors of up to
// 16 bytes. (8 groups of 8-byte tokens took padded_to_ragged to 97 registers, 2 blocks per SM.)
template <typename Token>
constexpr int kGroupsPerThread =
    TokenGroup<Token>::kTokens >= 4 ? (16 + TokenGroup<Token>::kTokens - 1) / TokenGroup<Token>::kTokens : 4;

// Group g of an output of `tokens` tokens: one 16-byte store, or token by token where the output ends inside it.
template <typename Token>
__device__ __forceinline__ void store_group(TokenGroup<Token>* dst, std::int64_t g, const TokenGroup<Token>& group,
                                            std::int64_t tokens) {
  constexpr int kTokens = TokenGroup<Token>::kTokens;
  if ((g + 1) * kTokens <= tokens) {
    *reinterpret_cast<uint4*>(dst + g) = *reinterpret_cast<const uint4*>(&group);
    return;
  }
  Token* out = reinterpret_cast<Token*>(dst + g);
#pragma unroll
  for (int j = 0; j < kTokens; ++j)
    if (g * kTokens + j < tokens) out[j] = group.t[j];
}

// ---------------------------------------------------------------------------------------------------------
// ragged -> padded
// ---------------------------------------------------------------------------------------------------------

template <typename Token, typename OffsetT, typename Divider>
struct ToPaddedTokenParams {
  const Token* src;  // ragged values, a token each
  const OffsetT* offsets;
  TokenGroup<Token>* dst;  // the padded tensor's batch * max_len slots, in groups
  Token pad;
  std::int64_t batch;
  std::int64_t nnz;
  std::int64_t max_len;
  std::int64_t slots;   // batch * max_len
  std::int64_t groups;  // slots / kTokens, rounded up
  Divider per_sequence;  // divides a slot index by max_len
  Align align;
  Truncate trunc;
};

// Sequence b's kept tokens as its slots: slot s in [lead, lead_end) holds token s + shift of the values.
struct PaddedSequence {
  std::int64_t lead = 0;
  std::int64_t lead_end = 0;
  std::int64_t shift = 0;
};

template <typename Params>
__device__ __forceinline__ PaddedSequence padded_sequence(const Params& p, std::int64_t b) {
  if (b >= p.batch) return PaddedSequence{};  // past the last slot: the tail of a last, partial group
  std::int64_t begin = 0, end = 0;
  clamped_row_range(p.offsets, b, p.nnz, begin, end);
  const SlotMap m = slot_map(end - begin, p.max_len, p.align, p.trunc);
  return PaddedSequence{m.lead, m.lead + m.kept, begin + m.skip - m.lead};
}

// Group g's tokens: slot after slot from the group's first, into the next sequence where a slot reaches max_len.
template <typename Token, typename OffsetT, typename Divider>
__device__ __forceinline__ TokenGroup<Token> gather_padded_group(
    const ToPaddedTokenParams<Token, OffsetT, Divider>& p, std::int64_t g) {
  constexpr int kTokens = TokenGroup<Token>::kTokens;
  std::int64_t b = 0, slot = 0;  // the sequence of the group's first slot, and that slot within it
  p.per_sequence.divmod(g * kTokens, b, slot);
  PaddedSequence s = padded_sequence(p, b);
  TokenGroup<Token> group;
#pragma unroll
  for (int j = 0; j < kTokens; ++j, ++slot) {
    if (slot == p.max_len) {
      slot = 0;
      s = padded_sequence(p, ++b);
    }
    group.t[j] = slot >= s.lead && slot < s.lead_end ? __ldg(p.src + slot + s.shift) : p.pad;
  }
  return group;
}

template <typename Token, typename OffsetT, typename Divider>
__global__ void __launch_bounds__(kThreads)
    ragged_to_padded_tokens_kernel(const __grid_constant__ ToPaddedTokenParams<Token, OffsetT, Divider> p) {
  constexpr int kGroups = kGroupsPerThread<Token>;
  constexpr std::int64_t kTileGroups = static_cast<std::int64_t>(kThreads) * kGroups;
  const std::int64_t grid_stride = static_cast<std::int64_t>(gridDim.x) * kTileGroups;
  for (std::int64_t tile = blockIdx.x * kTileGroups; tile < p.groups; tile += grid_stride) {
    TokenGroup<Token> group[kGroups];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const std::int64_t g = tile + k * kThreads + threadIdx.x;
      if (g < p.groups) group[k] = gather_padded_group(p, g);
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const std::int64_t g = tile + k * kThreads + threadIdx.x;
      if (g < p.groups) store_group(p.dst, g, group[k], p.slots);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// padded -> ragged
// ---------------------------------------------------------------------------------------------------------

template <typename Token, typename OffsetT>
struct ToRaggedTokenParams {
  const Token* src;  // the padded tensor's batch * max_len slots
  TokenGroup<Token>* dst;  // ragged values, nnz tokens, in groups
  const OffsetT* offsets;
  Token fill;
  std::int64_t batch;
  std::int64_t nnz;
  std::int64_t max_len;
  std::int64_t groups;  // nnz / kTokens, rounded up
  Align align;
  Truncate trunc;
};

// The sequence b a search gave for a token, as the group's token loop uses it: the tokens it owns,
// [begin, end); those of them the padded tensor holds, [keep_begin, keep_end), token t at slot t + shift; and
// `next` (offsets[b + 1], or past every token where b is the tile's last sequence): from there on b is no longer
// the answer of find_sequence for sorted offsets.
struct RaggedSequence {
  std::int64_t b = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t keep_begin = 0;
  std::int64_t keep_end = 0;
  std::int64_t shift = 0;
  std::int64_t next = 0;
};

template <typename Params>
__device__ __forceinline__ RaggedSequence ragged_sequence(const Params& p, std::int64_t b, std::int64_t hi) {
  RaggedSequence s;
  s.b = b;
  clamped_row_range(p.offsets, b, p.nnz, s.begin, s.end);
  const SlotMap m = slot_map(s.end - s.begin, p.max_len, p.align, p.trunc);
  s.keep_begin = s.begin + m.skip;
  s.keep_end = s.keep_begin + m.kept;
  s.shift = b * p.max_len + m.lead - s.keep_begin;
  s.next = b < hi ? static_cast<std::int64_t>(p.offsets[b + 1]) : LLONG_MAX;
  return s;
}

// Group g's tokens, from the sequences [lo, hi] of its tile; bit j of `owned`: token j lies in its sequence's
// rows (else it is left unwritten, as convert.cu leaves it).
template <typename Token, typename OffsetT>
__device__ __forceinline__ TokenGroup<Token> gather_ragged_group(const ToRaggedTokenParams<Token, OffsetT>& p,
                                                                 std::int64_t g, std::int64_t lo, std::int64_t hi,
                                                                 unsigned& owned) {
  constexpr int kTokens = TokenGroup<Token>::kTokens;
  const std::int64_t first = g * kTokens;
  RaggedSequence s = ragged_sequence(p, find_sequence(p.offsets, lo, hi, first), hi);
  TokenGroup<Token> group;
  owned = 0;
#pragma unroll
  for (int j = 0; j < kTokens; ++j) {
    const std::int64_t token = first + j;
    group.t[j] = p.fill;
    if (token >= p.nnz) continue;
    if (token >= s.next) {  // past offsets[b + 1]: b + 1 holds it unless offsets[b + 2] <= token too
      std::int64_t b = s.b + 1;
      if (b < hi && static_cast<std::int64_t>(p.offsets[b + 1]) <= token)
        b = find_sequence(p.offsets, b + 1, hi, token);
      s = ragged_sequence(p, b, hi);
    }
    if (token >= s.keep_begin && token < s.keep_end) group.t[j] = __ldg(p.src + token + s.shift);
    if (token >= s.begin && token < s.end) owned |= 1u << j;
  }
  return group;
}

template <typename Token, typename OffsetT>
__global__ void __launch_bounds__(kThreads)
    padded_to_ragged_tokens_kernel(const __grid_constant__ ToRaggedTokenParams<Token, OffsetT> p) {
  constexpr int kTokens = TokenGroup<Token>::kTokens;
  constexpr int kGroups = kGroupsPerThread<Token>;
  constexpr std::int64_t kTileGroups = static_cast<std::int64_t>(kThreads) * kGroups;
  static_assert(kTokens <= 16, "a group is 16 bytes of tokens of at least 1 byte");
  constexpr unsigned kAllOwned = (1u << kTokens) - 1u;
  // The sequences of the tile's first and last tokens: every token in between belongs to one in that range.
  __shared__ std::int64_t tile_sequences[2];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const std::int64_t grid_stride = static_cast<std::int64_t>(gridDim.x) * kTileGroups;
  for (std::int64_t tile = blockIdx.x * kTileGroups; tile < p.groups; tile += grid_stride) {
    if (warp < 2) {  // warp 0 searches for the first token, warp 1 for the last, concurrently
      const std::int64_t token = warp == 0 ? tile * kTokens : min((tile + kTileGroups) * kTokens, p.nnz) - 1;
      const std::int64_t b = warp_find_sequence(p.offsets, 0, p.batch - 1, token);
      if (threadIdx.x % 32 == 0) tile_sequences[warp] = b;
    }
    __syncthreads();
    const std::int64_t lo = tile_sequences[0];
    const std::int64_t hi = max(lo, tile_sequences[1]);  // max(): unsorted offsets may invert them

    TokenGroup<Token> group[kGroups];
    unsigned owned[kGroups];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const std::int64_t g = tile + k * kThreads + threadIdx.x;
      owned[k] = 0;
      if (g < p.groups) group[k] = gather_ragged_group(p, g, lo, hi, owned[k]);
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const std::int64_t g = tile + k * kThreads + threadIdx.x;
      if (g >= p.groups) continue;
      if (owned[k] == kAllOwned) {  // every token of a whole group (the output's end is not owned)
        store_group(p.dst, g, group[k], p.nnz);
      } else {
        Token* out = reinterpret_cast<Token*>(p.dst + g);
#pragma unroll
        for (int j = 0; j < kTokens; ++j)
          if (owned[k] >> j & 1u) out[j] = group[k].t[j];
      }
    }
    __syncthreads();  // tile_sequences is rewritten for the next tile
  }
}

// Calls launch(Token{}) with the unsigned type of `row_bytes` bytes (1, 2, 4 or 8).
template <typename Launch>
Status with_token_type(std::int64_t row_bytes, Launch&& launch) {
  switch (row_bytes) {
    case 1: return launch(byte_vector_t<1>{});
    case 2: return launch(byte_vector_t<2>{});
    case 4: return launch(byte_vector_t<4>{});
    case 8: return launch(byte_vector_t<8>{});
    default:
      return fail(Status::kInvalidArgument,
                  "token groups: no kernel for rows of " + std::to_string(row_bytes) + " bytes");
  }
}

// RAGGED_CONVERT_TOKEN_GROUPS=0 in the environment starts a process whose conversions of narrow rows take
// convert.cu's vector kernels, to compare the two on a GPU.
bool& token_groups_setting() {
  static bool enabled = switch_from_environment("RAGGED_CONVERT_TOKEN_GROUPS");
  return enabled;
}

}  // namespace

bool convert_token_groups_enabled() { return token_groups_setting(); }
void set_convert_token_groups_enabled(bool enabled) { token_groups_setting() = enabled; }

bool token_groups_fit(std::int64_t row_bytes, const void* src, const void* dst) {
  if (!convert_token_groups_enabled()) return false;
  if (row_bytes != 1 && row_bytes != 2 && row_bytes != 4 && row_bytes != 8) return false;
  const auto address = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a); };
  // src null: it holds no rows and is never read.
  const bool src_aligned = src == nullptr || address(src) % static_cast<std::uintptr_t>(row_bytes) == 0;
  return src_aligned && address(dst) % 16 == 0;
}

template <typename OffsetT>
Status launch_ragged_to_padded_tokens(const void* d_src, const OffsetT* d_offsets, std::int64_t batch,
                                      std::int64_t nnz, void* d_dst, std::int64_t max_len, std::int64_t row_bytes,
                                      std::int64_t elem_bytes, const void* pad_element, Align align, Truncate trunc,
                                      cudaStream_t stream, bool allow_32bit_index) {
  if (batch == 0 || max_len == 0 || row_bytes == 0) return Status::kSuccess;
  return with_token_type(row_bytes, [&](auto token) {
    using Token = decltype(token);
    constexpr int kTokens = TokenGroup<Token>::kTokens;
    const std::int64_t slots = batch * max_len;
    const std::int64_t groups = (slots + kTokens - 1) / kTokens;
    unsigned blocks = 0;
    return with_divider(slots, max_len, allow_32bit_index, [&](auto divider) {
      using Divider = decltype(divider);
      const auto kernel = &ragged_to_padded_tokens_kernel<Token, OffsetT, Divider>;
      RAGGED_RETURN_IF_ERROR(resident_grid_size(kernel, kThreads, groups, kThreads * kGroupsPerThread<Token>, blocks));
      const ToPaddedTokenParams<Token, OffsetT, Divider> params{static_cast<const Token*>(d_src),
                                                                d_offsets,
                                                                static_cast<TokenGroup<Token>*>(d_dst),
                                                                replicate<sizeof(Token)>(pad_element, elem_bytes),
                                                                batch,
                                                                nnz,
                                                                max_len,
                                                                slots,
                                                                groups,
                                                                divider,
                                                                align,
                                                                trunc};
      kernel<<<blocks, kThreads, 0, stream>>>(params);
      return check_launch("ragged_to_padded_tokens_kernel");
    });
  });
}

template <typename OffsetT>
Status launch_padded_to_ragged_tokens(const void* d_src, std::int64_t max_len, void* d_dst, const OffsetT* d_offsets,
                                      std::int64_t batch, std::int64_t nnz, std::int64_t row_bytes,
                                      std::int64_t elem_bytes, const void* fill_element, Align align, Truncate trunc,
                                      cudaStream_t stream) {
  if (batch == 0 || nnz == 0 || row_bytes == 0) return Status::kSuccess;
  return with_token_type(row_bytes, [&](auto token) {
    using Token = decltype(token);
    constexpr int kTokens = TokenGroup<Token>::kTokens;
    const std::int64_t groups = (nnz + kTokens - 1) / kTokens;
    unsigned blocks = 0;
    const auto kernel = &padded_to_ragged_tokens_kernel<Token, OffsetT>;
    RAGGED_RETURN_IF_ERROR(resident_grid_size(kernel, kThreads, groups, kThreads * kGroupsPerThread<Token>, blocks));
    const ToRaggedTokenParams<Token, OffsetT> params{static_cast<const Token*>(d_src),
                                                     static_cast<TokenGroup<Token>*>(d_dst),
                                                     d_offsets,
                                                     replicate<sizeof(Token)>(fill_element, elem_bytes),
                                                     batch,
                                                     nnz,
                                                     max_len,
                                                     groups,
                                                     align,
                                                     trunc};
    kernel<<<blocks, kThreads, 0, stream>>>(params);
    return check_launch("padded_to_ragged_tokens_kernel");
  });
}

#define RAGGED_INSTANTIATE_CONVERT_TOKENS(O)                                                                     \
  template Status launch_ragged_to_padded_tokens<O>(const void*, const O*, std::int64_t, std::int64_t, void*,    \
                                                    std::int64_t, std::int64_t, std::int64_t, const void*, Align, \
                                                    Truncate, cudaStream_t, bool);                               \
  template Status launch_padded_to_ragged_tokens<O>(const void*, std::int64_t, void*, const O*, std::int64_t,    \
                                                    std::int64_t, std::int64_t, std::int64_t, const void*, Align, \
                                                    Truncate, cudaStream_t);

RAGGED_INSTANTIATE_CONVERT_TOKENS(std::int32_t)
RAGGED_INSTANTIATE_CONVERT_TOKENS(std::int64_t)

}  // namespace detail
}  // namespace ragged
