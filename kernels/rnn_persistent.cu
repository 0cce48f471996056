// The persistent recurrent paths: one cooperative launch per layer, and the grid synchronises once per step
// (twice with a projection). Block b of direction d owns the gate rows of hidden units [b * units, + units) of
// W_hh (and rows [b * proj_units, + proj_units) of W_hr): either resident in shared memory for the whole
// sequence, or streamed through it every step as on the per-step path (weights too large for the chip: what
// the grid barrier saves there is a launch per step). Each step covers only the slots still active, so the work
// shrinks with the packed batch; the loop stops at the first step with no active slot, so max_steps may be loose.
// Also the choice between these paths and the per-step one (plan_rnn_path).
#include <cooperative_groups.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "launch.cuh"
#include "rnn_common.cuh"

namespace ragged {
namespace detail {
namespace rnn {
namespace {

template <typename T, bool kResidentWeights>
__global__ void __launch_bounds__(kRnnThreads, 1) rnn_persistent_kernel(const __grid_constant__ KernelParams<T> p) {
  extern __shared__ __align__(128) unsigned char shared[];
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const RnnRecurrenceArgs<T>& a = p.a;
  const int d = static_cast<int>(blockIdx.x) / p.slices;
  const int slice = static_cast<int>(blockIdx.x) - d * p.slices;

  // The block's weight slices, loaded once (zero rows / columns pad them to whole tiles); streamed ones, the
  // chunks the layout keeps.
  if constexpr (kResidentWeights) {
    const GateWeightRows gate_row{p.units, a.gates, a.hidden, static_cast<std::int64_t>(slice) * p.units};
    stage_rows<T, false>(reinterpret_cast<T*>(shared + p.shared.gate_weights), rnn_shared_ld(p.gate.k_pad, sizeof(T)),
                         p.gate.rows_pad, p.gate.k_pad, a.w_hh[d], a.state, 0, p.gate.k, p.vec_w_hh, gate_row);
    if (a.proj > 0) {
      const std::int64_t p0 = static_cast<std::int64_t>(slice) * p.proj_units;
      auto proj_row = [&](int q) -> std::int64_t { return q < p.proj_units && p0 + q < a.proj ? p0 + q : -1; };
      stage_rows<T, false>(reinterpret_cast<T*>(shared + p.shared.proj_weights),
                           rnn_shared_ld(p.proj.k_pad, sizeof(T)), p.proj.rows_pad, p.proj.k_pad, a.w_hr[d],
                           a.hidden, 0, p.proj.k, p.vec_w_hr, proj_row);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
  } else if (p.shared.kept_chunks > 0) {
    stage_kept_chunks(p, shared, d, slice);
  }

  // Each step ends at a split barrier: between arriving and waiting, the block loads what its next step needs
  // from memory no other block writes (rnn_common.cuh: held items, input projections; streamed weights: the
  // first chunks of its gate rows that stream, to L2), so those loads leave the step's critical path. Nothing
  // written there is read by another block in the next step.
  std::int64_t active = active_at(a, 0);  // the same for every block, so all leave together
  HeldItems held;
  load_held_items(p, d, slice, 0, active, false, held);
  if (!kResidentWeights && active > 0) prefetch_weight_chunks(p, d, slice, p.shared.kept_chunks, p.shared.stages - 1);
  for (std::int64_t t = 0; t < a.max_steps && active > 0; ++t) {
    gates_phase<T, kResidentWeights>(p, shared, d, slice, t, active, held, t > 0);
    if (a.proj > 0) {
      grid.sync();
      proj_phase<T, kResidentWeights>(p, shared, d, slice, t, active);
    }
    cooperative_groups::grid_group::arrival_token arrival = grid.barrier_arrive();
    const std::int64_t next = active_at(a, t + 1);
    load_held_items(p, d, slice, t + 1, next, true, held);
    for (std::int64_t m0 = 0; m0 < next; m0 += kRnnMChunk)
      prefetch_item_inputs(p, d, slice, t + 1, m0, chunk_rows(next, m0), first_unheld_item(m0));
    if (!kResidentWeights && next > 0)
      prefetch_weight_chunks(p, d, slice, p.shared.kept_chunks, p.shared.stages - 1);
    grid.barrier_wait(std::move(arrival));
    active = next;
  }
}

template <typename T>
const void* persistent_kernel(bool resident) {
  return resident ? reinterpret_cast<const void*>(&rnn_persistent_kernel<T, true>)
                  : reinterpret_cast<const void*>(&rnn_persistent_kernel<T, false>);
}

// The shared-memory layout of a persistent block: resident weights with h staged as deep as `dynamic_max` bytes
// allow (plan_resident_layout), or streamed ones with the chunks `policy` keeps (plan_streamed_layout:
// kRnnStreamedStages deep where `dynamic_max` bytes hold that, else kRnnResidentStages deep, which may not fit
// either).
RnnSharedLayout persistent_layout(const RnnGemmGeometry& gate, const RnnGemmGeometry& proj, bool has_proj,
                                  bool resident, int elem_bytes, std::size_t dynamic_max, RnnKeptChunks policy) {
  if (resident) return plan_resident_layout(gate, proj, has_proj, elem_bytes, dynamic_max, rnn_resident_stages());
  return plan_streamed_layout(gate, proj, has_proj, elem_bytes, dynamic_max, policy, rnn_kept_chunk_cap());
}

// RAGGED_RNN_RESIDENT_STAGES=2 or 3 in the environment starts a process with that depth, to compare on a GPU.
int& resident_stages_setting() {
  static int stages = setting_from_environment("RAGGED_RNN_RESIDENT_STAGES", kRnnResidentMaxStages,
                                               kRnnResidentStages, kRnnResidentMaxStages);
  return stages;
}

// RAGGED_RNN_KEPT_CHUNKS=0 or 1 in the environment starts a process with kNone or kSpare, to compare on a GPU.
RnnKeptChunks& kept_chunks_setting() {
  static RnnKeptChunks policy = static_cast<RnnKeptChunks>(setting_from_environment(
      "RAGGED_RNN_KEPT_CHUNKS", static_cast<int>(RnnKeptChunks::kMost), static_cast<int>(RnnKeptChunks::kNone),
      static_cast<int>(RnnKeptChunks::kMost)));
  return policy;
}

int& kept_chunk_cap_setting() {
  static int cap = std::numeric_limits<int>::max();
  return cap;
}

}  // namespace
}  // namespace rnn

int rnn_resident_stages() { return rnn::resident_stages_setting(); }
void set_rnn_resident_stages(int stages) {
  rnn::resident_stages_setting() = std::min(kRnnResidentMaxStages, std::max(kRnnResidentStages, stages));
}
RnnKeptChunks rnn_kept_chunks() { return rnn::kept_chunks_setting(); }
void set_rnn_kept_chunks(RnnKeptChunks policy) { rnn::kept_chunks_setting() = policy; }
int rnn_kept_chunk_cap() { return rnn::kept_chunk_cap_setting(); }
void set_rnn_kept_chunk_cap(int chunks) { rnn::kept_chunk_cap_setting() = chunks < 0 ? 0 : chunks; }

template <typename T>
Status plan_rnn_persistent(RnnMode mode, std::int64_t hidden, std::int64_t state, std::int64_t proj,
                           std::int64_t dirs, bool resident, RnnPersistentPlan& plan) {
  plan = RnnPersistentPlan{};
  int device = 0, sms = 0, cooperative = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device), "cudaDeviceGetAttribute");
  if (s != Status::kSuccess) return s;
  if (cooperative == 0 || sms <= 0) return Status::kSuccess;
  const void* kernel = rnn::persistent_kernel<T>(resident);
  std::size_t dynamic_max = 0;
  s = dynamic_shared_max(kernel, dynamic_max);
  if (s != Status::kSuccess) return s;

