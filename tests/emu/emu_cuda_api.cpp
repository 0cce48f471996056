// The CUDA runtime API as far as ragged and its tests call it, for the kernel emulator (linked instead of
// libcudart): device attributes, errors, memory, streams, events and graphs. Work runs on the host as soon as
// it is enqueued, in order, unless its stream is being captured.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_emu.h"
#include "emu_streams.h"

namespace emu {
namespace {

cudaError_t g_last_error = cudaSuccess;

struct Graph {
  std::vector<std::function<void()>> steps;
};
std::map<cudaStream_t, std::shared_ptr<Graph>> g_capturing;

struct Allocation {
  void* base;
  std::size_t mapped;
};
std::map<void*, Allocation> g_allocations;

std::map<cudaEvent_t, std::chrono::steady_clock::time_point> g_event_times;

// cudaFuncAttributeMaxDynamicSharedMemorySize per kernel, as set in this context (cudaDeviceReset clears it).
std::mutex g_shared_limits_mutex;
std::map<const void*, int> g_shared_limits;

// Streams and events are names only (work runs at once, in order): distinct non-null values.
std::uintptr_t next_handle() {
  static std::uintptr_t next = 0x1000;
  return next += 16;
}

}  // namespace

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

std::uint64_t g_steps = 0;
std::uint64_t steps_run() { return g_steps; }

// A captured step is stored as given and counted when it runs: cudaGraphLaunch enqueues the graph's steps again,
// and a step stored already counted would count twice per replay, so that no dependent launch of a replayed graph
// was ever checked against its prior kernel (emu_scheduler.cpp: prior_step + 1 == step).
void enqueue(cudaStream_t stream, std::function<void()> step) {
  const auto c = g_capturing.find(stream);
  if (c != g_capturing.end()) {
    c->second->steps.push_back(std::move(step));
    return;
  }
  ++g_steps;
  step();
}

std::size_t page_bytes() {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

void protect_device_memory(int prot) {
  for (const auto& a : g_allocations) mprotect(a.second.base, a.second.mapped - page_bytes(), prot);
}

char* device_page(const void* address) {
  const char* p = static_cast<const char*>(address);
  auto a = g_allocations.upper_bound(const_cast<void*>(address));
  if (a == g_allocations.begin()) return nullptr;
  --a;
  char* base = static_cast<char*>(a->second.base);
  if (p < base || p >= base + a->second.mapped - page_bytes()) return nullptr;
  return base + (p - base) / page_bytes() * page_bytes();
}

bool is_capturing(cudaStream_t stream) { return g_capturing.count(stream) != 0; }

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e == nullptr ? fallback : std::atoi(e);
}

int sm_count() { return env_int("EMU_SMS", 132); }
int shared_optin_bytes() { return env_int("EMU_SMEM_OPTIN", 232448); }
int shared_per_sm_bytes() { return env_int("EMU_SMEM_PER_SM", 233472); }
std::size_t global_memory_bytes() { return std::size_t{80} << 30; }
// Shared memory the GPU sets aside per resident block (cudaDevAttrReservedSharedMemoryPerBlock on sm_80 / sm_90).
constexpr int kReservedSharedPerBlock = 1024;

std::size_t dynamic_shared_limit(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_shared_limits_mutex);
  const auto set = g_shared_limits.find(kernel);
  return set == g_shared_limits.end() ? 49152 : static_cast<std::size_t>(set->second);
}

int resident_blocks(const void* kernel, int threads, std::size_t shared) {
  constexpr int kThreadsPerSm = 2048, kMaxBlocksPerSm = 32;
  if (threads <= 0 || threads > 1024) return 0;
  // A kernel asking for more than its limit in this context cannot launch: the GPU answers 0 blocks too (CUTLASS
  // raises the attribute before it asks).
  if (kernel != nullptr && shared > dynamic_shared_limit(kernel)) return 0;
  const int warp_threads = (threads + 31) / 32 * 32;
  const std::int64_t by_shared = static_cast<std::int64_t>(shared_per_sm_bytes()) /
                                 (static_cast<std::int64_t>(shared) + kReservedSharedPerBlock);
  const std::int64_t fitting = std::min<std::int64_t>(
      {env_int("EMU_BLOCKS_PER_SM", 2), kThreadsPerSm / warp_threads, kMaxBlocksPerSm, by_shared});
  return static_cast<int>(std::max<std::int64_t>(fitting, 0));
}

}  // namespace emu

using emu::enqueue;
using emu::set_error;

// --- CUDA runtime API, as far as ragged uses it -----------------------------------------------------------------

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = emu::sm_count(); return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = emu::shared_optin_bytes(); return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 49152; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = emu::shared_per_sm_bytes(); return cudaSuccess;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = emu::kReservedSharedPerBlock; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrCooperativeLaunch: *value = 1; return cudaSuccess;
    default: return set_error(cudaErrorInvalidValue);
  }
}

