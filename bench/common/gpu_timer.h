// GPU timing for Google Benchmark with UseManualTime: the kernel time of each iteration comes from CUDA events,
// the L2 cache is flushed before every iteration so each one starts cold (bench/common/l2_flush.h: clean by
// default), and one warm-up launch (module load, first-touch) happens before the timed loop.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/l2_flush.h"
#include "ragged/status.h"

namespace ragged {
namespace bench {

// True when a CUDA device is visible; otherwise `reason` says why not.
bool cuda_device_available(std::string* reason);

// Process-wide benchmark stream, timing events and L2 flush buffer, created on first use (needs a device).
class GpuTimer {
 public:
  static GpuTimer& instance();

  cudaStream_t stream() const { return stream_; }
  std::size_t l2_bytes() const { return l2_bytes_; }
  std::size_t flush_bytes() const { return flush_bytes_; }
  // The run's way of flushing (RAGGED_BENCH_FLUSH), which time_on_gpu uses unless told otherwise.
  L2Flush flush_mode() const { return flush_mode_; }

  // Enqueues a read (kClean) or a write (kDirty) of a buffer twice the L2 size, which evicts whatever the
  // previous iteration left there. The write's bytes change with `iteration`.
  cudaError_t flush_l2(int iteration, L2Flush how);
  cudaError_t record_start() { return cudaEventRecord(start_, stream_); }
  cudaError_t record_stop() { return cudaEventRecord(stop_, stream_); }
  // Waits for the stop event; `seconds` gets the time between the two events.
  cudaError_t elapsed(double* seconds);
  // Enqueued after the stop event: two reads of the flush buffer, each ending in an event. The first evicts what
  // the timed op left dirty in L2 and so pays its write-back to DRAM; the second finds only clean lines there.
  cudaError_t enqueue_drain();
  // Waits for the drain; `write_back_seconds` gets the first read's time less the second's (noise can make it
  // slightly negative).
  cudaError_t drain_elapsed(double* write_back_seconds);

  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

