// Public segment reduction / softmax API: argument checks, geometry, workspace layout and dispatch.
#include "ragged/segment_reduce.h"

#include <algorithm>
#include <string>

#include "segment_launch.h"
#include "validate.h"
#include "workspace_layout.h"

namespace ragged {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMean: return "mean";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "unknown";
}

namespace {

using detail::RowWork;
using detail::SegmentGeometry;
using detail::SegmentLayout;

// per_sequence: the op has a [batch, inner] output (or gradient of one), whose size is checked too; softmax's
// are [nnz, inner], as the values.
template <typename T, typename OffsetT>
Status check_ragged(const RaggedView<const T, OffsetT>& v, bool needs_values, bool per_sequence, const char* op) {
  RAGGED_RETURN_IF_ERROR(detail::check_batch(v.batch, "batch"));
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(v.nnz, "nnz"));
  if (v.inner < 1)
    return fail(Status::kUnsupportedShape, std::string(op) + ": inner size " + std::to_string(v.inner) +
                                               " must be at least 1");
  RAGGED_RETURN_IF_ERROR(detail::check_product(v.nnz, v.inner, 1, sizeof(T), "values"));
  if (per_sequence)
    RAGGED_RETURN_IF_ERROR(detail::check_product(v.batch, v.inner, 1, sizeof(std::int64_t), "output"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(v.offsets, v.batch + 1, "offsets"));
  if (needs_values) RAGGED_RETURN_IF_ERROR(detail::check_pointer(v.values, v.nnz * v.inner, "values"));
  return Status::kSuccess;
}

// The row pass's group sums, the plan, CUB's scan storage, the partials and their arrival counters, carved from
// one workspace. Query and run share this code.
struct SegmentScratch {
  RowWork* group_work = nullptr;
  RowWork* plan = nullptr;
  void* cub = nullptr;
  std::size_t cub_bytes = 0;
  float* partial_a = nullptr;
  void* partial_b = nullptr;
  std::int64_t capacity = 0;
  int* arrivals = nullptr;  // [capacity * tiles], the merge trees' arrival counters
};

// The op's geometry `g` and the one it would have at the other vector width (`other`): the workspace is sized for
// whichever needs more, so that its size does not depend on where the tensors sit. A caller may query once and
// run on other pointers; the vector width (16 bytes when the pointers are aligned) changes the chunk size.
struct Geometries {
  SegmentGeometry g;
  SegmentGeometry other;
};

// The merge trees' arrival counters per partial slot and column tile (SegmentLayout::arrivals), after the partials.
void carve_arrivals(detail::WorkspaceLayout& layout, const Geometries& gs, std::int64_t nnz, std::int64_t batch,
                    SegmentScratch& scratch) {
  const std::int64_t other = detail::max_partial_chunks(nnz, batch, gs.other) * gs.other.tiles;
  scratch.arrivals = layout.take_array<int>(std::max(scratch.capacity * gs.g.tiles, other));
}

// The pieces every segment op needs: group sums, plan and, where CUB scans the plan, its storage.
Status carve_plan(detail::WorkspaceLayout& layout, std::int64_t batch, SegmentScratch& scratch) {
  const std::int64_t groups = detail::row_groups(batch);
  scratch.group_work = layout.take_array<RowWork>(groups);
  scratch.plan = layout.take_array<RowWork>(groups + 1);
  if (detail::plan_scanned_in_kernel(batch)) return Status::kSuccess;
  RAGGED_RETURN_IF_ERROR(detail::launch_segment_plan(nullptr, scratch.cub_bytes, nullptr, groups, nullptr, nullptr));
  scratch.cub = layout.take(scratch.cub_bytes);
  return Status::kSuccess;
}

Status carve_scratch(detail::WorkspaceLayout& layout, std::int64_t batch, std::int64_t nnz, const Geometries& gs,
                     std::size_t partial_b_elem_bytes, SegmentScratch& scratch) {
  const SegmentGeometry& g = gs.g;
  RAGGED_RETURN_IF_ERROR(carve_plan(layout, batch, scratch));
  scratch.capacity = detail::max_partial_chunks(nnz, batch, g);
  const std::int64_t rows = std::max(scratch.capacity, detail::max_partial_chunks(nnz, batch, gs.other)) * g.inner;
  scratch.partial_a = layout.take_array<float>(rows);
  if (partial_b_elem_bytes > 0) scratch.partial_b = layout.take(static_cast<std::size_t>(rows) * partial_b_elem_bytes);
  carve_arrivals(layout, gs, nnz, batch, scratch);
  return Status::kSuccess;
}

// Query phase: report the size. Run phase: check the caller's size and fill the kernels' layout (the launchers
// run the row pass and the plan scan).
template <typename OffsetT>
Status prepare(void* d_workspace, std::size_t& workspace_bytes, const detail::WorkspaceLayout& layout,
               const SegmentScratch& scratch, const OffsetT* offsets, std::int64_t batch, std::int64_t nnz,
               const SegmentGeometry& g, const char* op, SegmentLayout<OffsetT>& out) {
  RAGGED_RETURN_IF_ERROR(layout.finish(workspace_bytes, op));
  if (d_workspace == nullptr) return Status::kSuccess;
  out.offsets = offsets;
  out.batch = batch;
  out.nnz = nnz;
  out.geometry = g;
  out.group_work = scratch.group_work;
  out.plan = scratch.plan;
  out.cub_temp = scratch.cub;
  out.cub_temp_bytes = scratch.cub_bytes;
  out.partial_capacity = scratch.capacity;
  out.arrivals = scratch.arrivals;
  out.prefetch_groups = detail::segment_prefetch_groups();
  out.prefetch_rows = detail::segment_row_prefetch_enabled();
  const bool stages = out.arrivals != nullptr && detail::stages_merges(g) && detail::segment_staged_merges_enabled();
  out.merge_stage_bytes = stages ? detail::segment_merge_stage_cap() : 0;
  return Status::kSuccess;
}

// The other vector width than `vec`: the widest for this inner size, or 1.
int other_vector_width(std::int64_t inner, std::size_t elem_size, int vec) {
  const int widest = detail::segment_vector_width(inner, elem_size, nullptr);  // a null base counts as aligned
  return vec == 1 ? widest : 1;
}

// backward: segment_reduce_backward's (no sub-warp row pass: its tiny rows are a lane each, as before).
Geometries reduce_geometry(std::int64_t inner, std::size_t elem_size, const void* values, bool backward = false) {
  const bool subwarp = !backward && detail::segment_subwarp_rows_enabled();
  auto make = [&](int vec) {
    return detail::make_segment_geometry(inner, vec, detail::kReduceFloatsPerLane / vec, 1, 1, subwarp);
  };
  const int vec = detail::segment_vector_width(inner, elem_size, values);
  return {make(vec), make(other_vector_width(inner, elem_size, vec))};
}

Geometries softmax_geometry(std::int64_t inner, std::size_t elem_size, const void* values, bool backward,
                            const void* second = nullptr, const void* out = nullptr) {
  int vec = detail::segment_vector_width(inner, elem_size, values);
  // Every array the unit touches with vectors must be aligned like the first.
  if (vec > 1 && ((second != nullptr && detail::segment_vector_width(inner, elem_size, second) != vec) ||
                  (out != nullptr && detail::segment_vector_width(inner, elem_size, out) != vec)))
    vec = 1;
  const bool subwarp = detail::segment_subwarp_rows_enabled();
  auto make = [&](int v) { return detail::make_softmax_geometry(inner, v, elem_size, backward, subwarp); };
  return {make(vec), make(other_vector_width(inner, elem_size, vec))};
}

bool is_valid_op(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kMax || op == ReduceOp::kMin;
}
bool is_extreme(ReduceOp op) { return op == ReduceOp::kMax || op == ReduceOp::kMin; }

}  // namespace

