// Memory-traffic counters shared by the benchmarks:
//   bytes_per_second (SetBytesProcessed)  bytes the op must read + write per iteration / iteration time
//   copy_frac   that rate over the device-to-device copy rate of this device, measured once per process
//               (a cudaMemcpyAsync of a 256 MiB buffer, counting bytes read + written): 1.0 = copy speed
//   peak_bytes  device bytes the variant needs at once: inputs + outputs + workspace
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>

namespace ragged {
namespace bench {

// False when RAGGED_BENCH_NO_CEILINGS=1: the copy rate and the bf16 GEMM rate are then never measured, and
// copy_frac / peak_frac are left out. For profilers (scripts/gpu-profile.sh), whose kernel filters and launch
// counts would otherwise meet the ceilings' own kernels (the GEMM is cuBLAS's, like the RNN's projection).
bool ceilings_measured();

// Bytes per second of a large device-to-device copy (read + write), measured on the first call.
// Throws ragged::Error when a CUDA call fails.
double copy_bytes_per_second();

// Sets bytes_per_second, copy_frac (GPU benchmarks only) and peak_bytes after the timed loop.
void set_gpu_traffic(benchmark::State& state, double bytes_per_iteration, double peak_bytes);
// Sets bytes_per_second and peak_bytes (host bytes) for a CPU benchmark.
void set_cpu_traffic(benchmark::State& state, double bytes_per_iteration, double peak_bytes);

// Runs `body`, turning an exception (allocation failure, CUDA error) into SkipWithError with its message.
void run_guarded(benchmark::State& state, const std::function<void()>& body);

}  // namespace bench
}  // namespace ragged
