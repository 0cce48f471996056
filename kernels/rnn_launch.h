// Internal: launchers of the recurrent kernels (kernels/rnn_*.cu), called by src/rnn.cpp after it has
// validated the arguments, laid out the workspace, built the packing order and run the input projections.
//
// The recurrence works on "slots": slot j is the j-th sequence in descending length order (PackedLayout's
// sorted order), so the sequences active at step t are the slots j < active[t]. Every array below is indexed
// by slot; the data (input projections, outputs) stays in the caller's row order, addressed through
// slot_begin[j] + token, so nothing is packed or unpacked. The reverse direction of slot j processes token
// length - 1 - t at step t: it uses the same active prefix as the forward direction, and both directions run
// in the same launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ragged/packing.h"
#include "ragged/rnn.h"
#include "ragged/status.h"
#include "rnn_geometry.h"
#include "setting_scope.h"

namespace ragged {
namespace detail {

// slot_begin[j] / slot_length[j]: first row and length (clamped to the rows, to sorted_lengths[j] and to
// max_steps) of the sequence in slot j; active[t] = batch_sizes[t] clamped to [0, batch].
template <typename OffsetT>
Status launch_rnn_slots(const OffsetT* d_offsets, std::int64_t rows, PackedLayout<const OffsetT> layout,
                        std::int64_t* d_slot_begin, std::int64_t* d_slot_length, std::int64_t* d_active,
                        cudaStream_t stream);

// One layer's state buffers, per direction d:
//   h: [dirs][2][batch][state]  T      (step t reads parity t % 2 and writes the other)
//   c: [dirs][batch][hidden]    float  (LSTM)
//   r: [dirs][batch][hidden]    T      (LSTM with projection: o * tanh(c) before W_hr)
template <typename T>
struct RnnStateArgs {
  std::int64_t dirs = 1, batch = 0, state = 0, hidden = 0;
  bool lstm = true;
  const std::int64_t* sorted_indices = nullptr;  // [batch] slot -> caller's sequence
  const std::int64_t* slot_length = nullptr;     // [batch]
  T* h = nullptr;
  float* c = nullptr;
  // The layer's slices of the caller's initial / final states: [dirs][batch][state] and [dirs][batch][hidden].
  const T* h0 = nullptr;
  const T* c0 = nullptr;
  T* hn = nullptr;
  T* cn = nullptr;
};

// h parity 0 and c from h0 / c0 (zeros when null), in slot order.
template <typename T>
Status launch_rnn_init_state(const RnnStateArgs<T>& args, cudaStream_t stream);
// hn / cn (when non-null) from the state each slot ended in (h parity = its length % 2).
template <typename T>
Status launch_rnn_final_state(const RnnStateArgs<T>& args, cudaStream_t stream);

// Everything one layer's recurrence reads and writes (both directions).
template <typename T>
struct RnnRecurrenceArgs {
  RnnMode mode = RnnMode::kLstm;
  int gates = 4;
  std::int64_t hidden = 0;     // H
  std::int64_t state = 0;      // size of h: P or H
  std::int64_t proj = 0;       // P (0: none)
  std::int64_t dirs = 1;
  std::int64_t batch = 0;
  std::int64_t max_steps = 0;
  bool bias = true;
  const std::int64_t* active = nullptr;       // [max_steps]
  const std::int64_t* slot_begin = nullptr;   // [batch]
  const std::int64_t* slot_length = nullptr;  // [batch]
  const float* xproj = nullptr;  // [rows][dirs * gates * H]: x W_ih^T, direction d at column d * gates * H
  T* out = nullptr;              // [rows][dirs * state]
  T* h = nullptr;                // state buffers as in RnnStateArgs
  float* c = nullptr;
  T* r = nullptr;
  const T* w_hh[2] = {nullptr, nullptr};
  const T* b_ih[2] = {nullptr, nullptr};
  const T* b_hh[2] = {nullptr, nullptr};
  const T* w_hr[2] = {nullptr, nullptr};
};

// Whether `algo` is one of RnnAlgo's values.
inline bool rnn_algo_known(RnnAlgo algo) {
  return algo == RnnAlgo::kAuto || algo == RnnAlgo::kPerStep || algo == RnnAlgo::kPersistent ||
         algo == RnnAlgo::kPersistentStreamed;
}

// The persistent kernel's configuration for these shapes on the current device; `fits` false when the grid
// cannot be co-resident (or its weights do not fit on chip, with `resident`; or the device has no cooperative
// launch).
struct RnnPersistentPlan {
  bool fits = false;
  bool resident = true;  // weights in shared memory for the whole layer; false: streamed every step
  int stages = 0;        // buffers per staged operand (plan_resident_layout's depth where resident)
  int kept_chunks = 0;   // streamed: gate-row k chunks kept in shared memory for the layer (RnnSharedLayout)
  int units = 0;         // hidden units per block (all gates of each)
  int slices = 0;        // blocks per direction
  int proj_units = 0;    // projection rows per block
  std::size_t shared_bytes = 0;
};
template <typename T>
Status plan_rnn_persistent(RnnMode mode, std::int64_t hidden, std::int64_t state, std::int64_t proj,
                           std::int64_t dirs, bool resident, RnnPersistentPlan& plan);

// How the persistent kernel with streamed weights keeps chunks of its gate rows in shared memory
// (RnnKeptChunks, rnn_geometry.h): kMost unless the process started with RAGGED_RNN_KEPT_CHUNKS set to 0 (kNone)
// or 1 (kSpare). Read when a layer is planned. Not thread-safe to change: the benchmarks set it to time the
// policies in one run, the tests to compare their bits.
RnnKeptChunks rnn_kept_chunks();
void set_rnn_kept_chunks(RnnKeptChunks policy);
// The most chunks a plan keeps (tests lower it to make a layer keep some chunks and stream others); no limit
// unless set. Not thread-safe to change, as above.
int rnn_kept_chunk_cap();
void set_rnn_kept_chunk_cap(int chunks);

// rnn_kept_chunks() set to a policy while the scope lives (the benchmarks' rows of each policy).
using RnnKeptChunksScope = SettingScope<RnnKeptChunks, rnn_kept_chunks, set_rnn_kept_chunks>;

// The most buffers a persistent block with resident weights stages h through (plan_resident_layout, at most
// kRnnResidentMaxStages, at least kRnnResidentStages): kRnnResidentMaxStages unless the process started with
// RAGGED_RNN_RESIDENT_STAGES set to 2 or 3. Read when a layer is planned. Not thread-safe to change: the
// benchmarks set it to time both depths in one run, the tests to compare their bits.
int rnn_resident_stages();
void set_rnn_resident_stages(int stages);

// rnn_resident_stages() set to a depth while the scope lives (the benchmarks' rows of each depth).
using RnnResidentStagesScope = SettingScope<int, rnn_resident_stages, set_rnn_resident_stages>;

// kAuto takes the per-step path up to this hidden size, whether or not a persistent kernel fits. Why: on the
// H200 (docs/results/2026-11-27-h200-8cbd4e5921d3 and -a910134773d1, the recurrent kernels as they are now) the
// per-step path beat the resident persistent kernel at hidden 256 in all 24 bfloat16 cases of the two runs
// (LSTM and GRU, batch 16 and 64, three length distributions), taking 0.82-0.94 of its time; at hidden 1024 the
// persistent kernel took 0.69-0.76 of the per-step path's. At 256 the persistent grid is 128 blocks of 2 hidden
// units (8 LSTM gate rows in a 16-row tile) where the per-step one is 64 blocks of 4. Hidden 512 is unmeasured.
constexpr std::int64_t kAutoPerStepMaxHidden = 256;

// The path `requested` takes for these shapes on the current device (rnn_select_algo's rule): kAuto takes the
// per-step path up to kAutoPerStepMaxHidden, above it the first of kPersistent, kPersistentStreamed, kPerStep
// that can run. `plan` is the persistent plan where the path is one. A forced persistent path that cannot run:
// kUnsupportedShape.
template <typename T>
Status plan_rnn_path(RnnMode mode, std::int64_t hidden, std::int64_t state, std::int64_t proj, std::int64_t dirs,
                     RnnAlgo requested, RnnAlgo& path, RnnPersistentPlan& plan);

// Runs the recurrence of one layer: max_steps steps, each over the slots j < active[t], on `path` (with `plan`)
// as plan_rnn_path gave them; rnn_forward plans once, before it enqueues anything, for every layer.
template <typename T>
Status launch_rnn_recurrence(const RnnRecurrenceArgs<T>& args, RnnAlgo path, const RnnPersistentPlan& plan,
                             cudaStream_t stream);

// The persistent launch itself (plan.fits must be true).
template <typename T>
Status launch_rnn_persistent(const RnnRecurrenceArgs<T>& args, const RnnPersistentPlan& plan, cudaStream_t stream);

}  // namespace detail
}  // namespace ragged