template <typename T, typename OffsetT>
Status segment_reduce(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src,
                      ReduceOp op, T* d_out, std::int64_t* d_arg, float empty_value, cudaStream_t stream) {
  if (!is_valid_op(op))
    return fail(Status::kInvalidArgument, "segment_reduce: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
  RAGGED_RETURN_IF_ERROR(check_ragged(src, true, true, "segment_reduce"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_out, src.batch * src.inner, "out"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_arg, 0, "arg"));  // optional: null or aligned
  if (d_arg != nullptr && !is_extreme(op))
    return fail(Status::kInvalidArgument, std::string("segment_reduce: arg output given for ") + reduce_op_name(op) +
                                              "; only max and min have one");

  // Vector loads need the values aligned; the (small) outputs are written one element at a time.
  const Geometries gs = reduce_geometry(src.inner, sizeof(T), src.values);
  const SegmentGeometry& g = gs.g;
  detail::WorkspaceLayout layout(d_workspace);
  SegmentScratch scratch;
  RAGGED_RETURN_IF_ERROR(
      carve_scratch(layout, src.batch, src.nnz, gs, is_extreme(op) ? sizeof(std::int64_t) : 0, scratch));
  detail::SegmentReduceArgs<T, OffsetT> args;
  RAGGED_RETURN_IF_ERROR(prepare(d_workspace, workspace_bytes, layout, scratch, src.offsets, src.batch, src.nnz, g,
                                 "segment_reduce", args.layout));
  if (d_workspace == nullptr || src.batch == 0) return Status::kSuccess;
  args.values = src.values;
  args.op = op;
  args.out = d_out;
  args.arg = d_arg;
  args.empty_value = empty_value;
  args.partial_value = scratch.partial_a;
  args.partial_index = static_cast<std::int64_t*>(scratch.partial_b);
  return detail::launch_segment_reduce(args, stream);
}

template <typename T, typename OffsetT>
Status segment_reduce_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> shape,
                               ReduceOp op, const T* d_grad_out, const std::int64_t* d_arg, T* d_grad_in,
                               cudaStream_t stream) {
  if (!is_valid_op(op))
    return fail(Status::kInvalidArgument,
                "segment_reduce_backward: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
  RAGGED_RETURN_IF_ERROR(check_ragged(shape, false, true, "segment_reduce_backward"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_grad_out, shape.batch * shape.inner, "grad_out"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_grad_in, shape.nnz * shape.inner, "grad_in"));
  if (is_extreme(op)) RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_arg, shape.batch * shape.inner, "arg"));
  // As in the forward: an arg for sum or mean is a caller's mix-up (the op or the arrays), not something to ignore.
  if (d_arg != nullptr && !is_extreme(op))
    return fail(Status::kInvalidArgument, std::string("segment_reduce_backward: arg given for ") + reduce_op_name(op) +
                                              "; only max and min route the gradient through one");

  const SegmentGeometry g = reduce_geometry(shape.inner, sizeof(T), d_grad_in, true).g;  // no partials to size
  detail::WorkspaceLayout layout(d_workspace);
  SegmentScratch scratch;
  RAGGED_RETURN_IF_ERROR(carve_plan(layout, shape.batch, scratch));
  detail::SegmentReduceBackwardArgs<T, OffsetT> args;
  RAGGED_RETURN_IF_ERROR(prepare(d_workspace, workspace_bytes, layout, scratch, shape.offsets, shape.batch, shape.nnz,
                                 g, "segment_reduce_backward", args.layout));
  if (d_workspace == nullptr || shape.batch == 0) return Status::kSuccess;
  args.op = op;
  args.grad_out = d_grad_out;
  args.arg = d_arg;
  args.grad_in = d_grad_in;
  return detail::launch_segment_reduce_backward(args, stream);
}

