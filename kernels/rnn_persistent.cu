// The persistent recurrent path: one cooperative launch per layer. Block b of direction d owns the gate rows of
// hidden units [b * units, + units) of W_hh (and rows [b * proj_units, + proj_units) of W_hr) in shared memory
// for the whole sequence, and the grid synchronises once per step (twice with a projection). Each step covers
// only the slots still active, so the work shrinks with the packed batch; the loop stops at the first step with
// no active slot, so max_steps may be loose.
#include <cooperative_groups.h>

#include <algorithm>
#include <string>
#include <utility>

#include "launch.cuh"
#include "rnn_common.cuh"

namespace ragged {
namespace detail {
namespace rnn {
namespace {

template <typename T>
__global__ void __launch_bounds__(kRnnThreads, 1) rnn_persistent_kernel(const __grid_constant__ KernelParams<T> p) {
  extern __shared__ __align__(128) unsigned char shared[];
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const RnnRecurrenceArgs<T>& a = p.a;
  const int d = static_cast<int>(blockIdx.x) / p.slices;
  const int slice = static_cast<int>(blockIdx.x) - d * p.slices;

  // The block's weight slices, loaded once (zero rows / columns pad them to whole tiles).
  {
    const int units = p.units;
    const std::int64_t u0 = static_cast<std::int64_t>(slice) * units;
    auto gate_row = [&](int q) -> std::int64_t {
      const int gate = q / units, u = q - gate * units;
      return q < a.gates * units && u0 + u < a.hidden ? gate * a.hidden + u0 + u : -1;
    };
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
  }

  // Each step ends at a split barrier: between arriving and waiting, the block loads what its next step needs
  // from memory no other block writes (rnn_common.cuh: held items, input projections), so those loads leave the
  // step's critical path. Nothing written there is read by another block in the next step.
  std::int64_t active = active_at(a, 0);  // the same for every block, so all leave together
  HeldItems held;
  load_held_items(p, d, slice, 0, active, false, held);
  for (std::int64_t t = 0; t < a.max_steps && active > 0; ++t) {
    gates_phase<T, true>(p, shared, d, slice, t, active, held, t > 0);
    if (a.proj > 0) {
      grid.sync();
      proj_phase<T, true>(p, shared, d, slice, t, active);
    }
    cooperative_groups::grid_group::arrival_token arrival = grid.barrier_arrive();
    const std::int64_t next = active_at(a, t + 1);
    load_held_items(p, d, slice, t + 1, next, true, held);
    for (std::int64_t m0 = 0; m0 < next; m0 += kRnnMChunk)
      prefetch_item_inputs(p, d, slice, t + 1, m0, chunk_rows(next, m0), first_unheld_item(m0));
    grid.barrier_wait(std::move(arrival));
    active = next;
  }
}

}  // namespace
}  // namespace rnn

template <typename T>
Status plan_rnn_persistent(RnnMode mode, std::int64_t hidden, std::int64_t state, std::int64_t proj,
                           std::int64_t dirs, RnnPersistentPlan& plan) {
  plan = RnnPersistentPlan{};
  int device = 0, sms = 0, cooperative = 0;
  Status s = from_cuda(cudaGetDevice(&device), "cudaGetDevice");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (s != Status::kSuccess) return s;
  s = from_cuda(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device), "cudaDeviceGetAttribute");
  if (s != Status::kSuccess) return s;
  if (cooperative == 0 || sms <= 0) return Status::kSuccess;

  // All blocks must be resident at once. Start from the fewest hidden units per block that one block per SM
  // allows and take the first count whose blocks fit the chip: the padded gate rows (multiples of 16) decide the
  // shared memory, so a count a little above the minimum can fit where a rounded-up one does not, and a larger
  // count needs fewer blocks (bidirectional layers on an odd number of SMs). Shared memory only grows with the
  // count, so the search stops at the first layout past the device's limit.
  const int gates = rnn_gate_count(mode);
  const void* kernel = reinterpret_cast<const void*>(&rnn::rnn_persistent_kernel<T>);
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
    const RnnSharedLayout shared = make_rnn_shared_layout(gate, projection, proj > 0, true, sizeof(T));
    s = set_shared_limit(kernel, shared.total, "rnn_persistent_kernel");
    if (s == Status::kUnsupportedShape) return Status::kSuccess;  // past the device's limit, as every larger count
    if (s != Status::kSuccess) return s;
    int per_sm = 0;
    s = from_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRnnThreads, shared.total),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor(rnn_persistent_kernel)");
    if (s != Status::kSuccess) return s;
    if (static_cast<std::int64_t>(per_sm) * sms < blocks) continue;

    plan.fits = true;
    plan.units = static_cast<int>(units);
    plan.slices = static_cast<int>(slices);
    plan.proj_units = static_cast<int>(proj_units);
    plan.shared_bytes = shared.total;
    return Status::kSuccess;
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
  p.shared = make_rnn_shared_layout(p.gate, p.proj, args.proj > 0, true, sizeof(T));
  rnn::fill_vector_flags(p);
  auto* kernel = &rnn::rnn_persistent_kernel<T>;
  Status s = set_shared_limit(reinterpret_cast<const void*>(kernel), p.shared.total, "rnn_persistent_kernel");
  if (s != Status::kSuccess) return s;
  void* kernel_args[] = {&p};
  const dim3 grid(static_cast<unsigned>(args.dirs * plan.slices));
  s = from_cuda(cudaLaunchCooperativeKernel(kernel, grid, dim3(kRnnThreads), kernel_args, p.shared.total, stream),
                "cudaLaunchCooperativeKernel(rnn_persistent_kernel)");
  if (s != Status::kSuccess) return s;
  return check_launch("rnn_persistent_kernel");
}

#define RAGGED_INSTANTIATE_RNN_PERSISTENT(T)                                                                     \
  template Status plan_rnn_persistent<T>(RnnMode, std::int64_t, std::int64_t, std::int64_t, std::int64_t,      \
                                         RnnPersistentPlan&);                                                  \
  template Status launch_rnn_persistent<T>(const RnnRecurrenceArgs<T>&, const RnnPersistentPlan&, cudaStream_t);

RAGGED_INSTANTIATE_RNN_PERSISTENT(float)
RAGGED_INSTANTIATE_RNN_PERSISTENT(__half)
RAGGED_INSTANTIATE_RNN_PERSISTENT(__nv_bfloat16)

}  // namespace detail
}  // namespace ragged
