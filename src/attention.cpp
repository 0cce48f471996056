// Public attention API: argument checks, the kernel parameters and dispatch (dtype -> head_dim, each with a
// default branch that returns an error).
#include "ragged/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "attention_launch.h"
#include "validate.h"

namespace ragged {
namespace {

template <typename T>
constexpr bool kTensorCoreType = std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;

std::string str(std::int64_t v) { return std::to_string(v); }

// The sequence layout of one side: ragged (offsets) or padded (lengths, max_len, rows = batch * max_len).
template <typename OffsetT>
Status check_layout(const SequenceLayout<OffsetT>& s, std::int64_t batch, const char* name) {
  const std::string n(name);
  if (s.offsets != nullptr && s.lengths != nullptr)
    return fail(Status::kInvalidArgument, n + ": give offsets (ragged) or lengths (padded), not both");
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(s.rows, (n + ".rows").c_str()));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(s.lengths, 0, (n + ".lengths").c_str()));  // null or aligned
  if (s.offsets != nullptr) return Status::kSuccess;
  if (batch > 0 && s.lengths == nullptr)
    return fail(Status::kNullPointer, n + " has neither offsets (ragged) nor lengths (padded) for " + str(batch) +
                                          " sequences");
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(s.max_len, (n + ".max_len").c_str()));
  if (s.max_len > 0 && batch > std::numeric_limits<std::int64_t>::max() / s.max_len)
    return fail(Status::kSizeOverflow, n + ": batch * max_len overflows");
  if (s.rows != batch * s.max_len)
    return fail(Status::kInvalidArgument, n + ": a padded layout holds batch * max_len = " + str(batch) + " * " +
                                              str(s.max_len) + " rows, but rows = " + str(s.rows));
  return Status::kSuccess;
}

// One [rows, heads, head_dim] tensor: non-null when it holds anything, strides that keep every element
// addressable with int64, and the 16-byte alignment the vector copies need.
template <typename T>
Status check_heads(const void* data, std::int64_t token_stride, std::int64_t head_stride, std::int64_t rows,
                   std::int64_t heads, std::int64_t head_dim, const char* name) {
  const std::string n(name);
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(data, rows * heads * head_dim, name));
  if (token_stride < 0 || head_stride < 0)
    return fail(Status::kInvalidArgument, n + ": strides must be non-negative, got token_stride " + str(token_stride) +
                                              ", head_stride " + str(head_stride));
  // A zero stride is HeadsView's default, not a layout: every token (or head) would read the first one.
  if (rows > 1 && token_stride == 0)
    return fail(Status::kInvalidArgument, n + ": token_stride is 0 with " + str(rows) +
                                              " rows (dense: heads * head_dim; dense_heads() sets both strides)");
  if (heads > 1 && head_stride == 0)
    return fail(Status::kInvalidArgument, n + ": head_stride is 0 with " + str(heads) +
                                              " heads (dense: head_dim; dense_heads() sets both strides)");
  constexpr std::int64_t kVec = 16 / sizeof(T);
  if (token_stride % kVec != 0 || head_stride % kVec != 0)
    return fail(Status::kInvalidArgument, n + ": token_stride " + str(token_stride) + " and head_stride " +
                                              str(head_stride) + " must be multiples of " + str(kVec) +
                                              " elements (16-byte vector copies)");
  if (reinterpret_cast<std::uintptr_t>(data) % 16 != 0)
    return fail(Status::kInvalidArgument, n + " must be 16-byte aligned");
  if (rows == 0) return Status::kSuccess;
  // The last element, (rows - 1) * token_stride + (heads - 1) * head_stride + head_dim - 1, must fit int64.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(sizeof(T));
  if (head_stride > 0 && heads - 1 > (max - head_dim) / head_stride)
    return fail(Status::kSizeOverflow, n + ": heads * head_stride overflows int64");
  const std::int64_t span = (heads - 1) * head_stride + head_dim;
  if (token_stride > 0 && rows - 1 > (max - span) / token_stride)
    return fail(Status::kSizeOverflow, n + ": rows * token_stride overflows int64");
  return Status::kSuccess;
}

