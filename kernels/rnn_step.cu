// The per-step recurrent path: one launch per step (two with a projection), each block computing all gates of
// a slice of hidden units for the active slots, with its slice of W_hh streamed through shared memory from L2.
// Every launch but the layer's first follows the one before as a programmatic dependent (grid_dependency.cuh):
// its blocks start while the step before finishes, read what that step does not write (the held items' input
// projections and biases) and send the first weight chunks to L2, then wait for it.
// Also the launch of a layer's recurrence on the path plan_rnn_path picks (rnn_persistent.cu).
#include "grid_dependency.cuh"
#include "launch.cuh"
#include "rnn_common.cuh"

#include <algorithm>
#include <string>

namespace ragged {
namespace detail {
namespace rnn {
namespace {

template <typename T>
__global__ void __launch_bounds__(kRnnThreads)
    rnn_gates_step_kernel(const __grid_constant__ KernelParams<T> p, std::int64_t t) {
  extern __shared__ __align__(128) unsigned char shared[];
  allow_dependent_grid();
  const std::int64_t active = active_at(p.a, t);
  const int d = static_cast<int>(blockIdx.y), slice = static_cast<int>(blockIdx.x);
  // The held items' loads go out before the product's, so their latencies overlap; all but their states are
  // read before the wait.
  HeldItems held;
  if (active > 0) {
    load_held_items(p, d, slice, t, active, false, held, false);
    prefetch_weight_chunks(p, d, slice, 0, p.shared.stages - 1);
  }
  wait_for_prior_grid();
  if (active == 0) return;
  load_held_states(p, d, slice, t, held);
  gates_phase<T, false>(p, shared, d, slice, t, active, held, false);
}

template <typename T>
__global__ void __launch_bounds__(kRnnThreads)
    rnn_proj_step_kernel(const __grid_constant__ KernelParams<T> p, std::int64_t t) {
  extern __shared__ __align__(128) unsigned char shared[];
  allow_dependent_grid();
  const std::int64_t active = active_at(p.a, t);
  wait_for_prior_grid();  // r, its input, is what the gates kernel before it writes
  if (active == 0) return;
  proj_phase<T, false>(p, shared, static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), t, active);
}

constexpr int kMinUnits = 4;
constexpr int kMaxStepUnits = 16;  // bounds the streamed weight chunk: 4 gates x 16 units = 64 rows
constexpr int kProjRowsPerBlock = 16;

// The streamed layout of `g` with kRnnStreamedStages buffers where `dynamic_max` bytes of shared memory hold
// them, else with kRnnResidentStages (which may not fit either). No chunk kept: a block lives one step.
RnnSharedLayout streamed_layout(const RnnGemmGeometry& g, int elem_bytes, std::size_t dynamic_max) {
  return plan_streamed_layout(g, g, false, elem_bytes, dynamic_max, RnnKeptChunks::kNone, 0);
}

}  // namespace

template <typename T>
Status launch_per_step(const RnnRecurrenceArgs<T>& a, cudaStream_t stream) {
  int sms = 0;
  Status s = sm_count(sms);
  if (s != Status::kSuccess) return s;
  // Enough unit slices to give every SM a block, in multiples of 4 units.
  std::int64_t units = (a.dirs * a.hidden + sms - 1) / sms;
  units = std::min<std::int64_t>(kMaxStepUnits, std::max<std::int64_t>(kMinUnits, rnn_round_up(units, 4)));
  units = std::min<std::int64_t>(units, rnn_round_up(a.hidden, 4));

  // Fewer units per block (more blocks) where the device's shared memory cannot hold that many gate rows
  // (99 KB devices: 64 float rows); set_shared_limit below reports a layout that fits at no count.
  const void* gates_kernel = reinterpret_cast<const void*>(&rnn_gates_step_kernel<T>);
  std::size_t dynamic_max = 0;
  s = dynamic_shared_max(gates_kernel, dynamic_max);
  if (s != Status::kSuccess) return s;
  KernelParams<T> gates;
  gates.a = a;
  for (;; units -= 4) {
    gates.gate = make_rnn_gemm_geometry(a.gates * units, a.state, sizeof(T));
    gates.shared = streamed_layout(gates.gate, sizeof(T), dynamic_max);
    if (gates.shared.total <= dynamic_max || units <= kMinUnits) break;
  }
  gates.units = static_cast<int>(units);
  gates.slices = static_cast<int>((a.hidden + units - 1) / units);
  fill_vector_flags(gates);
  s = set_shared_limit(gates_kernel, gates.shared.total, dynamic_max, "rnn_gates_step_kernel");
  if (s != Status::kSuccess) return s;

  KernelParams<T> proj = gates;
  const bool has_proj = a.proj > 0;
  if (has_proj) {
    proj.proj_units = kProjRowsPerBlock;
    proj.slices = static_cast<int>((a.proj + kProjRowsPerBlock - 1) / kProjRowsPerBlock);
    proj.proj = make_rnn_gemm_geometry(kProjRowsPerBlock, a.hidden, sizeof(T));
    const void* proj_kernel = reinterpret_cast<const void*>(&rnn_proj_step_kernel<T>);
    s = dynamic_shared_max(proj_kernel, dynamic_max);
    if (s != Status::kSuccess) return s;
    proj.shared = streamed_layout(proj.proj, sizeof(T), dynamic_max);
    s = set_shared_limit(proj_kernel, proj.shared.total, dynamic_max, "rnn_proj_step_kernel");
    if (s != Status::kSuccess) return s;
  }
  const dim3 gate_grid(static_cast<unsigned>(gates.slices), static_cast<unsigned>(a.dirs));
  const dim3 proj_grid(static_cast<unsigned>(proj.slices), static_cast<unsigned>(a.dirs));
  bool gates_dependent = false, proj_dependent = false;
  s = dependent_launch_available(&rnn_gates_step_kernel<T>, gates_dependent);
  if (s != Status::kSuccess) return s;
  s = dependent_launch_available(&rnn_proj_step_kernel<T>, proj_dependent);
  if (s != Status::kSuccess) return s;
  // The first launch is an ordinary one: what the steps read before their waits (input projections, batch
  // sizes, weights) is then complete before any of them starts.
  for (std::int64_t t = 0; t < a.max_steps; ++t) {
    s = launch_after_prior(gates_dependent && t > 0, "rnn_gates_step_kernel", &rnn_gates_step_kernel<T>, gate_grid,
                           dim3(kRnnThreads), gates.shared.total, stream, gates, t);
    if (s != Status::kSuccess) return s;
    if (!has_proj) continue;
    s = launch_after_prior(proj_dependent, "rnn_proj_step_kernel", &rnn_proj_step_kernel<T>, proj_grid,
                           dim3(kRnnThreads), proj.shared.total, stream, proj, t);
    if (s != Status::kSuccess) return s;
  }
  return Status::kSuccess;
}

}  // namespace rnn

template <typename T>
Status launch_rnn_recurrence(const RnnRecurrenceArgs<T>& args, RnnAlgo path, const RnnPersistentPlan& plan,
                             cudaStream_t stream) {
  if (args.batch == 0 || args.max_steps == 0) return Status::kSuccess;
  if (path == RnnAlgo::kPerStep) return rnn::launch_per_step(args, stream);
  return launch_rnn_persistent(args, plan, stream);
}

#define RAGGED_INSTANTIATE_RNN_RECURRENCE(T)                                                            \
  template Status launch_rnn_recurrence<T>(const RnnRecurrenceArgs<T>&, RnnAlgo, const RnnPersistentPlan&, \
                                           cudaStream_t);

RAGGED_INSTANTIATE_RNN_RECURRENCE(float)
RAGGED_INSTANTIATE_RNN_RECURRENCE(__half)
RAGGED_INSTANTIATE_RNN_RECURRENCE(__nv_bfloat16)

}  // namespace detail
}  // namespace ragged
