// Packed LSTM and GRU forward over a ragged batch, with torch.nn.LSTM / torch.nn.GRU semantics: the recurrence
// only ever computes on real tokens, the caller never sorts, and zero-length sequences are allowed.
//
// Semantics (PyTorch's, gate rows and names as in torch.nn.LSTM / torch.nn.GRU):
//   LSTM  i = s(W_ii x + b_ii + W_hi h + b_hi)   f = s(... f rows ...)   g = tanh(... g rows ...)   o = s(...)
//         c' = f * c + i * g,   h' = o * tanh(c'),   with proj_size P > 0: h' = W_hr (o * tanh(c'))
//   GRU   r = s(W_ir x + b_ir + W_hr h + b_hr)   z = s(... z rows ...)
//         n = tanh(W_in x + b_in + r * (W_hn h + b_hn))   (b_hn inside the reset product)
//         h' = (1 - z) * n + z * h
// Layer l + 1 reads layer l's output (both directions concatenated, forward first). The reverse direction of a
// sequence starts at its own last token with its own initial state. A sequence of length 0 writes no output row
// and its final state is its initial state.
//
// Precision: T in {float, half, bfloat16} is the storage type of inputs, weights, outputs, states and of the
// hidden state between steps; every product is accumulated in float and the LSTM cell state stays float for the
// whole sequence. The input projection is one cuBLAS GEMM per layer and direction with fp32 accumulation and
// TF32 disabled (PyTorch with torch.backends.cuda.matmul.allow_tf32 = False / cudnn.allow_tf32 = False).
// Batch invariance: the recurrence computes a sequence's rows in an order fixed by the shapes, bit for bit the
// same whatever else is in the batch. The input projection runs over all tokens at once: with cuBLAS (the
// default) another token count may get another kernel, so a sequence's results can differ in the last float bits
// between batches; RnnProjection::kBatchInvariant makes the whole layer bit for bit batch-invariant.
//
// Steps: the host does not know the longest sequence without a sync, so the caller passes `max_steps` >= the
// longest length (as for PackedLayout). The per-step path launches one kernel (two with proj_size) per step
// up to max_steps; launches past the longest sequence see no active sequence and return at once, so a loose
// bound costs about one empty launch per extra step. The persistent path loops on the device and stops at the
// first step with no active sequence, so a loose bound costs nothing there. A sequence longer than max_steps is
// recorded as kInvalidArgument (its index) in args.check and processed as if truncated to max_steps (its later
// output rows are not written).
//
// Same contract as every device op: two-phase workspace, explicit stream, no allocation, no host sync,
// graph-capturable (the persistent path is a cooperative launch, which stream capture supports).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/check.h"
#include "ragged/status.h"
#include "ragged/view.h"

