// The persistent recurrent kernel's step floors (bench/rnn_step_floor.h), registered by the rnn_gpu suite.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/common/gpu_timer.h"
#include "bench/common/traffic.h"
#include "bench/common/verify.h"
#include "bench/rnn_step_floor.h"
#include "kernels/rnn_launch.h"
#include "ragged/buffer.h"
#include "ragged/dtype.h"

namespace ragged {
namespace bench {
namespace {

constexpr int kFloorThreads = 256;
constexpr int kLoadsInFlight = 8;  // 16-byte loads per thread issued before the first is used
constexpr int kHalvesPerVector = 8;

// kind:barrier: block b hands a counter to block b - 1 through L2 each step (words: [2][blocks]).
__global__ void __launch_bounds__(kFloorThreads) barrier_floor_kernel(std::uint32_t* words, std::int64_t steps) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const unsigned blocks = gridDim.x, b = blockIdx.x;
  for (std::int64_t t = 0; t < steps; ++t) {
    if (threadIdx.x == 0) {
      const std::uint32_t previous = t == 0 ? 0u : __ldcg(words + ((t - 1) & 1) * blocks + (b + 1) % blocks);
      words[(t & 1) * blocks + b] = previous + 1u;
    }
    grid.sync();
  }
}

// Sum of the eight 16-bit words of a vector.
__device__ __forceinline__ std::uint32_t halves_sum(uint4 x) {
  return (x.x & 0xffffu) + (x.x >> 16) + (x.y & 0xffffu) + (x.y >> 16) + (x.z & 0xffffu) + (x.z >> 16) +
         (x.w & 0xffffu) + (x.w >> 16);
}

// kind:exchange: each step every block reads all of the previous h ([batch][row_halves] 16-bit words), sums
// them, and writes its slice [h0, h0 + slice_halves) of the next h from the sum. Each thread folds its vectors
// into one register as they arrive and the block reduces once at the end (a warp reduction, one shared atomic
// per warp), so what a step waits on is the loads, not a reduction per vector. Step 0 reads `init`; step t
// writes work[t % 2].
__global__ void __launch_bounds__(kFloorThreads)
    exchange_floor_kernel(const std::uint16_t* init, std::uint16_t* work, int batch, int row_halves,
                          int slice_halves, std::int64_t steps) {
  // Dynamic, not a static __shared__ variable: the kernel emulator runs a cooperative grid's blocks at once and
  // has one instance of a static one for all of them (docs/emulator.md).
  extern __shared__ std::uint32_t block_sum[];  // [1]
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const std::int64_t elements = static_cast<std::int64_t>(batch) * row_halves;
  const std::int64_t vectors = elements / kHalvesPerVector;
  const int h0 = static_cast<int>(blockIdx.x) * slice_halves;
  for (std::int64_t t = 0; t < steps; ++t) {
    const std::uint16_t* current = t == 0 ? init : work + ((t - 1) & 1) * elements;
    std::uint16_t* next = work + (t & 1) * elements;
    if (threadIdx.x == 0) block_sum[0] = 0;
    __syncthreads();
    const uint4* source = reinterpret_cast<const uint4*>(current);
    std::uint32_t sum = 0;
    const std::int64_t pass = static_cast<std::int64_t>(kLoadsInFlight) * blockDim.x;
    std::int64_t v0 = threadIdx.x;
    // Whole passes: kLoadsInFlight loads issued unconditionally before the first add.
    for (; v0 + (kLoadsInFlight - 1) * static_cast<std::int64_t>(blockDim.x) < vectors; v0 += pass) {
      uint4 x[kLoadsInFlight];
#pragma unroll
      for (int i = 0; i < kLoadsInFlight; ++i) x[i] = __ldcg(source + v0 + i * static_cast<std::int64_t>(blockDim.x));
#pragma unroll
      for (int i = 0; i < kLoadsInFlight; ++i) sum += halves_sum(x[i]);
    }
    for (; v0 < vectors; v0 += blockDim.x) sum += halves_sum(__ldcg(source + v0));
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(block_sum, sum);
    __syncthreads();
    const std::uint32_t total = block_sum[0];
    for (int i = threadIdx.x; i < batch * slice_halves; i += blockDim.x) {
      const int j = i / slice_halves, u = h0 + (i - j * slice_halves);
      if (u < row_halves)
        next[static_cast<std::int64_t>(j) * row_halves + u] = static_cast<std::uint16_t>(
            total + static_cast<std::uint32_t>(u) + static_cast<std::uint32_t>(j) + static_cast<std::uint32_t>(t));
    }
    grid.sync();
  }
}

// Host model of exchange_floor_kernel: the h after `steps` steps.
std::vector<std::uint16_t> exchange_floor_model(std::vector<std::uint16_t> h, int batch, int row_halves,
                                                std::int64_t steps) {
  std::vector<std::uint16_t> next(h.size());
  for (std::int64_t t = 0; t < steps; ++t) {
    std::uint32_t total = 0;
    for (const std::uint16_t x : h) total += x;
    for (int j = 0; j < batch; ++j)
      for (int u = 0; u < row_halves; ++u)
        next[static_cast<std::size_t>(j) * row_halves + u] = static_cast<std::uint16_t>(
            total + static_cast<std::uint32_t>(u) + static_cast<std::uint32_t>(j) + static_cast<std::uint32_t>(t));
    h.swap(next);
  }
  return h;
}

template <typename Word>
std::vector<double> to_doubles(const std::vector<Word>& v) {
  return {v.begin(), v.end()};
}

// The persistent kernel's grid for the case: its blocks and the hidden units each owns.
detail::RnnPersistentPlan persistent_plan(const RnnStepFloorCase& c) {
  detail::RnnPersistentPlan plan;
  const Status s = c.bf16 ? detail::plan_rnn_persistent<bfloat16>(c.mode, c.hidden, c.hidden, 0, 1, true, plan)
                          : detail::plan_rnn_persistent<float>(c.mode, c.hidden, c.hidden, 0, 1, true, plan);
  if (s != Status::kSuccess) throw std::runtime_error(std::string("plan_rnn_persistent failed: ") + status_string(s));
  if (!plan.fits) throw std::runtime_error("the persistent kernel does not fit this case: no floor to measure");
  return plan;
}

void set_step_counters(benchmark::State& state, const RnnStepFloorCase& c, int blocks) {
  state.counters["steps"] = static_cast<double>(c.steps);
  state.counters["blocks"] = static_cast<double>(blocks);
  if (c.steps > 0)
    state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(c.steps) * 1e-6,
                                                        benchmark::Counter::kIsIterationInvariantRate |
                                                            benchmark::Counter::kInvert);
}

void bench_barrier_floor(benchmark::State& state, const RnnStepFloorCase& c) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    const detail::RnnPersistentPlan plan = persistent_plan(c);
    const int blocks = plan.slices;
    DeviceBuffer<std::uint32_t> words(static_cast<std::size_t>(2 * blocks), stream);
    std::uint32_t* words_ptr = words.data();
    std::int64_t steps = c.steps;
    void* args[] = {&words_ptr, &steps};
    time_on_gpu(state, [&](cudaStream_t st) {
      return cudaLaunchCooperativeKernel(&barrier_floor_kernel, dim3(blocks),
                                         dim3(kFloorThreads), args, 0, st);
    });
    set_step_counters(state, c, blocks);
    if (verify_results() && !state.error_occurred() && c.steps > 0) {
      // After the last step every block's word in that step's half counts the steps.
      const std::vector<std::uint32_t> all = words.to_host();
      const std::vector<std::uint32_t> last(all.begin() + ((c.steps - 1) & 1) * blocks,
                                            all.begin() + ((c.steps - 1) & 1) * blocks + blocks);
      check_against_reference(state, to_doubles(last),
                              std::vector<double>(static_cast<std::size_t>(blocks), static_cast<double>(c.steps)),
                              0.0, "step counters");
    }
  });
}