  // All blocks must be resident at once. Start from the fewest hidden units per block that one block per SM
  // allows and take the first count whose blocks fit the chip: the padded gate rows (multiples of 16) decide the
  // shared memory, so a count a little above the minimum can fit where a rounded-up one does not, and a larger
  // count needs fewer blocks (bidirectional layers on an odd number of SMs). A layout's shared memory at a given
  // depth only grows with the count (a streamed one drops from three stages to two where three do not fit, a
  // resident one from four to three to two, and either fits at no count once two do not), so the search stops at
  // the first layout past the device's limit. Where the deeper staging or the kept chunks would cost a count its
  // residency, that count takes the two-stage resident layout or the streamed one keeping nothing: the count the
  // search settles on, and so every summation order (its splits), is then the one of the plain layout.
  const int gates = rnn_gate_count(mode);
  const std::int64_t first = std::max<std::int64_t>(1, (dirs * hidden + sms - 1) / sms);
  std::int64_t previous_slices = -1;
  for (std::int64_t units = first; units <= hidden; ++units) {
    const std::int64_t slices = (hidden + units - 1) / units;
    if (slices == previous_slices) continue;  // the same blocks as a smaller count, with more shared memory
    previous_slices = slices;
    const std::int64_t blocks = dirs * slices;
    const std::int64_t proj_units = proj > 0 ? (proj + slices - 1) / slices : 0;
    const RnnGemmGeometry gate = make_rnn_gemm_geometry(gates * units, state, sizeof(T));
    const RnnGemmGeometry projection = make_rnn_gemm_geometry(proj_units, hidden, sizeof(T));
    if (!rnn_gemm_fits_warps(gate) || (proj > 0 && !rnn_gemm_fits_warps(projection))) return Status::kSuccess;
    RnnSharedLayout shared =
        rnn::persistent_layout(gate, projection, proj > 0, resident, sizeof(T), dynamic_max, rnn_kept_chunks());
    if (shared.total > dynamic_max) return Status::kSuccess;  // past the device's limit, as every larger count
    s = set_shared_limit(kernel, shared.total, dynamic_max, "rnn_persistent_kernel");
    if (s != Status::kSuccess) return s;
    int per_sm = 0;
    const auto blocks_per_sm = [&](const RnnSharedLayout& layout) {
      return from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRnnThreads, layout.total),
                       "cudaOccupancyMaxActiveBlocksPerMultiprocessor(rnn_persistent_kernel)");
    };
    s = blocks_per_sm(shared);
    if (s != Status::kSuccess) return s;
    if (static_cast<std::int64_t>(per_sm) * sms < blocks && shared.kept_chunks > 0) {
      // The kept chunks cost the grid its residency (a count whose blocks need two per SM): stream them all.
      shared = rnn::persistent_layout(gate, projection, proj > 0, false, sizeof(T), dynamic_max, RnnKeptChunks::kNone);
      s = blocks_per_sm(shared);
      if (s != Status::kSuccess) return s;
    }
    if (static_cast<std::int64_t>(per_sm) * sms < blocks && resident && shared.stages > kRnnResidentStages) {
      // The deeper staging costs the grid its residency: stage h two deep, as the plain layout does. (Registers
      // hold these kernels to one block per SM on the GPUs measured, so this is for devices or emulations where
      // shared memory decides.)
      shared = make_rnn_shared_layout(gate, projection, proj > 0, true, sizeof(T), kRnnResidentStages);
      s = blocks_per_sm(shared);
      if (s != Status::kSuccess) return s;
    }
    if (static_cast<std::int64_t>(per_sm) * sms < blocks) continue;