// What the benchmarks read: the emulated device (emu_streams.h).
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* props, int) {
  *props = cudaDeviceProp{};
  std::snprintf(props->name, sizeof(props->name), "kernel emulator (tests/emu), sm_90 as an H100");
  props->major = 9;
  props->minor = 0;
  props->multiProcessorCount = emu::sm_count();
  props->l2CacheSize = 50 << 20;
  props->totalGlobalMem = emu::global_memory_bytes();
  props->sharedMemPerBlock = 49152;
  props->sharedMemPerBlockOptin = emu::shared_optin_bytes();
  props->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (kernel == nullptr || value < 0 || value > emu::shared_optin_bytes()) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(emu::g_shared_limits_mutex);
  emu::g_shared_limits[kernel] = value;
  return cudaSuccess;
}

// What of a reset the emulator models: the kernels' attributes go back to their defaults, as the primary
// context they belonged to is destroyed. Device memory stays mapped (a GPU frees it; using it after is the
// caller's bug, which this does not catch).
cudaError_t cudaDeviceReset(void) {
  std::lock_guard<std::mutex> lock(emu::g_shared_limits_mutex);
  emu::g_shared_limits.clear();
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void*) {
  *attributes = cudaFuncAttributes{};  // kernels under emulation declare no static shared memory that counts
  attributes->maxThreadsPerBlock = 1024;
  attributes->ptxVersion = 90;  // the kernels are compiled as sm_90 code (__CUDA_ARCH__ reads 900)
  attributes->binaryVersion = 90;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* kernel, int threads,
                                                          size_t shared) {
  if (blocks == nullptr || threads <= 0) return set_error(cudaErrorInvalidValue);
  *blocks = emu::resident_blocks(kernel, threads, shared);
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = emu::g_last_error;
  emu::g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return emu::g_last_error; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorCooperativeLaunchTooLarge: return "too many blocks in cooperative launch";
    default: return "emulated CUDA error";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorCooperativeLaunchTooLarge: return "cudaErrorCooperativeLaunchTooLarge";
    default: return "cudaErrorUnknown";
  }
}

// Device memory ends at a guard page (16-byte aligned start), so running off the end faults at once.
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (bytes > emu::global_memory_bytes()) return set_error(cudaErrorMemoryAllocation);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (bytes + 15) / 16 * 16;
  const std::size_t data_pages = (rounded + page - 1) / page;
  const std::size_t mapped = (data_pages + 1) * page;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return set_error(cudaErrorMemoryAllocation);
  char* guard = static_cast<char*>(base) + data_pages * page;
  mprotect(guard, page, PROT_NONE);
  char* p = guard - rounded;
  std::memset(p, 0xCD, rounded);  // never zero: a kernel that reads before writing sees garbage
  emu::g_allocations[p] = emu::Allocation{base, mapped};
  emu::forget_kernel_writes();
  *ptr = p;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const auto a = emu::g_allocations.find(ptr);
  if (a == emu::g_allocations.end()) return set_error(cudaErrorInvalidValue);
  munmap(a->second.base, a->second.mapped);
  emu::g_allocations.erase(a);
  emu::forget_kernel_writes();
  return cudaSuccess;
}
// Free memory: the 80 GiB less what the allocations map (their guard pages included).
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::size_t used = 0;
  for (const auto& a : emu::g_allocations) used += a.second.mapped;
  *total_bytes = emu::global_memory_bytes();
  *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) { return cudaMalloc(ptr, bytes); }
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return cudaFree(ptr); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  emu::forget_kernel_writes();
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  enqueue(stream, [=] {
    if (bytes > 0) std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  emu::forget_kernel_writes();
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  enqueue(stream, [=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(emu::next_handle());
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (emu::is_capturing(stream)) return set_error(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  if (!emu::g_capturing.empty()) return set_error(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(emu::next_handle());
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  emu::g_event_times.erase(event);
  return cudaSuccess;
}
// An event takes the host clock's time when the stream reaches it: the emulator's time, not a GPU's.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  enqueue(stream, [=] { emu::g_event_times[event] = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  const auto a = emu::g_event_times.find(start), b = emu::g_event_times.find(stop);
  if (a == emu::g_event_times.end() || b == emu::g_event_times.end()) return set_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->second - a->second).count();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) { return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr || emu::is_capturing(stream)) return set_error(cudaErrorInvalidValue);
  emu::g_capturing[stream] = std::make_shared<emu::Graph>();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  const auto c = emu::g_capturing.find(stream);
  if (c == emu::g_capturing.end()) return set_error(cudaErrorInvalidValue);
  *graph = reinterpret_cast<cudaGraph_t>(new emu::Graph(*c->second));
  emu::g_capturing.erase(c);
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = emu::is_capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new emu::Graph(*reinterpret_cast<emu::Graph*>(graph)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  for (const auto& step : reinterpret_cast<emu::Graph*>(exec)->steps) enqueue(stream, step);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<emu::Graph*>(graph);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<emu::Graph*>(exec);
  return cudaSuccess;
}

}  // extern "C"