void bench_exchange_floor(benchmark::State& state, const RnnStepFloorCase& c) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    const detail::RnnPersistentPlan plan = persistent_plan(c);
    const int blocks = plan.slices;
    const int elem_bytes = c.bf16 ? 2 : 4;
    int batch = static_cast<int>(c.batch);
    int row_halves = static_cast<int>(c.hidden) * elem_bytes / 2;
    int slice_halves = plan.units * elem_bytes / 2;
    if (row_halves % kHalvesPerVector != 0)
      throw std::runtime_error("the exchange floor needs rows of a multiple of 16 bytes, not " +
                               std::to_string(2 * row_halves));
    const std::size_t elements = static_cast<std::size_t>(batch) * row_halves;
    std::vector<std::uint16_t> host_init(elements);
    for (std::size_t i = 0; i < elements; ++i) host_init[i] = static_cast<std::uint16_t>(i * 2654435761u >> 7);
    DeviceBuffer<std::uint16_t> init(host_init, stream);
    DeviceBuffer<std::uint16_t> work(2 * elements, stream);
    const std::uint16_t* init_ptr = init.data();
    std::uint16_t* work_ptr = work.data();
    std::int64_t steps = c.steps;
    void* args[] = {&init_ptr, &work_ptr, &batch, &row_halves, &slice_halves, &steps};
    time_on_gpu(state, [&](cudaStream_t st) {
      return cudaLaunchCooperativeKernel(&exchange_floor_kernel, dim3(blocks), dim3(kFloorThreads), args,
                                         sizeof(std::uint32_t), st);
    });
    set_step_counters(state, c, blocks);
    // L2 -> SM bytes: every block reads the whole h each step.
    state.counters["l2_read_bytes_per_second"] =
        benchmark::Counter(static_cast<double>(blocks) * static_cast<double>(elements) * 2.0 * c.steps,
                           benchmark::Counter::kIsIterationInvariantRate);
    if (verify_results() && !state.error_occurred() && c.steps > 0) {
      const std::vector<std::uint16_t> all = work.to_host();
      const std::size_t at = static_cast<std::size_t>((c.steps - 1) & 1) * elements;
      const std::vector<std::uint16_t> last(all.begin() + at, all.begin() + at + elements);
      check_against_reference(state, to_doubles(last),
                              to_doubles(exchange_floor_model(host_init, batch, row_halves, c.steps)), 0.0, "h");
    }
  });
}

}  // namespace

void register_rnn_step_floor(const std::string& barrier_name, const std::string& exchange_name,
                             const RnnStepFloorCase& c) {
  register_gpu_benchmark(barrier_name, [c](benchmark::State& st) { bench_barrier_floor(st, c); });
  register_gpu_benchmark(exchange_name, [c](benchmark::State& st) { bench_exchange_floor(st, c); });
}

}  // namespace bench
}  // namespace ragged
