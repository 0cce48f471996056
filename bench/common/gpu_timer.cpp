#include "bench/common/gpu_timer.h"

#include <algorithm>
#include <stdexcept>

#include "bench/common/suite.h"

namespace ragged {
namespace bench {

bool cuda_device_available(std::string* reason) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    if (reason != nullptr) *reason = cudaGetErrorString(error);
    cudaGetLastError();  // clear it so that later runtime calls do not report it again
    return false;
  }
  if (count == 0 && reason != nullptr) *reason = "device count is 0";
  return count > 0;
}

GpuTimer& GpuTimer::instance() {
  static GpuTimer timer;
  return timer;
}

GpuTimer::GpuTimer() {
  int device = 0;
  cudaDeviceProp props{};
  throw_if_error(from_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  throw_if_error(from_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties"));
  l2_bytes_ = static_cast<std::size_t>(std::max(props.l2CacheSize, 0));
  // Twice the L2, shrunk with the cases in a scaled run (the emulator reads it thread by thread), a multiple of
  // 16 bytes for the read.
  flush_bytes_ = std::max<std::size_t>(scaled_bytes(2 * l2_bytes_), std::size_t{1} << 20) / 16 * 16;
  flush_blocks_ = std::max(props.multiProcessorCount, 1) * std::max(props.maxThreadsPerMultiProcessor / 256, 1);
  flush_mode_ = l2_flush_from_env();
  throw_if_error(from_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  throw_if_error(from_cuda(cudaEventCreate(&start_), "cudaEventCreate"));
  throw_if_error(from_cuda(cudaEventCreate(&stop_), "cudaEventCreate"));
  throw_if_error(from_cuda(cudaEventCreate(&drained_), "cudaEventCreate"));
  throw_if_error(from_cuda(cudaEventCreate(&reread_), "cudaEventCreate"));
  throw_if_error(from_cuda(cudaMalloc(&flush_buffer_, flush_bytes_), "cudaMalloc(L2 flush buffer)"));
  throw_if_error(
      from_cuda(cudaMalloc(reinterpret_cast<void**>(&flush_sink_), sizeof(unsigned)), "cudaMalloc(L2 flush sink)"));
  // The read flush reads what this wrote (never uninitialised memory).
  throw_if_error(from_cuda(cudaMemsetAsync(flush_buffer_, 0, flush_bytes_, stream_), "cudaMemsetAsync(L2 flush)"));
  throw_if_error(from_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
}

GpuTimer::~GpuTimer() {
  // Process exit: release quietly, a destructor must not throw.
  if (flush_buffer_ != nullptr) cudaFree(flush_buffer_);
  if (flush_sink_ != nullptr) cudaFree(flush_sink_);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  if (drained_ != nullptr) cudaEventDestroy(drained_);
  if (reread_ != nullptr) cudaEventDestroy(reread_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

cudaError_t GpuTimer::flush_l2(int iteration, L2Flush how) {
  if (how == L2Flush::kDirty) return cudaMemsetAsync(flush_buffer_, iteration & 0xff, flush_bytes_, stream_);
  return read_to_evict(flush_buffer_, flush_bytes_, flush_sink_, flush_blocks_, stream_);
}

cudaError_t GpuTimer::enqueue_drain() {
  // The clean flush's read, twice (the iteration number only matters to a dirty flush).
  cudaError_t error = flush_l2(0, L2Flush::kClean);
  if (error == cudaSuccess) error = cudaEventRecord(drained_, stream_);
  if (error == cudaSuccess) error = flush_l2(0, L2Flush::kClean);
  if (error == cudaSuccess) error = cudaEventRecord(reread_, stream_);
  return error;
}

cudaError_t GpuTimer::drain_elapsed(double* write_back_seconds) {
  cudaError_t error = cudaEventSynchronize(reread_);
  if (error != cudaSuccess) return error;
  float drain_ms = 0.0f, reread_ms = 0.0f;
  error = cudaEventElapsedTime(&drain_ms, stop_, drained_);
  if (error == cudaSuccess) error = cudaEventElapsedTime(&reread_ms, drained_, reread_);
  *write_back_seconds = (static_cast<double>(drain_ms) - static_cast<double>(reread_ms)) * 1e-3;
  return error;
}

cudaError_t GpuTimer::elapsed(double* seconds) {
  cudaError_t error = cudaEventSynchronize(stop_);
  if (error != cudaSuccess) return error;
  float ms = 0.0f;
  error = cudaEventElapsedTime(&ms, start_, stop_);
  *seconds = static_cast<double>(ms) * 1e-3;
  return error;
}

benchmark::internal::Benchmark* register_gpu_benchmark(const std::string& name,
                                                       std::function<void(benchmark::State&)> body) {
  return benchmark::RegisterBenchmark(name.c_str(), std::move(body))->UseManualTime()->Unit(benchmark::kMicrosecond);
}

double median_of(std::vector<double>& values) {
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 != 0) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return 0.5 * (lower + upper);
}

bool ok_or_skip(benchmark::State& state, Status status, const char* what) {
  if (status == Status::kSuccess) return true;
  state.SkipWithError((std::string(what) + ": " + status_string(status) + ": " + last_error_message()).c_str());
  return false;
}

bool ok_or_skip(benchmark::State& state, cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  return ok_or_skip(state, from_cuda(error, what), what);
}

}  // namespace bench
}  // namespace ragged