    plan.fits = true;
    plan.resident = resident;
    plan.stages = shared.stages;
    plan.kept_chunks = shared.kept_chunks;
    plan.units = static_cast<int>(units);
    plan.slices = static_cast<int>(slices);
    plan.proj_units = static_cast<int>(proj_units);
    plan.shared_bytes = shared.total;
    return Status::kSuccess;
  }
  return Status::kSuccess;
}

template <typename T>
Status plan_rnn_path(RnnMode mode, std::int64_t hidden, std::int64_t state, std::int64_t proj, std::int64_t dirs,
                     RnnAlgo requested, RnnAlgo& path, RnnPersistentPlan& plan) {
  plan = RnnPersistentPlan{};
  path = RnnAlgo::kPerStep;
  if (!rnn_algo_known(requested))
    return fail(Status::kInvalidArgument, "rnn algo " + std::to_string(static_cast<int>(requested)) + " is unknown");
  if (requested == RnnAlgo::kPerStep) return Status::kSuccess;
  if (requested == RnnAlgo::kAuto && hidden <= kAutoPerStepMaxHidden) return Status::kSuccess;
  for (const RnnAlgo candidate : {RnnAlgo::kPersistent, RnnAlgo::kPersistentStreamed}) {
    if (requested != RnnAlgo::kAuto && requested != candidate) continue;
    const bool resident = candidate == RnnAlgo::kPersistent;
    const Status s = plan_rnn_persistent<T>(mode, hidden, state, proj, dirs, resident, plan);
    if (s != Status::kSuccess) return s;
    if (plan.fits) {
      path = candidate;
      return Status::kSuccess;
    }
    if (requested == candidate)
      return fail(Status::kUnsupportedShape,
                  std::string("rnn: the persistent kernel") + (resident ? "" : " with streamed weights") +
                      " cannot run hidden_size = " + std::to_string(hidden) + " with these shapes on this device (" +
                      (resident ? "weights do not fit on chip, " : "") +
                      "a grid of one block per SM cannot hold them, or no cooperative launch)");
  }
  return Status::kSuccess;
}