 private:
  GpuTimer();
  ~GpuTimer();

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  cudaEvent_t drained_ = nullptr;  // after the read that writes back the op's dirty lines
  cudaEvent_t reread_ = nullptr;   // after the read of a clean L2
  void* flush_buffer_ = nullptr;
  unsigned* flush_sink_ = nullptr;
  int flush_blocks_ = 1;
  std::size_t l2_bytes_ = 0;
  std::size_t flush_bytes_ = 0;
  L2Flush flush_mode_ = L2Flush::kClean;
};

// Registers a GPU benchmark: timed by CUDA events (UseManualTime, see time_on_gpu), reported in microseconds.
benchmark::internal::Benchmark* register_gpu_benchmark(const std::string& name,
                                                       std::function<void(benchmark::State&)> body);

// Ends the benchmark with an error naming `what` when `status` failed; returns whether it succeeded.
bool ok_or_skip(benchmark::State& state, Status status, const char* what);
bool ok_or_skip(benchmark::State& state, cudaError_t error, const char* what);

// The median of `values` (not empty; reordered): the mean of the two middle ones for an even count.
double median_of(std::vector<double>& values);

// What time_on_gpu measures besides the event time.
enum class WriteBack {
  kLeftInL2,  // only the event time
  kDrained,   // also drained_us (below)
};

// The timed loop. `launch(cudaStream_t)` enqueues the work and returns ragged::Status. It runs once untimed,
// then once per iteration between two events after an L2 flush (`how`); the event time is the iteration's time.
// Counter enqueue_us: the host's wall time inside `launch` per iteration. The GPU spends the flush (twice the
// L2 read or written) waiting for nothing, so a launch that enqueues faster than that is not in the event time;
// one that enqueues about as long as the event time (hundreds of launches, one per RNN step) may be what sets it.
// Counter median_us: the median of the iterations' event times (the reported time is their mean): what a
// comparison with PyTorch's timings, which report medians (scripts/torch_attention.py), holds ragged to.
// Counter drained_us (WriteBack::kDrained): the event time plus the write-back of what the op left dirty in L2
// (GpuTimer::enqueue_drain). Why: after a clean flush an op's last writes, up to the L2's size (50 MB on an
// H100), can still sit in L2 at the stop event, so an op that writes (softmax and backward passes write their
// input's size, a reduction of tiny rows a quarter of its bytes) is timed without part of its DRAM traffic; the
// copy rate copy_frac divides by pays it in full (its back-to-back copies each write back what the one before
// left).
// `prime(cudaStream_t)` (returns ragged::Status) is enqueued after each flush, before the start event, untimed:
// device_reduce's `/code:warm` rows run the same op on other buffers of the same size there, so that the timed
// op finds its kernels' code in L2 (the flush evicts it with everything else) while its own data is still cold.
template <typename Launch, typename Prime>
void time_on_gpu_primed(benchmark::State& state, Launch&& launch, Prime&& prime, L2Flush how,
                        WriteBack write_back = WriteBack::kLeftInL2) {
  GpuTimer& timer = GpuTimer::instance();
  const bool drain = write_back == WriteBack::kDrained;
  if (!ok_or_skip(state, launch(timer.stream()), "warm-up launch")) return;
  if (!ok_or_skip(state, cudaStreamSynchronize(timer.stream()), "warm-up synchronize")) return;
  int iteration = 0;
  double enqueue_seconds = 0.0, drained_seconds = 0.0;
  std::vector<double> iteration_seconds;
  for (auto _ : state) {
    if (!ok_or_skip(state, timer.flush_l2(iteration++, how), "L2 flush")) break;
    if (!ok_or_skip(state, prime(timer.stream()), "priming launch")) break;
    if (!ok_or_skip(state, timer.record_start(), "cudaEventRecord(start)")) break;
    const auto enqueue_start = std::chrono::steady_clock::now();
    if (!ok_or_skip(state, launch(timer.stream()), "launch")) break;
    enqueue_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - enqueue_start).count();
    if (!ok_or_skip(state, timer.record_stop(), "cudaEventRecord(stop)")) break;
    if (drain && !ok_or_skip(state, timer.enqueue_drain(), "L2 drain")) break;
    double seconds = 0.0, write_back_seconds = 0.0;
    if (!ok_or_skip(state, timer.elapsed(&seconds), "cudaEventElapsedTime")) break;
    if (drain && !ok_or_skip(state, timer.drain_elapsed(&write_back_seconds), "cudaEventElapsedTime(drain)")) break;
    drained_seconds += seconds + write_back_seconds;
    state.SetIterationTime(seconds);
    iteration_seconds.push_back(seconds);
  }
  if (iteration > 0) {
    state.counters["enqueue_us"] = benchmark::Counter(enqueue_seconds * 1e6 / iteration);
    if (drain) state.counters["drained_us"] = benchmark::Counter(drained_seconds * 1e6 / iteration);
  }
  if (!iteration_seconds.empty())
    state.counters["median_us"] = benchmark::Counter(median_of(iteration_seconds) * 1e6);
}

// As time_on_gpu_primed with nothing run between the flush and the start event.
template <typename Launch>
void time_on_gpu(benchmark::State& state, Launch&& launch, L2Flush how, WriteBack write_back = WriteBack::kLeftInL2) {
  time_on_gpu_primed(state, std::forward<Launch>(launch), [](cudaStream_t) { return Status::kSuccess; }, how,
                     write_back);
}

// With the run's way of flushing.
template <typename Launch>
void time_on_gpu(benchmark::State& state, Launch&& launch, WriteBack write_back = WriteBack::kLeftInL2) {
  time_on_gpu(state, std::forward<Launch>(launch), GpuTimer::instance().flush_mode(), write_back);
}

}  // namespace bench
}  // namespace ragged