// Whether two [token, head] rows of head_dim elements of O share an element: blocks of different heads or query
// tiles would then race on it and O would depend on their order. Rows (t1, h1) and (t2, h2) overlap iff
// |dt * token_stride + dh * head_stride| < head_dim for dt = t1 - t2, dh = h1 - h2, not both 0. For each dh >= 1
// (dh < 0 is the same pair; dh = 0 needs token_stride >= head_dim) the expression grows with dt, so the dts on
// either side of its root -dh * head_stride / token_stride <= 0, clamped to dt >= 1 - rows, are the ones to try.
// check_heads has bounded (rows - 1) * token_stride and (heads - 1) * head_stride, and the sum adds a term <= 0.
bool rows_overlap(std::int64_t token_stride, std::int64_t head_stride, std::int64_t rows, std::int64_t heads,
                  std::int64_t head_dim) {
  if (rows == 0) return false;
  if (rows > 1 && token_stride < head_dim) return true;  // dh = 0, dt = 1
  for (std::int64_t dh = 1; dh < heads; ++dh) {
    const std::int64_t x = dh * head_stride;
    if (x < head_dim) return true;  // dt = 0
    if (rows == 1) continue;
    const std::int64_t ceiling = -(x / token_stride);  // token_stride >= head_dim > 0 here
    for (std::int64_t dt : {ceiling - 1, ceiling}) {
      const std::int64_t d = x + std::max(dt, 1 - rows) * token_stride;
      if (d > -head_dim && d < head_dim) return true;
    }
  }
  return false;
}

// The tensor-core kernel's tile when the caller leaves it to us: 128 rows once the average sequence covers one
// of them, else 64 (at most 63 wasted rows per sequence). Measured on an H100 (bf16, d128, docs/results/
// 2026-11-24-*): 128 was the faster in every case, by 7-17% at 256 to 4096 rows per sequence on average and by
// 2.3% at 131 (181.6 against 177.5 TFLOP/s), where the former threshold of two tiles chose 64. Below 128 rows
// nothing is measured yet. Uses host-known sizes only; a padded layout counts max_len as its average.
int automatic_mma_tile(std::int64_t q_rows, std::int64_t batch) {
  constexpr std::int64_t kLongTile = 128, kShortTile = 64;
  return batch > 0 && q_rows >= kLongTile * batch ? static_cast<int>(kLongTile) : static_cast<int>(kShortTile);
}

template <typename T, typename OffsetT>
int query_tile_for(const AttentionArgs<T, OffsetT>& a) {
  if (kTensorCoreType<T>) {
    const int tile = a.query_tile != 0 ? a.query_tile : automatic_mma_tile(a.q_seq.rows, a.batch);
    return detail::attention_mma_supports(a.head_dim, tile) ? tile : 0;
  }
  const int tile = detail::attention_simt_query_tile(a.head_dim);
  return a.query_tile == 0 || a.query_tile == tile ? tile : 0;
}

