// The persistent recurrent kernel's step floors (bench/rnn_step_floor.h), registered by the rnn_gpu suite.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/gpu_timer.h"
#include "bench/common/traffic.h"
#include "bench/common/verify.h"
#include "bench/rnn_step_floor.h"
#include "kernels/async_copy.cuh"
#include "kernels/rnn_geometry.h"
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

// The order in which weights_floor_kernel finds and walks a block's weights: the matrix row-major and each block
// walking its chunks from the first (the recurrent kernels' order); the same, block b starting at chunk
// b % chunks; or every block's chunks laid out one after another ([block][chunk][row][chunk columns]).
enum WeightOrder : int { kWeightsRowMajor = 0, kWeightsRotated = 1, kWeightsPacked = 2 };

// kind:weights: block b streams the rows of its units' gates of a [gates * hidden][state] matrix of 16-bit words
// (W_hh's shape; row gate * hidden + unit for unit b * units + q % units, gate q / units) through shared memory
// every step, as the persistent kernel with streamed weights does (chunk_product): k chunks of kRnnKChunkBytes
// per row, `stages` buffers deep by cp.async, a block barrier before and after each chunk's use, then a grid
// barrier. Each thread folds 16-byte vectors of every chunk into a sum (another warp's copies: the block barrier
// is needed, as for the mma reads); the block's sum + t goes to sums[t % 2][b]. The cost of moving the weights
// and nothing else: no activations, no arithmetic worth the name. Two other orders of the same bytes (WeightOrder)
// say whether the access pattern is what limits it: at one chunk index every block reads the same 512 bytes of
// each of its rows, rows a whole row (4 KB at H = 2048) apart, so all blocks' requests share their address bits
// below the row stride.
__global__ void __launch_bounds__(kFloorThreads)
    weights_floor_kernel(const std::uint16_t* w, std::uint32_t* sums, int hidden, int state, int gates, int units,
                         int stages, int order, std::int64_t steps) {
  extern __shared__ uint4 chunk_buffers[];  // [stages][rows][chunk_vecs + 1], then the block's sum
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  constexpr int kChunkVecs = detail::kRnnKChunkBytes / 16;
  constexpr int kLd = kChunkVecs + detail::kRnnSkewBytes / 16;
  const int rows = gates * units;
  const int buffer_vecs = rows * kLd;
  std::uint32_t* block_sum = reinterpret_cast<std::uint32_t*>(chunk_buffers + stages * buffer_vecs);
  const int state_vecs = state / kHalvesPerVector;
  const int chunks = (state_vecs + kChunkVecs - 1) / kChunkVecs;
  const int copies = rows * kChunkVecs;
  // Logical chunk c of this block's walk is chunk (c + b) % chunks when rotated, else c.
  const int rotation = order == kWeightsRotated ? static_cast<int>(blockIdx.x) % chunks : 0;
  auto stage = [&](int c, int b) {
    c = (c + rotation) % chunks;
    for (int i = threadIdx.x; i < copies; i += blockDim.x) {
      const int q = i / kChunkVecs, v = c * kChunkVecs + i % kChunkVecs;
      const int unit = static_cast<int>(blockIdx.x) * units + q % units;
      const std::int64_t row = static_cast<std::int64_t>(q / units) * hidden + unit;
      // Packed: [block][chunk][row][kChunkVecs], zeros where the row-major order has no element.
      const bool valid = order == kWeightsPacked || (unit < hidden && v < state_vecs);
      const std::int64_t at =
          order == kWeightsPacked
              ? ((static_cast<std::int64_t>(blockIdx.x) * chunks + c) * rows + q) * kChunkVecs + i % kChunkVecs
              : (valid ? row * state_vecs + v : 0);
      const uint4* src = reinterpret_cast<const uint4*>(w) + at;
      detail::cp_async_16(detail::smem_address(chunk_buffers + b * buffer_vecs + q * kLd + i % kChunkVecs), src,
                          valid);
    }
    detail::cp_async_commit();
  };
  // The vectors this thread folds: those the thread a warp further on copied.
  const int reader = (static_cast<int>(threadIdx.x) + 32) % static_cast<int>(blockDim.x);
  for (std::int64_t t = 0; t < steps; ++t) {
    if (threadIdx.x == 0) block_sum[0] = 0;
    std::uint32_t sum = 0;
    for (int c = 0; c < stages - 1; ++c) {
      if (c < chunks) stage(c, c);
      else detail::cp_async_commit();
    }
    for (int c = 0; c < chunks; ++c) {
      const int ahead = c + stages - 1;
      if (ahead < chunks) stage(ahead, ahead % stages);
      else detail::cp_async_commit();
      if (stages >= 3) detail::cp_async_wait<2>();
      else detail::cp_async_wait<1>();
      __syncthreads();
      const uint4* chunk = chunk_buffers + (c % stages) * buffer_vecs;
      for (int i = reader; i < copies; i += blockDim.x)
        sum += halves_sum(chunk[(i / kChunkVecs) * kLd + i % kChunkVecs]);
      __syncthreads();
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if ((threadIdx.x & 31) == 0) atomicAdd(block_sum, sum);
    __syncthreads();
    if (threadIdx.x == 0) sums[(t & 1) * gridDim.x + blockIdx.x] = block_sum[0] + static_cast<std::uint32_t>(t);
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

// The persistent kernel's grid for the case, with its weights resident or streamed: its blocks, the hidden units
// each owns and (streamed) its buffers per chunk.
detail::RnnPersistentPlan persistent_plan(const RnnStepFloorCase& c, bool resident = true) {
  // Streamed: every chunk, three buffers deep where they fit (the weights floor moves all of W_hh each step).
  const detail::RnnKeptChunksScope stream_all(detail::RnnKeptChunks::kNone);
  detail::RnnPersistentPlan plan;
  const Status s = c.bf16 ? detail::plan_rnn_persistent<bfloat16>(c.mode, c.hidden, c.hidden, 0, 1, resident, plan)
                          : detail::plan_rnn_persistent<float>(c.mode, c.hidden, c.hidden, 0, 1, resident, plan);
  if (s != Status::kSuccess) throw std::runtime_error(std::string("plan_rnn_persistent failed: ") + status_string(s));
  if (!plan.fits) throw std::runtime_error("the persistent kernel does not fit this case: no floor to measure");
  return plan;
}

// Host model of weights_floor_kernel: each block's sum over its rows' words (mod 2^32) + the last step.
std::vector<std::uint32_t> weights_floor_model(const std::vector<std::uint16_t>& w, int blocks, int hidden, int state,
                                               int gates, int units, std::int64_t steps) {
  std::vector<std::uint32_t> sums(static_cast<std::size_t>(blocks), static_cast<std::uint32_t>(steps - 1));
  for (int b = 0; b < blocks; ++b)
    for (int q = 0; q < gates * units; ++q) {
      const int unit = b * units + q % units;
      if (unit >= hidden) continue;
      const std::size_t row = static_cast<std::size_t>(q / units) * hidden + unit;
      for (int k = 0; k < state; ++k) sums[b] += w[row * state + k];
    }
  return sums;
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

void bench_weights_floor(benchmark::State& state, const RnnStepFloorCase& c, int order) {
  run_guarded(state, [&] {
    cudaStream_t stream = GpuTimer::instance().stream();
    const detail::RnnPersistentPlan plan = persistent_plan(c, false);
    int blocks = plan.slices;
    const int elem_bytes = c.bf16 ? 2 : 4;
    // The weights as 16-bit words: a row of `state` elements is state * elem_bytes / 2 of them.
    int hidden = static_cast<int>(c.hidden), state_words = static_cast<int>(c.hidden) * elem_bytes / 2;
    int gates = c.mode == RnnMode::kLstm ? 4 : 3;
    int units = plan.units, stages = plan.stages;
    if (state_words % kHalvesPerVector != 0)
      throw std::runtime_error("the weights floor needs rows of a multiple of 16 bytes, not " +
                               std::to_string(2 * state_words));
    const std::size_t words = static_cast<std::size_t>(gates) * hidden * state_words;
    std::vector<std::uint16_t> host_w(words);
    for (std::size_t i = 0; i < words; ++i) host_w[i] = static_cast<std::uint16_t>(i * 2654435761u >> 9);
    constexpr int kChunkWords = detail::kRnnKChunkBytes / 2;
    const int chunks = (state_words + kChunkWords - 1) / kChunkWords;
    const int rows = gates * units;
    std::vector<std::uint16_t> packed;
    if (order == kWeightsPacked) {
      packed.assign(static_cast<std::size_t>(blocks) * chunks * rows * kChunkWords, 0);
      for (int b = 0; b < blocks; ++b)
        for (int c = 0; c < chunks; ++c)
          for (int q = 0; q < rows; ++q) {
            const int unit = b * units + q % units;
            if (unit >= hidden) continue;
            const std::size_t row = static_cast<std::size_t>(q / units) * hidden + unit;
            for (int k = 0; k < kChunkWords && c * kChunkWords + k < state_words; ++k)
              packed[((static_cast<std::size_t>(b) * chunks + c) * rows + q) * kChunkWords + k] =
                  host_w[row * state_words + c * kChunkWords + k];
          }
    }
    DeviceBuffer<std::uint16_t> w(order == kWeightsPacked ? packed : host_w, stream);
    DeviceBuffer<std::uint32_t> sums(static_cast<std::size_t>(2 * blocks), stream);
    const std::uint16_t* w_ptr = w.data();
    std::uint32_t* sums_ptr = sums.data();
    std::int64_t steps = c.steps;
    constexpr int kLdBytes = detail::kRnnKChunkBytes + detail::kRnnSkewBytes;
    const std::size_t shared = static_cast<std::size_t>(stages) * gates * units * kLdBytes + sizeof(std::uint32_t);
    void* args[] = {&w_ptr, &sums_ptr, &hidden, &state_words, &gates, &units, &stages, &order, &steps};
    if (!ok_or_skip(state,
                    cudaFuncSetAttribute(&weights_floor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared)),
                    "cudaFuncSetAttribute(weights_floor_kernel)"))
      return;
    time_on_gpu(state, [&](cudaStream_t st) {
      return cudaLaunchCooperativeKernel(&weights_floor_kernel, dim3(blocks), dim3(kFloorThreads), args, shared, st);
    });
    set_step_counters(state, c, blocks);
    state.counters["stages"] = static_cast<double>(stages);
    // L2 -> SM bytes: every block's rows each step (the whole matrix once a step).
    state.counters["l2_read_bytes_per_second"] = benchmark::Counter(static_cast<double>(words) * 2.0 * c.steps,
                                                            benchmark::Counter::kIsIterationInvariantRate);
    if (verify_results() && !state.error_occurred() && c.steps > 0) {
      const std::vector<std::uint32_t> all = sums.to_host();
      const std::size_t at = static_cast<std::size_t>((c.steps - 1) & 1) * blocks;
      const std::vector<std::uint32_t> last(all.begin() + at, all.begin() + at + blocks);
      check_against_reference(
          state, to_doubles(last),
          to_doubles(weights_floor_model(host_w, blocks, hidden, state_words, gates, units, c.steps)), 0.0,
          "block sums");
    }
  });
}

}  // namespace

void register_rnn_step_floor(const std::string& barrier_name, const std::string& exchange_name,
                             const RnnStepFloorCase& c) {
  register_gpu_benchmark(barrier_name, [c](benchmark::State& st) { bench_barrier_floor(st, c); });
  register_gpu_benchmark(exchange_name, [c](benchmark::State& st) { bench_exchange_floor(st, c); });
}

void register_rnn_weights_floor(const std::string& name, const RnnStepFloorCase& c) {
  const std::pair<const char*, int> orders[] = {
      {"", kWeightsRowMajor}, {"_rotated", kWeightsRotated}, {"_packed", kWeightsPacked}};
  for (const auto& [suffix, order] : orders)
    register_gpu_benchmark(name + suffix,
                           [c, order = order](benchmark::State& st) { bench_weights_floor(st, c, order); });
}

}  // namespace bench
}  // namespace ragged
