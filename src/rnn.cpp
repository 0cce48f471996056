// Public packed LSTM / GRU forward: argument checks, workspace layout, the packing order, the input projections
// (cuBLAS) and the per-layer dispatch to the recurrent kernels (kernels/rnn_*.cu).
//
// Per call: packing_order (descending lengths, active count per step) -> slot table; then per layer: one GEMM
// per direction for every row of the layer input (x W_ih^T, fp32, caller's row order; cuBLAS, or ragged's
// batch-invariant GEMM), the initial states into
// slot order, the recurrence (both directions in one launch or per-step sequence), the final states back to the
// caller's order. Layers alternate between the caller's output and one workspace buffer so that the last layer
// writes the output directly; no data is packed or unpacked: the kernels address rows through the slot table.
#include "ragged/rnn.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "projection_launch.h"
#include "ragged/packing.h"
#include "rnn_launch.h"
#include "validate.h"
#include "workspace_layout.h"

namespace ragged {

const char* rnn_mode_name(RnnMode mode) {
  switch (mode) {
    case RnnMode::kLstm: return "lstm";
    case RnnMode::kGru: return "gru";
  }
  return "unknown";
}

const char* rnn_algo_name(RnnAlgo algo) {
  switch (algo) {
    case RnnAlgo::kAuto: return "auto";
    case RnnAlgo::kPerStep: return "per_step";
    case RnnAlgo::kPersistent: return "persistent";
    case RnnAlgo::kPersistentStreamed: return "persistent_streamed";
  }
  return "unknown";
}

const char* rnn_projection_name(RnnProjection projection) {
  switch (projection) {
    case RnnProjection::kCublas: return "cublas";
    case RnnProjection::kBatchInvariant: return "invariant";
  }
  return "unknown";
}

int rnn_gate_count(RnnMode mode) { return mode == RnnMode::kGru ? 3 : 4; }
int rnn_directions(const RnnDesc& desc) { return desc.bidirectional ? 2 : 1; }
std::int64_t rnn_state_size(const RnnDesc& desc) {
  return desc.mode == RnnMode::kLstm && desc.proj_size > 0 ? desc.proj_size : desc.hidden_size;
}
std::int64_t rnn_layer_input_size(const RnnDesc& desc, std::int64_t layer) {
  return layer == 0 ? desc.input_size : rnn_directions(desc) * rnn_state_size(desc);
}

namespace {
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
}  // namespace

Status rnn_check_desc(const RnnDesc& desc) {
  if (desc.mode != RnnMode::kLstm && desc.mode != RnnMode::kGru)
    return fail(Status::kInvalidArgument, "desc.mode = " + std::to_string(static_cast<int>(desc.mode)) + " is unknown");
  if (desc.input_size < 1)
    return fail(Status::kInvalidArgument, "desc.input_size = " + std::to_string(desc.input_size) + " must be >= 1");
  if (desc.hidden_size < 1)
    return fail(Status::kInvalidArgument, "desc.hidden_size = " + std::to_string(desc.hidden_size) + " must be >= 1");
  if (desc.num_layers < 1)
    return fail(Status::kInvalidArgument, "desc.num_layers = " + std::to_string(desc.num_layers) + " must be >= 1");
  if (desc.proj_size < 0)
    return fail(Status::kInvalidArgument, "desc.proj_size = " + std::to_string(desc.proj_size) + " is negative");
  if (desc.proj_size > 0 && desc.mode != RnnMode::kLstm)
    return fail(Status::kInvalidArgument, "desc.proj_size = " + std::to_string(desc.proj_size) +
                                              " is only supported for LSTM (GRU has no projection)");
  if (desc.proj_size >= desc.hidden_size)
    return fail(Status::kInvalidArgument, "desc.proj_size = " + std::to_string(desc.proj_size) +
                                              " must be smaller than hidden_size = " +
                                              std::to_string(desc.hidden_size));
  // cuBLAS dimensions and leading dimensions are int: bound each size before the products below.
  if (desc.input_size > kIntMax || desc.hidden_size > kIntMax || desc.num_layers > kIntMax)
    return fail(Status::kSizeOverflow, "desc: input_size = " + std::to_string(desc.input_size) + ", hidden_size = " +
                                           std::to_string(desc.hidden_size) + " and num_layers = " +
                                           std::to_string(desc.num_layers) + " must each fit int");
  const std::int64_t gate_rows = rnn_gate_count(desc.mode) * desc.hidden_size;
  if (gate_rows * rnn_directions(desc) > kIntMax ||
      rnn_directions(desc) * rnn_state_size(desc) > kIntMax)
    return fail(Status::kSizeOverflow, "desc: input_size = " + std::to_string(desc.input_size) + " / hidden_size = " +
                                           std::to_string(desc.hidden_size) + " exceed the int sizes of cuBLAS");
  return Status::kSuccess;
}

namespace {

template <typename T, typename OffsetT>
Status check_args(const RnnArgs<T, OffsetT>& args) {
  const RnnDesc& desc = args.desc;
  RAGGED_RETURN_IF_ERROR(rnn_check_desc(desc));
  const std::int64_t dirs = rnn_directions(desc);
  const std::int64_t layers_dirs = desc.num_layers * dirs;
  const std::int64_t gate_rows = rnn_gate_count(desc.mode) * desc.hidden_size;
  const std::int64_t S = rnn_state_size(desc), H = desc.hidden_size;
  const bool lstm = desc.mode == RnnMode::kLstm;

  if (args.weights == nullptr)
    return fail(Status::kNullPointer, "weights is null but must hold " + std::to_string(layers_dirs) + " entries");
  for (std::int64_t i = 0; i < layers_dirs; ++i) {
    const RnnLayerWeights<T>& w = args.weights[i];
    const std::string at = "weights[" + std::to_string(i) + "].";
    const std::int64_t in = rnn_layer_input_size(desc, i / dirs);
    RAGGED_RETURN_IF_ERROR(detail::check_pointer(w.w_ih, gate_rows * in, (at + "w_ih").c_str()));
    RAGGED_RETURN_IF_ERROR(detail::check_pointer(w.w_hh, gate_rows * S, (at + "w_hh").c_str()));
    if (desc.bias) {
      RAGGED_RETURN_IF_ERROR(detail::check_pointer(w.b_ih, gate_rows, (at + "b_ih").c_str()));
      RAGGED_RETURN_IF_ERROR(detail::check_pointer(w.b_hh, gate_rows, (at + "b_hh").c_str()));
    }
    if (lstm && desc.proj_size > 0)
      RAGGED_RETURN_IF_ERROR(detail::check_pointer(w.w_hr, desc.proj_size * H, (at + "w_hr").c_str()));
  }

  const RaggedView<const T, OffsetT>& in = args.input;
  RAGGED_RETURN_IF_ERROR(detail::check_batch(in.batch, "input.batch"));
  // The packing order counts active sequences per step in the offset type (packing_order would refuse it too,
  // naming its own arguments).
  if (in.batch > std::numeric_limits<OffsetT>::max())
    return fail(Status::kSizeOverflow, "input.batch = " + std::to_string(in.batch) + " does not fit the " +
                                           (sizeof(OffsetT) == 4 ? "int32" : "int64") + " offset type");
  RAGGED_RETURN_IF_ERROR(detail::check_non_negative(in.nnz, "input.nnz"));
  RAGGED_RETURN_IF_ERROR(detail::check_max_steps(args.max_steps, "max_steps"));
  RAGGED_RETURN_IF_ERROR(detail::check_equal(in.inner, desc.input_size, "input.inner and desc.input_size"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(in.nnz, in.inner, 1, sizeof(T), "input"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(in.nnz, dirs * gate_rows, 1, sizeof(float), "input projections"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(in.nnz, dirs * S, 1, sizeof(T), "output"));
  RAGGED_RETURN_IF_ERROR(detail::check_product(layers_dirs, in.batch, std::max(S, H), sizeof(float), "states"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(in.offsets, in.batch + 1, "input.offsets"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(in.values, in.nnz * in.inner, "input.values"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.output, in.nnz * dirs * S, "output"));
  if (!lstm && args.c0 != nullptr)
    return fail(Status::kInvalidArgument, "c0 is given for a GRU, which has no cell state");
  if (!lstm && args.cn != nullptr)
    return fail(Status::kInvalidArgument, "cn is given for a GRU, which has no cell state");
  // The optional pointers: null or aligned to their element type.
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.h0, 0, "h0"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.c0, 0, "c0"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.hn, 0, "hn"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.cn, 0, "cn"));
  RAGGED_RETURN_IF_ERROR(detail::check_pointer(args.check, 0, "check"));
  if (!detail::rnn_algo_known(args.algo))
    return fail(Status::kInvalidArgument, "algo = " + std::to_string(static_cast<int>(args.algo)) + " is unknown");
  if (args.projection != RnnProjection::kCublas && args.projection != RnnProjection::kBatchInvariant)
    return fail(Status::kInvalidArgument,
                "projection = " + std::to_string(static_cast<int>(args.projection)) + " is unknown");
  if (args.projection == RnnProjection::kBatchInvariant)
    for (std::int64_t layer = 0; layer < std::min<std::int64_t>(desc.num_layers, 2); ++layer)  // layers > 0 alike
      if (rnn_layer_input_size(desc, layer) > detail::kProjectionGemmMaxK)
        return fail(Status::kSizeOverflow,
                    "the input width of layer " + std::to_string(layer) + " (" +
                        std::to_string(rnn_layer_input_size(desc, layer)) + (layer == 0 ? ", desc.input_size" : "") +
                        ") exceeds 2^30, the widest RnnProjection::kBatchInvariant takes (kCublas takes any int)");
  if (in.nnz > 0 && args.projection == RnnProjection::kCublas && args.cublas == nullptr)
    return fail(Status::kNullPointer,
                "cublas is null but the input projections need a cuBLAS handle (or RnnProjection::kBatchInvariant)");
  return Status::kSuccess;
}

// A non-null address for the size-only query of packing_order, which checks its layout pointers but reads none.
template <typename T>
T* query_placeholder() {
  return reinterpret_cast<T*>(std::uintptr_t{256});
}

// Every piece of the workspace; the same code computes the size (base == nullptr) and the pointers.
template <typename T, typename OffsetT>
struct RnnScratch {
  PackedLayout<OffsetT> layout;
  void* packing = nullptr;
  std::size_t packing_bytes = 0;
  std::int64_t* slot_begin = nullptr;
  std::int64_t* slot_length = nullptr;
  std::int64_t* active = nullptr;
  void* cublas = nullptr;
  float* xproj = nullptr;
  T* layer_buffer = nullptr;
  T* h = nullptr;
  float* c = nullptr;
  T* r = nullptr;
};

template <typename T, typename OffsetT>
Status carve(detail::WorkspaceLayout& pieces, bool query, const RnnArgs<T, OffsetT>& args,
             RnnScratch<T, OffsetT>& s) {
  const RnnDesc& desc = args.desc;
  const std::int64_t B = args.input.batch, nnz = args.input.nnz, steps = args.max_steps;
  const std::int64_t dirs = rnn_directions(desc), S = rnn_state_size(desc), H = desc.hidden_size;
  s.layout.batch = B;
  s.layout.max_steps = steps;
  s.layout.sorted_indices = pieces.take_array<std::int64_t>(B);
  s.layout.unsorted_indices = pieces.take_array<std::int64_t>(B);
  s.layout.sorted_lengths = pieces.take_array<OffsetT>(B);
  s.layout.batch_sizes = pieces.take_array<OffsetT>(steps);
  s.layout.step_offsets = pieces.take_array<OffsetT>(steps + 1);
  PackedLayout<OffsetT> sizing = s.layout;
  if (query) {
    sizing.sorted_indices = sizing.unsorted_indices = query_placeholder<std::int64_t>();
    sizing.sorted_lengths = sizing.batch_sizes = sizing.step_offsets = query_placeholder<OffsetT>();
  }
  RAGGED_RETURN_IF_ERROR(
      packing_order<OffsetT>(nullptr, s.packing_bytes, args.input.offsets, sizing, nullptr, nullptr));
  s.packing = pieces.take(s.packing_bytes);
  s.slot_begin = pieces.take_array<std::int64_t>(B);
  s.slot_length = pieces.take_array<std::int64_t>(B);
  s.active = pieces.take_array<std::int64_t>(steps);
  s.cublas = pieces.take(args.projection == RnnProjection::kCublas ? args.cublas_workspace_bytes : 0);
  s.xproj = pieces.take_array<float>(nnz * dirs * rnn_gate_count(desc.mode) * H);
  if (desc.num_layers > 1) s.layer_buffer = pieces.take_array<T>(nnz * dirs * S);
  s.h = pieces.take_array<T>(dirs * 2 * B * S);
  if (desc.mode == RnnMode::kLstm) s.c = pieces.take_array<float>(dirs * B * H);
  if (desc.mode == RnnMode::kLstm && desc.proj_size > 0) s.r = pieces.take_array<T>(dirs * B * H);
  return Status::kSuccess;
}

template <typename T>
cudaDataType_t cuda_data_type() {
  if constexpr (std::is_same<T, half>::value) return CUDA_R_16F;
  else if constexpr (std::is_same<T, bfloat16>::value) return CUDA_R_16BF;
  else return CUDA_R_32F;
}

Status from_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::kSuccess;
  return fail(Status::kCudaError, std::string(what) + " failed: " + cublasGetStatusString(status));
}

// The handle's stream, pointer mode and math mode as the caller left them; restored by restore().
// cublasSetStream also resets the handle's workspace to cuBLAS's default pool, so the handle keeps no pointer
// into ragged's workspace afterwards.
class CublasSession {
 public:
  explicit CublasSession(cublasHandle_t handle) : handle_(handle) {}
  Status begin(cudaStream_t stream, void* workspace, std::size_t bytes) {
    RAGGED_RETURN_IF_ERROR(from_cublas(cublasGetStream(handle_, &saved_stream_), "cublasGetStream"));
    RAGGED_RETURN_IF_ERROR(from_cublas(cublasGetPointerMode(handle_, &saved_pointer_mode_), "cublasGetPointerMode"));
    RAGGED_RETURN_IF_ERROR(from_cublas(cublasGetMathMode(handle_, &saved_math_mode_), "cublasGetMathMode"));
    active_ = true;
    RAGGED_RETURN_IF_ERROR(from_cublas(cublasSetStream(handle_, stream), "cublasSetStream"));
    RAGGED_RETURN_IF_ERROR(
        from_cublas(cublasSetWorkspace(handle_, bytes > 0 ? workspace : nullptr, bytes), "cublasSetWorkspace"));
    RAGGED_RETURN_IF_ERROR(
        from_cublas(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode"));
    // No TF32: the float products must match PyTorch with TF32 disabled.
    return from_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  // Restores every setting even after a failure, and reports the first failure.
  Status restore() {
    if (!active_) return Status::kSuccess;
    active_ = false;
    Status first = Status::kSuccess;
    std::string message;
    auto keep_first = [&](Status status) {
      if (status == Status::kSuccess || first != Status::kSuccess) return;
      first = status;
      message = last_error_message();
    };
    keep_first(from_cublas(cublasSetStream(handle_, saved_stream_), "cublasSetStream(restore)"));
    keep_first(from_cublas(cublasSetPointerMode(handle_, saved_pointer_mode_), "cublasSetPointerMode(restore)"));
    keep_first(from_cublas(cublasSetMathMode(handle_, saved_math_mode_), "cublasSetMathMode(restore)"));
    return first == Status::kSuccess ? first : fail(first, message);
  }
  ~CublasSession() { restore(); }  // on an early error return; the first error is the one reported

  CublasSession(const CublasSession&) = delete;
  CublasSession& operator=(const CublasSession&) = delete;

 private:
  cublasHandle_t handle_;
  bool active_ = false;
  cudaStream_t saved_stream_ = nullptr;
  cublasPointerMode_t saved_pointer_mode_ = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t saved_math_mode_ = CUBLAS_DEFAULT_MATH;
};

// xproj[row, column_offset + n] = sum_k x[row, k] * w[n, k] for rows [0, rows), n < out_width (row-major x, w
// and xproj; fp32 accumulation and output). cuBLAS is column-major: xproj^T = w (as k x n, transposed) * x^T.
template <typename T>
Status input_projection(cublasHandle_t handle, const T* w, const T* x, std::int64_t rows, std::int64_t in_width,
                        std::int64_t out_width, float* xproj, std::int64_t xproj_ld) {
  constexpr std::int64_t kRowsPerCall = std::int64_t{1} << 30;  // cuBLAS sizes are int
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t type = cuda_data_type<T>();
  for (std::int64_t row0 = 0; row0 < rows; row0 += kRowsPerCall) {
    const std::int64_t count = std::min(kRowsPerCall, rows - row0);
    RAGGED_RETURN_IF_ERROR(from_cublas(
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out_width), static_cast<int>(count),
                     static_cast<int>(in_width), &alpha, w, type, static_cast<int>(in_width), x + row0 * in_width,
                     type, static_cast<int>(in_width), &beta, xproj + row0 * xproj_ld, CUDA_R_32F,
                     static_cast<int>(xproj_ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx(input projection)"));
  }
  return Status::kSuccess;
}

}  // namespace

template <typename T>
Status rnn_select_algo(const RnnDesc& desc, RnnAlgo requested, RnnAlgo& chosen) {
  RAGGED_RETURN_IF_ERROR(rnn_check_desc(desc));
  detail::RnnPersistentPlan plan;  // plan_rnn_path rejects an unknown `requested`
  RnnAlgo path = RnnAlgo::kPerStep;
  RAGGED_RETURN_IF_ERROR(detail::plan_rnn_path<T>(desc.mode, desc.hidden_size, rnn_state_size(desc),
                                                  desc.mode == RnnMode::kLstm ? desc.proj_size : 0,
                                                  rnn_directions(desc), requested, path, plan));
  chosen = path;  // left as it was on an error
  return Status::kSuccess;
}

template <typename T, typename OffsetT>
Status rnn_forward(void* d_workspace, std::size_t& workspace_bytes, const RnnArgs<T, OffsetT>& args,
                   cudaStream_t stream) {
  RAGGED_RETURN_IF_ERROR(check_args(args));
  // The recurrent path, the same for every layer (shapes, dtype and device). Planned before anything is enqueued,
  // so that a forced persistent path that cannot run is refused at once, by the query as by the run; a query with
  // kAuto or kPerStep needs no device.
  const RnnDesc& desc = args.desc;
  const std::int64_t dirs = rnn_directions(desc), S = rnn_state_size(desc), H = desc.hidden_size;
  const bool lstm = desc.mode == RnnMode::kLstm;
  const std::int64_t proj = lstm ? desc.proj_size : 0;
  const bool forced_persistent = args.algo == RnnAlgo::kPersistent || args.algo == RnnAlgo::kPersistentStreamed;
  RnnAlgo path = RnnAlgo::kPerStep;
  detail::RnnPersistentPlan plan;
  if (d_workspace != nullptr || forced_persistent)
    RAGGED_RETURN_IF_ERROR(detail::plan_rnn_path<T>(desc.mode, H, S, proj, dirs, args.algo, path, plan));
  detail::WorkspaceLayout pieces(d_workspace);
  RnnScratch<T, OffsetT> s;
  RAGGED_RETURN_IF_ERROR(carve(pieces, d_workspace == nullptr, args, s));
  RAGGED_RETURN_IF_ERROR(pieces.finish(workspace_bytes, "rnn_forward"));
  if (d_workspace == nullptr) return Status::kSuccess;

  const RaggedView<const T, OffsetT>& in = args.input;
  const std::int64_t B = in.batch, nnz = in.nnz;
  const int G = rnn_gate_count(desc.mode);
  // packing_order resets args.check and records sequences longer than max_steps there.
  RAGGED_RETURN_IF_ERROR(
      packing_order<OffsetT>(s.packing, s.packing_bytes, in.offsets, s.layout, args.check, stream));
  if (nnz > 0 && desc.num_layers > 1) {
    // Every layer after the first projects all nnz rows of the previous layer's output, but the recurrence writes
    // only rows that belong to a sequence: clear both ping-pong buffers so spare rows are zeros, not garbage
    // (also with no sequence or no step at all, as rnn.h promises for several layers).
    const std::size_t layer_bytes = static_cast<std::size_t>(nnz * dirs * S) * sizeof(T);
    RAGGED_RETURN_IF_ERROR(from_cuda(cudaMemsetAsync(args.output, 0, layer_bytes, stream), "cudaMemsetAsync(output)"));
    RAGGED_RETURN_IF_ERROR(
        from_cuda(cudaMemsetAsync(s.layer_buffer, 0, layer_bytes, stream), "cudaMemsetAsync(layer buffer)"));
  }
  if (B == 0) return Status::kSuccess;
  RAGGED_RETURN_IF_ERROR(
      detail::launch_rnn_slots<OffsetT>(in.offsets, nnz, s.layout, s.slot_begin, s.slot_length, s.active, stream));

  const bool project = nnz > 0 && args.max_steps > 0;
  const bool use_cublas = args.projection == RnnProjection::kCublas;
  CublasSession cublas(args.cublas);
  if (project && use_cublas) RAGGED_RETURN_IF_ERROR(cublas.begin(stream, s.cublas, args.cublas_workspace_bytes));

  const std::int64_t xproj_ld = dirs * G * H;
  const T* layer_in = in.values;
  for (std::int64_t layer = 0; layer < desc.num_layers; ++layer) {
    // The last layer writes the caller's output; earlier ones alternate so that no layer overwrites its input.
    T* layer_out = (desc.num_layers - 1 - layer) % 2 == 0 ? args.output : s.layer_buffer;
    const std::int64_t in_width = rnn_layer_input_size(desc, layer);
    const RnnLayerWeights<T>* w = args.weights + layer * dirs;
    if (project)
      for (std::int64_t d = 0; d < dirs; ++d) {
        float* xproj_d = s.xproj + d * G * H;
        if (use_cublas)
          RAGGED_RETURN_IF_ERROR(
              input_projection<T>(args.cublas, w[d].w_ih, layer_in, nnz, in_width, G * H, xproj_d, xproj_ld));
        else
          RAGGED_RETURN_IF_ERROR(detail::launch_projection_gemm<T>(layer_in, w[d].w_ih, nnz, static_cast<int>(in_width),
                                                                   static_cast<int>(G * H), xproj_d, xproj_ld, stream));
      }

    detail::RnnStateArgs<T> state;
    state.dirs = dirs;
    state.batch = B;
    state.state = S;
    state.hidden = H;
    state.lstm = lstm;
    state.sorted_indices = s.layout.sorted_indices;
    state.slot_length = s.slot_length;
    state.h = s.h;
    state.c = s.c;
    const std::int64_t h_slice = layer * dirs * B * S, c_slice = layer * dirs * B * H;
    state.h0 = args.h0 != nullptr ? args.h0 + h_slice : nullptr;
    state.c0 = lstm && args.c0 != nullptr ? args.c0 + c_slice : nullptr;
    state.hn = args.hn != nullptr ? args.hn + h_slice : nullptr;
    state.cn = lstm && args.cn != nullptr ? args.cn + c_slice : nullptr;
    RAGGED_RETURN_IF_ERROR(detail::launch_rnn_init_state(state, stream));

    detail::RnnRecurrenceArgs<T> rec;
    rec.mode = desc.mode;
    rec.gates = G;
    rec.hidden = H;
    rec.state = S;
    rec.proj = proj;
    rec.dirs = dirs;
    rec.batch = B;
    rec.max_steps = args.max_steps;
    rec.bias = desc.bias;
    rec.active = s.active;
    rec.slot_begin = s.slot_begin;
    rec.slot_length = s.slot_length;
    rec.xproj = s.xproj;
    rec.out = layer_out;
    rec.h = s.h;
    rec.c = s.c;
    rec.r = s.r;
    for (std::int64_t d = 0; d < dirs; ++d) {
      rec.w_hh[d] = w[d].w_hh;
      rec.b_ih[d] = desc.bias ? w[d].b_ih : nullptr;
      rec.b_hh[d] = desc.bias ? w[d].b_hh : nullptr;
      rec.w_hr[d] = proj > 0 ? w[d].w_hr : nullptr;
    }
    if (nnz > 0) RAGGED_RETURN_IF_ERROR(detail::launch_rnn_recurrence(rec, path, plan, stream));
    RAGGED_RETURN_IF_ERROR(detail::launch_rnn_final_state(state, stream));
    layer_in = layer_out;
  }
  return cublas.restore();
}

#define RAGGED_INSTANTIATE_RNN(T, O) \
  template Status rnn_forward<T, O>(void*, std::size_t&, const RnnArgs<T, O>&, cudaStream_t);

RAGGED_INSTANTIATE_RNN(float, std::int32_t)
RAGGED_INSTANTIATE_RNN(float, std::int64_t)
RAGGED_INSTANTIATE_RNN(half, std::int32_t)
RAGGED_INSTANTIATE_RNN(half, std::int64_t)
RAGGED_INSTANTIATE_RNN(bfloat16, std::int32_t)
RAGGED_INSTANTIATE_RNN(bfloat16, std::int64_t)

template Status rnn_select_algo<float>(const RnnDesc&, RnnAlgo, RnnAlgo&);
template Status rnn_select_algo<half>(const RnnDesc&, RnnAlgo, RnnAlgo&);
template Status rnn_select_algo<bfloat16>(const RnnDesc&, RnnAlgo, RnnAlgo&);

}  // namespace ragged