template <typename T>
Status launch_rnn_persistent(const RnnRecurrenceArgs<T>& args, const RnnPersistentPlan& plan, cudaStream_t stream) {
  if (!plan.fits) return fail(Status::kUnsupportedShape, "rnn: the persistent kernel does not fit these shapes");
  rnn::KernelParams<T> p;
  p.a = args;
  p.units = plan.units;
  p.slices = plan.slices;
  p.proj_units = plan.proj_units;
  p.gate = make_rnn_gemm_geometry(args.gates * plan.units, args.state, sizeof(T));
  p.proj = make_rnn_gemm_geometry(plan.proj_units, args.hidden, sizeof(T));
  p.shared = make_rnn_shared_layout(p.gate, p.proj, args.proj > 0, plan.resident, sizeof(T), plan.stages,
                                    plan.kept_chunks);
  rnn::fill_vector_flags(p);
  Status s = set_shared_limit(rnn::persistent_kernel<T>(plan.resident), p.shared.total, "rnn_persistent_kernel");
  if (s != Status::kSuccess) return s;
  void* kernel_args[] = {&p};
  const dim3 grid(static_cast<unsigned>(args.dirs * plan.slices));
  auto launch = [&](auto* kernel) {
    return from_cuda(cudaLaunchCooperativeKernel(kernel, grid, dim3(kRnnThreads), kernel_args, p.shared.total, stream),
                     "cudaLaunchCooperativeKernel(rnn_persistent_kernel)");
  };
  s = plan.resident ? launch(&rnn::rnn_persistent_kernel<T, true>) : launch(&rnn::rnn_persistent_kernel<T, false>);
  if (s != Status::kSuccess) return s;
  return check_launch("rnn_persistent_kernel");
}

#define RAGGED_INSTANTIATE_RNN_PERSISTENT(T)                                                                     \
  template Status plan_rnn_persistent<T>(RnnMode, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool, \
                                         RnnPersistentPlan&);                                                  \
  template Status plan_rnn_path<T>(RnnMode, std::int64_t, std::int64_t, std::int64_t, std::int64_t, RnnAlgo,   \
                                   RnnAlgo&, RnnPersistentPlan&);                                              \
  template Status launch_rnn_persistent<T>(const RnnRecurrenceArgs<T>&, const RnnPersistentPlan&, cudaStream_t);

RAGGED_INSTANTIATE_RNN_PERSISTENT(float)
RAGGED_INSTANTIATE_RNN_PERSISTENT(__half)
RAGGED_INSTANTIATE_RNN_PERSISTENT(__nv_bfloat16)

}  // namespace detail
}  // namespace ragged