namespace ragged {

enum class RnnMode : int { kLstm = 0, kGru = 1 };

// How the recurrence runs. kAuto takes the per-step kernels up to hidden_size 256 (measured faster there on an
// H200: docs/design.md); above it the persistent kernel when the recurrent weights of every block fit in its
// shared memory with the whole grid co-resident (and the device supports cooperative launches); else the
// persistent kernel with streamed weights where its grid can be co-resident; else the per-step kernels.
// Forcing a persistent path where it cannot run returns kUnsupportedShape.
enum class RnnAlgo : int {
  kAuto = 0,
  kPerStep = 1,     // one launch per step; the recurrent weights stream from L2 every step
  kPersistent = 2,  // one cooperative launch per layer; weights resident in shared memory, grid sync per step
  // One cooperative launch per layer, grid sync per step, the weights streamed from L2 every step as on the
  // per-step path: for weights too large to stay on chip, without a launch per step.
  kPersistentStreamed = 3,
};

// Who computes the input projections x W_ih^T (one GEMM per layer and direction over every token).
enum class RnnProjection : int {
  kCublas = 0,  // cublasGemmEx (fp32 accumulation, no TF32): cuBLAS's fastest kernel for the token count
  // ragged's own GEMM (kernels/projection_gemm.cu), whose summation order depends on the layer's input size only:
  // a sequence's outputs and final states are then bit for bit the same in any batch. No cuBLAS handle needed.
  // Its speed against cuBLAS is measured by bench_rnn's `/proj:invariant` cases. Input widths up to 2^30
  // (a wider one is refused with kSizeOverflow).
  kBatchInvariant = 1,
};

const char* rnn_mode_name(RnnMode mode);
const char* rnn_algo_name(RnnAlgo algo);
const char* rnn_projection_name(RnnProjection projection);

// The layer stack, as the constructor arguments of torch.nn.LSTM / torch.nn.GRU (batch_first is irrelevant:
// the input is ragged).
struct RnnDesc {
  RnnMode mode = RnnMode::kLstm;
  std::int64_t input_size = 0;   // >= 1
  std::int64_t hidden_size = 0;  // H >= 1
  std::int64_t proj_size = 0;    // P: LSTM only, 0 (none) or 1 <= P < H
  std::int64_t num_layers = 1;   // >= 1
  bool bidirectional = false;
  bool bias = true;  // false: b_ih and b_hh are not read (may be null)
};

// 4 for LSTM, 3 for GRU.
int rnn_gate_count(RnnMode mode);
// 1 or 2.
int rnn_directions(const RnnDesc& desc);
// The size of h: P when proj_size > 0, else H.
std::int64_t rnn_state_size(const RnnDesc& desc);
// The input size of `layer`: input_size for layer 0, directions * state size after.
std::int64_t rnn_layer_input_size(const RnnDesc& desc, std::int64_t layer);
// The checks rnn_forward makes of `desc` alone, with a message naming the field: kInvalidArgument for an unknown
// mode, a size below 1, or a proj_size that is negative, not below hidden_size or given to a GRU; kSizeOverflow
// for sizes past cuBLAS's int dimensions. Past it, every parameter's element count fits int64.
Status rnn_check_desc(const RnnDesc& desc);

// Device pointers to one layer and direction's parameters, in PyTorch's layout (row-major, gate rows stacked in
// PyTorch's order): weight_ih_l{k}[_reverse] etc.
template <typename T>
struct RnnLayerWeights {
  const T* w_ih = nullptr;  // [gates * H, layer input size]
  const T* w_hh = nullptr;  // [gates * H, state size]
  const T* b_ih = nullptr;  // [gates * H]  (desc.bias only)
  const T* b_hh = nullptr;  // [gates * H]  (desc.bias only)
  const T* w_hr = nullptr;  // [P, H]       (proj_size > 0 only)
};

template <typename T, typename OffsetT>
struct RnnArgs {
  RnnDesc desc;
  // HOST array of num_layers * directions entries, entry [layer * directions + direction] (direction 1 is the
  // reverse one). Only the pointers are read on the host.
  const RnnLayerWeights<T>* weights = nullptr;
  // [nnz, input_size] with offsets [batch + 1] in the caller's order (any order of lengths).
  RaggedView<const T, OffsetT> input;
  std::int64_t max_steps = 0;  // >= the longest sequence (see the header comment)
  const T* h0 = nullptr;       // [num_layers * directions, batch, state size] or null (zeros)
  const T* c0 = nullptr;       // [num_layers * directions, batch, H] or null (zeros); LSTM only
  T* output = nullptr;         // [nnz, directions * state size], row r aligned with input row r
  T* hn = nullptr;             // [num_layers * directions, batch, state size] or null (not written)
  T* cn = nullptr;             // [num_layers * directions, batch, H] or null; LSTM only
  RnnProjection projection = RnnProjection::kCublas;
  // cuBLAS handle for the input projections (RnnProjection::kCublas only; ignored, may be null, with
  // kBatchInvariant). rnn_forward sets its stream to `stream` and its workspace to a
  // slice of ragged's workspace (cublas_workspace_bytes), and its math mode to CUBLAS_DEFAULT_MATH (no TF32).
  // Before returning it restores the handle's previous stream and math mode; restoring the stream also resets
  // the handle's workspace to cuBLAS's default pool (cublasSetStream always does that), so the handle never
  // keeps a pointer into ragged's workspace. Not thread-safe with other users of the same handle.
  cublasHandle_t cublas = nullptr;
  // None by default: the projection GEMMs have a row per token, large enough for cuBLAS's kernels without split-K,
  // and a small part of a layer's time next to the recurrence, while a fixed slice would dominate the peak memory of
  // small batches (docs/design.md). Give cuBLAS room (its recommendation: 4 MiB, 32 MiB on Hopper) to let it pick
  // kernels that need it.
  std::size_t cublas_workspace_bytes = 0;  // kCublas only: with kBatchInvariant no workspace is set aside for it
  RnnAlgo algo = RnnAlgo::kAuto;
  CheckResult* check = nullptr;  // optional: the first sequence longer than max_steps (kInvalidArgument)
};

// Runs the whole stack. Output rows that belong to no sequence (past offsets[batch], or past max_steps) hold no
// result: untouched with one layer; zero with several (the layers in between read them back through the next layer's
// input GEMM, so they are cleared first rather than read uninitialised). Errors: kInvalidArgument / kNullPointer /
// kSizeOverflow naming the argument, kUnsupportedShape for a forced persistent path that does not fit (by the
// query too, and whatever the batch: the path depends on the shapes and the device, so an empty batch is refused
// as well), kWorkspaceTooSmall, kCudaError (a launch or cuBLAS call failed).
template <typename T, typename OffsetT>
Status rnn_forward(void* d_workspace, std::size_t& workspace_bytes, const RnnArgs<T, OffsetT>& args,
                   cudaStream_t stream);

// The path kAuto takes for this stack on the current device (kPersistent, kPersistentStreamed or kPerStep), or
// the one requested where it can run (kUnsupportedShape where a forced persistent path cannot). It depends on the
// shapes, the dtype and the device, never on the batch or its lengths, so results for one sequence do not
// depend on the rest of the batch.
template <typename T>
Status rnn_select_algo(const RnnDesc& desc, RnnAlgo requested, RnnAlgo& chosen);

}  // namespace ragged