template <typename T, typename OffsetT>
Status segment_softmax(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> src, bool log,
                       T* d_out, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_ragged(src, true, false, "segment_softmax"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_out, src.nnz * src.inner, "out"));
  const Geometries gs = softmax_geometry(src.inner, sizeof(T), src.values, false, nullptr, d_out);
  const SegmentGeometry& g = gs.g;
  detail::WorkspaceLayout layout(d_workspace);
  SegmentScratch scratch;
  RAGGED_RETURN_IF_ERROR(carve_scratch(layout, src.batch, src.nnz, gs, sizeof(float), scratch));
  detail::SegmentSoftmaxArgs<T, OffsetT> args;
  RAGGED_RETURN_IF_ERROR(prepare(d_workspace, workspace_bytes, layout, scratch, src.offsets, src.batch, src.nnz, g,
                                 "segment_softmax", args.layout));
  if (d_workspace == nullptr || src.batch == 0) return Status::kSuccess;
  args.log = log;
  args.backward = false;
  args.x = src.values;
  args.out = d_out;
  args.partial_a = scratch.partial_a;
  args.partial_b = static_cast<float*>(scratch.partial_b);
  return detail::launch_segment_softmax(args, stream);
}

template <typename T, typename OffsetT>
Status segment_softmax_backward(void* d_workspace, std::size_t& workspace_bytes, RaggedView<const T, OffsetT> shape,
                                bool log, const T* d_out, const T* d_grad_out, T* d_grad_in, cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_ragged(shape, false, false, "segment_softmax_backward"));
  const std::int64_t count = shape.nnz * shape.inner;
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_out, count, "out"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_grad_out, count, "grad_out"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(d_grad_in, count, "grad_in"));
  const Geometries gs = softmax_geometry(shape.inner, sizeof(T), d_out, true, d_grad_out, d_grad_in);
  const SegmentGeometry& g = gs.g;
  detail::WorkspaceLayout layout(d_workspace);
  SegmentScratch scratch;
  RAGGED_RETURN_IF_ERROR(carve_scratch(layout, shape.batch, shape.nnz, gs, 0, scratch));
  detail::SegmentSoftmaxArgs<T, OffsetT> args;
  RAGGED_RETURN_IF_ERROR(prepare(d_workspace, workspace_bytes, layout, scratch, shape.offsets, shape.batch, shape.nnz,
                                 g, "segment_softmax_backward", args.layout));
  if (d_workspace == nullptr || shape.batch == 0) return Status::kSuccess;
  args.log = log;
  args.backward = true;
  args.x = d_out;
  args.dy = d_grad_out;
  args.out = d_grad_in;
  args.partial_a = scratch.partial_a;
  return detail::launch_segment_softmax(args, stream);
}

#define RAGGED_INSTANTIATE_SEGMENT(T, O)                                                                          \
  template Status segment_reduce<T, O>(void*, std::size_t&, RaggedView<const T, O>, ReduceOp, T*, std::int64_t*,  \
                                       float, cudaStream_t);                                                      \
  template Status segment_reduce_backward<T, O>(void*, std::size_t&, RaggedView<const T, O>, ReduceOp, const T*,  \
                                                const std::int64_t*, T*, cudaStream_t);                           \
  template Status segment_softmax<T, O>(void*, std::size_t&, RaggedView<const T, O>, bool, T*, cudaStream_t);    \
  template Status segment_softmax_backward<T, O>(void*, std::size_t&, RaggedView<const T, O>, bool, const T*,     \
                                                 const T*, T*, cudaStream_t);

RAGGED_INSTANTIATE_SEGMENT(float, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT(float, std::int64_t)
RAGGED_INSTANTIATE_SEGMENT(half, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT(half, std::int64_t)
RAGGED_INSTANTIATE_SEGMENT(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_SEGMENT(bfloat16, std::int64_t)

}  // namespace ragged