template <typename T, typename OffsetT>
Status check_args(const AttentionArgs<T, OffsetT>& a) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(a.batch, "batch"));
  if (a.heads_q < 1 || a.heads_kv < 1)
    return fail(Status::kInvalidArgument, "attention: heads_q = " + str(a.heads_q) + " and heads_kv = " +
                                              str(a.heads_kv) + " must be at least 1");
  if (a.heads_q % a.heads_kv != 0)
    return fail(Status::kInvalidArgument, "attention: heads_kv = " + str(a.heads_kv) + " must divide heads_q = " +
                                              str(a.heads_q));
  if (a.heads_q > 65535)
    return fail(Status::kUnsupportedShape, "attention: heads_q = " + str(a.heads_q) + " exceeds 65535");
  if (a.head_dim != 64 && a.head_dim != 128)
    return fail(Status::kUnsupportedShape,
                "attention: head_dim " + str(a.head_dim) + " is not supported (64 or 128)");
  if (!(std::isfinite(a.scale) && a.scale > 0.0f))
    return fail(Status::kInvalidArgument,
                "attention: scale = " + std::to_string(a.scale) + " must be finite and positive");
  if (a.query_tile != 0 && query_tile_for(a) == 0)
    return fail(Status::kInvalidArgument, "attention: query_tile = " + str(a.query_tile) +
                                              " is not a tile of this kernel (0 for automatic; 64 or 128 for half / "
                                              "bfloat16; 32 for float)");
  RAGGED_RETURN_IF_ERROR(check_layout(a.q_seq, a.batch, "q_seq"));
  RAGGED_RETURN_IF_ERROR(check_layout(a.k_seq, a.batch, "k_seq"));
  if (a.q_seq.offsets != nullptr)
    RAGGED_RETURN_IF_ERROR(detail::check_pointer(a.q_seq.offsets, a.batch + 1, "q_seq.offsets"));
  if (a.k_seq.offsets != nullptr)
    RAGGED_RETURN_IF_ERROR(detail::check_pointer(a.k_seq.offsets, a.batch + 1, "k_seq.offsets"));
  const std::int64_t rq = a.q_seq.rows, rk = a.k_seq.rows, d = a.head_dim;
  RAGGED_RETURN_IF_ERROR(detail::check_product(rq, a.heads_q, d, sizeof(T), "q"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(rk, a.heads_kv, d, sizeof(T), "k"));
  RAGGED_RETURN_IF_ERROR(check_heads<T>(a.q.data, a.q.token_stride, a.q.head_stride, rq, a.heads_q, d, "q"));
  RAGGED_RETURN_IF_ERROR(check_heads<T>(a.k.data, a.k.token_stride, a.k.head_stride, rk, a.heads_kv, d, "k"));
  RAGGED_RETURN_IF_ERROR(check_heads<T>(a.v.data, a.v.token_stride, a.v.head_stride, rk, a.heads_kv, d, "v"));
  RAGGED_RETURN_IF_ERROR(check_heads<T>(a.o.data, a.o.token_stride, a.o.head_stride, rq, a.heads_q, d, "o"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(a.lse, 0, "lse"));  // optional: null or aligned
  if (rows_overlap(a.o.token_stride, a.o.head_stride, rq, a.heads_q, d))
    return fail(Status::kInvalidArgument, "attention: o's strides (token_stride " + str(a.o.token_stride) +
                                              ", head_stride " + str(a.o.head_stride) + ") make rows of " +
                                              str(a.heads_q) + " heads x " + str(d) + " overlap");
  // The kernels count a sequence's key tiles (32 keys or more each) in an int.
  constexpr std::int64_t kMaxKeyRows = std::int64_t{32} * std::numeric_limits<int>::max();
  if (rk > kMaxKeyRows)
    return fail(Status::kSizeOverflow, "attention: k_seq.rows = " + str(rk) + " exceeds " + str(kMaxKeyRows));
  // The grid's query-tile slots (attention_grid, checked again at the launch), so that the query refuses what
  // the run would.
  const int tile = query_tile_for(a);
  const std::int64_t slots = tile > 0 ? rq / tile + a.batch : 0;
  if (slots > std::numeric_limits<int>::max())
    return fail(Status::kSizeOverflow, "attention: " + str(slots) + " query-tile slots (q rows / " + str(tile) +
                                           " + batch) exceed the grid limit; split the batch");
  return Status::kSuccess;
}

template <typename OffsetT>
detail::AttentionSeqIndex seq_index(const SequenceLayout<OffsetT>& s) {
  detail::AttentionSeqIndex index;
  index.offsets = s.offsets;
  index.lengths = s.lengths;
  index.max_len = s.max_len;
  index.rows = s.rows;
  index.index64 = sizeof(OffsetT) == 8;
  return index;
}

// Both kernels use cp.async; the tensor-core one also bfloat16 mma: compute capability 8.0 or newer.
Status check_device() {
  int device = 0, major = 0;
  RAGGED_RETURN_IF_ERROR(from_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  RAGGED_RETURN_IF_ERROR(from_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                                   "cudaDeviceGetAttribute(ComputeCapabilityMajor)"));
  if (major < 8)
    return fail(Status::kUnsupportedDType, "attention needs compute capability 8.0 or newer, the device has " +
                                               str(major) + ".x");
  return Status::kSuccess;
}

}  // namespace

template <typename T, typename OffsetT>
int attention_query_tile(const AttentionArgs<T, OffsetT>& args) {
  return query_tile_for(args);
}

template <typename T, typename OffsetT>
Status varlen_attention_forward(void* d_workspace, std::size_t& workspace_bytes, const AttentionArgs<T, OffsetT>& a,
                                cudaStream_t stream) {
  static_assert(kTensorCoreType<T> || std::is_same<T, float>::value, "attention: T is float, half or bfloat16");
  RAGGED_RETURN_IF_ERROR(check_args(a));
  if (d_workspace == nullptr) {
    workspace_bytes = detail::kNoWorkspaceBytes;  // none: the schedule is computed on the fly (attention_common.cuh)
    return Status::kSuccess;
  }
  if (a.batch == 0 || a.q_seq.rows == 0) return Status::kSuccess;  // no query, nothing to write
  RAGGED_RETURN_IF_ERROR(check_device());

  detail::AttentionParams p;
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.lse = a.lse;
  p.q_token_stride = a.q.token_stride;
  p.q_head_stride = a.q.head_stride;
  p.k_token_stride = a.k.token_stride;
  p.k_head_stride = a.k.head_stride;
  p.v_token_stride = a.v.token_stride;
  p.v_head_stride = a.v.head_stride;
  p.o_token_stride = a.o.token_stride;
  p.o_head_stride = a.o.head_stride;
  p.q_seq = seq_index(a.q_seq);
  p.k_seq = seq_index(a.k_seq);
  p.batch = a.batch;
  p.heads_q = a.heads_q;
  p.heads_per_kv = a.heads_q / a.heads_kv;
  p.scale = a.scale;
  p.scale_log2 = static_cast<float>(static_cast<double>(a.scale) * 1.4426950408889634);  // scale * log2(e)
  p.causal = a.causal;

  const int tile = query_tile_for(a);
  if (std::is_same<T, half>::value) return detail::launch_attention_mma<__half>(p, a.head_dim, tile, stream);
  if (std::is_same<T, bfloat16>::value)
    return detail::launch_attention_mma<__nv_bfloat16>(p, a.head_dim, tile, stream);
  if (std::is_same<T, float>::value) return detail::launch_attention_simt(p, a.head_dim, stream);
  return fail(Status::kUnsupportedDType, "attention: no kernel for this element type");
}

#define RAGGED_INSTANTIATE_ATTENTION(T, O)                                                                     \
  template Status varlen_attention_forward<T, O>(void*, std::size_t&, const AttentionArgs<T, O>&, cudaStream_t); \
  template int attention_query_tile<T, O>(const AttentionArgs<T, O>&);

RAGGED_INSTANTIATE_ATTENTION(float, std::int32_t)
RAGGED_INSTANTIATE_ATTENTION(float, std::int64_t)
RAGGED_INSTANTIATE_ATTENTION(half, std::int32_t)
RAGGED_INSTANTIATE_ATTENTION(half, std::int64_t)
RAGGED_INSTANTIATE_ATTENTION(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_ATTENTION(bfloat16, std::int64_t)


}  // namespace ragged
